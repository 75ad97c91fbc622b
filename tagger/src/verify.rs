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

use crate::bits::{bits_at, has, set, BitSet};
use crate::routes::dags::{Dags, Numbering, Walker, Ways};
use crate::routes::{RouteModel, State};
use crate::system::{TagSystem, LOSSY_TAG};
use crate::threads::in_pool;
use crate::topology::{PortId, SwitchId, Topology};

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
    #[error("the routes cannot be walked: {0}")]
    Unwalkable(String),
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

/// [`verify`] for every shortest route (`--routes shortest`), a destination at a time
/// over `threads` threads: the same checks, without the route model's states (9×10⁸ for a
/// Jellyfish of 10 000 switches, which [`verify`] would visit one by one). The tables are
/// read as a switch applies them, a byte per (hop, tag); each tag's edges are kept as a
/// bit per hop, merged over the destinations, and checked for cycles as [`verify`]
/// checks its graph. A violation names the port and tag where it was found (the route
/// that led there is not kept).
pub fn verify_shortest(t: &Topology, sys: &TagSystem, threads: usize) -> Result<Report, Violation> {
    let dags = Dags::new(t, threads).map_err(|e| Violation::Unwalkable(e.to_string()))?;
    verify_on(&dags, sys, threads)
}

/// [`verify_shortest`] over DAGs made already (those the tags were computed on).
pub(crate) fn verify_on(dags: &Dags<'_>, sys: &TagSystem, threads: usize) -> Result<Report, Violation> {
    let t = dags.t;
    shared_queues(t, sys)?;
    lossless_start(sys)?;
    let tags = sys.tags;
    let width = usize::from(tags) + 1;
    let table = rule_table(dags, sys);
    let mut queued = vec![false; t.ports.len() * width];
    for (&(p, x), &prio) in &sys.queue {
        if prio != sys.lossy_priority && x <= tags {
            queued[p as usize * width + usize::from(x)] = true;
        }
    }
    let masks = Masks::new(dags, sys, &table, &queued);
    let words = t.ports.len().div_ceil(64);
    let one = |p: PortId, tag: u8| TaggedRoute(vec![(t.port_label(p), tag)]);
    struct Part {
        used: Vec<BitSet>,
        /// By port bit ([`Numbering::bit`]).
        nodes: Vec<BitSet>,
        states: u64,
        /// The first violation, by destination.
        failed: Option<(usize, Violation)>,
    }
    let part = || Part {
        used: (0..width).map(|_| BitSet::new(dags.hops())).collect(),
        nodes: (0..width).map(|_| BitSet::new(t.ports.len())).collect(),
        states: 0,
        failed: None,
    };
    // The violation at switch `a` for tag `x`, port by port and way by way, in the order
    // a switch meets them: what the masks found wrong, named.
    let violation = |a: SwitchId, x: u8, at: &[Vec<u64>], ways: &Ways| -> Result<(), Violation> {
        let ports = &t.switches[a as usize].ports;
        let xi = usize::from(x);
        for (i, &p) in ports.iter().enumerate().filter(|&(i, _)| has(&at[xi], dags.bit(a, i))) {
            if !queued[p as usize * width + xi] {
                return Err(Violation::NoQueue { route: one(p, x), port: t.port_label(p), tag: x });
            }
            for &(j, _) in ways.iter().filter(|&&(j, next)| next.is_some() || j != i) {
                let rule = Some(table[dags.hop(a, i, j) * width + xi]).filter(|&y| y != NO_RULE);
                next_tag(sys, x, rule, || one(p, x), || t.port_label(ports[j]))?;
            }
        }
        Ok(())
    };
    // Walks the routes toward destination `d` with their tags; `at[x]` holds the ports a
    // packet with tag x waits at. A switch's ports with one tag are taken at once, 64 to
    // a mask, and checked against the masks of its rules.
    let walk = |w: &mut Walker<'_, '_>,
                (at, ways): &mut (Vec<Vec<u64>>, Ways),
                part: &mut Part,
                d: usize|
     -> Result<(), Violation> {
        for bits in at.iter_mut() {
            bits.fill(0);
        }
        w.starts(d, &mut at[usize::from(sys.initial_tag)]);
        w.order(d);
        for &a in &w.order {
            let n = dags.ports(a);
            let base = dags.bit(a, 0);
            let mut onward = false;
            for x in (1..=tags).rev() {
                let xi = usize::from(x);
                for c in (0..n).step_by(64) {
                    let ins = bits_at(&at[xi], base + c, (n - c).min(64));
                    if ins == 0 {
                        continue;
                    }
                    if !std::mem::replace(&mut onward, true) {
                        w.onward(d, a, ways);
                    }
                    if ins & !masks.queued(base, c, x) != 0 {
                        violation(a, x, at, ways)?;
                    }
                    part.nodes[xi].insert_bits(base + c, ins);
                    part.states += u64::from(ins.count_ones());
                    for &(j, next) in ways.iter() {
                        let hop = dags.hop(a, c, j);
                        let rule = masks.rule(base + j, c, x);
                        // Never back out of the port a packet came in by, to a host.
                        let mine = match next {
                            None if (c..c + 64).contains(&j) => ins & !(1 << (j - c)),
                            _ => ins,
                        };
                        // The rest: rules that lower the tag by more than one, or none
                        // that keep the packet lossless; the table says which.
                        let mut rest = mine & !rule.same & !rule.down;
                        while rest != 0 {
                            let i = rest.trailing_zeros() as usize;
                            rest &= rest - 1;
                            let y = table[(hop + i) * width + xi];
                            if y == NO_RULE || y == LOSSY_TAG || y > x {
                                violation(a, x, at, ways)?;
                            }
                            if let (Some(p2), Some(lower)) = (next, at.get_mut(usize::from(y))) {
                                set(lower, p2 as usize);
                            }
                        }
                        let Some(p2) = next else { continue };
                        part.used[xi].insert_bits(hop, ins);
                        if ins & rule.same != 0 {
                            set(&mut at[xi], p2 as usize);
                        }
                        if ins & rule.down != 0 {
                            set(&mut at[xi - 1], p2 as usize);
                        }
                    }
                }
            }
        }
        Ok(())
    };
    // Destinations over the threads, each piece of work with scratch space of its own;
    // the pieces merge by union, and the violation reported is the first destination's
    // to fail, so the outcome is the same for any number of threads.
    let merged = in_pool(threads, || {
        use rayon::prelude::*;
        (0..dags.dests.len())
            .into_par_iter()
            .fold(
                || (Walker::new(dags), (vec![vec![0u64; words]; width], Vec::new()), part()),
                |(mut w, mut at, mut part), d| {
                    if part.failed.is_none() {
                        if let Err(v) = walk(&mut w, &mut at, &mut part, d) {
                            part.failed = Some((d, v));
                        }
                    }
                    (w, at, part)
                },
            )
            .map(|(_, _, part)| part)
            .reduce(part, |mut a, b| {
                for (x, y) in a.used.iter_mut().zip(&b.used) {
                    x.union(y);
                }
                for (x, y) in a.nodes.iter_mut().zip(&b.nodes) {
                    x.union(y);
                }
                a.states += b.states;
                a.failed = match (a.failed, b.failed) {
                    (Some(x), Some(y)) => Some(if x.0 <= y.0 { x } else { y }),
                    (x, y) => x.or(y),
                };
                a
            })
    });
    if let Some((_, v)) = merged.failed {
        return Err(v);
    }
    let mut g = TaggedGraph { states: merged.states, ..TaggedGraph::default() };
    for x in 1..=tags {
        let xi = usize::from(x);
        g.nodes.extend(merged.nodes[xi].iter().map(|b| (dags.port_of_bit(b), x)));
        for hop in merged.used[xi].iter() {
            let (p, e) = dags.ports_of(hop);
            let p2 = t.peer_port(e).expect("a hop between switches");
            g.edges.push(((p, x), (p2, table[hop * width + xi])));
        }
    }
    g.nodes.sort_unstable();
    g.edges.sort_unstable();
    acyclic_per_tag(t, &g)?;
    let tags_used = (1..=tags).filter(|&x| merged.nodes[usize::from(x)].iter().next().is_some()).count() as u8;
    Ok(Report { states: g.states, nodes: g.nodes.len(), edges: g.edges.len(), tags_used })
}

