//! Reliability: the agent's state dir runs out of space. The state dir is a
//! 1 MiB tmpfs mounted by the test (it runs as root on the CI machine) and filled with a filler
//! file while a new document arrives; then the filler is deleted. The agent must stay up, log the
//! problem by name (ENOSPC, "No space left on device"), never leave a torn journal entry or cache
//! file or a temp file taken for an entry, run nothing it could not journal first, and carry on
//! by itself when space returns: the new deployments run once and their signals are delivered.
//!
//! Where mounting is not allowed (not root), the same scenario injects the write errors instead:
//! the agent runs with `RLIMIT_FSIZE` 0 (set and lifted with `prlimit --pid`, `SIGXFSZ` ignored,
//! its stderr through a pipe), so its writes fail with EFBIG ("File too large"). The second test
//! always runs that variant, so both paths are exercised here.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anneal_tests::metadata::{document, journal_entries, script_deployment};
use anneal_tests::{Agent, AgentSettings, SwitchableServer, eventually, run_command, toml_string, wait_until};
use serde_json::Value;
use tokio::process::Command;

const TMPFS_SIZE: &str = "1m";
/// The agent under `bash`: `SIGXFSZ` ignored (an ignored signal stays ignored across exec),
/// stderr through `cat` (a pipe has no file size limit), then `exec` of the agent itself so the
/// process `prlimit` targets is the agent.
const FILE_SIZE_WRAPPER: [&str; 3] = ["bash", "-c", "trap '' XFSZ; exec 2> >(exec cat >&2); exec \"$0\" \"$@\""];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_tmpfs_state_dir_is_reported_and_recovered() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state_dir = dir.path().join("vm").join("state");
    let failure = match Tmpfs::mount(&state_dir).await {
        Ok(tmpfs) => WriteFailure::FullDisk { tmpfs },
        Err(error) => {
            assert!(!is_root(), "running as root, yet cannot mount a tmpfs on {}: {error}", state_dir.display());
            eprintln!("not root, so no tmpfs ({error}); injecting write errors with RLIMIT_FSIZE instead");
            WriteFailure::FileSizeLimit
        }
    };
    run_scenario(dir.path(), failure).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_size_limit_write_errors_are_reported_and_recovered() {
    let dir = tempfile::tempdir().expect("temp dir");
    run_scenario(dir.path(), WriteFailure::FileSizeLimit).await;
}

/// How the test makes the agent's writes fail.
enum WriteFailure {
    /// The state dir is a small tmpfs; a filler file in it takes the space that is left.
    FullDisk { tmpfs: Tmpfs },
    /// `RLIMIT_FSIZE` 0 on the agent process.
    FileSizeLimit,
}

impl WriteFailure {
    fn start(&self, agent: &mut Agent) {
        match self {
            WriteFailure::FullDisk { .. } => agent.start(),
            WriteFailure::FileSizeLimit => agent.start_wrapped(&FILE_SIZE_WRAPPER),
        }
    }

    /// How the agent's log names the failure.
    fn error_text(&self) -> &'static str {
        match self {
            WriteFailure::FullDisk { .. } => "No space left on device",
            WriteFailure::FileSizeLimit => "File too large",
        }
    }

    async fn fail_writes(&self, agent: &Agent) {
        match self {
            WriteFailure::FullDisk { tmpfs } => fill(&tmpfs.filler()),
            WriteFailure::FileSizeLimit => set_file_size_limit(agent, "0:unlimited").await,
        }
    }

    async fn allow_writes(&self, agent: &Agent) {
        match self {
            WriteFailure::FullDisk { tmpfs } => std::fs::remove_file(tmpfs.filler()).expect("remove the filler"),
            WriteFailure::FileSizeLimit => set_file_size_limit(agent, "unlimited:unlimited").await,
        }
    }
}

async fn run_scenario(dir: &Path, failure: WriteFailure) {
    let receiver = SwitchableServer::start().await;
    let source = SwitchableServer::start().await;
    let signal = |id: &str| format!("{}/signal/{id}", receiver.url());
    let first = vec![script_deployment("first", "#!/bin/sh\necho first\n", &signal("first"))];
    source.set_document(document(&first));
    let url = format!("{}/metadata/vm", source.url());
    let sources = format!("[[source]]\nkind = \"http\"\nurl = {}\n", toml_string(&url));
    let mut agent = Agent::standalone(dir, "vm", &AgentSettings::default(), &sources);
    failure.start(&mut agent);
    wait_for_signal(&receiver, "first", Duration::from_secs(20)).await;
    wait_until(Duration::from_secs(20), "first is journaled as signalled", || async {
        journal_entries(&agent.state_dir()).iter().all(|entry| entry["state"] == "signalled").then_some(())
    })
    .await;

    failure.fail_writes(&agent).await;
    let mut all = first.clone();
    all.push(script_deployment("second", "#!/bin/sh\necho second\n", &signal("second")));
    all.push(script_deployment("third", "#!/bin/sh\necho third\n", &signal("third")));
    source.set_document(document(&all));
    let reported = |agent: &Agent| {
        let log = agent.log_text();
        log.lines().filter(|line| line.contains("journal") && line.contains(failure.error_text())).count()
    };
    wait_until(Duration::from_secs(30), "the agent logs the failed journal write twice", || async {
        (reported(&agent) >= 2).then_some(())
    })
    .await;
    let log = agent.log_text();
    let named = |what: &str| log.lines().find(|line| line.contains(what) && line.contains(failure.error_text()));
    let journal_line = named("second").expect("the failed journal write names the deployment");
    eprintln!("the agent reports: {journal_line}");
    assert!(named("source cache").is_some(), "the failed cache write is reported too:\n{log}");
    assert!(agent.is_alive(), "the agent stays up\n{log}");
    check_state_files(&agent, &["first"], &document(&first));
    assert!(receiver.answered("POST", "/signal/second").is_empty(), "nothing runs that was not journaled");
    let rows = agent.status().await;
    assert_eq!(rows.len(), 1, "status lists only real entries: {rows:#?}");

    failure.allow_writes(&agent).await;
    wait_for_signal(&receiver, "second", Duration::from_secs(30)).await;
    wait_for_signal(&receiver, "third", Duration::from_secs(30)).await;
    eventually(Duration::from_secs(20), "every entry is signalled", || {
        journal_entries(&agent.state_dir()).iter().filter(|entry| entry["state"] == "signalled").count() == 3
    })
    .await;
    // The failed cache write is retried after the next fetch, which may come after the runs.
    let expected = document(&all);
    eventually(Duration::from_secs(20), "the cache holds the new document", || {
        cached_document(&agent).is_some_and(|cached| cached == expected)
    })
    .await;
    check_state_files(&agent, &["first", "second", "third"], &expected);
    for id in ["first", "second", "third"] {
        assert_eq!(receiver.answered("POST", &format!("/signal/{id}")).len(), 1, "{id} signalled once");
    }
    agent.stop().await;
    eventually(Duration::from_secs(5), "no temp file is left", || temp_files(&agent.state_dir()).is_empty()).await;
}

