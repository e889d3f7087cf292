use serde_json::{Value, json};

use super::*;
use crate::engine::graph::build;
use crate::model::Action;
use crate::store::{NodeRecord, NodeRow, NodeState};

fn row(name: &str, resource_type: &str, state: NodeState, server: Option<&str>, definition: Value) -> NodeRow {
    NodeRow {
        stack: "s".into(),
        name: name.into(),
        resource_type: resource_type.into(),
        generation: 1,
        action: Action::Create,
        state,
        status_reason: format!("{name} reason"),
        remaining: 0,
        definition: definition.into(),
        attributes: json!({}).into(),
        record: NodeRecord::default(),
        derived_config_id: None,
        signal_token_hash: None,
        server: server.map(str::to_string),
        updated_at: 0,
    }
}

/// config → first (vm1) → second (vm2, get_attr of first), a wait depending on second.
fn sample() -> StackGraph {
    let nodes = vec![
        row("config", "OS::Heat::SoftwareConfig", NodeState::Complete, None, json!({})),
        row(
            "first",
            "OS::Heat::SoftwareDeployment",
            NodeState::Complete,
            Some("vm1"),
            json!({"properties": {"config": {"get_resource": "config"}, "server": "vm1"}}),
        ),
        row(
            "second",
            "OS::Heat::SoftwareDeployment",
            NodeState::InProgress,
            Some("vm2"),
            json!({"properties": {"config": {"get_resource": "config"},
                   "input_values": {"word": {"get_attr": ["first", "word"]}, "id": {"get_resource": "first"}}}}),
        ),
        row("wait", "OS::Heat::WaitCondition", NodeState::Init, None, json!({"depends_on": ["second"]})),
        row("extra", "OS::Heat::None", NodeState::Failed, None, json!({})),
    ];
    let edges: Vec<(String, String)> =
        [("config", "first"), ("config", "second"), ("first", "second"), ("second", "wait"), ("wait", "extra")]
            .iter()
            .map(|(from, to)| (from.to_string(), to.to_string()))
            .collect();
    build("s", "CREATE_IN_PROGRESS", &nodes, &edges, |_| "2026-01-01T00:00:00Z".into())
}

#[test]
fn nodes_carry_kind_phase_and_status_and_edges_say_why() {
    let graph = sample();
    let kinds: Vec<NodeKind> = graph.nodes.iter().map(|node| node.kind).collect();
    assert_eq!(kinds, [NodeKind::Config, NodeKind::Deployment, NodeKind::Deployment, NodeKind::Wait, NodeKind::Other]);
    let phases: Vec<Phase> = graph.nodes.iter().map(|node| node.phase).collect();
    assert_eq!(phases, [Phase::Complete, Phase::Complete, Phase::InProgress, Phase::Waiting, Phase::Failed]);
    assert_eq!(graph.nodes[3].status, "INIT_COMPLETE");
    assert_eq!(graph.nodes[2].status, "CREATE_IN_PROGRESS");
    let kinds: Vec<EdgeKind> = graph.edges.iter().map(|edge| edge.kind).collect();
    // first → second: both get_resource and get_attr name it; get_attr wins.
    assert_eq!(
        kinds,
        [EdgeKind::GetResource, EdgeKind::GetResource, EdgeKind::GetAttr, EdgeKind::DependsOn, EdgeKind::Implicit]
    );
    let json = serde_json::to_value(&graph).expect("serialises");
    assert_eq!(json["edges"][2], json!({"from": "first", "to": "second", "kind": "get_attr"}));
    assert_eq!(json["nodes"][1]["server"], "vm1");
    assert_eq!(json["nodes"][1]["phase"], "complete");
}

#[test]
fn dot_clusters_deployments_by_server_and_colours_by_phase() {
    let dot = to_dot(&sample());
    assert!(dot.starts_with("digraph \"s\" {\n"), "{dot}");
    assert!(dot.contains("subgraph cluster_0 {\n    label=\"server vm1\";"), "{dot}");
    assert!(dot.contains("subgraph cluster_1 {\n    label=\"server vm2\";"), "{dot}");
    assert!(dot.contains("\"first\" -> \"second\" [label=\"get_attr\"];"), "{dot}");
    assert!(dot.contains("\"second\" -> \"wait\" [label=\"depends_on\", style=dashed];"), "{dot}");
    let (fill, _) = Phase::Failed.colours();
    assert!(
        dot.contains(&format!("\"extra\" [label=\"extra\\nNone\\nCREATE_FAILED\", shape=box, fillcolor=\"{fill}\""))
    );
    assert!(dot.ends_with("}\n"));
}