/// The rewrite rules as [`TaggedGraph::build`] reads them, and the ones it used. Where
/// a table of a byte per hop (an ingress and an egress port of one switch) and tag is no
/// larger than a few bytes per rule, the rules are read from it and each one used is a
/// bit: a k=64 fat-tree's 34 million rules were a hash lookup per hop of every route
/// state and its 27 million edges a hash set, 19 s of its verification. Elsewhere (few
/// rules among many ports) the rules stay in their map and the edges in a set.
enum RuleIndex<'s> {
    Dense(Dense<'s>),
    Sparse { rules: &'s crate::algo::Rules, edges: FxHashSet<((PortId, u8), (PortId, u8))> },
}

struct Dense<'s> {
    t: &'s Topology,
    hops: Numbering<'s>,
    width: usize,
    table: Vec<u8>,
    used: BitSet,
}

const NO_RULE: u8 = u8::MAX;

/// `sys`'s rewrite rules as a table of a byte per hop (by `hops`'s numbers) and tag,
/// [`NO_RULE`] where there is none; a rule between ports of two switches, or for a tag
/// past the system's, is on no hop and left out.
fn rule_table(hops: &Numbering<'_>, sys: &TagSystem) -> Vec<u8> {
    let width = usize::from(sys.tags) + 1;
    let mut table = vec![NO_RULE; hops.hops() * width];
    for (&(p, x, e), &y) in &sys.rewrite {
        if let Some(hop) = hops.hop_of(p, e).filter(|_| x <= sys.tags) {
            table[hop * width + usize::from(x)] = y;
        }
    }
    table
}

