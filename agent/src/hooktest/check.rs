//! `anneal-agent hook-test GROUP --check`: runs the built-in cases (`cases`) one after another
//! through the path the agent uses (`run_as_agent`: component resolution, the agent's hook
//! choice, its environment and deadlines) and judges each result by heat-config's and Heat's
//! rules: what Heat would record, the exact signal body, and the protocol violations found.
//!
//! The checker sees the result heat-config would have made and whether the hook's stdout was one
//! JSON object (`HookRun::wrapped`): a hook that prints plain text breaks the protocol even when
//! it exits 0 and Heat records the same as for a proper answer.

use std::time::Duration;

use anneal_protocol::result::{DEPLOY_STATUS_CODE, DEPLOY_STDERR, DEPLOY_STDOUT};
use anneal_protocol::signal::{MAX_SIGNAL_CHARS, signal_body};
use anneal_protocol::{Evaluation, HookResult, evaluate};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::cases::{self, Case, Expect};
use super::{HookTestError, Ran, run_as_agent};
use crate::hook::{Ending, HookChoice, HookRun, HookRunner, HookSettings};

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// Nothing to check: no hook for the group, a skipped group, or a hook the agent refuses.
    #[error("cannot check group {group}: {reason}")]
    NotCheckable { group: String, reason: String },
    #[error("case {case} could not be run")]
    Case {
        case: &'static str,
        #[source]
        source: HookTestError,
    },
}

impl CheckError {
    /// Whether the command line named something that cannot be checked (exit status 2), rather
    /// than a run that broke (exit status 1).
    pub fn is_usage(&self) -> bool {
        matches!(self, CheckError::NotCheckable { .. })
    }
}

/// How bad a finding is: violations make the check fail, notes explain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Violation,
    Note,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    pub message: String,
}

/// One case's run as Heat would see it.
#[derive(Debug, Clone)]
pub struct CaseReport {
    pub name: &'static str,
    pub about: &'static str,
    pub evaluation: Evaluation,
    /// The declared outputs, with their values in the result (`None`: absent, Heat stores null).
    pub outputs: Vec<(String, Option<Value>)>,
    pub signal_body: String,
    pub duration: Duration,
    pub findings: Vec<Finding>,
}

/// The whole check.
#[derive(Debug, Clone)]
pub struct CheckReport {
    pub group: String,
    /// What ran: `built-in script hook`, `built-in ansible hook`, or the hook file.
    pub hook: String,
    /// How the config was given (see `cases::config_description`).
    pub config: &'static str,
    pub cases: Vec<CaseReport>,
}

impl CheckReport {
    pub fn has_violations(&self) -> bool {
        self.cases.iter().any(CaseReport::has_violations)
    }
}

impl CaseReport {
    pub fn has_violations(&self) -> bool {
        self.findings.iter().any(|finding| finding.severity == Severity::Violation)
    }
}

/// Runs every case for `group` with `settings` (scratch dirs already set by the caller).
pub async fn check(
    group: &str,
    settings: HookSettings,
    default_timeout: Duration,
    shutdown: &CancellationToken,
) -> Result<CheckReport, CheckError> {
    let runner = HookRunner::new(settings);
    let mut report = CheckReport {
        group: group.to_string(),
        hook: String::new(),
        config: cases::config_description(group),
        cases: Vec::new(),
    };
    for case in cases::cases(group) {
        let ran = run_as_agent(&runner, case.deployment.clone(), group, default_timeout, shutdown).await;
        let ran = ran.map_err(|source| match source {
            HookTestError::NotRunnable { reason } => CheckError::NotCheckable { group: group.to_string(), reason },
            source => CheckError::Case { case: case.name, source },
        })?;
        report.hook = describe_choice(&ran.choice);
        report.cases.push(judge(&case, &ran));
    }
    Ok(report)
}

fn describe_choice(choice: &HookChoice) -> String {
    match choice {
        HookChoice::Builtin(builtin) => format!("the built-in {} hook", builtin.group()),
        HookChoice::External(path) => path.display().to_string(),
        other => format!("{other:?}"),
    }
}

/// Heat's reading of one case's result and what the checker finds in it.
fn judge(case: &Case, ran: &Ran) -> CaseReport {
    let result = &ran.run.result;
    let evaluation = evaluate(result, &ran.deployment.outputs);
    let outputs = ran
        .deployment
        .outputs
        .iter()
        .map(|output| (output.name.clone(), result.0.get(&output.name).cloned()))
        .collect();
    CaseReport {
        name: case.name,
        about: case.about,
        evaluation,
        outputs,
        signal_body: signal_body(result, MAX_SIGNAL_CHARS),
        duration: ran.run.duration,
        findings: findings(case, ran),
    }
}

/// What heat-config made of the hook's stdout, as far as the result shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A JSON object the hook printed (or a built-in's answer).
    Answer,
    /// Nothing on stdout with exit status 0: heat-config signals `{}`.
    Empty,
    /// stdout was not one JSON object: heat-config sent `{deploy_stdout, deploy_stderr,
    /// deploy_status_code: <exit status>}`.
    Wrapped,
}

fn findings(case: &Case, ran: &Ran) -> Vec<Finding> {
    let mut found = Vec::new();
    let run = &ran.run;
    if let Ending::TimedOut { after } = run.ending {
        let expected = case.expect.as_ref().is_some_and(|expect| expect.timed_out);
        found.push(timed_out(after, expected));
        return found;
    }
    let shape = match &ran.choice {
        HookChoice::External(_) => external_shape(run, &mut found),
        // The config is the script hook's process: its exit status is its deploy_status_code.
        HookChoice::Builtin(anneal_hooks::Builtin::Script) => Shape::Answer,
        HookChoice::Builtin(_) => builtin_shape(run, &mut found),
        _ => Shape::Answer,
    };
    if shape == Shape::Answer {
        answer_findings(&run.result, ran, &mut found);
    }
    match &case.expect {
        Some(expect) => expectation_findings(expect, ran, &mut found),
        None => missing_outputs_note(ran, &mut found),
    }
    found
}