#[test]
fn hostile_names_stay_inside_their_dot_strings_and_svg_text() {
    let hostile = "x\"]; evil [label=\"pwned\\\n<script>&'";
    let nodes = vec![
        row(hostile, "OS::Heat::SoftwareConfig", NodeState::Complete, Some("vm\"1</text>"), json!({})),
        row("b", "OS::Heat::None", NodeState::Init, None, json!({"depends_on": hostile})),
    ];
    let graph = build("st\"ack", "CREATE_COMPLETE", &nodes, &[(hostile.into(), "b".into())], |_| String::new());
    let dot = to_dot(&graph);
    assert!(dot.contains("\"x\\\"]; evil [label=\\\"pwned\\\\\\n<script>&'\" -> \"b\""), "{dot}");
    assert!(!dot.contains("\"pwned\""), "no quote is left unescaped: {dot}");
    let svg = to_svg(&graph);
    let names = svg_node_names(&svg);
    assert_eq!(names, [hostile.replace('\n', " "), "b".to_string()]);
    assert!(!svg.contains("<script>"), "{svg}");
}

#[test]
fn svg_is_well_formed_and_draws_every_node_and_edge() {
    let graph = sample();
    let svg = to_svg(&graph);
    let names = svg_node_names(&svg);
    assert_eq!(names, ["config", "first", "second", "wait", "extra"]);
    assert_eq!(svg.matches("<path class=\"edge").count(), graph.edges.len());
    assert!(svg.contains("class=\"node phase-in_progress kind-deployment\" data-name=\"second\""));
    assert!(!svg.contains("http://") || svg.matches("http://").count() == 1, "only the namespace: nothing to fetch");
}

#[test]
fn layers_run_left_to_right_and_boxes_of_a_layer_do_not_overlap() {
    let graph = sample();
    let lines: Vec<Vec<String>> = graph.nodes.iter().map(|node| vec![node.name.clone(), "type".into()]).collect();
    let placed = layout::layout(&graph, &lines);
    let x = |name: &str| placed.boxes[graph.nodes.iter().position(|node| node.name == name).unwrap()].x;
    assert!(x("config") < x("first") && x("first") < x("second") && x("second") < x("wait") && x("wait") < x("extra"));
    for (index, one) in placed.boxes.iter().enumerate() {
        for other in &placed.boxes[index + 1..] {
            let apart_x = one.x + one.width <= other.x || other.x + other.width <= one.x;
            let apart_y = one.y + one.height <= other.y || other.y + other.height <= one.y;
            assert!(apart_x || apart_y, "{one:?} overlaps {other:?}");
        }
        assert!(one.x + one.width <= placed.width && one.y + one.height <= placed.height);
    }
}

#[test]
fn a_cycle_or_a_dangling_edge_still_lays_out() {
    let nodes = vec![
        row("a", "OS::Heat::None", NodeState::Init, None, json!({})),
        row("b", "OS::Heat::None", NodeState::Init, None, json!({})),
    ];
    let edges = vec![("a".into(), "b".into()), ("b".into(), "a".into()), ("ghost".into(), "a".into())];
    let graph = build("s", "CREATE_IN_PROGRESS", &nodes, &edges, |_| String::new());
    assert_eq!(svg_node_names(&to_svg(&graph)), ["a", "b"]);
    let empty = build("s", "CREATE_COMPLETE", &[], &[], |_| String::new());
    assert!(svg_node_names(&to_svg(&empty)).is_empty());
}