impl Dense<'_> {
    /// Where rule (`p`, `tag`, `e`) lies in the table: none for ports of two switches,
    /// or a tag past the system's.
    fn key(&self, p: PortId, tag: u8, e: PortId) -> Option<usize> {
        let hop = self.hops.hop_of(p, e).filter(|_| usize::from(tag) < self.width)?;
        Some(hop * self.width + usize::from(tag))
    }

    /// The rule of a key: (ingress, tag, egress).
    fn rule(&self, k: usize) -> (PortId, u8, PortId) {
        let (p, e) = self.hops.ports_of(k / self.width);
        (p, (k % self.width) as u8, e)
    }
}

impl<'s> RuleIndex<'s> {
    fn new(t: &'s Topology, sys: &'s TagSystem) -> RuleIndex<'s> {
        let width = usize::from(sys.tags) + 1;
        let small = |hops: &Numbering<'_>| {
            hops.hops().saturating_mul(width) <= (1 << 24).max(sys.rewrite.len().saturating_mul(4))
        };
        match Numbering::new(t) {
            Ok(hops) if small(&hops) => {
                let (table, used) = (rule_table(&hops, sys), BitSet::new(hops.hops() * width));
                RuleIndex::Dense(Dense { t, hops, width, table, used })
            }
            _ => RuleIndex::sparse(sys),
        }
    }

    fn sparse(sys: &'s TagSystem) -> RuleIndex<'s> {
        RuleIndex::Sparse { rules: &sys.rewrite, edges: FxHashSet::default() }
    }

    fn get(&self, p: PortId, tag: u8, e: PortId) -> Option<u8> {
        match self {
            RuleIndex::Sparse { rules, .. } => rules.get(&(p, tag, e)).copied(),
            RuleIndex::Dense(d) => d.key(p, tag, e).map(|k| d.table[k]).filter(|&y| y != NO_RULE),
        }
    }

    /// A packet at `p` with `tag` left by `e` for `p2` with tag `to`, by its rule.
    fn used(&mut self, p: PortId, tag: u8, e: PortId, p2: PortId, to: u8) {
        match self {
            RuleIndex::Sparse { edges, .. } => {
                edges.insert(((p, tag), (p2, to)));
            }
            RuleIndex::Dense(d) => {
                if let Some(k) = d.key(p, tag, e) {
                    d.used.insert(k);
                }
            }
        }
    }

    /// The tagged graph's edges: one for each rule used toward a switch, sorted.
    fn edges(self) -> Vec<((PortId, u8), (PortId, u8))> {
        let mut edges: Vec<_> = match self {
            RuleIndex::Sparse { edges, .. } => edges.into_iter().collect(),
            RuleIndex::Dense(d) => d
                .used
                .iter()
                .map(|k| {
                    let (p, tag, e) = d.rule(k);
                    let p2 = d.t.peer_port(e).expect("a rule used toward a switch");
                    ((p, tag), (p2, d.table[k]))
                })
                .collect(),
        };
        edges.sort_unstable();
        edges
    }
}

