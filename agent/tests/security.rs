//! What the agent refuses to protect the machine it runs on (see docs/security.md): a scratch or
//! state directory someone else prepared, symbolic links planted where it writes, hooks and local
//! metadata that another user could change. The attacks need another owner than the test's, so
//! the parts that chown run only as root (as the tests do in CI and here).

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, chown, symlink};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{BINARY, Sandbox, body_json, script_deployment, signal_receiver, signals};
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// The uid of `nobody`: the attacker.
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    fs::metadata("/proc/self").map(|metadata| metadata.uid()).unwrap_or(1) == 0
}

fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

/// `hook-test` used to take `$TMPDIR/anneal-hook-test-<pid>` as found and write its script through
/// whatever was there. Here another user prepares that directory (the pid is known before the
/// command reads its stdin) with links to a root-owned file where the script's temp file goes.
#[tokio::test]
async fn hook_test_never_writes_through_a_prepared_scratch_dir() {
    if !is_root() {
        eprintln!("skipped: preparing another user's directory needs root");
        return;
    }
    let sandbox = Sandbox::new();
    sandbox.write_local_config("");
    let tmp = sandbox.root().join("tmp");
    fs::create_dir(&tmp).unwrap();
    set_mode(&tmp, 0o1777);
    let victim = sandbox.root().join("victim");
    fs::write(&victim, "#!/bin/sh\necho precious\n").unwrap();
    set_mode(&victim, 0o644);

    let mut child = Command::new(BINARY)
        .args(["hook-test", "script", "--config"])
        .arg(sandbox.config_path())
        .env("TMPDIR", &tmp)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let trap = tmp.join(format!("anneal-hook-test-{pid}"));
    for dir in [trap.clone(), trap.join("script"), trap.join("outputs")] {
        fs::create_dir(&dir).unwrap();
        chown(&dir, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    for serial in 0..8 {
        let link = trap.join("script").join(format!(".ht.tmp.{pid}.{serial}"));
        symlink(&victim, &link).unwrap();
        fs::symlink_metadata(&link).unwrap();
        std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let deployment = script_deployment("ht", "ht", "#!/bin/sh\necho written-by-hook-test\n", None);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(deployment.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("written-by-hook-test"));

    assert_eq!(fs::read_to_string(&victim).unwrap(), "#!/bin/sh\necho precious\n", "the victim was overwritten");
    assert_eq!(mode_of(&victim), 0o644, "the victim's mode was changed");
    let leftovers: Vec<_> = fs::read_dir(&tmp).unwrap().map(|item| item.unwrap().file_name()).collect();
    assert_eq!(leftovers, [trap.file_name().unwrap()], "its own scratch dir is gone, the trap left as found");
}

#[tokio::test]
async fn hook_test_scratch_dir_is_fresh_and_private() {
    let sandbox = Sandbox::new();
    sandbox.write_local_config("");
    let tmp = sandbox.root().join("tmp");
    fs::create_dir(&tmp).unwrap();
    let script = "#!/bin/sh\nstat -c '%a %u' \"$(dirname \"$PWD\")\" \"$PWD\" > \"$heat_outputs_path.result\"\n";
    let mut command = Command::new(BINARY);
    command.args(["hook-test", "script", "--config"]).arg(sandbox.config_path()).env("TMPDIR", &tmp);
    let deployment = script_deployment("ht", "ht", script, None);
    let finished = common::run_to_end(command, Some(&deployment.to_string()), Duration::from_secs(30)).await;
    assert!(finished.status.success(), "{}", finished.stderr);
    let payload: serde_json::Value = serde_json::from_str(finished.stdout.trim()).unwrap();
    let uid = fs::metadata(sandbox.root()).unwrap().uid();
    assert_eq!(payload["result"], json!(format!("700 {uid}\n700 {uid}\n")));
    assert_eq!(fs::read_dir(&tmp).unwrap().count(), 0, "removed afterwards");
}

/// A state directory the agent would reuse as found (someone else's, shared, or a link) is
/// refused before anything is written into it, with the path and the problem on stderr.
#[tokio::test]
async fn an_unsafe_existing_state_dir_is_refused() {
    let sandbox = Sandbox::new();
    sandbox.write_local_config("");
    let state = sandbox.state();
    fs::create_dir(&state).unwrap();
    set_mode(&state, 0o777);
    let finished = sandbox.once().await;
    assert_eq!(finished.status.code(), Some(1), "{}", finished.stderr);
    let expected = format!(
        "cannot use the state directory {0}: {0} is group- and world-writable (mode 0777); refusing to use it",
        state.display()
    );
    assert!(finished.stderr.contains(&expected), "{}", finished.stderr);
    assert_eq!(fs::read_dir(&state).unwrap().count(), 0, "nothing written into it");
    assert_eq!(mode_of(&state), 0o777, "left as found");

    fs::remove_dir(&state).unwrap();
    let elsewhere = sandbox.root().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    symlink(&elsewhere, &state).unwrap();
    let finished = sandbox.once().await;
    assert_eq!(finished.status.code(), Some(1), "{}", finished.stderr);
    assert!(finished.stderr.contains(&format!("{} is a symbolic link", state.display())), "{}", finished.stderr);

    if is_root() {
        fs::remove_file(&state).unwrap();
        fs::create_dir(&state).unwrap();
        set_mode(&state, 0o700);
        chown(&state, Some(NOBODY), Some(NOBODY)).unwrap();
        let finished = sandbox.once().await;
        assert_eq!(finished.status.code(), Some(1), "{}", finished.stderr);
        let expected = format!("{} is owned by uid {NOBODY}, not by the agent (uid 0)", state.display());
        assert!(finished.stderr.contains(&expected), "{}", finished.stderr);
        assert_eq!(fs::read_dir(&state).unwrap().count(), 0, "nothing written into it");
    }

    fs::remove_dir(&state).ok();
    fs::remove_file(&state).ok();
    fs::create_dir(&state).unwrap();
    set_mode(&state, 0o755);
    let finished = sandbox.once().await;
    assert!(finished.status.success(), "a state dir of its own is used: {}", finished.stderr);
    assert_eq!(mode_of(&state), 0o700, "and made private");
}

/// A hook that another user could change is never run; the deployment fails and says why.
#[tokio::test]
async fn a_hook_others_could_write_is_refused_and_the_deployment_fails() {
    let sandbox = Sandbox::new();
    sandbox.write_local_config("");
    let receiver = signal_receiver().await;
    let ran = sandbox.root().join("ran");
    sandbox.install_hook("puppet", &format!("#!/bin/sh\ncat >/dev/null\ntouch {}\n", ran.display()));
    let hook = sandbox.hooks().join("puppet");
    set_mode(&hook, 0o777);
    let mut deployment = script_deployment("id-puppet", "p", "", Some(&format!("{}/signal/id-puppet", receiver.uri())));
    deployment["group"] = json!("puppet");
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment]}));
    let finished = sandbox.once().await;
    assert_eq!(finished.status.code(), Some(1), "{}", finished.stderr);
    assert!(!ran.exists(), "the hook ran");
    let received = signals(&receiver).await;
    assert_eq!(received.len(), 1);
    let body = body_json(&received[0]);
    assert_eq!(body["deploy_status_code"], 1);
    let expected = format!(
        "anneal: cannot run the hook for group puppet: {} is group- and world-writable (mode 0777); refusing to use it",
        hook.display()
    );
    assert_eq!(body["deploy_stderr"], json!(expected));

    let mut command = Command::new(BINARY);
    command.args(["hook-test", "puppet", "--config"]).arg(sandbox.config_path());
    let finished = common::run_to_end(command, Some(&deployment.to_string()), Duration::from_secs(30)).await;
    assert_eq!(finished.status.code(), Some(1));
    assert!(finished.stderr.contains("is group- and world-writable (mode 0777); refusing"), "{}", finished.stderr);
    assert!(!ran.exists(), "hook-test ran it");
}

/// A local metadata file another user could write is a fetch error naming the file.
#[tokio::test]
async fn a_local_document_others_could_write_is_refused() {
    let sandbox = Sandbox::new();
    sandbox.write_local_config("");
    let ran = sandbox.root().join("ran");
    let deployment = script_deployment("l1", "l1", &format!("#!/bin/sh\ntouch {}\n", ran.display()), None);
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment]}));
    let document = sandbox.local().join("a.json");
    set_mode(&document, 0o664);
    let finished = sandbox.once().await;
    assert_eq!(finished.status.code(), Some(1), "{}", finished.stderr);
    let expected = format!("{}: it is group-writable (mode 0664); refusing to use it", document.display());
    assert!(finished.stderr.contains(&expected), "{}", finished.stderr);
    assert!(!ran.exists());
}
