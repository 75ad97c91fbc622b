//! The routes of `--routes shortest` as one DAG per destination: toward a switch with
//! hosts, every switch forwards to each neighbour one hop closer. Walked a destination
//! at a time, farthest switch first, they cover every shortest route without ever
//! holding the routes' states (an ingress port and a destination: 9×10⁸ for a Jellyfish
//! of 10 000 switches), for the streaming greedy ([`crate::algo::stream`]) and the
//! streaming verifier ([`crate::verify::verify_shortest`]) alike.
//!
//! A *hop* is an ingress and an egress port of one switch, numbered densely per switch,
//! egress by egress (the hops out of one port from each of the switch's ports are
//! consecutive, so that a walk marks them with one mask): what those two keep across
//! destinations is a bit or a byte per hop.

use crate::bits::{bits_at, has, set, BitSet};
use crate::threads::in_pool;
use crate::topology::{Distances, PortId, SwitchId, Topology};

/// The shortest-route DAGs of a topology, toward each switch with hosts.
pub(crate) struct Dags<'t> {
    pub(crate) t: &'t Topology,
    dist: Distances,
    /// The destinations: switches with hosts.
    pub(crate) dests: Vec<SwitchId>,
    /// Per switch: where its hops are numbered from.
    first: Vec<u32>,
    /// Per port: its place among its switch's ports.
    slot: Vec<u16>,
    /// Per switch: where its ports' bits begin. A walk's sets of ports (where routes
    /// enter, where they wait) have a bit per port with each switch's side by side: by
    /// port number, a Jellyfish switch's ports lie wherever its links were drawn, and a
    /// walk read a word far from the others for each of them, at every switch of every
    /// destination.
    bit_at: Vec<u32>,
    hops: usize,
    /// Per switch (from `link_at[s]` to `link_at[s + 1]`): its links to switches, as
    /// the egress port's place, the next switch's ingress port and that switch. The
    /// walks read these for every switch of every destination; read from the ports
    /// (large records, scattered), they were most of a walk's time.
    link_at: Vec<u32>,
    links: Vec<Link>,
    /// Per destination (from `host_at[d]` to `host_at[d + 1]`): its ports facing hosts,
    /// as their place among its ports and the port. Every destination's routes start
    /// at every other's (read 10⁸ times at 10 000 switches).
    host_at: Vec<u32>,
    hosts: Vec<(u16, u32)>,
}

/// The ways on from a switch toward a destination ([`Walker::onward`]): the egress
/// port's place among the switch's ports, and the next switch's ingress port's bit (none
/// for a delivery).
pub(crate) type Ways = Vec<(usize, Option<u32>)>;

/// A link from a switch: its egress port's place among the switch's ports, and the port
/// and switch at the other end.
#[derive(Clone, Copy)]
pub(crate) struct Link {
    pub(crate) slot: u16,
    pub(crate) next: PortId,
    pub(crate) to: SwitchId,
    /// `next`'s bit ([`Dags::bit`]).
    pub(crate) bit: u32,
}