/// The tables as [`verify_on`] reads them, a mask at a time: per egress port and tag,
/// masks of the ingress ports of its switch (64 to a mask) by what their rule does
/// ([`Rule`]); per switch and tag, the ports with a lossless queue. A walk checks a
/// switch's ports with one tag at once against them, where it read a byte of the table
/// per port and way.
struct Masks {
    tags: usize,
    chunks: usize,
    rules: Vec<Rule>,
    queued: Vec<u64>,
}

/// The ingress ports whose rule, for one egress port and tag x, sends a packet on
/// with x (`same`) or with x − 1 (`down`: what greedy's and brute force's demoted hops
/// do): for the others, a walk reads the table, which says whether their rule lowers the
/// tag further or is missing, lossy or rising. Side by side, as a walk reads them.
#[derive(Clone, Copy, Default)]
struct Rule {
    same: u64,
    down: u64,
}

impl Masks {
    /// From the table of rules (a byte per hop and tag, `u8::MAX` for none) and which
    /// (port, tag) has a lossless queue.
    fn new(dags: &Dags<'_>, sys: &TagSystem, table: &[u8], queued: &[bool]) -> Masks {
        let t = dags.t;
        let tags = usize::from(sys.tags);
        let width = tags + 1;
        let chunks = t.switches.iter().map(|s| s.ports.len().div_ceil(64)).max().unwrap_or(0).max(1);
        let bits = dags.bits();
        let mut m =
            Masks { tags, chunks, rules: vec![Rule::default(); bits * chunks * tags], queued: vec![0; bits * tags] };
        for (a, s) in t.switches.iter().enumerate() {
            let base = dags.bit(a as SwitchId, 0);
            for (i, &p) in s.ports.iter().enumerate() {
                let (c, bit) = (i / 64 * 64, 1u64 << (i % 64));
                for x in 1..=tags {
                    if queued[p as usize * width + x] {
                        let k = m.queued_at(base, c, x);
                        m.queued[k] |= bit;
                    }
                    for j in 0..s.ports.len() {
                        let y = usize::from(table[dags.hop(a as SwitchId, i, j) * width + x]);
                        let k = m.at(base + j, c, x);
                        let r = &mut m.rules[k];
                        if y == x {
                            r.same |= bit;
                        }
                        if y + 1 == x && y != usize::from(LOSSY_TAG) {
                            r.down |= bit;
                        }
                    }
                }
            }
        }
        m
    }

    fn at(&self, egress: usize, c: usize, x: usize) -> usize {
        (egress * self.chunks + c / 64) * self.tags + x - 1
    }

    fn queued_at(&self, base: usize, c: usize, x: usize) -> usize {
        (base + c / 64) * self.tags + x - 1
    }

