//! `anneal-shim serve` refuses secrets others could read (docs/security.md, "Secret files"): an
//! existing `admin.token`, `shim.key` or database that group or others may read, a database
//! directory they may write, a file another user owns, and an `ANNEAL_TOKEN` shorter than 32 characters.
//! Each refusal exits 1 at once with a message naming the path (or variable) and the fix, and a
//! private layout still starts.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use anneal_tests::{CommandOutput, Shim, run_command, shim_binary};
use tokio::process::Command;

/// A refused start exits at once; a start that is not refused would run until this passes.
const REFUSAL_LIMIT: Duration = Duration::from_secs(10);

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// `serve` on a database in `directory`, with `ANNEAL_TOKEN` when given.
async fn serve(directory: &Path, environment_token: Option<&str>) -> CommandOutput {
    let mut command = Command::new(shim_binary());
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(format!("sqlite://{}", directory.join("shim.db").display()))
        .env_remove("ANNEAL_TOKEN");
    if let Some(token) = environment_token {
        command.env("ANNEAL_TOKEN", token);
    }
    run_command(command, REFUSAL_LIMIT).await
}

fn assert_refused(output: &CommandOutput, names: &[&str]) {
    assert_eq!(output.code, 1, "serve is refused: {output:?}");
    for name in names {
        assert!(output.stderr.contains(name), "the error names {name:?}: {}", output.stderr);
    }
}

/// A shim dir as a clean stop leaves it (the database checkpointed): database, `admin.token`,
/// `shim.key`, all private.
async fn initialised_dir() -> tempfile::TempDir {
    let mut shim = Shim::start().await;
    shim.stop().await;
    let dir = anneal_tests::private_temp_dir("anneal-secrets-");
    for name in ["admin.token", "shim.key", "shim.db"] {
        std::fs::copy(shim.dir().join(name), dir.path().join(name)).expect("copy a secret file");
        set_mode(&dir.path().join(name), 0o600);
    }
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_or_other_readable_secret_files_are_refused() {
    let dir = initialised_dir().await;
    for name in ["admin.token", "shim.key", "shim.db"] {
        let path = dir.path().join(name);
        set_mode(&path, 0o644);
        assert_refused(&serve(dir.path(), None).await, &[&path.display().to_string(), "chmod 600"]);
        set_mode(&path, 0o600);
    }
    for mode in [0o775, 0o755] {
        set_mode(dir.path(), mode);
        assert_refused(&serve(dir.path(), None).await, &[&dir.path().display().to_string(), "chmod 700"]);
    }
    set_mode(dir.path(), 0o700);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_files_owned_by_another_user_are_refused() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: only root can give a file to another user");
        return;
    }
    let dir = initialised_dir().await;
    let path = dir.path().join("admin.token");
    nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(65534)), None).expect("chown");
    assert_refused(&serve(dir.path(), None).await, &[&path.display().to_string(), "chown"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_anneal_token_is_refused() {
    let dir = anneal_tests::private_temp_dir("anneal-secrets-");
    assert_refused(&serve(dir.path(), Some("secret")).await, &["ANNEAL_TOKEN", "32"]);
    assert!(!dir.path().join("shim.db").exists(), "nothing was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_layout_still_starts() {
    let mut shim = Shim::start().await;
    shim.restart().await;
    shim.cli_ok(&["server", "list"]).await;
}