impl<'t> Dags<'t> {
    /// The distances between switches are found over `threads` threads.
    pub(crate) fn new(t: &'t Topology, threads: usize) -> Result<Dags<'t>, crate::topology::TopologyError> {
        let dist = t.distances_over(threads)?;
        let dests = (0..t.switches.len() as SwitchId).filter(|&s| t.has_hosts(s)).collect();
        let mut first = Vec::with_capacity(t.switches.len());
        let mut slot = vec![0u16; t.ports.len()];
        let mut bit_at = Vec::with_capacity(t.switches.len());
        let mut hops = 0usize;
        let mut bits = 0u32;
        for s in &t.switches {
            first.push(hops as u32);
            bit_at.push(bits);
            for (i, &p) in s.ports.iter().enumerate() {
                slot[p as usize] = i as u16;
            }
            hops += s.ports.len() * s.ports.len();
            bits += s.ports.len() as u32;
        }
        let bit = |p: PortId| bit_at[t.switch_of(p) as usize] + u32::from(slot[p as usize]);
        let (mut link_at, mut links) = (vec![0u32], Vec::new());
        for s in &t.switches {
            for (i, &p) in s.ports.iter().enumerate() {
                if let Some(next) = t.peer_port(p) {
                    links.push(Link { slot: i as u16, next, to: t.switch_of(next), bit: bit(next) });
                }
            }
            link_at.push(links.len() as u32);
        }
        let (mut host_at, mut hosts) = (vec![0u32], Vec::new());
        for &d in &dests {
            let ports = t.switches[d as usize].ports.iter().enumerate();
            hosts.extend(ports.filter(|&(_, &p)| t.faces_host(p)).map(|(i, &p)| (i as u16, bit(p))));
            host_at.push(hosts.len() as u32);
        }
        Ok(Dags { t, dist, dests, first, slot, bit_at, hops, link_at, links, host_at, hosts })
    }

    /// The bit of the port in place `i` of switch `a` in a walk's sets of ports.
    pub(crate) fn bit(&self, a: SwitchId, i: usize) -> usize {
        self.bit_at[a as usize] as usize + i
    }

    /// Destination `d`'s ports facing hosts (its index among the destinations).
    fn hosts_of(&self, d: usize) -> &[(u16, u32)] {
        &self.hosts[self.host_at[d] as usize..self.host_at[d + 1] as usize]
    }

    /// The links from switch `a` to other switches.
    pub(crate) fn links(&self, a: SwitchId) -> &[Link] {
        &self.links[self.link_at[a as usize] as usize..self.link_at[a as usize + 1] as usize]
    }

    /// How many (ingress, egress) port pairs the switches have.
    pub(crate) fn hops(&self) -> usize {
        self.hops
    }

    /// The hop from the port in place `i` out of the port in place `j` of switch `a`.
    pub(crate) fn hop(&self, a: SwitchId, i: usize, j: usize) -> usize {
        self.first[a as usize] as usize + j * self.t.switches[a as usize].ports.len() + i
    }

    /// The hop from ingress `p` out of egress `e` (ports of one switch).
    pub(crate) fn key(&self, p: PortId, e: PortId) -> usize {
        let (i, j) = (self.slot[p as usize], self.slot[e as usize]);
        self.hop(self.t.switch_of(p), usize::from(i), usize::from(j))
    }

    /// The ingress and egress port of a hop.
    pub(crate) fn ports_of(&self, hop: usize) -> (PortId, PortId) {
        let a = self.first.partition_point(|&f| f as usize <= hop) - 1;
        let ports = &self.t.switches[a].ports;
        let k = hop - self.first[a] as usize;
        (ports[k % ports.len()], ports[k / ports.len()])
    }

    /// A hop between switches as (ingress port, the next switch's ingress port).
    pub(crate) fn pair(&self, hop: usize) -> (PortId, PortId) {
        let (p, e) = self.ports_of(hop);
        (p, self.t.peer_port(e).expect("a candidate hop leads to a switch"))
    }

    /// Runs `f` for every destination (its index), over `threads` threads, each with a
    /// walker of its own; returns the union of the hops they found.
    pub(crate) fn pass(
        &self,
        threads: usize,
        f: impl Fn(&mut Walker<'_, 't>, usize, &mut Vec<u64>, &mut BitSet) + Sync,
    ) -> BitSet {
        self.pass_into(threads, &mut [], 0, |w, d, bits, _, found| f(w, d, bits, found))
    }

    /// As [`Dags::pass`], with a slice of `out` (`words` a destination) for each
    /// destination's own result.
    pub(crate) fn pass_into<'d>(
        &'d self,
        threads: usize,
        out: &mut [u64],
        words: usize,
        f: impl Fn(&mut Walker<'_, 't>, usize, &mut Vec<u64>, &mut [u64], &mut BitSet) + Sync,
    ) -> BitSet {
        use rayon::prelude::*;
        let n = self.dests.len();
        // Each of rayon's pieces of work walks with scratch space of its own (`fold`), and
        // their hops meet by union: the same for any split, any number of threads.
        let scratch = || (Walker::new(self), Vec::new(), BitSet::new(self.hops));
        let walk = |(mut w, mut bits, mut found): (Walker<'d, 't>, Vec<u64>, BitSet),
                    (d, mine): (usize, &mut [u64])| {
            f(&mut w, d, &mut bits, mine, &mut found);
            (w, bits, found)
        };
        let union = |mut a: BitSet, b: BitSet| {
            a.union(&b);
            a
        };
        in_pool(threads, || {
            if words == 0 {
                (0..n)
                    .into_par_iter()
                    .map(|d| (d, &mut [][..]))
                    .fold(scratch, walk)
                    .map(|(_, _, f)| f)
                    .reduce(|| BitSet::new(self.hops), union)
            } else {
                out.par_chunks_mut(words)
                    .enumerate()
                    .fold(scratch, walk)
                    .map(|(_, _, f)| f)
                    .reduce(|| BitSet::new(self.hops), union)
            }
        })
    }

