//! The resource dependency graph: a deterministic topological order (dependencies first, ties
//! by declaration order) and readable cycle reports. Nodes are declaration indexes; `edges[i]`
//! lists what resource `i` depends on. Everything is iterative, so a long chain cannot
//! overflow the stack.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// At most this many cycles are described; one is enough to act on, and listing every
/// elementary cycle of a dense graph would be exponential.
const MAX_REPORTED_CYCLES: usize = 10;

/// Kahn's algorithm with the smallest declaration index first among ready nodes. Nodes on or
/// behind a cycle are left out.
pub fn order(edges: &[Vec<usize>]) -> Vec<usize> {
    let mut waiting: Vec<usize> = edges.iter().map(Vec::len).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); edges.len()];
    for (node, dependencies) in edges.iter().enumerate() {
        for &dependency in dependencies {
            dependents[dependency].push(node);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> =
        waiting.iter().enumerate().filter(|(_, count)| **count == 0).map(|(node, _)| Reverse(node)).collect();
    let mut ordered = Vec::with_capacity(edges.len());
    while let Some(Reverse(node)) = ready.pop() {
        ordered.push(node);
        for &dependent in &dependents[node] {
            waiting[dependent] -= 1;
            if waiting[dependent] == 0 {
                ready.push(Reverse(dependent));
            }
        }
    }
    ordered
}

/// One message per cycle found: `dependency cycle: a -> b -> a` (a depends on b). Each cycle
/// is listed once, starting from its earliest-declared resource.
pub fn cycles(names: &[&str], edges: &[Vec<usize>]) -> Vec<String> {
    let mut component = vec![usize::MAX; edges.len()];
    let components = strongly_connected(edges);
    for (id, members) in components.iter().enumerate() {
        for &member in members {
            component[member] = id;
        }
    }
    let mut ordered: Vec<&Vec<usize>> = components.iter().collect();
    ordered.sort_by_key(|members| members.iter().min().copied());
    let mut covered = vec![false; edges.len()];
    let mut messages = Vec::new();
    for members in ordered {
        let mut members = members.clone();
        members.sort_unstable();
        let cyclic = members.len() > 1 || edges[members[0]].contains(&members[0]);
        if !cyclic {
            continue;
        }
        for &start in &members {
            if covered[start] {
                continue;
            }
            if messages.len() == MAX_REPORTED_CYCLES {
                return messages;
            }
            let Some(path) = shortest_cycle(start, edges, &component) else { continue };
            for &node in &path {
                covered[node] = true;
            }
            let mut text: Vec<&str> = path.iter().map(|&node| names[node]).collect();
            text.push(names[start]);
            messages.push(format!("dependency cycle: {}", text.join(" -> ")));
        }
    }
    messages
}

/// Breadth-first search from `start` back to itself inside its component.
fn shortest_cycle(start: usize, edges: &[Vec<usize>], component: &[usize]) -> Option<Vec<usize>> {
    let mut parent = vec![usize::MAX; edges.len()];
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &next in &edges[node] {
            if component[next] != component[start] {
                continue;
            }
            if next == start {
                let mut path = vec![node];
                let mut current = node;
                while current != start {
                    current = parent[current];
                    path.push(current);
                }
                path.reverse();
                return Some(path);
            }
            if parent[next] == usize::MAX {
                parent[next] = node;
                queue.push_back(next);
            }
        }
    }
    None
}

/// Tarjan's strongly connected components, with an explicit call stack.
fn strongly_connected(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const UNVISITED: usize = usize::MAX;
    let count = edges.len();
    let (mut index, mut low, mut on_stack) = (vec![UNVISITED; count], vec![0; count], vec![false; count]);
    let (mut stack, mut components, mut next) = (Vec::new(), Vec::new(), 0);
    for root in 0..count {
        if index[root] != UNVISITED {
            continue;
        }
        let mut calls: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(frame) = calls.last_mut() {
            let node = frame.0;
            if let Some(&successor) = edges[node].get(frame.1) {
                frame.1 += 1;
                if index[successor] == UNVISITED {
                    index[successor] = next;
                    low[successor] = next;
                    next += 1;
                    stack.push(successor);
                    on_stack[successor] = true;
                    calls.push((successor, 0));
                } else if on_stack[successor] {
                    low[node] = low[node].min(index[successor]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == index[node] {
                let mut members = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    members.push(member);
                    if member == node {
                        break;
                    }
                }
                components.push(members);
            }
        }
    }
    components
}
