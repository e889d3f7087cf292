//! The graph as Graphviz DOT: left to right, each server's deployments in a cluster, nodes
//! filled by phase, edges labelled by kind. Every name is quoted and escaped, so a resource
//! name cannot end a string or add statements.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{EdgeKind, NodeKind, StackGraph, one_line, short_type};

/// Longest piece of a name or reason put in a label.
const LABEL_LIMIT: usize = 80;

pub fn to_dot(graph: &StackGraph) -> String {
    let mut out = String::new();
    let title = format!("{} ({})", one_line(&graph.stack, LABEL_LIMIT), graph.status);
    let _ = writeln!(out, "digraph {} {{", quoted(&graph.stack));
    let _ = writeln!(out, "  graph [rankdir=LR, fontname=\"Helvetica\", labelloc=t, label={}];", quoted(&title));
    let _ = writeln!(out, "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];");
    let _ = writeln!(out, "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#666666\"];");
    let mut by_server: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut loose = Vec::new();
    for (index, node) in graph.nodes.iter().enumerate() {
        match &node.server {
            Some(server) => by_server.entry(server.as_str()).or_default().push(index),
            None => loose.push(index),
        }
    }
    for (cluster, (server, members)) in by_server.iter().enumerate() {
        let _ = writeln!(out, "  subgraph cluster_{cluster} {{");
        let label = format!("server {}", one_line(server, LABEL_LIMIT));
        let _ = writeln!(out, "    label={}; style=\"rounded,dashed\"; color=\"#999999\";", quoted(&label));
        for &index in members {
            write_node(&mut out, graph, index, "    ");
        }
        let _ = writeln!(out, "  }}");
    }
    for index in loose {
        write_node(&mut out, graph, index, "  ");
    }
    for edge in &graph.edges {
        let style = match edge.kind {
            EdgeKind::DependsOn => ", style=dashed",
            EdgeKind::Implicit => ", style=dotted",
            EdgeKind::GetAttr | EdgeKind::GetResource => "",
        };
        let _ = writeln!(
            out,
            "  {} -> {} [label={}{style}];",
            quoted(&edge.from),
            quoted(&edge.to),
            quoted(edge.kind.as_str())
        );
    }
    out.push_str("}\n");
    out
}

fn write_node(out: &mut String, graph: &StackGraph, index: usize, indent: &str) {
    let node = &graph.nodes[index];
    let (fill, stroke) = node.phase.colours();
    let shape = match node.kind {
        NodeKind::Config => "note",
        NodeKind::Wait => "hexagon",
        NodeKind::Group => "box3d",
        NodeKind::Server => "component",
        NodeKind::Deployment | NodeKind::Other => "box",
    };
    let label = format!("{}\n{}\n{}", one_line(&node.name, LABEL_LIMIT), short_type(&node.resource_type), node.status);
    let tooltip = one_line(&node.status_reason, 4 * LABEL_LIMIT);
    let _ = writeln!(
        out,
        "{indent}{} [label={}, shape={shape}, fillcolor=\"{fill}\", color=\"{stroke}\", tooltip={}];",
        quoted(&node.name),
        quoted(&label),
        quoted(&tooltip)
    );
}

/// A DOT quoted string: `"` and `\` escaped, a newline as DOT's `\n` line break, other control
/// characters as spaces.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            ch if ch.is_control() => out.push(' '),
            ch => out.push(ch),
        }
    }
    out.push('"');
    out
}
