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

use super::{check_ports, egress_to, starts, AlgoError, Algorithm, GroupRules, Tagging};
use crate::bits::BitSet;
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
    let mut proofs = Proofs::default();
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
        let demoted = demotions(&candidates, &depth, &mut proofs);
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
///
/// Nodes are numbered by (depth, port); edges that go up in that numbering are all kept
/// (they cannot close a cycle among themselves), and those that go down are taken in
/// order of (source, target), each kept unless it closes a cycle with what was kept.
///
/// Taken in that order, the question for a downward edge (u, v) is whether v reaches u
/// through nodes numbered below u: every edge kept so far that goes down starts at u or
/// below, so a path that climbed past u could never come back to it. A search from v
/// confined to those nodes answers it, and needs no topological order kept up to date:
/// Pearce and Kelly's dynamic order (`dyntopo`, which the tests hold it to) gave the same
/// answers in 1.7 times the time on a 3 000-switch Jellyfish, whose demotions were most
/// of greedy's time.
///
/// `proofs` carries, from one call to the next, the path that made each demotion: an
/// edge demoted before is demoted again without a search when every edge of its path is
/// kept this time too (such a path is a way from v back to u, through nodes below u,
/// whatever else changed). Greedy's groups over a Jellyfish's shortest routes take
/// nearly the same candidates one after another, and the searches that found a cycle
/// were four fifths of the time: at 10 000 switches, each of the first three groups had
/// 280 000 edges to decide, 159 000 of them demoted after a search of 5 000 nodes on
/// average.
pub(super) fn demotions(
    candidates: &FxHashSet<(PortId, PortId)>,
    depth: &[u16],
    proofs: &mut Proofs,
) -> FxHashSet<(PortId, PortId)> {
    let (nodes, edges) = numbered(candidates, depth);
    // A cycle lies within one strongly connected component of all the candidates: an
    // edge between two is kept without a search, and a search leaves its source's.
    let component = components(nodes.len(), &edges);
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); nodes.len()];
    for &(u, v) in edges.iter().filter(|&&(u, v)| u < v) {
        out[u as usize].push(v);
    }
    // `seen[w] == search`: the current search has reached w, from `parent[w]`.
    // `dead[w] == round`: w does not reach the current source u, as a search from it
    // found. An edge kept out of u gives no node below u a way to u, so what one search
    // of u's learned holds for the next of u's edges.
    let (mut seen, mut parent, mut search) = (vec![0u32; nodes.len()], vec![0u32; nodes.len()], 0u32);
    let (mut dead, mut round, mut source) = (vec![0u32; nodes.len()], 0u32, u32::MAX);
    let (mut stack, mut reached) = (Vec::new(), Vec::new());
    let mut demoted = FxHashSet::default();
    let before = std::mem::take(proofs);
    let kept = |a: PortId, b: PortId, demoted: &FxHashSet<(PortId, PortId)>| {
        candidates.contains(&(a, b)) && !demoted.contains(&(a, b))
    };
    for &(u, v) in edges.iter().filter(|&&(u, v)| u >= v) {
        let edge = (nodes[u as usize], nodes[v as usize]);
        if u == v {
            // A hop back to its own port closes a cycle by itself.
            demoted.insert(edge);
            continue;
        }
        let within = component[u as usize];
        if component[v as usize] != within {
            out[u as usize].push(v);
            continue;
        }
        if let Some(path) = before.path(edge) {
            // Every edge of the path starts below u: its fate this time is known.
            if path.windows(2).all(|w| kept(w[0], w[1], &demoted)) && path.last() == Some(&edge.0) {
                proofs.add(edge, path);
                demoted.insert(edge);
                continue;
            }
        }
        if u != source {
            (source, round) = (u, round + 1);
        }
        search += 1;
        stack.clear();
        reached.clear();
        if dead[v as usize] != round {
            stack.push(v);
            reached.push(v);
            seen[v as usize] = search;
        }
        let closes = 'search: loop {
            let Some(x) = stack.pop() else { break None };
            for &w in &out[x as usize] {
                if w == u {
                    break 'search Some(x);
                }
                if w < u && seen[w as usize] != search && dead[w as usize] != round && component[w as usize] == within {
                    seen[w as usize] = search;
                    parent[w as usize] = x;
                    reached.push(w);
                    stack.push(w);
                }
            }
        };
        match closes {
            Some(last) => {
                // The way back: v, ..., last, u.
                let mut path = vec![edge.0];
                let mut x = last;
                loop {
                    path.push(nodes[x as usize]);
                    if x == v {
                        break;
                    }
                    x = parent[x as usize];
                }
                path.reverse();
                proofs.add(edge, &path);
                demoted.insert(edge);
            }
            None => {
                for &w in &reached {
                    dead[w as usize] = round;
                }
                out[u as usize].push(v);
            }
        }
    }
    demoted
}

