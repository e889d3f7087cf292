//! The graph as one self-contained SVG document (no scripts, fonts or links to fetch): boxes
//! placed by `layout`, filled by phase, curved edges with arrowheads, dashed for `depends_on`.
//! Each node is a `<g class="node phase-…" data-name="…">` with a `<title>` (its status
//! reason) so a page can restyle it as signals arrive. A deployment group's box also says its
//! failure budget, how many members failed and its batch. All text is XML-escaped.

use std::fmt::Write;

use super::layout::{NodeBox, layout};
use super::{EdgeKind, GroupProgress, StackGraph, one_line, short_type};

const LABEL_LIMIT: usize = 60;

pub fn to_svg(graph: &StackGraph) -> String {
    let lines: Vec<Vec<String>> = graph
        .nodes
        .iter()
        .map(|node| {
            let mut lines = vec![one_line(&node.name, LABEL_LIMIT), short_type(&node.resource_type).to_string()];
            lines.push(node.status.clone());
            if let Some(server) = &node.server {
                lines.push(format!("on {}", one_line(server, LABEL_LIMIT)));
            }
            if let Some(group) = &node.group {
                lines.extend(group_lines(group));
            }
            lines
        })
        .collect();
    let placed = layout(graph, &lines);
    let mut out = String::new();
    let (width, height) = (placed.width, placed.height + 24.0);
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">"
    );
    let _ = writeln!(out, "<title>{}</title>", escape(&format!("{} ({})", graph.stack, graph.status)));
    out.push_str(
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" \
         markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#666\"/></marker></defs>\n",
    );
    let _ = writeln!(
        out,
        "<text x=\"20\" y=\"{:.0}\" font-size=\"12\" font-weight=\"bold\">{}</text>",
        placed.height + 12.0,
        escape(&format!("{} — {}", one_line(&graph.stack, LABEL_LIMIT), graph.status))
    );
    for lane in &placed.lanes {
        let _ = writeln!(
            out,
            "<g class=\"lane\" data-server=\"{server}\"><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"8\" \
             fill=\"#f3f6fa\" stroke=\"#d3dbe6\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#4a5a70\">server {server}</text></g>",
            8.0,
            lane.y - 4.0,
            placed.width - 16.0,
            lane.height + 8.0,
            14.0,
            lane.y + 9.0,
            server = escape(&one_line(&lane.server, LABEL_LIMIT)),
        );
    }
    let indexes: std::collections::HashMap<&str, usize> =
        graph.nodes.iter().enumerate().map(|(index, node)| (node.name.as_str(), index)).collect();
    for (edge, route) in graph.edges.iter().zip(&placed.routes) {
        let (Some(&from), Some(&to), Some(route)) =
            (indexes.get(edge.from.as_str()), indexes.get(edge.to.as_str()), route.as_ref())
        else {
            continue;
        };
        write_edge(&mut out, (placed.boxes[from], placed.boxes[to]), route, edge.kind, (&edge.from, &edge.to));
    }
    for (index, node) in graph.nodes.iter().enumerate() {
        let at = placed.boxes[index];
        let (fill, stroke) = node.phase.colours();
        let _ = writeln!(
            out,
            "<g class=\"node phase-{} kind-{}\" data-name=\"{}\"><title>{}</title>",
            node.phase.as_str(),
            node.kind.as_str(),
            escape(&node.name),
            escape(&one_line(&format!("{}: {}", node.status, node.status_reason), 400))
        );
        let _ = writeln!(
            out,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"6\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"1.5\"/>",
            at.x, at.y, at.width, at.height
        );
        for (line, text) in lines[index].iter().enumerate() {
            let weight = if line == 0 { " font-weight=\"bold\"" } else { "" };
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\"{weight}>{}</text>",
                at.x + 10.0,
                at.y + 18.0 + 15.0 * line as f64,
                escape(text)
            );
        }
        out.push_str("</g>\n");
    }
    out.push_str("</svg>\n");
    out
}

/// A group's extra label lines: its budget, its failed members, its batch and pause.
fn group_lines(group: &GroupProgress) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(budget) = group.budget() {
        lines.push(format!("budget: {budget}"));
    }
    if !group.failed_members.is_empty() {
        let verdict = match group.within_budget {
            Some(true) => ", within budget",
            Some(false) => ", over budget",
            None => "",
        };
        lines.push(format!("{} of {} failed{verdict}", group.failed_members.len(), group.members));
    }
    if let (Some(batch), Some(batches)) = (group.batch, group.batches) {
        lines.push(format!("batch {batch} of {batches}"));
    }
    if let Some(until) = &group.pause_until {
        // The time of day is enough on a box; the panel has the whole date.
        lines.push(format!("next batch at {}", until.split_once('T').map_or(until.as_str(), |(_, time)| time)));
    }
    lines
}

/// A curve from the source's right side through `route`'s points to the target's left side,
/// each stretch a horizontal-tangent cubic (smooth where stretches meet).
fn write_edge(out: &mut String, ends: (NodeBox, NodeBox), route: &[(f64, f64)], kind: EdgeKind, names: (&str, &str)) {
    let (from, to) = ends;
    let mut points = vec![(from.x + from.width, from.y + from.height / 2.0)];
    points.extend_from_slice(route);
    points.push((to.x, to.y + to.height / 2.0));
    let mut d = format!("M {:.1} {:.1}", points[0].0, points[0].1);
    for pair in points.windows(2) {
        let ((x1, y1), (x2, y2)) = (pair[0], pair[1]);
        let bend = ((x2 - x1).abs() / 2.0).max(20.0);
        let _ = write!(d, " C {:.1} {y1:.1}, {:.1} {y2:.1}, {x2:.1} {y2:.1}", x1 + bend, x2 - bend);
    }
    let dash = match kind {
        EdgeKind::DependsOn => " stroke-dasharray=\"6 4\"",
        EdgeKind::Implicit => " stroke-dasharray=\"2 3\"",
        EdgeKind::GetAttr | EdgeKind::GetResource => "",
    };
    let (from_name, to_name) = names;
    let _ = writeln!(
        out,
        "<path class=\"edge kind-{}\" data-from=\"{}\" data-to=\"{}\" d=\"{d}\" fill=\"none\" stroke=\"#666\" \
         stroke-width=\"1.2\"{dash} marker-end=\"url(#arrow)\"><title>{}</title></path>",
        kind.as_str(),
        escape(from_name),
        escape(to_name),
        escape(&format!("{from_name} → {to_name} ({})", kind.as_str()))
    );
}

/// Text and attribute values: `& < > " '` as entities, control characters (not allowed in XML
/// 1.0, or collapsed by it) as spaces.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            ch if ch.is_control() => out.push(' '),
            ch => out.push(ch),
        }
    }
    out
}
