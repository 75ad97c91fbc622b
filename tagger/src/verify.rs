//! The verifier, independent of the algorithms: it takes the tables as switches would apply
//! them, walks every route of the route set through them, and checks that
//!
//! 1. every hop and every delivery has a rule that keeps the packet lossless, and every
//!    (port, tag) a packet waits in has a lossless queue, distinct per tag on each port;
//! 2. tags never increase along a route (monotonic);
//! 3. each tag's subgraph of the tagged graph — nodes (ingress port, tag), an edge where a
//!    packet waiting in one may next wait in the other — is acyclic.
//!
//! With 2, edges between tags only go down, so 3 makes the whole tagged graph acyclic: no
//! cyclic buffer dependency, no PFC deadlock. A failure names the offending route or cycle.

use std::fmt;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::algo::BitSet;
use crate::routes::{RouteModel, State};
use crate::system::{TagSystem, LOSSY_TAG};
use crate::topology::{PortId, Topology};

/// A route (prefix) as the ports it waited at, each with its tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaggedRoute(pub Vec<(String, u8)>);

impl fmt::Display for TaggedRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (port, tag)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" → ")?;
            }
            write!(f, "{port} [tag {tag}]")?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    #[error("no rule for a hop: {route} then out of {egress}; the packet would leave lossless service")]
    Unmapped { route: TaggedRoute, egress: String },
    #[error("a rule sends the packet on with tag {to} (lossy or unknown): {route} then out of {egress}")]
    Lossy { route: TaggedRoute, egress: String, to: u8 },
    #[error("the tag rises from {from} to {to}: {route} then out of {egress}")]
    NotMonotonic { route: TaggedRoute, egress: String, from: u8, to: u8 },
    #[error("no lossless queue for {port} tag {tag}, reached by {route}")]
    NoQueue { route: TaggedRoute, port: String, tag: u8 },
    #[error("tags {a} and {b} share priority {priority} on {port}")]
    SharedQueue { port: String, a: u8, b: u8, priority: u8 },
    #[error("cyclic buffer dependency within tag {tag}: {}", .ports.join(" → "))]
    Cycle { tag: u8, ports: Vec<String> },
    #[error("the initial tag {0} is not a lossless tag")]
    BadInitialTag(u8),
}

/// What a successful verification covered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// (route state, tag) pairs walked.
    pub states: u64,
    /// Tagged-graph nodes and edges (within and across tags).
    pub nodes: usize,
    pub edges: usize,
    pub tags_used: u8,
}

pub fn verify(t: &Topology, m: &dyn RouteModel, sys: &TagSystem) -> Result<Report, Violation> {
    shared_queues(t, sys)?;
    let g = TaggedGraph::build(t, m, sys)?;
    acyclic_per_tag(t, &g)?;
    let tags_used = g.nodes.iter().map(|&(_, tag)| tag).collect::<FxHashSet<u8>>().len() as u8;
    Ok(Report { states: g.states, nodes: g.nodes.len(), edges: g.edges.len(), tags_used })
}

/// The tagged graph: nodes (ingress port, tag), and an edge (A_i, x) → (B_j, y) where a
/// packet waiting at A's port i with tag x may next wait at B's port j with tag y.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaggedGraph {
    /// Sorted.
    pub nodes: Vec<(PortId, u8)>,
    /// Sorted.
    pub edges: Vec<((PortId, u8), (PortId, u8))>,
    /// (route state, tag) pairs walked to build it.
    pub states: u64,
}

impl TaggedGraph {
    /// Walks every route of `m` through `sys`'s tables; fails on the first hop that has no
    /// lossless rule or raises the tag, or the first (port, tag) without a lossless queue.
    pub fn build(t: &Topology, m: &dyn RouteModel, sys: &TagSystem) -> Result<TaggedGraph, Violation> {
        let tags = sys.tags;
        if sys.initial_tag == LOSSY_TAG || sys.initial_tag > tags {
            return Err(Violation::BadInitialTag(sys.initial_tag));
        }
        let lossless = |tag: u8| tag != LOSSY_TAG && tag <= tags;
        let width = tags as usize + 1;
        let mut visited = BitSet::new(m.num_states() * width);
        // Breadth-first, each entry with its parent for naming the route.
        let mut walk: Vec<(State, u8, u32)> = Vec::new();
        let mut starts = Vec::new();
        m.starts(&mut starts);
        for s in starts {
            if visited.insert(s as usize * width + sys.initial_tag as usize) {
                walk.push((s, sys.initial_tag, u32::MAX));
            }
        }
        let route = |walk: &[(State, u8, u32)], mut i: u32| {
            let mut hops = Vec::new();
            while i != u32::MAX {
                let (s, tag, parent) = walk[i as usize];
                hops.push((t.port_label(m.port(s)), tag));
                i = parent;
            }
            hops.reverse();
            TaggedRoute(hops)
        };
        let mut edges: FxHashSet<((PortId, u8), (PortId, u8))> = FxHashSet::default();
        let mut nodes: FxHashSet<(PortId, u8)> = FxHashSet::default();
        let (mut succ, mut deliver) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < walk.len() {
            let (s, tag, _) = walk[i];
            let p = m.port(s);
            if sys.queue.get(&(p, tag)).is_none_or(|&prio| prio == sys.lossy_priority) {
                return Err(Violation::NoQueue { route: route(&walk, i as u32), port: t.port_label(p), tag });
            }
            nodes.insert((p, tag));
            let mut hop = |egress: PortId, next: Option<(State, PortId)>, walk: &mut Vec<(State, u8, u32)>| {
                let Some(&to) = sys.rewrite.get(&(p, tag, egress)) else {
                    return Err(Violation::Unmapped { route: route(walk, i as u32), egress: t.port_label(egress) });
                };
                if !lossless(to) {
                    return Err(Violation::Lossy { route: route(walk, i as u32), egress: t.port_label(egress), to });
                }
                if to > tag {
                    return Err(Violation::NotMonotonic {
                        route: route(walk, i as u32),
                        egress: t.port_label(egress),
                        from: tag,
                        to,
                    });
                }
                if let Some((s2, p2)) = next {
                    edges.insert(((p, tag), (p2, to)));
                    if visited.insert(s2 as usize * width + to as usize) {
                        walk.push((s2, to, i as u32));
                    }
                }
                Ok(())
            };
            succ.clear();
            m.successors(s, &mut succ);
            for &s2 in &succ {
                let p2 = m.port(s2);
                let egress = t.peer_port(p2).expect("a successor's port faces a switch");
                hop(egress, Some((s2, p2)), &mut walk)?;
            }
            deliver.clear();
            m.deliveries(s, &mut deliver);
            for &e in &deliver {
                hop(e, None, &mut walk)?;
            }
            i += 1;
        }
        let mut nodes: Vec<(PortId, u8)> = nodes.into_iter().collect();
        nodes.sort_unstable();
        let mut edges: Vec<_> = edges.into_iter().collect();
        edges.sort_unstable();
        Ok(TaggedGraph { nodes, edges, states: walk.len() as u64 })
    }

