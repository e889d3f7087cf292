//! Where `tests/peers/setup.sh` put the OpenStack peers (git-ignored `tests/peers/.cache`), and
//! the check every peer test starts with: a missing peer fails the test with a message saying
//! how to install it, it never skips.

use std::path::{Path, PathBuf};

/// The peers' cache directory, after checking that each of `required` (paths relative to it)
/// exists.
pub fn cache(required: &[&str]) -> PathBuf {
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/.cache");
    for needed in required {
        assert!(
            cache.join(needed).exists(),
            "{} is missing: the OpenStack peer tests need tests/peers/setup.sh to have installed the peers \
             from PyPI (run it; it fails with a message naming the package when PyPI cannot be reached)",
            cache.join(needed).display()
        );
    }
    cache
}

/// Runs `tests/peers/real-heat/<script>` with the heat venv's python, `input` as JSON on its
/// stdin, and returns the JSON it prints (Heat's own code answering in-process; importing Heat
/// takes seconds, so callers send every case at once).
pub fn heat_python(script: &str, input: &serde_json::Value) -> serde_json::Value {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let cache = cache(&["heat-venv/bin/python3"]);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/real-heat").join(script);
    let mut child = Command::new(cache.join("heat-venv/bin/python3"))
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("the heat venv's python starts {script}: {error}"));
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.to_string().as_bytes()).expect("the input is written");
    drop(stdin);
    let output = child.wait_with_output().unwrap_or_else(|error| panic!("{script} ends: {error}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{script} failed ({}): {stderr}", output.status);
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| panic!("{script} printed no JSON: {error}: {stderr}"))
}

/// Heat's answers to `inputs`, one each, from a Heat-side script that reads a JSON list and
/// prints one (hot_eval.py, hot_stack_eval.py).
pub fn heat_answers(script: &str, inputs: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    let count = inputs.len();
    match heat_python(script, &serde_json::Value::Array(inputs)) {
        serde_json::Value::Array(answers) if answers.len() == count => answers,
        other => panic!("{script} answered {other}"),
    }
}

/// A differential case's parameter (`{"type", "value"}`) as the shim's `resolve_parameters`
/// types the value: a `comma_delimited_list` text split at each comma, anything else as given.
pub fn typed_parameter(spec: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match (spec["type"].as_str(), &spec["value"]) {
        (Some("comma_delimited_list"), Value::String(text)) => {
            Value::Array(text.split(',').map(|item| Value::String(item.to_owned())).collect())
        }
        (_, value) => value.clone(),
    }
}

/// Whether the shim's answer is Heat's (`{"value"}` or `{"error"}`): the same value, or both
/// refuse (and, with a `needle`, both messages contain it).
pub fn same_answer(shim: &Result<serde_json::Value, String>, heat: &serde_json::Value, needle: Option<&str>) -> bool {
    let heat_error = heat.get("error").and_then(serde_json::Value::as_str);
    match (shim, heat_error, needle) {
        (Ok(value), None, _) => Some(value) == heat.get("value"),
        (Err(_), Some(_), None) => true,
        (Err(message), Some(error), Some(needle)) => message.contains(needle) && error.contains(needle),
        _ => false,
    }
}

/// Metrics text parsed by Prometheus's reference parser (prometheus_client, in the peers'
/// `prometheus` venv; tests/fixtures/metrics/parse.py): `{family: {type, samples: [[name,
/// labels, value]]}}`. `format` is `openmetrics` or `text`; panics with the parser's message
/// when the text does not parse.
pub fn parse_metrics(text: &str, format: &str) -> serde_json::Value {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let cache = cache(&["prometheus/bin/python3"]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/metrics/parse.py");
    let mut child = Command::new(cache.join("prometheus/bin/python3"))
        .arg(script)
        .arg(format)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the prometheus venv's python starts");
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("write the metrics");
    let output = child.wait_with_output().expect("the parser ends");
    assert!(output.status.success(), "{}\n{text}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("the parser prints JSON")
}

/// The value of the sample `name` whose labels include every pair of `labels` (0 when none).
pub fn metric_value(families: &serde_json::Value, name: &str, labels: &[(&str, &str)]) -> f64 {
    families
        .as_object()
        .into_iter()
        .flat_map(|families| families.values())
        .flat_map(|family| family["samples"].as_array().cloned().unwrap_or_default())
        .filter(|sample| sample[0] == name)
        .filter(|sample| labels.iter().all(|(key, value)| sample[1][*key] == *value))
        .map(|sample| sample[2].as_f64().unwrap_or(0.0))
        .sum()
}
