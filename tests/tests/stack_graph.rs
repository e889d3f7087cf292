//! `anneal-shim stack graph` on a real shim with a real agent, mid-convergence: vm1's agent runs
//! its deployment, vm2 has no agent, so vm2's deployment stays in progress and what depends on it
//! waits. The JSON says so node by node, the DOT renders with Graphviz's `dot` where it is
//! installed (Debian's graphviz; scripts/test installs it), and the SVG is well-formed XML naming
//! every node with its phase.

use std::time::{Duration, Instant};

use anneal_tests::{AgentSettings, Fleet, Shim};
use serde_json::Value;

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
resources:
  first_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      outputs: [{name: word}]
      config: "#!/bin/sh\nprintf hello > $heat_outputs_path.word\n"
  first:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: first_config}, server: vm1}
  second_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: word}]
      config: "#!/bin/sh\ntrue\n"
  second:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: second_config}
      server: vm2
      input_values: {word: {get_attr: [first, word]}}
  "after \"second\" <&>":
    type: OS::Heat::None
    depends_on: [second]
"##;

const NAMES: [&str; 5] = ["first_config", "first", "second_config", "second", "after \"second\" <&>"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stack_graph_shows_a_stack_mid_convergence_as_json_dot_and_svg() {
    let shim = Shim::start().await;
    let fleet = Fleet::start(&shim, &["vm1"], &AgentSettings::default()).await;
    shim.cli_ok(&["server", "add", "vm2"]).await;
    let template = shim.write_template("stack.yaml", TEMPLATE);
    shim.cli_ok(&["stack", "create", "pair", "--template", template.to_str().expect("utf-8")]).await;

    let graph = wait_for(&shim, |graph| phase(graph, "second") == "in_progress").await;
    assert_eq!(graph["stack"], "pair");
    assert_eq!(graph["status"], "CREATE_IN_PROGRESS");
    let names: Vec<&str> =
        graph["nodes"].as_array().expect("nodes").iter().map(|node| node["name"].as_str().unwrap()).collect();
    assert_eq!(names, NAMES);
    assert_eq!(phase(&graph, "first"), "complete", "{graph}\n{}", fleet.logs());
    assert_eq!(phase(&graph, "after \"second\" <&>"), "waiting");
    let first = node(&graph, "first");
    assert_eq!((first["kind"].as_str(), first["server"].as_str()), (Some("deployment"), Some("vm1")));
    assert_eq!(node(&graph, "second")["server"], "vm2");
    let edge_kinds: Vec<(String, String, String)> = graph["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|edge| (edge["from"].to_string(), edge["to"].to_string(), edge["kind"].as_str().unwrap().to_string()))
        .collect();
    for expected in [
        ("first_config", "first", "get_resource"),
        ("first", "second", "get_attr"),
        ("second", "after \"second\" <&>", "depends_on"),
    ] {
        let wanted = (Value::from(expected.0).to_string(), Value::from(expected.1).to_string(), expected.2.to_string());
        assert!(edge_kinds.contains(&wanted), "{wanted:?} in {edge_kinds:?}");
    }

    let dot = shim.cli_ok(&["stack", "graph", "pair", "--format", "dot"]).await;
    assert!(dot.starts_with("digraph \"pair\" {"), "{dot}");
    assert!(dot.contains("label=\"server vm1\"") && dot.contains("label=\"server vm2\""), "{dot}");
    render_with_graphviz(&dot);

    let svg = shim.cli_ok(&["stack", "graph", "pair", "--format", "svg"]).await;
    let nodes = svg_nodes(&svg);
    let drawn: Vec<&str> = nodes.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(drawn, NAMES, "{svg}");
    assert!(nodes.contains(&("second".to_string(), "node phase-in_progress kind-deployment".to_string())), "{nodes:?}");

    let unknown = shim.cli(&["stack", "graph", "nope"]).await;
    assert_eq!(unknown.code, 1, "{unknown:?}");
    assert!(unknown.stderr.contains("not found") || unknown.stderr.contains("404"), "{unknown:?}");
    drop(fleet);
}

async fn wait_for(shim: &Shim, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let graph = shim.cli_json(&["stack", "graph", "pair", "--format", "json"]).await;
        if done(&graph) {
            return graph;
        }
        assert!(Instant::now() < deadline, "the graph never got there: {graph}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn node<'a>(graph: &'a Value, name: &str) -> &'a Value {
    graph["nodes"].as_array().and_then(|nodes| nodes.iter().find(|node| node["name"] == name)).expect("node")
}

fn phase(graph: &Value, name: &str) -> String {
    node(graph, name)["phase"].as_str().unwrap_or_default().to_string()
}

/// `dot -Tsvg` must accept the DOT and draw every node (its `<title>` is the node id).
fn render_with_graphviz(dot: &str) {
    use std::io::Write;
    let Ok(mut child) = std::process::Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    else {
        eprintln!("graphviz's dot is not installed (Debian: apt-get install graphviz): DOT checked by shape only");
        return;
    };
    child.stdin.take().expect("stdin").write_all(dot.as_bytes()).expect("write the DOT");
    let output = child.wait_with_output().expect("dot ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success() && stderr.trim().is_empty(), "dot refused the DOT: {stderr}\n{dot}");
    let svg = String::from_utf8_lossy(&output.stdout);
    for name in NAMES {
        let escaped = name.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
        assert!(svg.contains(&format!("<title>{escaped}</title>")), "dot drew {name}: {svg}");
    }
}

/// Each node group of the SVG: (data-name, class); panics unless the SVG is well-formed XML.
fn svg_nodes(svg: &str) -> Vec<(String, String)> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut nodes = Vec::new();
    loop {
        match reader.read_event().unwrap_or_else(|error| panic!("not well-formed: {error}\n{svg}")) {
            Event::Start(element)
                if element.name().as_ref() == b"g"
                    && element
                        .try_get_attribute("class")
                        .ok()
                        .flatten()
                        .is_some_and(|class| class.value.starts_with(b"node ")) =>
            {
                let attribute = |key: &str| {
                    let value = element.try_get_attribute(key).expect("attributes").expect("present");
                    value.unescape_value().expect("escaped").into_owned()
                };
                nodes.push((attribute("data-name"), attribute("class")));
            }
            Event::Eof => break,
            _ => {}
        }
    }
    nodes
}
