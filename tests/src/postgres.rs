//! A private PostgreSQL server for one test: `initdb` into a temp dir, `postgres` listening only
//! on a Unix socket in that dir (no TCP port, so tests never collide and nothing outside can
//! connect), in its own process group, stopped and removed when the value drops. As root (CI),
//! the server runs as `nobody`, since PostgreSQL refuses to run as root.
//!
//! The binaries: `ANNEAL_POSTGRES_BIN` (a directory), else the directory of `initdb` on PATH,
//! else the newest `/usr/lib/postgresql/*/bin` (Debian's layout). When none has them the test
//! fails naming the Debian package (`scripts/test` installs it when run as root).

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The database role the tests connect as (trust authentication on the private socket).
pub const USER: &str = "anneal";
/// The port number names the socket file (`.s.PGSQL.<port>`); nothing listens on TCP.
const PORT: u16 = 5432;
/// The uid and gid of `nobody`, which runs the server when the tests run as root.
const NOBODY: u32 = 65_534;
const START_LIMIT: Duration = Duration::from_secs(30);
const STOP_LIMIT: Duration = Duration::from_secs(30);

pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    child: Option<Child>,
    fsync: bool,
}

impl Postgres {
    /// A fresh cluster, started. `fsync` off is for tests that never crash the machine (the
    /// store's own tests); tests of durability across a server restart keep it on.
    pub fn start(fsync: bool) -> Postgres {
        let bin = binaries();
        let dir = tempfile::Builder::new().prefix("anneal-pg-").tempdir().expect("temp dir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let mut postgres = Postgres { dir, bin, child: None, fsync };
        postgres.hand_to_server_user(postgres.dir.path());
        let mut initdb = postgres.command("initdb");
        initdb.args(["-A", "trust", "-U", USER, "-E", "UTF8", "--locale=C", "--no-sync", "-D"]);
        initdb.arg(postgres.data_dir());
        let output = initdb.output().unwrap_or_else(|error| panic!("cannot run initdb: {error}"));
        assert!(output.status.success(), "initdb failed: {}", String::from_utf8_lossy(&output.stderr));
        postgres.start_server();
        postgres
    }

    /// The URL of `database` for `anneal-shim serve --db` and `PgStore::open`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://{USER}@localhost:{PORT}/{database}?host={}", self.socket_dir().display())
    }

    /// Creates an empty database; returns its URL.
    pub fn create_database(&self, name: &str) -> String {
        self.psql("postgres", &format!("CREATE DATABASE \"{name}\""));
        self.url(name)
    }

    /// Runs one SQL command with psql as the tests' role; returns its unaligned output.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        self.run_psql(database, &["-c", sql])
    }

    /// Runs the SQL file `path` (a `pg_dump`, say) with psql as the tests' role, stopping at
    /// the first error; returns its unaligned output.
    pub fn psql_file(&self, database: &str, path: &Path) -> String {
        self.run_psql(database, &["-f", &path.display().to_string()])
    }

    fn run_psql(&self, database: &str, what: &[&str]) -> String {
        let output = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(self.socket_dir())
            .args(["-p", &PORT.to_string(), "-U", USER, "-d", database])
            .args(what)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|error| panic!("cannot run psql: {error}"));
        assert!(output.status.success(), "psql {what:?} failed: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// Stops the server the way `pg_ctl restart -m fast` does (SIGINT: connections are ended,
    /// committed work is kept) and starts it again on the same socket.
    pub fn restart(&mut self) {
        self.stop(Signal::SIGINT);
        self.start_server();
    }

    /// Stops the server (fast shutdown) without starting it again.
    pub fn stop_fast(&mut self) {
        self.stop(Signal::SIGINT);
    }

    /// Starts a stopped server again.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        self.start_server();
    }

    /// The server's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn socket_dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    fn start_server(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("server.log")).expect("server log");
        self.hand_to_server_user(&self.dir.path().join("server.log"));
        let mut command = self.command("postgres");
        command.arg("-D").arg(self.data_dir()).arg("-k").arg(self.socket_dir());
        command.args(["-p", &PORT.to_string(), "-c", "listen_addresses=", "-c", "max_connections=200"]);
        command.args(["-c", if self.fsync { "fsync=on" } else { "fsync=off" }]);
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::from(log)).process_group(0);
        self.child = Some(command.spawn().unwrap_or_else(|error| panic!("cannot start postgres: {error}")));
        let deadline = Instant::now() + START_LIMIT;
        loop {
            let ready = Command::new(self.bin.join("pg_isready"))
                .arg("-h")
                .arg(self.socket_dir())
                .args(["-p", &PORT.to_string(), "-U", USER, "-q"])
                .status()
                .is_ok_and(|status| status.success());
            if ready {
                return;
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!("postgres exited ({status}) while starting:\n{}", self.log_text());
            }
            assert!(Instant::now() < deadline, "postgres did not start within {START_LIMIT:?}:\n{}", self.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop(&mut self, signal: Signal) {
        let Some(mut child) = self.child.take() else { return };
        let group = Pid::from_raw(child.id() as i32);
        let _ = killpg(group, signal);
        let deadline = Instant::now() + STOP_LIMIT;
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = killpg(group, Signal::SIGKILL);
        let _ = child.wait();
    }

    /// A command for one of the server binaries, as the server's user.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(self.bin.join(program));
        if nix::unistd::geteuid().is_root() {
            command.uid(NOBODY).gid(NOBODY);
        }
        command
    }

    fn hand_to_server_user(&self, path: &Path) {
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).expect("chown to nobody");
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // SIGQUIT: immediate shutdown; the cluster is thrown away.
        self.stop(Signal::SIGQUIT);
    }
}

/// The directory holding initdb, postgres, pg_isready and psql.
pub fn binaries() -> PathBuf {
    let has_all = |dir: &Path| ["initdb", "postgres", "pg_isready", "psql"].iter().all(|name| dir.join(name).exists());
    if let Some(dir) = std::env::var_os("ANNEAL_POSTGRES_BIN").map(PathBuf::from) {
        assert!(has_all(&dir), "ANNEAL_POSTGRES_BIN={} lacks initdb, postgres, pg_isready or psql", dir.display());
        return dir;
    }
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join("initdb"))
        .find(|initdb| initdb.exists())
        .and_then(|initdb| std::fs::canonicalize(initdb).ok())
        .and_then(|initdb| initdb.parent().map(Path::to_path_buf));
    let debian = std::fs::read_dir("/usr/lib/postgresql").ok().and_then(|entries| {
        let mut versions: Vec<(u32, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| Some((entry.file_name().to_str()?.parse().ok()?, entry.path().join("bin"))))
            .collect();
        versions.sort();
        versions.pop().map(|(_, dir)| dir)
    });
    on_path.into_iter().chain(debian).find(|dir| has_all(dir)).unwrap_or_else(|| {
        panic!(
            "PostgreSQL's server binaries (initdb, postgres, pg_isready, psql) are not installed: on Debian or \
             Ubuntu `apt-get install postgresql` (scripts/test installs it when run as root), or set \
             ANNEAL_POSTGRES_BIN to their directory"
        )
    })
}