    /// Each port's depth: the latest hop (0: entering) at which it is an ingress on some
    /// route ([`super::greedy`]'s `port_depth`).
    pub(crate) fn depth(&self, threads: usize) -> Vec<u16> {
        use rayon::prelude::*;
        let ports = self.t.ports.len();
        in_pool(threads, || {
            (0..self.dests.len())
                .into_par_iter()
                .fold(
                    || (Walker::new(self), vec![0u16; ports]),
                    |(mut w, mut depth), d| {
                        w.levels(d, &mut depth);
                        (w, depth)
                    },
                )
                .map(|(_, depth)| depth)
                .reduce(
                    || vec![0u16; ports],
                    |mut a, b| {
                        for (x, y) in a.iter_mut().zip(b) {
                            *x = (*x).max(y);
                        }
                        a
                    },
                )
        })
    }
}

/// One thread's scratch space for walking destinations' DAGs.
pub(crate) struct Walker<'d, 't> {
    dags: &'d Dags<'t>,
    /// The reachable switches toward the destination, farthest first.
    pub(crate) order: Vec<SwitchId>,
    /// Per switch: its latest hop on any route toward the destination (`u16::MAX`: none).
    level: Vec<u16>,
    /// The ports where routes start (for the levels).
    starts: Vec<u64>,
}

impl<'d, 't> Walker<'d, 't> {
    pub(crate) fn new(dags: &'d Dags<'t>) -> Walker<'d, 't> {
        let words = dags.t.ports.len().div_ceil(64);
        Walker { dags, order: Vec::new(), level: vec![u16::MAX; dags.t.switches.len()], starts: vec![0; words] }
    }

    /// Orders the switches that reach destination `d` (its index), farthest first.
    pub(crate) fn order(&mut self, d: usize) {
        let row = self.dags.dist.row(self.dags.dests[d]);
        let mut count = [0u32; 256];
        for &x in row {
            count[x as usize] += 1;
        }
        // Farthest first: start each distance's run after every farther one's.
        let mut at = [0u32; 256];
        let mut sum = 0;
        for x in (0..255).rev() {
            at[x] = sum;
            sum += count[x];
        }
        self.order.clear();
        self.order.resize(sum as usize, 0);
        for (s, &x) in row.iter().enumerate() {
            if x != u8::MAX {
                self.order[at[x as usize] as usize] = s as SwitchId;
                at[x as usize] += 1;
            }
        }
    }

    /// The host ports where routes toward `d` start: every host port of a switch that
    /// reaches it, and of `d` itself when it has another host to deliver to.
    pub(crate) fn starts(&self, d: usize, bits: &mut [u64]) {
        let dest = self.dags.dests[d];
        let row = self.dags.dist.row(dest);
        for (k, &a) in self.dags.dests.iter().enumerate() {
            let hosts = self.dags.hosts_of(k);
            if row[a as usize] == u8::MAX || (a == dest && hosts.len() < 2) {
                continue;
            }
            for &(_, b) in hosts {
                set(bits, b as usize);
            }
        }
    }

    /// Sets `bits` (cleared) to where the current group's routes toward `d` enter it:
    /// `entries`' slice for `d`, or the starts for group 0.
    pub(crate) fn enter(&mut self, d: usize, entries: Option<&[u64]>, words: usize, bits: &mut Vec<u64>) {
        bits.clear();
        bits.resize(words, 0);
        match entries {
            Some(e) => bits.copy_from_slice(&e[d * words..(d + 1) * words]),
            None => self.starts(d, bits),
        }
        self.order(d);
    }

