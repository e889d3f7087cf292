//! A hook's result, which is also the deployment signal's payload, and Heat's rules for it:
//! the failure rule and reason text of `signal_software_deployment` (openstack/heat
//! `heat/engine/service_software_config.py`; docs/metadata.md "How Heat (and the shim) read a
//! result"; fixture `tests/fixtures/heat/signal-decision-table.json`), and heat-config's wrapping
//! of a hook's raw process output.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::deployment::OutputDecl;
use crate::pyjson;

pub const DEPLOY_STDOUT: &str = "deploy_stdout";
pub const DEPLOY_STDERR: &str = "deploy_stderr";
pub const DEPLOY_STATUS_CODE: &str = "deploy_status_code";

/// The JSON object a hook prints and the agent signals:
/// `{deploy_stdout, deploy_stderr, deploy_status_code, <output>: value, ...}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HookResult(pub Map<String, Value>);

/// What the engine makes of a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Complete,
    Failed { reason: String },
}

/// Heat's reading of a signal: the outcome, its status reason and the values it stores.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub outcome: Outcome,
    /// `"Outputs received"` on success, else Heat's joined failure reasons.
    pub status_reason: String,
    /// The declared outputs present in the signal plus the three `deploy_*` keys (null when absent).
    pub output_values: Map<String, Value>,
}

impl HookResult {
    /// heat-config's result for a hook whose stdout is not a JSON object (or a failed process):
    /// `{deploy_stdout, deploy_stderr, deploy_status_code}`.
    pub fn from_process(stdout: &str, stderr: &str, status_code: i64) -> HookResult {
        let mut map = Map::new();
        map.insert(DEPLOY_STDOUT.into(), Value::String(stdout.to_string()));
        map.insert(DEPLOY_STDERR.into(), Value::String(stderr.to_string()));
        map.insert(DEPLOY_STATUS_CODE.into(), Value::from(status_code));
        HookResult(map)
    }

    /// heat-config's rule for an external hook's output (55-heat-config step 8): a JSON object on
    /// stdout wins even with a non-zero exit; empty stdout with exit 0 is `{}`; anything else is
    /// wrapped with [`HookResult::from_process`].
    pub fn from_hook_output(stdout: &str, stderr: &str, status_code: i64) -> HookResult {
        if !stdout.trim().is_empty() {
            if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(stdout) {
                return HookResult(map);
            }
        } else if status_code == 0 {
            return HookResult::default();
        }
        HookResult::from_process(stdout, stderr, status_code)
    }

    pub fn status_code(&self) -> Option<&Value> {
        self.0.get(DEPLOY_STATUS_CODE)
    }

    /// Whether Heat would mark the deployment FAILED (see [`evaluate`]).
    pub fn is_failure(&self, outputs: &[OutputDecl]) -> bool {
        matches!(evaluate(self, outputs).outcome, Outcome::Failed { .. })
    }
}

