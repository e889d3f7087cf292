//! The text `hook-test --check` prints: a block per case (what Heat would record, the signal
//! body, the findings), then one summary line. Long values are cut so a case stays a few lines;
//! `hook-test GROUP < deployment.json` prints a whole body.

use anneal_protocol::Outcome;
use anneal_protocol::pyjson;
use serde_json::Value;

use super::check::{CaseReport, CheckReport, Severity};

/// Characters of a signal body shown per case.
const BODY_CHARS: usize = 240;
/// Characters of one output value shown.
const VALUE_CHARS: usize = 60;

impl CheckReport {
    /// The report as `hook-test --check` prints it.
    pub fn render(&self) -> String {
        let mut text = format!("group {}: runs {}\nconfig: {}\n", self.group, self.hook, self.config);
        for case in &self.cases {
            text.push('\n');
            text.push_str(&render_case(case));
        }
        text.push('\n');
        text.push_str(&self.summary());
        text
    }

    /// `N cases: M with protocol violations (names)` or `N cases: no protocol violations`.
    fn summary(&self) -> String {
        let failing: Vec<&str> = self.cases.iter().filter(|case| case.has_violations()).map(|case| case.name).collect();
        if failing.is_empty() {
            format!("{} cases: no protocol violations\n", self.cases.len())
        } else {
            format!("{} cases: {} with protocol violations ({})\n", self.cases.len(), failing.len(), failing.join(", "))
        }
    }
}

fn render_case(case: &CaseReport) -> String {
    let heat = match &case.evaluation.outcome {
        Outcome::Complete => format!("COMPLETE ({})", case.evaluation.status_reason),
        Outcome::Failed { reason } => format!("FAILED ({reason})"),
    };
    let code = case.evaluation.output_values.get("deploy_status_code").cloned().unwrap_or(Value::Null);
    let verdict = if case.has_violations() { "PROTOCOL VIOLATION" } else { "ok" };
    let mut text = format!("{}: {}\n", case.name, case.about);
    text.push_str(&format!("  heat:     {heat}\n"));
    text.push_str(&format!("  code:     deploy_status_code {}\n", pyjson::dumps(&code, false)));
    text.push_str(&format!("  outputs:  {}\n", render_outputs(&case.outputs)));
    text.push_str(&format!("  signal:   {}\n", cut(&case.signal_body, BODY_CHARS)));
    text.push_str(&format!("  verdict:  {verdict} ({:.1} s)\n", case.duration.as_secs_f64()));
    for finding in &case.findings {
        let label = match finding.severity {
            Severity::Violation => "VIOLATION",
            Severity::Note => "note",
        };
        text.push_str(&format!("  {label}: {}\n", finding.message));
    }
    text
}

/// `name = value, ...` for the declared outputs, `null` for the absent ones.
fn render_outputs(outputs: &[(String, Option<Value>)]) -> String {
    if outputs.is_empty() {
        return "(none declared)".to_string();
    }
    let shown: Vec<String> = outputs
        .iter()
        .map(|(name, value)| match value {
            Some(value) => format!("{name} = {}", cut(&pyjson::dumps(value, false), VALUE_CHARS)),
            None => format!("{name} = null (absent)"),
        })
        .collect();
    shown.join(", ")
}

/// `text` cut to `limit` characters, saying how much was left out.
fn cut(text: &str, limit: usize) -> String {
    let total = text.chars().count();
    if total <= limit {
        return text.to_string();
    }
    let head: String = text.chars().take(limit).collect();
    format!("{head}... ({} more characters)", total - limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooktest::check::Finding;
    use anneal_protocol::{HookResult, evaluate};
    use serde_json::json;
    use std::time::Duration;

    fn case(findings: Vec<Finding>) -> CaseReport {
        let result: HookResult = serde_json::from_value(json!({"deploy_status_code": 3, "x": 1})).unwrap();
        CaseReport {
            name: "failure",
            about: "fails",
            evaluation: evaluate(&result, &[]),
            outputs: vec![("result".into(), None), ("x".into(), Some(json!("é".repeat(100))))],
            signal_body: "b".repeat(300),
            duration: Duration::from_millis(1500),
            findings,
        }
    }

    #[test]
    fn a_case_shows_heat_code_outputs_signal_and_findings() {
        let violation = Finding { severity: Severity::Violation, message: "exited 3".into() };
        let text = render_case(&case(vec![violation]));
        assert!(text.starts_with("failure: fails\n"), "{text}");
        assert!(
            text.contains("heat:     FAILED (deploy_status_code : Deployment exited with non-zero status code: 3)")
        );
        assert!(text.contains("code:     deploy_status_code 3\n"));
        assert!(text.contains("result = null (absent), x = \""), "{text}");
        assert!(text.contains("... (60 more characters)"), "{text}");
        assert!(text.contains("verdict:  PROTOCOL VIOLATION (1.5 s)"));
        assert!(text.contains("  VIOLATION: exited 3\n"));
    }

    #[test]
    fn the_summary_names_the_failing_cases() {
        let report = CheckReport {
            group: "g".into(),
            hook: "/hooks/g".into(),
            config: "an empty string",
            cases: vec![case(Vec::new()), case(vec![Finding { severity: Severity::Note, message: "n".into() }])],
        };
        assert!(report.render().ends_with("2 cases: no protocol violations\n"));
        let mut failing = report.clone();
        failing.cases[1].findings.push(Finding { severity: Severity::Violation, message: "v".into() });
        assert!(failing.render().ends_with("2 cases: 1 with protocol violations (failure)\n"));
        assert!(failing.render().starts_with("group g: runs /hooks/g\nconfig: an empty string\n"));
    }

    #[test]
    fn cutting_respects_characters() {
        assert_eq!(cut("héllo", 10), "héllo");
        assert_eq!(cut("héllo", 2), "hé... (3 more characters)");
    }
}
