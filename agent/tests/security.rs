//! What the agent refuses to protect the machine it runs on (see docs/security.md): a scratch or
//! state directory someone else prepared, symbolic links planted where it writes, hooks and local
//! metadata that another user could change. The attacks need another owner than the test's, so
//! the parts that chown run only as root (as the tests do in CI and here).

mod common;
#[path = "common/tls.rs"]
mod tls;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, chown, symlink};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{BINARY, Sandbox, body_json, run_to_end, script_deployment, signal_receiver, signals};
use serde_json::json;
use tls::TlsServer;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use wiremock::{Mock, MockServer, ResponseTemplate};

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
    let finished = run_to_end(command, Some(&deployment.to_string()), Duration::from_secs(30)).await;
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
    let finished = run_to_end(command, Some(&deployment.to_string()), Duration::from_secs(30)).await;
    assert_eq!(finished.status.code(), Some(1));
    assert!(finished.stderr.contains("is group- and world-writable (mode 0777); refusing"), "{}", finished.stderr);
    assert!(!ran.exists(), "hook-test ran it");
}

/// A deployment that waited for its hook fails once the hook appears but another user could
/// change it, instead of waiting on as if the hook were still missing.
#[tokio::test]
async fn a_waiting_deployment_fails_when_its_hook_appears_unsafe() {
    let sandbox = Sandbox::new();
    sandbox.write_local_config("");
    let mut deployment = script_deployment("id-custom", "s", "", None);
    deployment["group"] = json!("custom-tool");
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment]}));
    let finished = sandbox.once().await;
    assert!(finished.status.success(), "{}", finished.stderr);
    assert_eq!(Sandbox::status_of(&sandbox.status().await, "id-custom")["state"], "waiting");
    sandbox.install_hook("custom-tool", "#!/bin/sh\ncat >/dev/null\n");
    set_mode(&sandbox.hooks().join("custom-tool"), 0o775);
    let finished = sandbox.once().await;
    assert_eq!(finished.status.code(), Some(1), "{}", finished.stderr);
    let rows = sandbox.status().await;
    let row = Sandbox::status_of(&rows, "id-custom");
    assert_eq!(row["state"], "signalled", "{row}");
    assert!(row["outcome"].as_str().unwrap().starts_with("FAILED"), "{row}");
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

/// A shim behind HTTPS with a private CA: with the source's `ca_file`, the metadata is read and
/// the deployment's signal (same server) is delivered too, not retried forever as UnknownIssuer.
#[tokio::test]
async fn a_private_ca_serves_metadata_and_signals_alike() {
    let sandbox = Sandbox::new();
    let server = TlsServer::start();
    let deployment = script_deployment("d1", "d1", "#!/bin/sh\necho ok\n", Some(&format!("{}/signal/d1", server.url)));
    server.set_document(&json!({"deployments": [deployment]}));
    let ca = sandbox.root().join("ca.pem");
    fs::write(&ca, &server.ca_pem).unwrap();
    let source =
        format!("[[source]]\nkind = \"http\"\nurl = \"{}/metadata\"\nca_file = \"{}\"\n", server.url, ca.display());
    sandbox.write_config("", &source);
    let finished = sandbox.once().await;
    assert!(finished.status.success(), "{}", finished.stderr);
    assert_eq!(server.requests(), ["GET /metadata", "POST /signal/d1"]);

    // The `signal` command: the CA from --ca-file, or from the config's sources.
    let url = format!("{}/signal/handle", server.url);
    for trust in [
        vec!["--ca-file".to_string(), ca.display().to_string()],
        vec!["--config".to_string(), sandbox.config_path().display().to_string()],
    ] {
        let mut command = Command::new(BINARY);
        command.args(["signal", &url, "--retry-for-secs", "0"]).args(&trust);
        let finished = run_to_end(command, None, Duration::from_secs(30)).await;
        assert!(finished.status.success(), "{trust:?}: {}", finished.stderr);
    }
    let mut command = Command::new(BINARY);
    command.args(["signal", &url, "--retry-for-secs", "0"]);
    let finished = run_to_end(command, None, Duration::from_secs(30)).await;
    assert_eq!(finished.status.code(), Some(1), "not trusted without the CA: {}", finished.stderr);
    assert!(finished.stderr.contains("UnknownIssuer"), "{}", finished.stderr);
    assert_eq!(server.requests().iter().filter(|line| *line == "POST /signal/handle").count(), 2);
}

/// Proxy variables in the agent's environment are used by no client: metadata requests never
/// did, and signals (deployment and wait condition) must not either.
#[tokio::test]
async fn proxy_variables_are_ignored_by_every_client() {
    let proxy = MockServer::start().await;
    Mock::given(wiremock::matchers::any()).respond_with(ResponseTemplate::new(200)).mount(&proxy).await;
    let receiver = signal_receiver().await;
    let sandbox = Sandbox::new();
    sandbox.write_local_config("");
    let deployment =
        script_deployment("d1", "d1", "#!/bin/sh\necho ok\n", Some(&format!("{}/signal/d1", receiver.uri())));
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment]}));
    let proxy_env: Vec<(&str, String)> =
        ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
            .into_iter()
            .map(|name| (name, proxy.uri()))
            .collect();

    let mut command = Command::new(BINARY);
    command.args(["once", "--config"]).arg(sandbox.config_path()).envs(proxy_env.clone());
    let finished = run_to_end(command, None, Duration::from_secs(60)).await;
    assert!(finished.status.success(), "{}", finished.stderr);
    let mut command = Command::new(BINARY);
    command.args(["signal", &format!("{}/signal/handle", receiver.uri()), "--retry-for-secs", "0"]).envs(proxy_env);
    let finished = run_to_end(command, None, Duration::from_secs(30)).await;
    assert!(finished.status.success(), "{}", finished.stderr);

    let through_proxy = proxy.received_requests().await.unwrap_or_default();
    assert!(
        through_proxy.is_empty(),
        "sent through the proxy: {:?}",
        through_proxy.iter().map(|r| r.url.to_string()).collect::<Vec<_>>()
    );
    let paths: Vec<String> = signals(&receiver).await.iter().map(|request| request.url.path().to_string()).collect();
    assert_eq!(paths, ["/signal/d1", "/signal/handle"]);
}
