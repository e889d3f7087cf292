//! Differential: the `config` attribute of `OS::Heat::CloudConfig` (and of
//! `OS::Heat::MultipartMime`, its random boundary aside) from the real shim binary is
//! byte for byte what Heat's own rendering code (PyYAML with Heat's dumper, run in-process by
//! `tests/peers/real-heat/heat_render.py` with the heat venv's python) makes of the same
//! `cloud_config`, over values that exercise the emitter: key order, nested and indentless
//! lists, empty collections, quoting of implicit types, line folding, escapes.

use anneal_tests::{Shim, peers};
use serde_json::{Value, json};

fn cases() -> Vec<Value> {
    let long = "word ".repeat(40);
    vec![
        json!({"packages": ["nginx", "git"], "package_update": true, "runcmd": [["ls", "-l"], "echo hi"]}),
        json!({"write_files": [{"path": "/etc/app.conf", "permissions": "0644", "content": "a: b\nline2\n\n  x\n"}]}),
        json!({"users": [{"name": "bob", "sudo": "ALL=(ALL) NOPASSWD:ALL", "groups": null}], "empty": {}, "none": []}),
        json!({"yes": "yes", "num": "123", "float": "1.5", "date": "2001-12-14", "time": "1:30", "blank": "",
               "quote": "it's", "colon": "a: b", "hash": "a #b", "star": "*x", "dash": "- x", "lead": " x",
               "trail": "x ", "tab": "a\tb", "uni": "h\u{e9}llo", "bool": false, "int": 42, "real": 2.5,
               "big": 1e20, "small": 0.00001}),
        json!({"long": long, "long_quoted": format!("'{long}"), "multi": format!("{long}\n{long}"),
               "escaped": format!("{long}\u{e9}{long}")}),
        json!({"nested": {"b": {"c": [1, {"d": [[], {}]}]}, "a": "x"}, "list": [[["deep"]]]}),
        json!({"sci": "1e5", "sci2": "1.5e+5", "sci3": "1.5e5", "dotted": "-.5", "hex": "0x1F", "neg": -3, "inf": ".inf", "tilde": "~", "merge": "<<", "eq": "=",
               "on": "on", "dots": "...", "doc": "--- x", "q": "?", "pct": "%x", "bang": "!x", "url": "http://x:80/#a",
               "spaced": format!("{long} {long}  {long}"), "crlf": "a\r\nb", "key with: colon": 1}),
        json!({}),
        json!(null),
    ]
}

fn heat_rendering(mode: &str, values: &[Value]) -> Vec<String> {
    let cache = peers::cache(&["heat-venv/bin/python3"]);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/real-heat/heat_render.py");
    let input = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(input.path(), serde_json::to_vec(values).expect("json")).expect("write");
    let mut command = std::process::Command::new(cache.join("heat-venv/bin/python3"));
    command.arg(script).arg(mode).stdin(std::fs::File::open(input.path()).expect("open"));
    let output = command.output().expect("run heat_render.py");
    assert!(output.status.success(), "heat_render.py: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("a JSON list of strings")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloud_config_renders_as_heat_renders_it() {
    let values = cases();
    let expected = heat_rendering("cloud_config", &values);
    let shim = Shim::start().await;
    // A JSON template, which Heat reads with json.loads: numbers stay numbers. (In YAML,
    // serde_json's `1e20` would be a string to PyYAML, which wants a dot and a signed exponent.)
    let mut resources = serde_json::Map::new();
    let mut outputs = serde_json::Map::new();
    for (index, value) in values.iter().enumerate() {
        let properties = if value.is_null() { json!({}) } else { json!({"cloud_config": value}) };
        resources.insert(format!("cc{index}"), json!({"type": "OS::Heat::CloudConfig", "properties": properties}));
        outputs.insert(format!("cc{index}"), json!({"value": {"get_attr": [format!("cc{index}"), "config"]}}));
    }
    let template = json!({"heat_template_version": "2018-08-31", "resources": resources, "outputs": outputs});
    let path = shim.write_template("cloud.json", &template.to_string());
    shim.cli_ok(&["stack", "create", "cloud", "--template", path.to_str().expect("utf-8"), "--wait"]).await;
    let shown = shim.cli_json(&["stack", "outputs", "cloud", "--json"]).await;
    for (index, heat) in expected.iter().enumerate() {
        let name = format!("cc{index}");
        let ours = shown.as_array().expect("list").iter().find(|output| output["name"] == name.as_str());
        let ours = ours.and_then(|output| output["value"].as_str()).unwrap_or_default();
        assert_eq!(ours, heat, "case {index}: {}", values[index]);
    }
}

fn mime_cases() -> Vec<Value> {
    let long = "word ".repeat(30);
    vec![
        json!([{"config": "#!/bin/sh\necho hi"}, {"config": "#cloud-config\n", "subtype": "cloud-config"}]),
        json!([{"config": "h\u{e9}llo\n", "filename": "part.sh"}, {"config": long, "filename": ".bashrc"},
               {"config": "x", "filename": "we\"ird\\name.txt", "subtype": "x-shellscript"},
               {"config": "From me\n--", "filename": "n\u{e9}.sh"}]),
        json!([]),
    ]
}

/// The boundary is random in both; it is replaced by a fixed one before comparing.
fn fixed_boundary(message: &str) -> String {
    let start = message.find("boundary=\"").map(|index| index + 10).expect("a boundary");
    let end = start + message[start..].find('"').expect("a closing quote");
    message.replace(&message[start..end], "BOUNDARY")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_mime_renders_as_heat_renders_it() {
    let values = mime_cases();
    let expected = heat_rendering("multipart", &values);
    let shim = Shim::start().await;
    let mut template = String::from("heat_template_version: 2018-08-31\nresources:\n");
    let mut outputs = String::from("outputs:\n");
    for (index, parts) in values.iter().enumerate() {
        let properties = json!({"parts": parts});
        template.push_str(&format!("  mime{index}: {{type: OS::Heat::MultipartMime, properties: {properties}}}\n"));
        outputs.push_str(&format!("  mime{index}: {{value: {{get_attr: [mime{index}, config]}}}}\n"));
    }
    template.push_str(
        "  cc: {type: OS::Heat::CloudConfig, properties: {cloud_config: {packages: [git]}}}\n  \
         joined:\n    type: OS::Heat::MultipartMime\n    properties: {parts: [{config: {get_resource: cc}}]}\n",
    );
    outputs.push_str("  joined: {value: {get_attr: [joined, config]}}\n");
    let path = shim.write_template("mime.yaml", &(template + &outputs));
    shim.cli_ok(&["stack", "create", "mime", "--template", path.to_str().expect("utf-8"), "--wait"]).await;
    let shown = shim.cli_json(&["stack", "outputs", "mime", "--json"]).await;
    let output = |name: &str| -> String {
        let found = shown.as_array().expect("list").iter().find(|output| output["name"] == name);
        found.and_then(|output| output["value"].as_str()).unwrap_or_default().to_owned()
    };
    for (index, heat) in expected.iter().enumerate() {
        let ours = output(&format!("mime{index}"));
        assert_eq!(fixed_boundary(&ours), fixed_boundary(heat), "case {index}: {}", values[index]);
    }
    let joined = output("joined");
    assert!(joined.contains("\n\n#cloud-config\npackages:\n- git\n\n--"), "a config id is its text: {joined}");
}
