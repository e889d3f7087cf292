//! A layered (Sugiyama-style) layout for the SVG drawing, left to right: each node's layer is the
//! longest path to it from a node with no predecessor, nodes within a layer are ordered by the
//! mean position of their neighbours (a few sweeps each way, which removes most crossings in the
//! shallow, wide graphs stacks make), then placed on a grid sized by their labels. Linear in
//! nodes and edges per sweep; a cycle (the engine refuses them) only flattens layers.

use super::StackGraph;

/// Horizontal gap between layers, and vertical gap between nodes of a layer (pixels).
const LAYER_GAP: f64 = 90.0;
const NODE_GAP: f64 = 24.0;
const MARGIN: f64 = 20.0;
/// Approximate width of one character at the drawing's font size.
const CHAR_WIDTH: f64 = 7.0;
const LINE_HEIGHT: f64 = 15.0;
const SWEEPS: usize = 4;

/// Where each node's box is (same order as `graph.nodes`), how each edge runs, and the
/// drawing's size.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Layout {
    pub(super) boxes: Vec<NodeBox>,
    /// Per edge of `graph.edges`: the points it passes between its ends (the centres of the
    /// placeholders of the layers it crosses), so a long edge runs between boxes, not through
    /// them; `None` for an edge not drawn (an end unknown, or a node's edge to itself).
    pub(super) routes: Vec<Option<Vec<(f64, f64)>>>,
    /// One band per server, holding the deployments that run on it (resources of no server
    /// are above them).
    pub(super) lanes: Vec<Lane>,
    pub(super) width: f64,
    pub(super) height: f64,
}

/// A server's swimlane: its name and where its band is.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Lane {
    pub(super) server: String,
    pub(super) y: f64,
    pub(super) height: f64,
}

/// Room above a server's band for its name, and between bands.
const LANE_LABEL: f64 = 18.0;
const LANE_GAP: f64 = 16.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct NodeBox {
    pub(super) x: f64,
    pub(super) y: f64,
    pub(super) width: f64,
    pub(super) height: f64,
}

/// Size of the placeholder a long edge has in each layer it crosses.
const PLACEHOLDER: (f64, f64) = (12.0, 10.0);

/// Lays `graph` out for boxes holding `lines[i]` (each node's label lines).
pub(super) fn layout(graph: &StackGraph, lines: &[Vec<String>]) -> Layout {
    let count = graph.nodes.len();
    let indexes: std::collections::HashMap<&str, usize> =
        graph.nodes.iter().enumerate().map(|(index, node)| (node.name.as_str(), index)).collect();
    let edges: Vec<Option<(usize, usize)>> = graph
        .edges
        .iter()
        .map(|edge| match (indexes.get(edge.from.as_str()), indexes.get(edge.to.as_str())) {
            (Some(&from), Some(&to)) if from != to => Some((from, to)),
            _ => None,
        })
        .collect();
    let mut predecessors = vec![Vec::new(); count];
    let mut successors = vec![Vec::new(); count];
    for &(from, to) in edges.iter().flatten() {
        predecessors[to].push(from);
        successors[from].push(to);
    }
    let mut layer = layers(&predecessors, &successors);
    // Swimlanes: lane 0 for the resources of no server, then one per server, by name.
    let mut servers: Vec<&str> = graph.nodes.iter().filter_map(|node| node.server.as_deref()).collect();
    servers.sort_unstable();
    servers.dedup();
    let mut lane: Vec<usize> = graph
        .nodes
        .iter()
        .map(|node| node.server.as_deref().map_or(0, |server| 1 + servers.binary_search(&server).unwrap_or(0)))
        .collect();
    // A placeholder per layer a long edge crosses, chained from its source to its target.
    let (mut predecessors, mut successors) = (vec![Vec::new(); count], vec![Vec::new(); count]);
    let mut chains: Vec<Option<Vec<usize>>> = Vec::with_capacity(edges.len());
    for edge in &edges {
        let Some((from, to)) = *edge else {
            chains.push(None);
            continue;
        };
        let mut chain = Vec::new();
        let mut previous = from;
        for crossed in layer[from] + 1..layer[to].max(layer[from] + 1) {
            let placeholder = layer.len();
            layer.push(crossed);
            lane.push(lane[to]);
            predecessors.push(vec![previous]);
            successors.push(Vec::new());
            successors[previous].push(placeholder);
            chain.push(placeholder);
            previous = placeholder;
        }
        successors[previous].push(to);
        predecessors[to].push(previous);
        chains.push(Some(chain));
    }
    let depth = layer.iter().copied().max().map_or(0, |deepest| deepest + 1);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for (node, &at) in layer.iter().enumerate() {
        rows[at].push(node);
    }
    order(&mut rows, &predecessors, &successors);
    for row in &mut rows {
        // Stable: within a lane, the crossing-reducing order stays.
        row.sort_by_key(|&node| lane[node]);
    }
    let size = |node: usize| match lines.get(node) {
        Some(lines) => {
            let longest = lines.iter().map(|line| line.chars().count()).max().unwrap_or(0);
            (longest as f64 * CHAR_WIDTH + 20.0, lines.len() as f64 * LINE_HEIGHT + 12.0)
        }
        None => PLACEHOLDER,
    };
    let (mut boxes, bands, width, height) = place(&rows, &lane, size);
    let lanes = bands
        .into_iter()
        .enumerate()
        .skip(1)
        .filter(|(_, (_, height))| *height > 0.0)
        .map(|(index, (y, height))| Lane { server: servers[index - 1].to_string(), y, height })
        .collect();
    let routes = chains
        .into_iter()
        .map(|chain| {
            chain.map(|chain| {
                chain
                    .iter()
                    .map(|&at| (boxes[at].x + boxes[at].width / 2.0, boxes[at].y + boxes[at].height / 2.0))
                    .collect()
            })
        })
        .collect();
    boxes.truncate(count);
    Layout { boxes, routes, lanes, width, height }
}

