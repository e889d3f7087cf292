//! The script hook against a recording tool runner: the one invocation it asks for (the config
//! itself, from its directory, with inputs in its environment), the script file it writes, the
//! outputs it reads back, and how a failure to start becomes a result.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use crate::testing::{Answer, Recorder, deployment, output};
use crate::{Builtin, Context, HookEnv, HookError, Response, ToolError, ToolOutput, Tools};

struct Dirs {
    root: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Dirs {
        let dirs = Dirs { root: tempfile::tempdir().unwrap() };
        fs::create_dir(dirs.root.path().join("work")).unwrap();
        fs::create_dir(dirs.root.path().join("outputs")).unwrap();
        dirs
    }

    async fn run<T: Tools>(&self, document: Value, tools: &mut T) -> Result<Response, HookError> {
        let env = HookEnv::new(vec![("PATH".into(), "/usr/bin:/bin".into()), ("LANG".into(), "C.UTF-8".into())]);
        let work = self.root.path().join("work");
        let outputs = self.root.path().join("outputs");
        let context =
            Context { env: &env, cwd: &work, outputs_dir: &outputs, max_output_bytes: 1 << 20, metadata: None };
        Builtin::Script.run(&deployment(document), &context, tools).await
    }
}

fn executed(response: Response) -> (Value, i64) {
    match response {
        Response::Executed { result, status_code } => (Value::Object(result), status_code),
        other => panic!("the script hook answered {other:?}"),
    }
}

#[tokio::test]
async fn the_config_runs_from_its_directory_with_inputs_in_its_environment() {
    let dirs = Dirs::new();
    let outputs_path = dirs.root.path().join("outputs/d1");
    fs::write(outputs_path.with_file_name("d1.result"), "stale").unwrap();
    let mut tools = Recorder::answering(vec![output("out", "err", 3)]);
    let document = json!({
        "id": "d1", "group": "script", "config": "#!/bin/sh\necho hi",
        "inputs": [{"name": "LANG", "value": "fr_FR"}, {"name": "bad=name", "value": "x"}, {"name": "n", "value": 5}],
        "outputs": [{"name": "result"}],
    });
    let (result, status_code) = executed(dirs.run(document, &mut tools).await.unwrap());
    assert_eq!(status_code, 3);
    // The stale output of an earlier run is gone before the script runs, so it is not reported.
    assert_eq!(result, json!({"deploy_stdout": "out", "deploy_stderr": "err", "deploy_status_code": 3}));
    let invocation = &tools.invocations[0];
    assert_eq!(invocation.program, dirs.root.path().join("work/d1").to_string_lossy());
    assert!(invocation.args.is_empty());
    assert_eq!(invocation.cwd, dirs.root.path().join("work"));
    let outputs_variable = ("heat_outputs_path".to_string(), outputs_path.to_string_lossy().into_owned());
    let expected = [
        ("PATH".to_string(), "/usr/bin:/bin".to_string()),
        ("LANG".to_string(), "C.UTF-8".to_string()),
        ("LANG".to_string(), "fr_FR".to_string()),
        ("n".to_string(), "5".to_string()),
        outputs_variable,
    ];
    assert_eq!(invocation.env, expected);
    let script = dirs.root.path().join("work/d1");
    assert_eq!(fs::read_to_string(&script).unwrap(), "#!/bin/sh\necho hi");
    assert_eq!(fs::metadata(&script).unwrap().permissions().mode() & 0o777, 0o700);
}

#[tokio::test]
async fn declared_outputs_are_read_after_the_run() {
    struct WritesOutput(std::path::PathBuf);
    impl Tools for WritesOutput {
        async fn run(&mut self, _: crate::Invocation) -> Result<ToolOutput, ToolError> {
            fs::write(&self.0, "value\n").unwrap();
            Ok(ToolOutput::default())
        }
        async fn run_with_stdin(&mut self, invocation: crate::Invocation, _: Vec<u8>) -> Result<ToolOutput, ToolError> {
            self.run(invocation).await
        }
    }
    let dirs = Dirs::new();
    let mut tools = WritesOutput(dirs.root.path().join("outputs/d1.result"));
    let document = json!({"id": "d1", "group": "script", "config": "#!/bin/sh\n", "outputs": [{"name": "result"}]});
    let (result, _) = executed(dirs.run(document, &mut tools).await.unwrap());
    let keys: Vec<&str> = result.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["result", "deploy_stdout", "deploy_stderr", "deploy_status_code"]);
    assert_eq!(result["result"], "value\n");
}