/// Parses the SVG as XML (failing on any error) and returns each node group's `data-name`.
fn svg_node_names(svg: &str) -> Vec<String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut names = Vec::new();
    let mut depth = 0usize;
    loop {
        match reader.read_event().unwrap_or_else(|error| panic!("not well-formed XML: {error}\n{svg}")) {
            Event::Start(element) => {
                depth += 1;
                let class = element.try_get_attribute("class").expect("attributes parse");
                let is_node = class.is_some_and(|class| class.value.starts_with(b"node "));
                if element.name().as_ref() == b"g" && is_node {
                    let name = element
                        .try_get_attribute("data-name")
                        .expect("attributes parse")
                        .expect("a node group has data-name");
                    names.push(name.unescape_value().expect("escaped value").into_owned());
                }
            }
            Event::End(_) => depth -= 1,
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(depth, 0, "every element is closed");
    names
}

#[test]
fn a_long_edge_runs_between_the_boxes_of_the_layers_it_crosses() {
    let graph = sample();
    let lines: Vec<Vec<String>> = graph.nodes.iter().map(|node| vec![node.name.clone()]).collect();
    let placed = layout::layout(&graph, &lines);
    assert_eq!(placed.routes.len(), graph.edges.len());
    // config (layer 0) → second (layer 2) crosses layer 1; first → second does not.
    let long = graph.edges.iter().position(|edge| edge.from == "config" && edge.to == "second").unwrap();
    let short = graph.edges.iter().position(|edge| edge.from == "first" && edge.to == "second").unwrap();
    assert_eq!(placed.routes[short].as_deref(), Some(&[][..]));
    let route = placed.routes[long].as_ref().expect("drawn");
    assert_eq!(route.len(), 1);
    for &(x, y) in route {
        for one in &placed.boxes {
            let inside = x >= one.x && x <= one.x + one.width && y >= one.y && y <= one.y + one.height;
            assert!(!inside, "{x},{y} is inside {one:?}");
        }
    }
}

#[test]
fn deployments_are_drawn_in_their_server_s_lane() {
    let graph = sample();
    let lines: Vec<Vec<String>> = graph.nodes.iter().map(|node| vec![node.name.clone()]).collect();
    let placed = layout::layout(&graph, &lines);
    let servers: Vec<&str> = placed.lanes.iter().map(|lane| lane.server.as_str()).collect();
    assert_eq!(servers, ["vm1", "vm2"]);
    for (node, at) in graph.nodes.iter().zip(&placed.boxes) {
        match &node.server {
            Some(server) => {
                let lane = placed.lanes.iter().find(|lane| &lane.server == server).expect("its lane");
                assert!(at.y >= lane.y && at.y + at.height <= lane.y + lane.height, "{} in {lane:?}", node.name);
            }
            None => {
                for lane in &placed.lanes {
                    assert!(at.y + at.height <= lane.y || at.y >= lane.y + lane.height, "{} is in no lane", node.name);
                }
            }
        }
    }
    let svg = to_svg(&graph);
    assert!(svg.contains("<g class=\"lane\" data-server=\"vm1\">"), "{svg}");
}

#[test]
fn a_group_node_carries_its_budget_failed_members_and_batch_and_draws_them() {
    let mut group = row(
        "web",
        "OS::Heat::SoftwareDeploymentGroup",
        NodeState::InProgress,
        None,
        json!({"policies": {"failure_budget": {"max_failures": 1}}}),
    );
    group.record.members = ["web/a", "web/b", "web/c"].map(String::from).to_vec();
    group.record.failed_members = vec!["web/b".into()];
    group.record.batch = 1;
    group.record.batches = vec![vec!["a".into()]];
    group.record.pause_until = Some(7);
    let graph =
        build("s", "CREATE_IN_PROGRESS", std::slice::from_ref(&group), &[], |at| format!("2026-01-01T00:00:0{at}Z"));
    let progress = graph.nodes[0].group.clone().expect("a group's progress");
    assert_eq!(
        progress,
        GroupProgress {
            members: 3,
            max_failures: Some(1),
            max_failure_percentage: None,
            failed_members: vec!["b".into()],
            within_budget: Some(true),
            batch: Some(1),
            batches: Some(2),
            pause_until: Some("2026-01-01T00:00:07Z".into()),
        }
    );
    let svg = to_svg(&graph);
    for line in ["budget: max_failures 1", "1 of 3 failed, within budget", "batch 1 of 2", "next batch at 00:00:07Z"] {
        assert!(svg.contains(line), "{line}: {svg}");
    }
    // A failed group's pause never ends in a next batch; other resources have no progress.
    group.state = NodeState::Failed;
    let config = row("config", "OS::Heat::SoftwareConfig", NodeState::Complete, None, json!({}));
    let graph = build("s", "CREATE_FAILED", &[group, config], &[], |_| String::new());
    assert_eq!(graph.nodes[0].group.as_ref().and_then(|group| group.pause_until.clone()), None);
    assert_eq!(graph.nodes[1].group, None);
}