/// Longest-path layering by Kahn's order; nodes on a cycle go after everything else.
fn layers(predecessors: &[Vec<usize>], successors: &[Vec<usize>]) -> Vec<usize> {
    let count = predecessors.len();
    let mut remaining: Vec<usize> = predecessors.iter().map(Vec::len).collect();
    let mut ready: Vec<usize> = (0..count).filter(|&node| remaining[node] == 0).collect();
    let mut layer = vec![0; count];
    let mut done = vec![false; count];
    while let Some(node) = ready.pop() {
        done[node] = true;
        for &next in &successors[node] {
            layer[next] = layer[next].max(layer[node] + 1);
            remaining[next] -= 1;
            if remaining[next] == 0 {
                ready.push(next);
            }
        }
    }
    let deepest = layer.iter().copied().max().unwrap_or(0);
    for node in (0..count).filter(|&node| !done[node]) {
        layer[node] = deepest + 1;
    }
    layer
}

/// Barycentre ordering: down sweeps by predecessors, up sweeps by successors.
fn order(rows: &mut [Vec<usize>], predecessors: &[Vec<usize>], successors: &[Vec<usize>]) {
    let mut position = vec![0.0; predecessors.len()];
    let remember = |rows: &[Vec<usize>], position: &mut Vec<f64>| {
        for row in rows {
            for (at, &node) in row.iter().enumerate() {
                position[node] = at as f64;
            }
        }
    };
    remember(rows, &mut position);
    for _ in 0..SWEEPS {
        for at in 1..rows.len() {
            sort_by_neighbours(&mut rows[at], predecessors, &position);
            remember(rows, &mut position);
        }
        for at in (0..rows.len().saturating_sub(1)).rev() {
            sort_by_neighbours(&mut rows[at], successors, &position);
            remember(rows, &mut position);
        }
    }
}

fn sort_by_neighbours(row: &mut [usize], neighbours: &[Vec<usize>], position: &[f64]) {
    let key = |node: usize| {
        let around = &neighbours[node];
        if around.is_empty() {
            position[node]
        } else {
            around.iter().map(|&other| position[other]).sum::<f64>() / around.len() as f64
        }
    };
    // Stable: ties keep the current order (the template's resource order at first).
    row.sort_by(|&left, &right| key(left).total_cmp(&key(right)));
}

/// Boxes on the grid: layers left to right; top to bottom, the lanes (each as tall as its
/// tallest layer), a layer's nodes of one lane centred in it. Returns every node's box
/// (placeholders included), each lane's band (top, height; height 0 for an empty lane), and
/// the drawing's width and height.
type Placed = (Vec<NodeBox>, Vec<(f64, f64)>, f64, f64);

fn place(rows: &[Vec<usize>], lane: &[usize], size: impl Fn(usize) -> (f64, f64)) -> Placed {
    let lanes = lane.iter().copied().max().map_or(1, |last| last + 1);
    let stack = |row: &Vec<usize>, which: usize| {
        let heights: Vec<f64> = row.iter().filter(|&&node| lane[node] == which).map(|&node| size(node).1).collect();
        heights.iter().sum::<f64>() + NODE_GAP * heights.len().saturating_sub(1) as f64
    };
    let mut bands = Vec::with_capacity(lanes);
    let mut y = MARGIN;
    for which in 0..lanes {
        let height = rows.iter().map(|row| stack(row, which)).fold(0.0, f64::max);
        if height == 0.0 {
            bands.push((y, 0.0));
            continue;
        }
        // A server's band has its name above its nodes.
        let label = if which == 0 { 0.0 } else { LANE_LABEL };
        bands.push((y, height + label));
        y += height + label + LANE_GAP;
    }
    let mut boxes = vec![NodeBox { x: 0.0, y: 0.0, width: 0.0, height: 0.0 }; lane.len()];
    let mut x = MARGIN;
    for row in rows {
        let widest = row.iter().map(|&node| size(node).0).fold(0.0, f64::max);
        for (which, &(top, band)) in bands.iter().enumerate() {
            let label = if which == 0 { 0.0 } else { LANE_LABEL };
            let mut at = top + label + (band - label - stack(row, which)) / 2.0;
            for &node in row.iter().filter(|&&node| lane[node] == which) {
                let (width, height) = size(node);
                boxes[node] = NodeBox { x: x + (widest - width) / 2.0, y: at, width, height };
                at += height + NODE_GAP;
            }
        }
        x += widest + LAYER_GAP;
    }
    let width = (x - LAYER_GAP + MARGIN).max(2.0 * MARGIN);
    let height = (y - LANE_GAP + MARGIN).max(2.0 * MARGIN);
    (boxes, bands, width, height)
}
