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
    // edge between two is kept without a search, and no search needs it.
    let component = components(nodes.len(), &edges);
    let within = edges.iter().copied().filter(|&(u, v)| u != v && component[u as usize] == component[v as usize]);
    let mut s = Searches::new(nodes.len(), within.clone());
    for (u, v) in within.filter(|&(u, v)| u < v) {
        s.keep(u, v);
    }
    let mut demoted = FxHashSet::default();
    let before = std::mem::take(proofs);
    let kept = |a: PortId, b: PortId, demoted: &FxHashSet<(PortId, PortId)>| {
        candidates.contains(&(a, b)) && !demoted.contains(&(a, b))
    };
    // The edges whose proof may hold again (its every edge a candidate still), and the
    // components of the candidates without them. While no such edge is kept, every edge
    // kept lies within those components, so an edge between two closes no cycle: where
    // the last group's proofs hold, the next group's keeps need no search (at 5 000
    // switches, the second group's 60 000 searches all kept their edge). Once one is kept
    // after all, only the components of all the candidates say so.
    let proven: FxHashSet<(u32, u32)> = edges
        .iter()
        .copied()
        .filter(|&(u, v)| {
            u > v
                && before
                    .path((nodes[u as usize], nodes[v as usize]))
                    .is_some_and(|path| path.windows(2).all(|w| candidates.contains(&(w[0], w[1]))))
        })
        .collect();
    let mut unproven = component.clone();
    if !proven.is_empty() {
        let rest: Vec<(u32, u32)> = edges.iter().copied().filter(|e| !proven.contains(e)).collect();
        unproven = components(nodes.len(), &rest);
    }
    let mut path = Vec::new();
    for &(u, v) in edges.iter().filter(|&&(u, v)| u >= v) {
        let edge = (nodes[u as usize], nodes[v as usize]);
        if u == v {
            // A hop back to its own port closes a cycle by itself.
            demoted.insert(edge);
            continue;
        }
        if component[v as usize] != component[u as usize] {
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
        let is_proven = proven.contains(&(u, v));
        if !is_proven && unproven[u as usize] != unproven[v as usize] {
            s.keep(u, v);
            continue;
        }
        if s.closes(u, v, &mut path) {
            path.iter_mut().for_each(|x| *x = nodes[*x as usize]);
            proofs.add(edge, &path);
            demoted.insert(edge);
        } else {
            s.keep(u, v);
            if is_proven {
                unproven.clone_from(&component);
            }
        }
    }
    demoted
}

/// The searches of [`demotions`]: whether v reaches u over the kept edges through nodes
/// numbered below u, asked for u's edges one after another, u rising.
///
/// Each search goes both ways at once, forward from v and backward from u, a node at a
/// time from the side with the fewer nodes waiting, until the two meet or one runs out.
/// Candidates over a Jellyfish's shortest routes form one strongly connected component
/// of nearly every port, whose searches fan out as in a random graph: from one side
/// alone a search that found a cycle visited 5 000 nodes on average at 10 000
/// switches, where two sides meet when each has seen about the square root of what one
/// side would. The verdicts are reachability's, so the demotions are the same whatever
/// the searches visit; only the paths kept as proofs differ.
///
/// What one search of u's learns holds for the next of u's edges, since an edge kept out
/// of u gives no node below u a way to u: the nodes the backward side reached reach u
/// (`toward` leads there), the backward side goes on where it stopped, and once it has
/// run out the ancestors of u are all known; the nodes of a forward side that ran out
/// reach u by no way at all.
struct Searches {
    out: Slots,
    into: Slots,
    marks: Vec<Mark>,
    /// Per node: the next on its way to the current source, where `ancestor` is this
    /// round.
    toward: Vec<u32>,
    search: u32,
    round: u32,
    source: u32,
    /// The current forward side, the first `ahead` of them expanded.
    forward: Vec<u32>,
    ahead: usize,
    /// The backward side of the current source (every node it reached), the first
    /// `behind` expanded.
    backward: Vec<u32>,
    behind: usize,
}

/// What the searches know of a node, side by side: a search looks at all three for every
/// edge it crosses.
#[derive(Clone, Copy, Default)]
struct Mark {
    /// `== search`: the current forward side reached it, from `parent`.
    seen: u32,
    /// It does not reach the current source ([`Searches::revive`]).
    dead: bool,
    /// `== round`: it reaches the current source, by way of `toward`.
    ancestor: u32,
    parent: u32,
}