fn violation(message: String) -> Finding {
    Finding { severity: Severity::Violation, message }
}

fn note(message: String) -> Finding {
    Finding { severity: Severity::Note, message }
}

fn timed_out(after: Duration, expected: bool) -> Finding {
    let secs = after.as_secs();
    if expected {
        note(format!(
            "killed at its {secs} s deadline, as this case intends: the process group got SIGTERM, then SIGKILL \
             after hook_kill_grace_secs; deploy_status_code 124"
        ))
    } else {
        violation(format!("timed out after {secs} s: the process group was killed and deploy_status_code is 124"))
    }
}

/// `deploy_status_code` heat-config gives a process that ended this way.
fn exit_status(ending: Ending) -> i64 {
    match ending {
        Ending::Exited(code) => i64::from(code),
        Ending::Signalled(signal) => -i64::from(signal),
        Ending::TimedOut { .. } => 124,
    }
}

/// An external hook: how its stdout was read, and whether it exited 0.
fn external_shape(run: &HookRun, found: &mut Vec<Finding>) -> Shape {
    let status = exit_status(run.ending);
    let shape = if run.result.0.is_empty() && status == 0 {
        Shape::Empty
    } else if run.wrapped {
        Shape::Wrapped
    } else {
        Shape::Answer
    };
    match shape {
        Shape::Empty => found.push(violation(
            "printed nothing on stdout: heat-config signals {} (no deploy_status_code, no outputs)".into(),
        )),
        Shape::Wrapped => found.push(violation(format!(
            "stdout is not one JSON object: heat-config wrapped it as {{deploy_stdout, deploy_stderr, \
             deploy_status_code: {status}}}"
        ))),
        Shape::Answer => {}
    }
    match run.ending {
        Ending::Exited(0) => {}
        Ending::Signalled(signal) => found.push(violation(format!("the hook was killed by signal {signal}"))),
        _ => found.push(violation(format!(
            "the hook exited with status {status}: exit 0 and report failure in deploy_status_code"
        ))),
    }
    shape
}

/// A built-in: an error before answering is where heat-agents' hook ends in a traceback.
fn builtin_shape(run: &HookRun, found: &mut Vec<Finding>) -> Shape {
    if run.result.0.is_empty() {
        found.push(note(
            "the hook answered nothing (heat-agents' hook returns early here): heat-config signals {}".into(),
        ));
        return Shape::Empty;
    }
    if run.ending != Ending::Exited(0) {
        let stderr = run.result.0.get(DEPLOY_STDERR).and_then(Value::as_str).unwrap_or_default();
        found.push(violation(format!("the hook failed before answering: {}", stderr.trim())));
        return Shape::Wrapped;
    }
    Shape::Answer
}

/// A JSON answer: it needs `deploy_status_code`, and keys other than declared outputs are lost.
fn answer_findings(result: &HookResult, ran: &Ran, found: &mut Vec<Finding>) {
    if result.status_code().is_none() {
        found.push(violation("the JSON answer has no deploy_status_code (Heat reads that as success)".into()));
    }
    let declared = |key: &str| ran.deployment.outputs.iter().any(|output| output.name == key);
    let dropped: Vec<&str> = result
        .0
        .keys()
        .map(String::as_str)
        .filter(|key| ![DEPLOY_STDOUT, DEPLOY_STDERR, DEPLOY_STATUS_CODE].contains(key) && !declared(key))
        .collect();
    if !dropped.is_empty() {
        found.push(violation(format!("keys that are not declared outputs (Heat drops them): {}", dropped.join(", "))));
    }
}

/// A script case: the status code is the script's exit status and its outputs must arrive.
fn expectation_findings(expect: &Expect, ran: &Ran, found: &mut Vec<Finding>) {
    let result = &ran.run.result;
    let code = result.status_code().cloned().unwrap_or(Value::Null);
    if code.as_i64() != Some(expect.status_code) {
        found.push(violation(format!(
            "deploy_status_code is {code}, not {} (the config script's exit status)",
            expect.status_code
        )));
    }
    let missing: Vec<&str> = expect.outputs.iter().copied().filter(|name| !result.0.contains_key(*name)).collect();
    if !missing.is_empty() {
        found.push(violation(format!(
            "declared outputs the script wrote to ${{heat_outputs_path}}.<name> are missing: {}",
            missing.join(", ")
        )));
    }
    if expect.timed_out {
        found.push(violation("the config sleeps past its deadline, but the hook was not stopped".into()));
    }
}

/// A neutral config: outputs may well be absent, but say what Heat does then (on success only:
/// a failed deployment is not expected to have them).
fn missing_outputs_note(ran: &Ran, found: &mut Vec<Finding>) {
    if ran.run.result.is_failure(&ran.deployment.outputs) {
        return;
    }
    let missing: Vec<&str> = ran
        .deployment
        .outputs
        .iter()
        .filter(|output| !output.error_output && !ran.run.result.0.contains_key(&output.name))
        .map(|output| output.name.as_str())
        .collect();
    if !missing.is_empty() {
        found.push(note(format!("declared outputs not in the result (Heat stores null): {}", missing.join(", "))));
    }
}

#[cfg(test)]
mod tests;