#[tokio::test]
async fn a_longer_earlier_script_leaves_nothing_behind() {
    let dirs = Dirs::new();
    let mut tools = Recorder::default();
    let long = json!({"id": "d1", "group": "script", "config": format!("#!/bin/sh\n# {}", "x".repeat(100))});
    dirs.run(long, &mut tools).await.unwrap();
    dirs.run(json!({"id": "d1", "group": "script", "config": "#!/bin/sh\n"}), &mut tools).await.unwrap();
    assert_eq!(fs::read_to_string(dirs.root.path().join("work/d1")).unwrap(), "#!/bin/sh\n");
    let names: Vec<_> =
        fs::read_dir(dirs.root.path().join("work")).unwrap().map(|entry| entry.unwrap().file_name()).collect();
    assert_eq!(names, ["d1"], "no temp file left");
}

#[tokio::test]
async fn a_config_that_cannot_start_is_a_failed_result_naming_why() {
    let dirs = Dirs::new();
    let mut tools = Recorder::answering(vec![Answer::Missing]);
    let document = json!({"id": "d1", "group": "script", "config": "#!/no/such/interpreter\n"});
    let (result, status_code) = executed(dirs.run(document, &mut tools).await.unwrap());
    assert_eq!(status_code, 1);
    let stderr = result["deploy_stderr"].as_str().unwrap();
    assert!(stderr.starts_with("anneal: cannot run the config: ") && stderr.contains("#!"), "{stderr}");
    // No interpreter line: refused without asking the runner.
    let mut tools = Recorder::default();
    let document = json!({"id": "d2", "group": "script", "config": "echo hi"});
    let (result, status_code) = executed(dirs.run(document, &mut tools).await.unwrap());
    assert_eq!((status_code, result["deploy_status_code"].clone()), (1, json!(1)));
    assert!(tools.invocations.is_empty());
}

#[tokio::test]
async fn inputs_too_large_for_exec_are_named_as_such() {
    struct TooLarge;
    impl Tools for TooLarge {
        async fn run(&mut self, invocation: crate::Invocation) -> Result<ToolOutput, ToolError> {
            Err(ToolError::Spawn { program: invocation.program, source: io::Error::from_raw_os_error(7) })
        }
        async fn run_with_stdin(&mut self, invocation: crate::Invocation, _: Vec<u8>) -> Result<ToolOutput, ToolError> {
            self.run(invocation).await
        }
    }
    let dirs = Dirs::new();
    let document = json!({"id": "d1", "group": "script", "config": "#!/bin/sh\n"});
    let (result, _) = executed(dirs.run(document, &mut TooLarge).await.unwrap());
    assert!(result["deploy_stderr"].as_str().unwrap().contains("too large to pass as environment variables"));
}

#[tokio::test]
async fn an_id_that_is_not_a_file_name_is_refused_before_anything_is_written() {
    let dirs = Dirs::new();
    let mut tools = Recorder::default();
    let document = json!({"id": "../d1", "group": "script", "config": "#!/bin/sh\n"});
    let error = dirs.run(document, &mut tools).await.unwrap_err();
    assert!(matches!(error, HookError::UnsafeId { ref id } if id == "../d1"), "{error:?}");
    assert!(!dirs.root.path().join("d1").exists());
    assert!(tools.invocations.is_empty());
}

#[test]
fn run_files_name_the_script_and_each_safe_output() {
    let document = json!({"id": "d1", "group": "script", "outputs": [{"name": "a"}, {"name": "../b"}]});
    let files = crate::script_run_files("/w".as_ref(), "/o".as_ref(), &deployment(document));
    assert_eq!(files, [std::path::PathBuf::from("/w/d1"), "/o/d1.a".into()]);
    let unsafe_id = json!({"id": "../d1", "group": "script"});
    assert!(crate::script_run_files("/w".as_ref(), "/o".as_ref(), &deployment(unsafe_id)).is_empty());
}