/// Edges out of (or into) each node, in one array with room for every edge a node may
/// get: where a vector a node took a pointer to follow at every node a search expanded.
struct Slots {
    at: Vec<u32>,
    len: Vec<u32>,
    to: Vec<u32>,
}

impl Slots {
    /// Room at each of `n` nodes for its edges out among `edges`, none there yet.
    fn room_for(n: usize, edges: impl Iterator<Item = (u32, u32)>) -> Slots {
        let mut at = vec![0u32; n + 1];
        for (u, _) in edges {
            at[u as usize + 1] += 1;
        }
        for i in 0..n {
            at[i + 1] += at[i];
        }
        Slots { len: vec![0; n], to: vec![0; at[n] as usize], at }
    }

    /// `edges` out of each of `n` nodes.
    fn of_edges(n: usize, edges: impl Iterator<Item = (u32, u32)> + Clone) -> Slots {
        let mut slots = Slots::room_for(n, edges.clone());
        for (u, v) in edges {
            slots.push(u, v);
        }
        slots
    }

    fn push(&mut self, x: u32, w: u32) {
        let x = x as usize;
        self.to[(self.at[x] + self.len[x]) as usize] = w;
        self.len[x] += 1;
    }

    fn of(&self, x: u32) -> &[u32] {
        let x = x as usize;
        &self.to[self.at[x] as usize..(self.at[x] + self.len[x]) as usize]
    }
}

impl Searches {
    /// For `n` nodes and the edges that may be kept.
    fn new(n: usize, edges: impl Iterator<Item = (u32, u32)> + Clone) -> Searches {
        Searches {
            out: Slots::room_for(n, edges.clone()),
            into: Slots::room_for(n, edges.map(|(u, v)| (v, u))),
            marks: vec![Mark::default(); n],
            toward: vec![0; n],
            search: 0,
            round: 0,
            source: u32::MAX,
            forward: Vec::new(),
            ahead: 0,
            backward: Vec::new(),
            behind: 0,
        }
    }

    fn keep(&mut self, u: u32, v: u32) {
        self.out.push(u, v);
        self.into.push(v, u);
    }

    /// Keeps what the searches of source `from` found dead for source `to`, but for
    /// the nodes that reach a node of `from..=to` over dead nodes alone.
    ///
    /// A node is dead when a forward side that reached it ran out: its edges lead to
    /// dead nodes or to nodes at or above the source, never to an ancestor. So the dead
    /// nodes are closed below the source, and for a later source a dead node reaches it
    /// below it only by leaving them for a node in the range the source rose by. Those
    /// that can are found backward from that range over dead nodes; the rest stay dead,
    /// closed below the new source, where a search from each would find the same. A
    /// node's round its edges out are all there (sources rise), so none are added to a
    /// dead node later. Consecutive sources are mostly consecutive nodes: at 5 000
    /// switches, the searches that ran out forward had met 600 nodes each, most of them
    /// dead for the last source too.
    fn revive(&mut self, from: u32, to: u32) {
        // The range's nodes are not dead themselves: backward from them, as from the
        // nodes revived.
        let mut stack = std::mem::take(&mut self.forward);
        stack.clear();
        stack.extend(from..=to);
        while let Some(y) = stack.pop() {
            for &x in self.into.of(y) {
                if std::mem::replace(&mut self.marks[x as usize].dead, false) {
                    stack.push(x);
                }
            }
        }
        self.forward = stack;
    }

