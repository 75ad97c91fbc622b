//! Greedy tag minimisation: merge the brute-force groups from the first hop onward for as
//! long as the merged group's subgraph stays acyclic.
//!
//! Group by group: (1) collect every hop a packet of this group could take if the group
//! never ended — the candidate edges, (port → next port); (2) keep an acyclic subset of them
//! and demote the rest, i.e. those hops move the packet to the next group; (3) walk the
//! group again with these decisions: the packets that crossed a demoted hop are the next
//! group's entry. Each rule (ingress port, group, egress port) is decided once, so the
//! system stays a function of its key; a route moves to the next group at most once per
//! hop, so greedy never needs more tags than brute force.
//!
//! Which edges to demote decides how many groups follow. Nodes are ordered by their
//! *depth*, the latest hop at which a port appears on any route; edges that go deeper are
//! all kept (they cannot form a cycle among themselves), and edges back up are kept while
//! they close no cycle. In a Clos with up-down routes and k bounces every up or down hop
//! goes deeper and every bounce goes back up, so exactly the bounces that close cycles are
//! demoted: k + 1 tags, the paper's construction.

use rustc_hash::{FxHashMap, FxHashSet};

use super::dyntopo::DynTopo;
use super::{check_ports, egress_to, starts, AlgoError, Algorithm, BitSet, GroupRules, Tagging};
use crate::routes::{RouteModel, State};
use crate::topology::{PortId, Topology};

pub fn greedy(t: &Topology, m: &dyn RouteModel) -> Result<Tagging, AlgoError> {
    check_ports(t)?;
    let depth = port_depth(t, m)?;
    let n = m.num_states();
    let mut rules = GroupRules::default();
    let mut entry = starts(m);
    let mut seen = BitSet::new(n);
    let mut next_seen = BitSet::new(n);
    let (mut succ, mut deliver, mut stack, mut next): (Vec<State>, Vec<PortId>, Vec<State>, Vec<State>) =
        Default::default();
    let mut group: usize = 0;
    while !entry.is_empty() {
        if group > u8::MAX as usize {
            return Err(AlgoError::TooManyTags(group));
        }
        // (1) Candidates.
        let mut candidates: FxHashSet<(PortId, PortId)> = FxHashSet::default();
        seen.clear();
        for &s in &entry {
            if seen.insert(s as usize) {
                stack.push(s);
            }
        }
        while let Some(s) = stack.pop() {
            succ.clear();
            m.successors(s, &mut succ);
            for &s2 in &succ {
                candidates.insert((m.port(s), m.port(s2)));
                if seen.insert(s2 as usize) {
                    stack.push(s2);
                }
            }
        }
        // (2) Decisions.
        let demoted = demotions(&candidates, &depth);
        // (3) The group as decided.
        let g = group as u16;
        seen.clear();
        next_seen.clear();
        next.clear();
        for &s in &entry {
            if seen.insert(s as usize) {
                stack.push(s);
            }
        }
        while let Some(s) = stack.pop() {
            let p = m.port(s);
            succ.clear();
            m.successors(s, &mut succ);
            for &s2 in &succ {
                let p2 = m.port(s2);
                if demoted.contains(&(p, p2)) {
                    rules.insert(p, g, egress_to(t, p2), g + 1);
                    if next_seen.insert(s2 as usize) {
                        next.push(s2);
                    }
                } else {
                    rules.insert(p, g, egress_to(t, p2), g);
                    if seen.insert(s2 as usize) {
                        stack.push(s2);
                    }
                }
            }
            deliver.clear();
            m.deliveries(s, &mut deliver);
            for &e in &deliver {
                rules.insert(p, g, e, g);
            }
        }
        std::mem::swap(&mut entry, &mut next);
        group += 1;
    }
    rules.into_tagging(Algorithm::Greedy, group)
}

/// The candidate edges to demote so that the rest is acyclic.
pub(super) fn demotions(candidates: &FxHashSet<(PortId, PortId)>, depth: &[u16]) -> FxHashSet<(PortId, PortId)> {
    let mut nodes: Vec<PortId> = candidates.iter().flat_map(|&(a, b)| [a, b]).collect();
    nodes.sort_unstable_by_key(|&p| (depth[p as usize], p));
    nodes.dedup();
    let index: FxHashMap<PortId, u32> = nodes.iter().enumerate().map(|(i, &p)| (p, i as u32)).collect();
    let mut edges: Vec<(u32, u32)> = candidates.iter().map(|(a, b)| (index[a], index[b])).collect();
    edges.sort_unstable();
    let mut g = DynTopo::new((0..nodes.len() as u32).collect());
    let mut backward = Vec::new();
    for (u, v) in edges {
        if u < v {
            let kept = g.try_add(u, v);
            debug_assert!(kept, "edges along the initial order never close a cycle");
        } else {
            backward.push((u, v));
        }
    }
    backward
        .into_iter()
        .filter(|&(u, v)| !g.try_add(u, v))
        .map(|(u, v)| (nodes[u as usize], nodes[v as usize]))
        .collect()
}

/// Each port's depth: the latest hop (0 = entering) at which it appears on some route.
/// The longest path over the route model's states, which form a DAG when every route ends.
fn port_depth(t: &Topology, m: &dyn RouteModel) -> Result<Vec<u16>, AlgoError> {
    let n = m.num_states();
    let starts = starts(m);
    let mut indeg = vec![0u32; n];
    let mut reached = BitSet::new(n);
    let mut stack: Vec<State> = Vec::new();
    let mut succ = Vec::new();
    for &s in &starts {
        reached.insert(s as usize);
        stack.push(s);
    }
    let mut reachable = 0usize;
    while let Some(s) = stack.pop() {
        reachable += 1;
        succ.clear();
        m.successors(s, &mut succ);
        for &s2 in &succ {
            indeg[s2 as usize] += 1;
            if reached.insert(s2 as usize) {
                stack.push(s2);
            }
        }
    }
    // Kahn's order; a state's level is final once all its predecessors are done.
    let mut level = vec![0u16; n];
    let mut depth = vec![0u16; t.ports.len()];
    stack.extend(starts.iter().copied().filter(|&s| indeg[s as usize] == 0));
    let mut done = 0usize;
    while let Some(s) = stack.pop() {
        done += 1;
        let l = level[s as usize];
        let p = m.port(s) as usize;
        depth[p] = depth[p].max(l);
        succ.clear();
        m.successors(s, &mut succ);
        for &s2 in &succ {
            let i = s2 as usize;
            level[i] = level[i].max(l.saturating_add(1));
            indeg[i] -= 1;
            if indeg[i] == 0 {
                stack.push(s2);
            }
        }
    }
    if done < reachable {
        return Err(AlgoError::EndlessRoutes);
    }
    Ok(depth)
}