    /// The ways on from switch `a` toward destination `d`, each as its egress port's
    /// place among `a`'s ports and, for a link, the next switch's ingress port: at `d`,
    /// a delivery out of each port facing a host (`None`); elsewhere, each link to a
    /// switch one hop closer. Into `out`, emptied first.
    pub(crate) fn onward(&self, d: usize, a: SwitchId, out: &mut Ways) {
        out.clear();
        if a == self.dags.dests[d] {
            out.extend(self.dags.hosts_of(d).iter().map(|&(j, _)| (usize::from(j), None)));
            return;
        }
        out.extend(self.closer(d, a).map(|l| (usize::from(l.slot), Some(l.bit))));
    }

    /// The links from switch `a` (not `d` itself) to a switch one hop closer to
    /// destination `d`: where its shortest routes toward `d` go on.
    fn closer(&self, d: usize, a: SwitchId) -> impl Iterator<Item = &'d Link> + 'd {
        let row = self.dags.dist.row(self.dags.dests[d]);
        let closer = row[a as usize] - 1;
        self.dags.links(a).iter().filter(move |l| row[l.to as usize] == closer)
    }

    /// Walks the routes toward `d` from the ingress ports in `bits`, farthest switch
    /// first, a switch's ingress ports at a time. For each way on from a switch with
    /// ingress ports in the group, `hops(base, ins, next)` is told of the hops out of
    /// the way's egress port from the ingress ports in `ins`, a mask whose bit `b` is the
    /// hop `base + b` (a switch with more than 64 ports takes a call per 64), and `next`,
    /// the next port's bit, or `None` for a delivery (never back out of the port it came
    /// in by). The hops of the mask it returns go on in the group: when there are any and
    /// the way leads to a switch, its next port joins `bits`.
    pub(crate) fn walk(&self, d: usize, bits: &mut [u64], mut hops: impl FnMut(usize, u64, Option<u32>) -> u64) {
        let t = self.dags.t;
        // The switch's ingress ports in the group, 64 places a mask, and its ways on.
        let (mut ins, mut ways) = (Vec::new(), Vec::new());
        for &a in &self.order {
            let n = t.switches[a as usize].ports.len();
            let at = self.dags.bit(a, 0);
            ins.clear();
            ins.extend((0..n).step_by(64).map(|c| bits_at(bits, at + c, (n - c).min(64))));
            if ins.iter().all(|&m| m == 0) {
                continue;
            }
            self.onward(d, a, &mut ways);
            for &(j, next) in &ways {
                let mut on = 0;
                for (k, &mask) in ins.iter().enumerate() {
                    let c = k * 64;
                    let own = if next.is_none() && (c..c + 64).contains(&j) { 1 << (j - c) } else { 0 };
                    if mask & !own != 0 {
                        on |= hops(self.dags.hop(a, c, j), mask & !own, next);
                    }
                }
                if on != 0 {
                    if let Some(p2) = next {
                        set(bits, p2 as usize);
                    }
                }
            }
        }
    }

    /// Raises `depth` to the hop at which each port is an ingress on a route toward `d`.
    fn levels(&mut self, d: usize, depth: &mut [u16]) {
        let t = self.dags.t;
        let dest = self.dags.dests[d];
        let mut starts = std::mem::take(&mut self.starts);
        starts.fill(0);
        self.starts(d, &mut starts);
        self.order(d);
        for &a in &self.order {
            self.level[a as usize] = u16::MAX;
        }
        for &a in &self.order {
            let ports = &t.switches[a as usize].ports;
            if self.level[a as usize] == u16::MAX && (0..ports.len()).any(|i| has(&starts, self.dags.bit(a, i))) {
                self.level[a as usize] = 0;
            }
            let here = self.level[a as usize];
            if here == u16::MAX || a == dest {
                continue;
            }
            for link in self.closer(d, a) {
                let (p2, b) = (link.next, link.to as usize);
                let l = here.saturating_add(1);
                depth[p2 as usize] = depth[p2 as usize].max(l);
                self.level[b] = if self.level[b] == u16::MAX { l } else { self.level[b].max(l) };
            }
        }
        self.starts = starts;
    }
}