/// Every journal entry and the cache parse (no torn file); the entries are exactly `ids`; the
/// cache holds `cached`.
fn check_state_files(agent: &Agent, ids: &[&str], cached: &Value) {
    let mut found: Vec<String> = journal_entries(&agent.state_dir())
        .iter()
        .map(|entry| entry["id"].as_str().unwrap_or_default().to_string())
        .collect();
    found.sort();
    assert_eq!(found, ids, "journal entries");
    let cache_dir = agent.state_dir().join("sources");
    let files: Vec<PathBuf> = std::fs::read_dir(&cache_dir)
        .expect("cache dir")
        .flatten()
        .map(|item| item.path())
        .filter(|path| !path.file_name().is_some_and(|name| name.to_string_lossy().starts_with('.')))
        .collect();
    assert_eq!(files.len(), 1, "one cache file: {files:?}");
    let bytes = std::fs::read(&files[0]).expect("read the cache");
    let cache: Value = serde_json::from_slice(&bytes).unwrap_or_else(|error| panic!("torn cache ({error})"));
    assert_eq!(&cache["document"], cached, "the cache holds the last document it could write whole");
}

/// The document in the agent's one cache file, if it parses.
fn cached_document(agent: &Agent) -> Option<Value> {
    let listing = std::fs::read_dir(agent.state_dir().join("sources")).ok()?;
    let path = listing
        .flatten()
        .map(|item| item.path())
        .find(|path| !path.file_name().is_some_and(|name| name.to_string_lossy().starts_with('.')))?;
    let cache: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    Some(cache["document"].clone())
}

/// Temp files (names starting with `.`) in the journal and cache dirs.
fn temp_files(state_dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in ["journal", "sources"] {
        let Ok(listing) = std::fs::read_dir(state_dir.join(dir)) else { continue };
        found.extend(
            listing
                .flatten()
                .filter(|item| item.file_name().to_string_lossy().starts_with('.'))
                .map(|item| item.path()),
        );
    }
    found
}

async fn wait_for_signal(receiver: &SwitchableServer, id: &str, limit: Duration) {
    let path = format!("/signal/{id}");
    wait_until(limit, &format!("{id}'s signal arrives"), || async {
        (!receiver.answered("POST", &path).is_empty()).then_some(())
    })
    .await;
}

/// Writes `filler` until the file system is full; panics unless the error is ENOSPC.
fn fill(filler: &Path) {
    let mut file = std::fs::File::create(filler).expect("create the filler");
    let chunk = vec![0u8; 64 * 1024];
    loop {
        if let Err(error) = file.write_all(&chunk).and_then(|()| file.sync_all()) {
            assert_eq!(error.raw_os_error(), Some(28), "the filler stops at ENOSPC: {error}");
            return;
        }
    }
}

async fn set_file_size_limit(agent: &Agent, limits: &str) {
    let pid = agent.pid().expect("the agent runs").to_string();
    let mut command = Command::new("prlimit");
    command.args(["--pid", &pid, &format!("--fsize={limits}")]);
    run_command(command, Duration::from_secs(10)).await.expect_success("prlimit (util-linux) on the agent");
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|metadata| metadata.uid() == 0)
}

/// A tmpfs mounted on a dir for the test's lifetime; unmounted (lazily, so a busy mount cannot
/// stay behind) when dropped, also on panic.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    async fn mount(dir: &Path) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(dir).expect("create the mount point");
        let mut command = Command::new("mount");
        command.args(["-t", "tmpfs", "-o", &format!("size={TMPFS_SIZE},mode=0700"), "tmpfs"]).arg(dir);
        let output = run_command(command, Duration::from_secs(10)).await;
        if output.code != 0 {
            return Err(format!("mount exited {}: {}", output.code, output.stderr.trim()));
        }
        Ok(Tmpfs { dir: dir.to_path_buf() })
    }

    fn filler(&self) -> PathBuf {
        self.dir.join("filler")
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let status = std::process::Command::new("umount").arg("-l").arg(&self.dir).status();
        if !status.as_ref().is_ok_and(|status| status.success()) {
            eprintln!("could not unmount the tmpfs on {}: {status:?}", self.dir.display());
        }
    }
}