    /// The ports `c..c + 64` of the switch whose ports' bits begin at `base` that have a
    /// lossless queue for tag `x`.
    fn queued(&self, base: usize, c: usize, x: u8) -> u64 {
        self.queued[self.queued_at(base, c, usize::from(x))]
    }

    /// What the rules for tag `x` out of the port with bit `egress` do with ingress ports
    /// `c..c + 64`.
    fn rule(&self, egress: usize, c: usize, x: u8) -> Rule {
        self.rules[self.at(egress, c, usize::from(x))]
    }
}

/// The initial tag must be a lossless tag of the system.
fn lossless_start(sys: &TagSystem) -> Result<(), Violation> {
    if sys.initial_tag == LOSSY_TAG || sys.initial_tag > sys.tags {
        return Err(Violation::BadInitialTag(sys.initial_tag));
    }
    Ok(())
}

/// The tag a packet with tag `from` leaves a hop with, by the hop's `rule` (none: the
/// table has no rule for it): a lossless tag no higher than `from`. `route` and `egress`
/// name the hop in the violation otherwise.
fn next_tag(
    sys: &TagSystem,
    from: u8,
    rule: Option<u8>,
    route: impl FnOnce() -> TaggedRoute,
    egress: impl FnOnce() -> String,
) -> Result<u8, Violation> {
    let Some(to) = rule else {
        return Err(Violation::Unmapped { route: route(), egress: egress() });
    };
    if to == LOSSY_TAG || to > sys.tags {
        return Err(Violation::Lossy { route: route(), egress: egress(), to });
    }
    if to > from {
        return Err(Violation::NotMonotonic { route: route(), egress: egress(), from, to });
    }
    Ok(to)
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
        Self::build_with(t, m, sys, RuleIndex::new(t, sys))
    }

    fn build_with(
        t: &Topology,
        m: &dyn RouteModel,
        sys: &TagSystem,
        mut rules: RuleIndex<'_>,
    ) -> Result<TaggedGraph, Violation> {
        lossless_start(sys)?;
        let width = sys.tags as usize + 1;
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
        let mut nodes = BitSet::new(t.ports.len() * width);
        let (mut succ, mut deliver) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < walk.len() {
            let (s, tag, _) = walk[i];
            let p = m.port(s);
            if sys.queue.get(&(p, tag)).is_none_or(|&prio| prio == sys.lossy_priority) {
                return Err(Violation::NoQueue { route: route(&walk, i as u32), port: t.port_label(p), tag });
            }
            nodes.insert(p as usize * width + usize::from(tag));
            let mut hop = |egress: PortId, next: Option<(State, PortId)>, walk: &mut Vec<(State, u8, u32)>| {
                let rule = rules.get(p, tag, egress);
                let to = next_tag(sys, tag, rule, || route(walk, i as u32), || t.port_label(egress))?;
                if let Some((s2, p2)) = next {
                    rules.used(p, tag, egress, p2, to);
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
        let nodes: Vec<(PortId, u8)> = nodes.iter().map(|k| ((k / width) as PortId, (k % width) as u8)).collect();
        let edges = rules.edges();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::Algorithm;
    use crate::routes::RouteSpec;
    use crate::topology::generate::Generator;

    fn system(spec: &str, algorithm: Algorithm) -> (Topology, TagSystem) {
        let t = spec.parse::<Generator>().unwrap().build().unwrap();
        let tagging = algorithm.run(&t, RouteSpec::Shortest.model(&t).unwrap().as_ref()).unwrap();
        let sys = TagSystem::queue_per_tag(&t, &tagging);
        (t, sys)
    }

    #[test]
    fn the_streaming_verifier_reports_what_the_whole_model_s_verifier_reports() {
        for spec in ["ring:n=8", "mesh:n=5", "bcube:n=3,k=2", "jellyfish:switches=80,degree=5,hosts=2"] {
            for algorithm in [Algorithm::Greedy, Algorithm::BruteForce] {
                let (t, sys) = system(spec, algorithm);
                let m = RouteSpec::Shortest.model(&t).unwrap();
                let whole = verify(&t, m.as_ref(), &sys).unwrap();
                for threads in [1, 2] {
                    assert_eq!(verify_shortest(&t, &sys, threads).unwrap(), whole, "{spec}, {algorithm}");
                }
            }
        }
    }

    #[test]
    fn the_tagged_graph_is_the_same_from_the_rules_table_as_from_their_map() {
        for spec in ["fattree:k=4", "ring:n=8", "bcube:n=3,k=2", "jellyfish:switches=80,degree=5,hosts=2"] {
            for algorithm in [Algorithm::Greedy, Algorithm::BruteForce] {
                let (t, sys) = system(spec, algorithm);
                let m = RouteSpec::Shortest.model(&t).unwrap();
                // As computed, one rule lowered by two, and one rule gone.
                let mut lowered = sys.clone();
                if let Some(key) = sys.rewrite.keys().copied().filter(|&(_, x, _)| x >= 3).min() {
                    lowered.rewrite.insert(key, key.1 - 2);
                }
                let mut missing = sys.clone();
                missing.rewrite.remove(&sys.rewrite.keys().copied().max().unwrap());
                for s in [&sys, &lowered, &missing] {
                    let dense = TaggedGraph::build(&t, m.as_ref(), s);
                    assert!(matches!(RuleIndex::new(&t, s), RuleIndex::Dense(_)));
                    assert_eq!(dense, TaggedGraph::build_with(&t, m.as_ref(), s, RuleIndex::sparse(s)), "{spec}");
                }
            }
        }
    }

    #[test]
    fn a_rule_that_lowers_the_tag_by_two_is_followed_as_the_whole_model_s_verifier_follows_it() {
        let (t, sys) = system("jellyfish:switches=80,degree=5,hosts=2", Algorithm::BruteForce);
        assert!(sys.tags >= 3);
        let m = RouteSpec::Shortest.model(&t).unwrap();
        let mut keys: Vec<_> = sys.rewrite.keys().copied().filter(|&(_, x, _)| x >= 3).collect();
        keys.sort_unstable();
        let (mut passed, mut failed) = (0, 0);
        for &key in keys.iter().step_by(keys.len() / 12 + 1) {
            let mut lowered = sys.clone();
            lowered.rewrite.insert(key, key.1 - 2);
            let (whole, streamed) = (verify(&t, m.as_ref(), &lowered), verify_shortest(&t, &lowered, 2));
            match (whole, streamed) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a, b, "{key:?}");
                    passed += 1;
                }
                (Err(_), Err(_)) => failed += 1,
                (a, b) => panic!("{key:?}: the whole model's verifier says {a:?}, the streaming one {b:?}"),
            }
        }
        assert!(passed > 0 && failed > 0, "{passed} passed, {failed} failed");
    }

    #[test]
    fn the_streaming_verifier_finds_a_missing_rule_a_rising_tag_and_a_cycle() {
        let (t, sys) = system("ring:n=6", Algorithm::Greedy);
        let mut missing = sys.clone();
        let key = *missing.rewrite.keys().min().unwrap();
        missing.rewrite.remove(&key);
        assert!(matches!(verify_shortest(&t, &missing, 1), Err(Violation::Unmapped { .. })));
        let mut rising = sys.clone();
        let (&key, _) = rising.rewrite.iter().filter(|(k, _)| k.1 < sys.tags).min().unwrap();
        rising.rewrite.insert(key, sys.tags);
        assert!(matches!(verify_shortest(&t, &rising, 1), Err(Violation::NotMonotonic { .. })));
        // Every hop in one tag: the ring's routes chase each other round it.
        let mut one = sys.clone();
        for v in one.rewrite.values_mut() {
            *v = sys.tags;
        }
        assert!(matches!(verify_shortest(&t, &one, 2), Err(Violation::Cycle { .. })));
    }
}