    /// Graphviz: one cluster per tag; edges within a tag solid, to a lower tag dashed.
    pub fn to_dot(&self, t: &Topology) -> String {
        let id = |(p, tag): (PortId, u8)| format!("\"{}#{tag}\"", t.port_label(p));
        let mut s = String::from("digraph tagged {\n  rankdir=LR;\n  node [shape=box, fontsize=10];\n");
        let mut tags: Vec<u8> = self.nodes.iter().map(|&(_, tag)| tag).collect();
        tags.sort_unstable();
        tags.dedup();
        for tag in tags.iter().rev() {
            s += &format!("  subgraph cluster_tag{tag} {{\n    label=\"tag {tag}\";\n");
            for &(p, _) in self.nodes.iter().filter(|n| n.1 == *tag) {
                s += &format!("    {} [label=\"{}\"];\n", id((p, *tag)), t.port_label(p));
            }
            s += "  }\n";
        }
        for &(a, b) in &self.edges {
            let style = if a.1 == b.1 { "" } else { " [style=dashed]" };
            s += &format!("  {} -> {}{style};\n", id(a), id(b));
        }
        s + "}\n"
    }
}

fn shared_queues(t: &Topology, sys: &TagSystem) -> Result<(), Violation> {
    let mut by_queue: FxHashMap<(PortId, u8), u8> = FxHashMap::default();
    let mut entries: Vec<(&(PortId, u8), &u8)> = sys.queue.iter().collect();
    entries.sort_unstable();
    for (&(port, tag), &priority) in entries {
        if let Some(other) = by_queue.insert((port, priority), tag) {
            return Err(Violation::SharedQueue { port: t.port_label(port), a: other, b: tag, priority });
        }
    }
    Ok(())
}

/// Depth-first search per tag; a back edge closes a cycle, read off the search path.
fn acyclic_per_tag(t: &Topology, g: &TaggedGraph) -> Result<(), Violation> {
    let mut by_tag: FxHashMap<u8, Vec<(PortId, PortId)>> = FxHashMap::default();
    for &((a, x), (b, y)) in &g.edges {
        if x == y {
            by_tag.entry(x).or_default().push((a, b));
        }
    }
    let mut tags: Vec<u8> = by_tag.keys().copied().collect();
    tags.sort_unstable();
    for tag in tags {
        let mut edges = by_tag.remove(&tag).unwrap_or_default();
        edges.sort_unstable();
        let mut out: FxHashMap<PortId, Vec<PortId>> = FxHashMap::default();
        for &(a, b) in &edges {
            out.entry(a).or_default().push(b);
        }
        // 0 = unseen, 1 = on the path, 2 = done.
        let mut colour: FxHashMap<PortId, u8> = FxHashMap::default();
        let mut roots: Vec<PortId> = out.keys().copied().collect();
        roots.sort_unstable();
        for root in roots {
            if colour.get(&root).copied().unwrap_or(0) != 0 {
                continue;
            }
            // (node, next child index)
            let mut path: Vec<(PortId, usize)> = vec![(root, 0)];
            colour.insert(root, 1);
            while let Some(&mut (node, ref mut child)) = path.last_mut() {
                let kids = out.get(&node).map_or(&[][..], |v| v.as_slice());
                if let Some(&next) = kids.get(*child) {
                    *child += 1;
                    match colour.get(&next).copied().unwrap_or(0) {
                        0 => {
                            colour.insert(next, 1);
                            path.push((next, 0));
                        }
                        1 => {
                            let from = path.iter().position(|&(n, _)| n == next).expect("grey nodes are on the path");
                            let mut ports: Vec<String> = path[from..].iter().map(|&(n, _)| t.port_label(n)).collect();
                            ports.push(t.port_label(next));
                            return Err(Violation::Cycle { tag, ports });
                        }
                        _ => {}
                    }
                } else {
                    colour.insert(node, 2);
                    path.pop();
                }
            }
        }
    }
    Ok(())
}