    /// Whether v reaches u through nodes below u (u above v, and never below a source
    /// asked before); if so, `path` is the way, from v to u.
    fn closes(&mut self, u: u32, v: u32, path: &mut Vec<u32>) -> bool {
        if u != self.source {
            if self.source != u32::MAX {
                self.revive(self.source, u);
            }
            (self.source, self.round) = (u, self.round + 1);
            self.marks[u as usize].ancestor = self.round;
            self.toward[u as usize] = u;
            self.backward.clear();
            self.backward.push(u);
            self.behind = 0;
        }
        let round = self.round;
        let m = self.marks[v as usize];
        if m.ancestor == round {
            self.way(None, v, path);
            return true;
        }
        if m.dead || self.behind == self.backward.len() {
            return false;
        }
        self.search += 1;
        let search = self.search;
        self.marks[v as usize].seen = search;
        self.marks[v as usize].parent = v;
        self.forward.clear();
        self.forward.push(v);
        self.ahead = 0;
        loop {
            let (waiting_ahead, waiting_behind) = (self.forward.len() - self.ahead, self.backward.len() - self.behind);
            if waiting_ahead == 0 {
                for &w in &self.forward {
                    self.marks[w as usize].dead = true;
                }
                return false;
            }
            if waiting_behind == 0 {
                return false;
            }
            if waiting_ahead <= waiting_behind {
                let x = self.forward[self.ahead];
                self.ahead += 1;
                for &w in self.out.of(x) {
                    let m = &mut self.marks[w as usize];
                    if m.ancestor == round {
                        self.way(Some(x), w, path);
                        return true;
                    }
                    if w < u && m.seen != search && !m.dead {
                        m.seen = search;
                        m.parent = x;
                        self.forward.push(w);
                    }
                }
            } else {
                // y's expansion is finished even when it meets the forward side, so
                // that the next search goes on from a backward side whole.
                let y = self.backward[self.behind];
                self.behind += 1;
                let mut met = None;
                for &w in self.into.of(y) {
                    let m = &mut self.marks[w as usize];
                    if w >= u || m.ancestor == round {
                        continue;
                    }
                    if m.seen == search && met.is_none() {
                        met = Some(w);
                    }
                    m.ancestor = round;
                    self.toward[w as usize] = y;
                    self.backward.push(w);
                }
                if let Some(w) = met {
                    self.way(Some(w), y, path);
                    return true;
                }
            }
        }
    }

    /// The way from the current search's start to `x` (none: from `y` alone), then from
    /// `y`, an ancestor of the source (`x → y` kept), to the source.
    fn way(&self, x: Option<u32>, y: u32, path: &mut Vec<u32>) {
        path.clear();
        if let Some(mut w) = x {
            path.push(w);
            while self.marks[w as usize].parent != w {
                w = self.marks[w as usize].parent;
                path.push(w);
            }
            path.reverse();
        }
        let mut w = y;
        path.push(w);
        while w != self.source {
            w = self.toward[w as usize];
            path.push(w);
        }
    }
}

/// Each node's strongly connected component (a number) in the graph of `edges` over
/// `n` nodes: Kosaraju's two passes, without recursion (a component may hold every port
/// of a fabric).
fn components(n: usize, edges: &[(u32, u32)]) -> Vec<u32> {
    // First pass: the nodes in the order their searches finish.
    let out = Slots::of_edges(n, edges.iter().copied());
    let mut finished = Vec::with_capacity(n);
    let mut visited = vec![false; n];
    let mut stack: Vec<(u32, std::slice::Iter<'_, u32>)> = Vec::new();
    for start in 0..n as u32 {
        if std::mem::replace(&mut visited[start as usize], true) {
            continue;
        }
        stack.push((start, out.of(start).iter()));
        while let Some((x, next)) = stack.last_mut() {
            if let Some(&w) = next.next() {
                if !std::mem::replace(&mut visited[w as usize], true) {
                    stack.push((w, out.of(w).iter()));
                }
            } else {
                finished.push(*x);
                stack.pop();
            }
        }
    }
    // Second pass, over the edges reversed, the last finished first: each search
    // gathers one component.
    let back = Slots::of_edges(n, edges.iter().map(|&(a, b)| (b, a)));
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
            for &w in back.of(x) {
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
        fn every_demotion_s_proof_is_a_way_back_over_kept_candidates(
            edges in proptest::collection::vec((0u32..40, 0u32..40), 0..200),
            depth in proptest::collection::vec(0u16..4, 40),
        ) {
            let candidates: FxHashSet<(PortId, PortId)> = edges.into_iter().collect();
            let mut proofs = Proofs::default();
            let demoted = demotions(&candidates, &depth, &mut proofs);
            for &(u, v) in demoted.iter().filter(|&&(u, v)| u != v) {
                let path = proofs.path((u, v)).expect("a demotion's proof");
                prop_assert_eq!((path[0], path[path.len() - 1]), (v, u));
                for w in path.windows(2) {
                    prop_assert!(candidates.contains(&(w[0], w[1])) && !demoted.contains(&(w[0], w[1])), "{:?} in {:?}", w, path);
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
