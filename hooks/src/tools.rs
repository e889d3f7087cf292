//! The seam between a built-in hook and the processes it runs: a hook describes each tool run
//! (`Invocation`) and the caller's [`Tools`] runs it. The agent's implementation gives every tool
//! its own process group and the hook's deadline; tests record what would have run.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// One tool run, as heat-agents' `subprocess.Popen(cmd, env=env)` from the hook's working dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// A path, or a bare name looked up in `PATH` of `env`, as Python's `Popen` does.
    pub program: String,
    pub args: Vec<String>,
    /// The tool's whole environment.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
}

/// A tool that ran to its end.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The exit code, or the negated signal number (Python's `returncode`).
    pub status_code: i64,
}

impl ToolOutput {
    /// `stdout.decode('utf-8', 'replace')`.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The tool could not start (Python's `OSError` from `Popen`, e.g. not installed).
    #[error("cannot start {program}")]
    Spawn { program: String, source: io::Error },
    /// The hook's deadline passed while the tool ran; its process group was killed.
    #[error("{program} ran past the hook's deadline ({after:?})")]
    TimedOut { program: String, output: ToolOutput, after: Duration },
    /// Shutdown stopped the tool.
    #[error("{program} was stopped by shutdown")]
    Cancelled { program: String },
    /// The tool started but could not be waited for.
    #[error("cannot wait for {program}")]
    Wait { program: String, source: io::Error },
}

/// Runs tools for a built-in hook.
pub trait Tools: Send {
    /// Runs the tool with its stdin at end of file (heat-agents' hooks have read theirs whole
    /// before they start a tool, which inherits it).
    fn run(&mut self, invocation: Invocation) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send;

    /// Runs the tool with `stdin` on its standard input: what a heat-agents hook that never reads
    /// its own stdin passes on to the tool it starts (the deployment).
    fn run_with_stdin(
        &mut self,
        invocation: Invocation,
        stdin: Vec<u8>,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send;
}