/// Each node's strongly connected component (a number) in the graph of `edges` over
/// `n` nodes: Kosaraju's two passes, without recursion (a component may hold every port
/// of a fabric).
fn components(n: usize, edges: &[(u32, u32)]) -> Vec<u32> {
    let adjacency = |reverse: bool| {
        let mut at = vec![0u32; n + 1];
        for &(a, b) in edges {
            at[if reverse { b } else { a } as usize + 1] += 1;
        }
        for i in 0..n {
            at[i + 1] += at[i];
        }
        let mut fill = at.clone();
        let mut to = vec![0u32; edges.len()];
        for &(a, b) in edges {
            let (from, into) = if reverse { (b, a) } else { (a, b) };
            to[fill[from as usize] as usize] = into;
            fill[from as usize] += 1;
        }
        (at, to)
    };
    // First pass: the nodes in the order their searches finish.
    let (at, to) = adjacency(false);
    let mut finished = Vec::with_capacity(n);
    let mut visited = vec![false; n];
    let mut stack: Vec<(u32, u32)> = Vec::new();
    for start in 0..n as u32 {
        if std::mem::replace(&mut visited[start as usize], true) {
            continue;
        }
        stack.push((start, at[start as usize]));
        while let Some(&mut (x, ref mut next)) = stack.last_mut() {
            if *next < at[x as usize + 1] {
                let w = to[*next as usize];
                *next += 1;
                if !std::mem::replace(&mut visited[w as usize], true) {
                    stack.push((w, at[w as usize]));
                }
            } else {
                finished.push(x);
                stack.pop();
            }
        }
    }
    // Second pass, over the edges reversed, the last finished first: each search
    // gathers one component.
    let (at, to) = adjacency(true);
    let mut component = vec![u32::MAX; n];
    let mut count = 0u32;
    let mut todo = Vec::new();
    for &start in finished.iter().rev() {
        if component[start as usize] != u32::MAX {
            continue;
        }
        component[start as usize] = count;
        todo.push(start);
        while let Some(x) = todo.pop() {
            for &w in &to[at[x as usize] as usize..at[x as usize + 1] as usize] {
                if component[w as usize] == u32::MAX {
                    component[w as usize] = count;
                    todo.push(w);
                }
            }
        }
        count += 1;
    }
    component
}

/// Why each demoted edge (u, v) was demoted: a path of kept edges from v back to u
/// ([`demotions`]).
#[derive(Default)]
pub(super) struct Proofs {
    /// Per edge: where its path lies in `nodes`.
    at: FxHashMap<(PortId, PortId), (u32, u32)>,
    nodes: Vec<PortId>,
}

impl Proofs {
    fn path(&self, edge: (PortId, PortId)) -> Option<&[PortId]> {
        self.at.get(&edge).map(|&(from, len)| &self.nodes[from as usize..(from + len) as usize])
    }

