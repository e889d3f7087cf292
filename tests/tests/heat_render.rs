//! Differential: the `config` attribute of `OS::Heat::CloudConfig` (and of
//! `OS::Heat::MultipartMime`, its random boundary aside) from the real shim binary is
//! byte for byte what Heat's own rendering code (PyYAML with Heat's dumper, run in-process by
//! `tests/peers/real-heat/heat_render.py` with the heat venv's python) makes of the same
//! `cloud_config`, over values that exercise the emitter: key order, nested and indentless
//! lists, empty collections, quoting of implicit types, line folding, escapes. For
//! MultipartMime parts of `type: multipart`, Heat's own `get_message` runs over the same
//! resources: nested MultipartMimes, configs that are no message, and hand-written messages
//! that exercise Python's email parser.

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
        // Line ends written as `\n`; subtypes Python's set_param rewrites; a `b` encoded word.
        json!([{"config": "a\r\nb\rc\n"}, {"config": "x", "subtype": "a=b"}, {"config": "x", "filename": "f g "},
               {"config": "h\u{e9}", "subtype": "n\u{e9}"}]),
    ]
}

/// Boundaries are random in both; each (a message's, and any inside a part's text) is replaced
/// by a fixed one, numbered in order of appearance, before comparing.
fn fixed_boundary(message: &str) -> String {
    let mut fixed = message.to_owned();
    let mut number = 0;
    while let Some(start) = fixed.find("boundary=\"=").map(|index| index + 10) {
        let end = start + fixed[start..].find('"').expect("a closing quote");
        fixed = fixed.replace(&fixed[start..end].to_owned(), &format!("BOUNDARY{number}"));
        number += 1;
    }
    fixed
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

/// Hand-written messages spliced by a part of `type: multipart`, over Python's email parser:
/// CRLF, a preamble, repeated boundary lines, upper case, Content-Type's `name`, an epilogue; a
/// folded header, an RFC 2231 file name, a base64 payload (kept encoded), a first line that is
/// no header, no closing boundary; no start boundary; message/rfc822; delivery-status; an
/// envelope line; a boundary with blanks; RFC 2231 sections; a nested multipart without its
/// start; subtypes that are not ASCII or that Python's set_param rewrites.
const HANDWRITTEN: &[&str] = &[
    "Content-Type: Multipart/Mixed; boundary=B\r\n\r\npreamble\r\n--B\r\n\r\nno headers\r\n--B\r\n--B\r\n\
     Content-Type: TEXT/X-Upper; name=n.txt\r\n\r\nafter dup\r\n--B--\r\nepilogue",
    "Content-Type: multipart/mixed;\n boundary=B\n\n--B\nContent-Disposition: attachment; filename*=utf-8''n%C3%A9.sh\n\
     Content-Transfer-Encoding: base64\n\naMOpbGxvCg==\n\n--B\nnot a header\n--B",
    "Content-Type: multipart/mixed; boundary=B\n\nno start boundary\n--B--\nafter",
    "Content-Type: message/rfc822\n\nContent-Type: text/x-inner\n\nbody\n",
    "Content-Type: message/delivery-status\n\nA: 1\n\nContent-Type: text/y\nB: 2\n\n",
    "From me\nContent-Type: multipart/mixed; boundary=B\n\n--B\nA: 1\nFrom x\n\nbody\n--B--",
    "Content-Type: multipart/mixed; boundary=\"B \"\n\n--B \t\nx\n--B--",
    "Content-Type: multipart/mixed; boundary*0=\"A\"; boundary*1=B\n\n--AB\n\nx\n--AB--",
    "Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: multipart/alternative; boundary=C\n\n\
     no inner start\n--B--\n",
    "Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: text/x-\u{e9}\n\nh\u{e9}\n--B\n\
     Content-Type: text/a=b\n\nx\n--B--",
];

/// Messages with a part that has parts of its own: Heat's get_message fails on them.
const NESTED: &[&str] = &[
    "Content-Type: multipart/mixed; boundary=B\n\n--B\n\nfirst\n--B\nContent-Type: multipart/mixed; boundary=C\n\n\
     --C\n\ninner\n--C--\n--B--\n",
    "Content-Type: multipart/digest; boundary=B\n\n--B\n\nimplicitly message/rfc822\n--B--\n",
];

/// Three levels of MultipartMime, each splicing the one below, beside text parts, a
/// CloudConfig spliced (no message: nothing) and named (its text), a message as a text part;
/// then each hand-written message spliced on its own.
fn spliced_resources() -> Vec<Value> {
    let mut resources = vec![
        json!({"cloud_config": {"packages": ["git"], "runcmd": ["echo hi"]}}),
        json!({"parts": [{"config": "#!/bin/sh\necho inner", "filename": "inner.sh"},
                         {"config": "h\u{e9}llo\r\n", "filename": "n\u{e9}.sh"},
                         {"config": "#cloud-config\nruncmd: [ls]\n", "subtype": "cloud-config"},
                         {"config": "a\r\nb\rc", "subtype": "x-shellscript"}]}),
        json!({"parts": [{"config": "#!/bin/sh\necho middle"}, {"config": {"ref": 1}, "type": "multipart"},
                         {"config": {"ref": 0}}, {"config": {"ref": 0}, "type": "multipart"}]}),
        json!({"parts": [{"config": {"ref": 2}, "type": "multipart"}, {"config": "tail", "filename": "tail.sh"},
                         {"config": {"ref": 1}, "type": "text"}, {"config": "", "type": "multipart"}]}),
    ];
    resources.extend(HANDWRITTEN.iter().map(|text| json!({"parts": [{"config": text, "type": "multipart"}]})));
    resources
}

/// A JSON template of `resources` (`res<index>`, a `ref` a `get_resource`), an output each.
fn spliced_template(resources: &[Value]) -> String {
    let mut template_resources = serde_json::Map::new();
    let mut outputs = serde_json::Map::new();
    for (index, resource) in resources.iter().enumerate() {
        let name = format!("res{index}");
        let definition = match resource.get("cloud_config") {
            Some(value) => json!({"type": "OS::Heat::CloudConfig", "properties": {"cloud_config": value}}),
            None => {
                let mut parts = resource["parts"].clone();
                for part in parts.as_array_mut().expect("parts") {
                    if let Some(target) = part["config"].get("ref").and_then(Value::as_u64) {
                        part["config"] = json!({"get_resource": format!("res{target}")});
                    }
                }
                json!({"type": "OS::Heat::MultipartMime", "properties": {"parts": parts}})
            }
        };
        template_resources.insert(name.clone(), definition);
        outputs.insert(name.clone(), json!({"value": {"get_attr": [name, "config"]}}));
    }
    json!({"heat_template_version": "2018-08-31", "resources": template_resources, "outputs": outputs}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_parts_splice_as_heat_splices_them() {
    let resources = spliced_resources();
    let expected = heat_rendering("mime_stack", &resources);
    let shim = Shim::start().await;
    let path = shim.write_template("spliced.json", &spliced_template(&resources));
    shim.cli_ok(&["stack", "create", "spliced", "--template", path.to_str().expect("utf-8"), "--wait"]).await;
    let shown = shim.stack_outputs("spliced").await;
    for (index, heat) in expected.iter().enumerate() {
        assert!(!heat.starts_with("ERROR"), "Heat refused case {index}: {heat}");
        let ours = shown.get(&format!("res{index}")).and_then(Value::as_str).unwrap_or_default();
        assert_eq!(fixed_boundary(ours), fixed_boundary(heat), "case {index}: {}", resources[index]);
    }
    let outer = fixed_boundary(&expected[3]);
    assert_eq!(outer.matches("\n--BOUNDARY0").count(), 9, "8 parts, spliced from two levels, and the close: {outer}");
}

/// Where Heat's get_message fails (a spliced part with parts of its own), the resource fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_parts_heat_fails_on_fail_the_resource() {
    let resources: Vec<Value> =
        NESTED.iter().map(|text| json!({"parts": [{"config": text, "type": "multipart"}]})).collect();
    let heat = heat_rendering("mime_stack", &resources);
    assert!(heat.iter().all(|rendered| rendered == "ERROR: AttributeError"), "{heat:?}");
    let shim = Shim::start().await;
    for (index, resource) in resources.iter().enumerate() {
        let path =
            shim.write_template(&format!("nested{index}.json"), &spliced_template(std::slice::from_ref(resource)));
        let stack = format!("nested{index}");
        shim.cli(&["stack", "create", &stack, "--template", path.to_str().expect("utf-8"), "--wait"]).await;
        let shown = shim.stack_show(&stack).await;
        assert_eq!(shown["status"], "CREATE_FAILED", "{shown}");
        let reason = shown["status_reason"].as_str().unwrap_or_default();
        assert!(reason.contains("res0: parts[0]: ") && reason.contains("splices one level of parts"), "{reason}");
    }
}
