//! Test helpers: a [`Tools`] that records each invocation and answers from a script, and
//! deployments from JSON.

use std::collections::VecDeque;
use std::io;

use anneal_protocol::Deployment;
use serde_json::Value;

use std::path::Path;

use crate::{Context, HookEnv, Invocation, Response, ToolError, ToolOutput, Tools};

/// What the recorder answers to one invocation.
pub(crate) enum Answer {
    Output(ToolOutput),
    Missing,
}

/// Records invocations; answers them in order (exit 0 with no output once the script is spent).
#[derive(Default)]
pub(crate) struct Recorder {
    pub(crate) invocations: Vec<Invocation>,
    /// What each invocation got on stdin (empty for `run`).
    pub(crate) stdins: Vec<Vec<u8>>,
    pub(crate) answers: VecDeque<Answer>,
}

impl Recorder {
    pub(crate) fn answering(answers: Vec<Answer>) -> Recorder {
        Recorder { invocations: Vec::new(), stdins: Vec::new(), answers: answers.into() }
    }
}

impl Tools for Recorder {
    async fn run(&mut self, invocation: Invocation) -> Result<ToolOutput, ToolError> {
        self.run_with_stdin(invocation, Vec::new()).await
    }

    async fn run_with_stdin(&mut self, invocation: Invocation, stdin: Vec<u8>) -> Result<ToolOutput, ToolError> {
        let program = invocation.program.clone();
        self.invocations.push(invocation);
        self.stdins.push(stdin);
        match self.answers.pop_front() {
            Some(Answer::Output(output)) => Ok(output),
            Some(Answer::Missing) => Err(ToolError::Spawn { program, source: io::Error::from_raw_os_error(2) }),
            None => Ok(ToolOutput::default()),
        }
    }
}

pub(crate) fn output(stdout: &str, stderr: &str, status_code: i64) -> Answer {
    Answer::Output(ToolOutput { stdout: stdout.as_bytes().to_vec(), stderr: stderr.as_bytes().to_vec(), status_code })
}

pub(crate) fn deployment(document: Value) -> Deployment {
    serde_json::from_value(document).unwrap()
}

/// A run's context with every directory at `dir`, no metadata and a 1 MiB output bound.
pub(crate) fn context<'a>(env: &'a HookEnv, dir: &'a Path) -> Context<'a> {
    Context { env, cwd: dir, outputs_dir: dir, max_output_bytes: 1 << 20, metadata: None }
}

/// What a hook printed, as JSON; a hook that printed nothing fails the test.
pub(crate) fn printed(response: Response) -> Value {
    match response {
        Response::Printed(map) => Value::Object(map),
        Response::Silent { reason } => panic!("silent: {reason}"),
        Response::Executed { .. } => panic!("only script executes its config"),
    }
}