    fn add(&mut self, edge: (PortId, PortId), path: &[PortId]) {
        self.at.insert(edge, (self.nodes.len() as u32, path.len() as u32));
        self.nodes.extend_from_slice(path);
    }
}

/// The candidates' ports numbered by (depth, port), and the edges between those numbers,
/// sorted.
fn numbered(candidates: &FxHashSet<(PortId, PortId)>, depth: &[u16]) -> (Vec<PortId>, Vec<(u32, u32)>) {
    let mut nodes: Vec<PortId> = candidates.iter().flat_map(|&(a, b)| [a, b]).collect();
    nodes.sort_unstable_by_key(|&p| (depth[p as usize], p));
    nodes.dedup();
    let index: FxHashMap<PortId, u32> = nodes.iter().enumerate().map(|(i, &p)| (p, i as u32)).collect();
    let mut edges: Vec<(u32, u32)> = candidates.iter().map(|(a, b)| (index[a], index[b])).collect();
    edges.sort_unstable();
    (nodes, edges)
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

#[cfg(test)]
mod tests {
    use super::super::dyntopo::DynTopo;
    use super::*;
    use proptest::prelude::*;

    /// The demotions as Pearce and Kelly's dynamic order decides them.
    fn by_dynamic_order(candidates: &FxHashSet<(PortId, PortId)>, depth: &[u16]) -> FxHashSet<(PortId, PortId)> {
        let (nodes, edges) = numbered(candidates, depth);
        let mut g = DynTopo::new((0..nodes.len() as u32).collect());
        let mut backward = Vec::new();
        for (u, v) in edges {
            if u < v {
                assert!(g.try_add(u, v));
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

    proptest! {
        #[test]
        fn the_confined_searches_demote_what_the_dynamic_order_demotes(
            edges in proptest::collection::vec((0u32..40, 0u32..40), 0..200),
            depth in proptest::collection::vec(0u16..4, 40),
        ) {
            let candidates: FxHashSet<(PortId, PortId)> = edges.into_iter().collect();
            prop_assert_eq!(demotions(&candidates, &depth, &mut Proofs::default()), by_dynamic_order(&candidates, &depth));
        }

        #[test]
        fn two_nodes_share_a_component_exactly_when_each_reaches_the_other(
            edges in proptest::collection::vec((0u32..20, 0u32..20), 0..60),
        ) {
            let component = components(20, &edges);
            let reaches = |a: u32, b: u32| {
                let (mut seen, mut todo) = (vec![false; 20], vec![a]);
                while let Some(x) = todo.pop() {
                    if x == b {
                        return true;
                    }
                    for &(p, q) in &edges {
                        if p == x && !std::mem::replace(&mut seen[q as usize], true) {
                            todo.push(q);
                        }
                    }
                }
                false
            };
            for a in 0..20u32 {
                for b in 0..20u32 {
                    let same = component[a as usize] == component[b as usize];
                    prop_assert_eq!(same, reaches(a, b) && reaches(b, a), "{} and {}", a, b);
                }
            }
        }

        #[test]
        fn the_paths_that_proved_one_groups_demotions_change_nothing_in_the_next_groups(
            first in proptest::collection::vec((0u32..30, 0u32..30), 0..150),
            dropped in proptest::collection::vec(any::<bool>(), 150),
            added in proptest::collection::vec((0u32..30, 0u32..30), 0..20),
            depth in proptest::collection::vec(0u16..3, 30),
        ) {
            // The next group's candidates: most of the first's, and a few new ones.
            let a: FxHashSet<(PortId, PortId)> = first.iter().copied().collect();
            let b: FxHashSet<(PortId, PortId)> =
                first.iter().zip(&dropped).filter(|(_, &d)| !d).map(|(&e, _)| e).chain(added).collect();
            let mut proofs = Proofs::default();
            demotions(&a, &depth, &mut proofs);
            prop_assert_eq!(demotions(&b, &depth, &mut proofs), demotions(&b, &depth, &mut Proofs::default()));
        }
    }
}