/// Applies Heat's failure rule: FAILED iff `deploy_status_code` is truthy and its string form is
/// not `"0"`, or an output declared `error_output: true` is present. Undeclared keys are dropped.
pub fn evaluate(result: &HookResult, outputs: &[OutputDecl]) -> Evaluation {
    let mut output_values = Map::new();
    let mut reasons = Vec::new();
    for output in outputs {
        if let Some(value) = result.0.get(&output.name) {
            output_values.insert(output.name.clone(), value.clone());
            if output.error_output {
                reasons.push(format!("{} : {}", output.name, pyjson::python_str(value)));
            }
        }
    }
    let status_code = result.status_code().cloned().unwrap_or(Value::Null);
    if pyjson::is_truthy(&status_code) && pyjson::python_str(&status_code) != "0" {
        reasons.push(format!(
            "deploy_status_code : Deployment exited with non-zero status code: {}",
            pyjson::python_str(&status_code)
        ));
    }
    for key in [DEPLOY_STDOUT, DEPLOY_STDERR, DEPLOY_STATUS_CODE] {
        output_values.insert(key.to_string(), result.0.get(key).cloned().unwrap_or(Value::Null));
    }
    if reasons.is_empty() {
        Evaluation { outcome: Outcome::Complete, status_reason: "Outputs received".into(), output_values }
    } else {
        let reason = reasons.join(", ");
        Evaluation { outcome: Outcome::Failed { reason: reason.clone() }, status_reason: reason, output_values }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn outputs(error_outputs: &[&str]) -> Vec<OutputDecl> {
        vec![OutputDecl { name: "foo".into(), error_output: error_outputs.contains(&"foo"), extra: Map::new() }]
    }

    #[test]
    fn heat_decision_table_fixture_holds() {
        let text = include_str!("../../tests/fixtures/heat/signal-decision-table.json");
        let table: Value = serde_json::from_str(text).unwrap();
        for case in table["cases"].as_array().unwrap() {
            let error_outputs: Vec<&str> = case
                .get("error_output")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let signal: HookResult = serde_json::from_value(case["signal"].clone()).unwrap();
            let evaluation = evaluate(&signal, &outputs(&error_outputs));
            let status = match evaluation.outcome {
                Outcome::Complete => "COMPLETE",
                Outcome::Failed { .. } => "FAILED",
            };
            assert_eq!(status, case["status"], "case {case}");
            assert_eq!(evaluation.status_reason, case["status_reason"], "case {case}");
            assert_eq!(Value::Object(evaluation.output_values), case["output_values"], "case {case}");
        }
    }

    #[test]
    fn status_code_truthiness_follows_python() {
        let failing = [json!(1), json!(-1), json!("2"), json!(true), json!("00"), json!(-1.5), json!([0])];
        let passing = [json!(0), json!("0"), json!(null), json!(""), json!(false), json!(0.0), json!([])];
        for code in failing {
            let result = HookResult(Map::from_iter([(DEPLOY_STATUS_CODE.to_string(), code.clone())]));
            assert!(result.is_failure(&[]), "{code} should fail");
        }
        for code in passing {
            let result = HookResult(Map::from_iter([(DEPLOY_STATUS_CODE.to_string(), code.clone())]));
            assert!(!result.is_failure(&[]), "{code} should pass");
        }
        assert!(!HookResult::default().is_failure(&[]), "a missing status code is success");
    }

    #[test]
    fn failure_reason_uses_python_str_of_the_code() {
        let result = HookResult(Map::from_iter([(DEPLOY_STATUS_CODE.to_string(), json!(true))]));
        let evaluation = evaluate(&result, &[]);
        assert_eq!(
            evaluation.outcome,
            Outcome::Failed { reason: "deploy_status_code : Deployment exited with non-zero status code: True".into() }
        );
    }

    #[test]
    fn error_output_present_fails_even_with_zero_status() {
        let result = HookResult(Map::from_iter([
            ("foo".to_string(), json!("bad things")),
            (DEPLOY_STATUS_CODE.to_string(), json!(0)),
        ]));
        let evaluation = evaluate(&result, &outputs(&["foo"]));
        assert_eq!(evaluation.outcome, Outcome::Failed { reason: "foo : bad things".into() });
    }

    #[test]
    fn undeclared_keys_are_not_stored() {
        let result = HookResult(Map::from_iter([("other".to_string(), json!(1))]));
        assert!(!evaluate(&result, &outputs(&[])).output_values.contains_key("other"));
    }

    #[test]
    fn hook_output_rules_match_heat_config() {
        let json_wins = HookResult::from_hook_output("{\"a\": 1}", "err", 3);
        assert_eq!(json_wins.0, Map::from_iter([("a".to_string(), json!(1))]));
        assert_eq!(HookResult::from_hook_output("", "", 0), HookResult::default());
        let empty_failure = HookResult::from_hook_output("", "boom", 2);
        assert_eq!(empty_failure.status_code(), Some(&json!(2)));
        assert_eq!(empty_failure.0[DEPLOY_STDERR], json!("boom"));
        let not_json = HookResult::from_hook_output("plain text", "", 0);
        assert_eq!(not_json.0[DEPLOY_STDOUT], json!("plain text"));
        assert_eq!(not_json.status_code(), Some(&json!(0)));
        let json_list = HookResult::from_hook_output("[1, 2]", "", 0);
        assert_eq!(json_list.0[DEPLOY_STDOUT], json!("[1, 2]"), "only an object counts as a result");
    }
}
