//! The routes of `--routes shortest` as one DAG per destination: toward a switch with
//! hosts, every switch forwards to each neighbour one hop closer. Walked a destination
//! at a time, farthest switch first, they cover every shortest route without ever
//! holding the routes' states (an ingress port and a destination: 9×10⁸ for a Jellyfish
//! of 10 000 switches), for the streaming greedy ([`crate::algo::stream`]) and the
//! streaming verifier ([`crate::verify::verify_shortest`]) alike.
//!
//! A *hop* is an ingress and an egress port of one switch (`Numbering`): what those
//! two keep across destinations is a bit or a byte per hop.

use crate::bits::{bits_at, set, BitSet};
use crate::threads::in_pool;
use crate::topology::{Distances, PortId, SwitchId, Topology};

/// The shortest-route DAGs of a topology, toward each switch with hosts.
pub(crate) struct Dags<'t> {
    pub(crate) t: &'t Topology,
    dist: Distances,
    /// The destinations: switches with hosts.
    pub(crate) dests: Vec<SwitchId>,
    /// How hops and ports are numbered ([`Numbering`], which a `Dags` derefs to).
    numbering: Numbering<'t>,
    /// The links of each switch to other switches, switch by switch (from its
    /// [`Place`]'s `link`).
    /// The walks read these for every switch of every destination; read from the ports
    /// (large records, scattered), they were most of a walk's time.
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

/// `L` sets of ports walked at once ([`Walker::walk`]), a bit per port as [`Numbering::bit`]
/// numbers them.
pub(crate) type Layers<const L: usize> = [Vec<u64>; L];

/// Where a switch's numbers begin, in one record: a walk reads them all at every switch
/// of every destination, where four arrays took four reads from four places.
#[derive(Clone, Copy)]
struct Place {
    /// Its first hop (hops are numbered switch by switch).
    hop: u32,
    /// Its first port's bit. A walk's sets of ports (where routes enter, where they wait)
    /// have a bit per port with each switch's side by side: by port number, a Jellyfish
    /// switch's ports lie wherever its links were drawn, and a walk read a word far from
    /// the others for each of them, at every switch of every destination.
    bit: u32,
    /// Its first link in [`Dags::links`].
    link: u32,
    ports: u16,
    links: u16,
}

/// A link from a switch: its egress port's place among the switch's ports, and the port
/// and switch at the other end.
#[derive(Clone, Copy)]
pub(crate) struct Link {
    pub(crate) slot: u16,
    pub(crate) next: PortId,
    pub(crate) to: SwitchId,
    /// `next`'s bit ([`Numbering::bit`]).
    pub(crate) bit: u32,
}

impl<'t> Dags<'t> {
    /// The distances between switches are found over `threads` threads.
    pub(crate) fn new(t: &'t Topology, threads: usize) -> Result<Dags<'t>, crate::topology::TopologyError> {
        let dist = t.distances_over(threads)?;
        let dests = (0..t.switches.len() as SwitchId).filter(|&s| t.has_hosts(s)).collect();
        let mut numbering = Numbering::new(t)?;
        let bit = |p: PortId| numbering.bit_of_port(p) as u32;
        let (mut links, mut at) = (Vec::new(), Vec::with_capacity(t.switches.len()));
        for s in &t.switches {
            let first = links.len();
            for (i, &p) in s.ports.iter().enumerate() {
                if let Some(next) = t.peer_port(p) {
                    links.push(Link { slot: i as u16, next, to: t.switch_of(next), bit: bit(next) });
                }
            }
            at.push((first as u32, (links.len() - first) as u16));
        }
        let (mut host_at, mut hosts) = (vec![0u32], Vec::new());
        for &d in &dests {
            let ports = t.switches[d as usize].ports.iter().enumerate();
            hosts.extend(ports.filter(|&(_, &p)| t.faces_host(p)).map(|(i, &p)| (i as u16, bit(p))));
            host_at.push(hosts.len() as u32);
        }
        for (place, (link, count)) in numbering.places.iter_mut().zip(at) {
            (place.link, place.links) = (link, count);
        }
        Ok(Dags { t, dist, dests, numbering, links, host_at, hosts })
    }

    /// Destination `d`'s ports facing hosts (its index among the destinations).
    fn hosts_of(&self, d: usize) -> &[(u16, u32)] {
        &self.hosts[self.host_at[d] as usize..self.host_at[d + 1] as usize]
    }

    /// The links from switch `a` to other switches.
    pub(crate) fn links(&self, a: SwitchId) -> &[Link] {
        let p = self.numbering.places[a as usize];
        &self.links[p.link as usize..p.link as usize + usize::from(p.links)]
    }

    /// A hop between switches as (ingress port, the next switch's ingress port).
    pub(crate) fn pair(&self, hop: usize) -> (PortId, PortId) {
        let (p, e) = self.ports_of(hop);
        (p, self.t.peer_port(e).expect("a candidate hop leads to a switch"))
    }

    /// Runs `f` for every destination (its index), over `threads` threads, each with a
    /// walker, `L` sets of ports and a slice of `out` (`words` a destination) of its own;
    /// returns the union of the `L` sets of hops they found.
    pub(crate) fn pass_into<const L: usize>(
        &self,
        threads: usize,
        out: &mut [u64],
        words: usize,
        f: impl Fn(&mut Walker<'_, 't>, usize, &mut Layers<L>, &mut [u64], &mut [BitSet; L]) + Sync,
    ) -> [BitSet; L] {
        let none = || std::array::from_fn(|_| BitSet::new(self.hops));
        let union = |mut a: [BitSet; L], b: [BitSet; L]| {
            for (x, y) in a.iter_mut().zip(&b) {
                x.union(y);
            }
            a
        };
        self.fold(threads, out, words, none, union, f)
    }

    /// Runs `f` for every destination over `threads` threads, each piece of rayon's work
    /// with a walker, `L` sets of ports and a result of its own (`zero()` to begin with),
    /// the results merged by `merge`: with a merge that is associative and commutative
    /// (union, maximum), the same for any split, any number of threads. `out` and `words`
    /// as in [`Dags::pass_into`].
    pub(crate) fn fold<'d, A: Send, const L: usize>(
        &'d self,
        threads: usize,
        out: &mut [u64],
        words: usize,
        zero: impl Fn() -> A + Sync + Send,
        merge: impl Fn(A, A) -> A + Sync + Send,
        f: impl Fn(&mut Walker<'_, 't>, usize, &mut Layers<L>, &mut [u64], &mut A) + Sync,
    ) -> A {
        use rayon::prelude::*;
        let n = self.dests.len();
        let scratch = || (Walker::new(self), std::array::from_fn(|_| Vec::new()), zero());
        let walk = |(mut w, mut bits, mut found): (Walker<'d, 't>, Layers<L>, A), (d, mine): (usize, &mut [u64])| {
            f(&mut w, d, &mut bits, mine, &mut found);
            (w, bits, found)
        };
        in_pool(threads, || {
            if words == 0 {
                (0..n)
                    .into_par_iter()
                    .map(|d| (d, &mut [][..]))
                    .fold(scratch, walk)
                    .map(|(_, _, f)| f)
                    .reduce(&zero, &merge)
            } else {
                out.par_chunks_mut(words).enumerate().fold(scratch, walk).map(|(_, _, f)| f).reduce(&zero, &merge)
            }
        })
    }
}

/// Hops (an ingress and an egress port of one switch) and ports numbered densely, switch
/// by switch: a switch's hops egress by egress (the hops out of one port from each of
/// its ports are consecutive, so that a walk marks them with one mask), and its ports'
/// bits side by side. What the walks keep across destinations is a bit or a byte per
/// hop; the whole model's verifier reads its table of rules by the same numbers.
pub(crate) struct Numbering<'t> {
    t: &'t Topology,
    /// Per switch: where its hops, its ports' bits and its links begin, side by side.
    places: Vec<Place>,
    /// Per port: its place among its switch's ports.
    slot: Vec<u16>,
    hops: usize,
}

impl<'t> Numbering<'t> {
    pub(crate) fn new(t: &'t Topology) -> Result<Numbering<'t>, crate::topology::TopologyError> {
        use crate::topology::TopologyError;
        let mut slot = vec![0u16; t.ports.len()];
        let mut places = Vec::with_capacity(t.switches.len());
        let (mut hops, mut bits) = (0usize, 0u32);
        for s in &t.switches {
            let ports = u16::try_from(s.ports.len()).map_err(|_| TopologyError::TooManyPorts(s.name.clone()))?;
            let hop = u32::try_from(hops).map_err(|_| TopologyError::TooManyHops(s.name.clone()))?;
            places.push(Place { hop, bit: bits, link: 0, ports, links: 0 });
            for (i, &p) in s.ports.iter().enumerate() {
                slot[p as usize] = i as u16;
            }
            hops += s.ports.len() * s.ports.len();
            bits += s.ports.len() as u32;
        }
        if u32::try_from(hops).is_err() {
            let last = t.switches.last().map_or(String::new(), |s| s.name.clone());
            return Err(TopologyError::TooManyHops(last));
        }
        Ok(Numbering { t, places, slot, hops })
    }

    /// The bit of the port in place `i` of switch `a` in a walk's sets of ports.
    pub(crate) fn bit(&self, a: SwitchId, i: usize) -> usize {
        self.places[a as usize].bit as usize + i
    }

    /// How many ports switch `a` has.
    pub(crate) fn ports(&self, a: SwitchId) -> usize {
        usize::from(self.places[a as usize].ports)
    }

    /// How many bits a walk's set of ports has: one per port of a switch.
    pub(crate) fn bits(&self) -> usize {
        self.places.last().map_or(0, |p| p.bit as usize + usize::from(p.ports))
    }

    /// The port of bit `b` ([`Numbering::bit`]).
    pub(crate) fn port_of_bit(&self, b: usize) -> PortId {
        let a = self.switch_of_bit(b);
        self.t.switches[a as usize].ports[b - self.places[a as usize].bit as usize]
    }

    /// The switch of bit `b`.
    pub(crate) fn switch_of_bit(&self, b: usize) -> SwitchId {
        (self.places.partition_point(|p| p.bit as usize <= b) - 1) as SwitchId
    }

    /// How many (ingress, egress) port pairs the switches have.
    pub(crate) fn hops(&self) -> usize {
        self.hops
    }

    /// The hop from the port in place `i` out of the port in place `j` of switch `a`.
    pub(crate) fn hop(&self, a: SwitchId, i: usize, j: usize) -> usize {
        let p = self.places[a as usize];
        p.hop as usize + j * usize::from(p.ports) + i
    }

    /// The hop from ingress `p` out of egress `e` (ports of one switch).
    pub(crate) fn key(&self, p: PortId, e: PortId) -> usize {
        let (i, j) = (self.slot[p as usize], self.slot[e as usize]);
        self.hop(self.t.switch_of(p), usize::from(i), usize::from(j))
    }

    /// The hop from `p` out of `e`, if they are ports of one switch.
    pub(crate) fn hop_of(&self, p: PortId, e: PortId) -> Option<usize> {
        (self.t.switch_of(p) == self.t.switch_of(e)).then(|| self.key(p, e))
    }

    /// The ingress and egress port of a hop.
    pub(crate) fn ports_of(&self, hop: usize) -> (PortId, PortId) {
        let a = self.places.partition_point(|p| p.hop as usize <= hop) - 1;
        let ports = &self.t.switches[a].ports;
        let k = hop - self.places[a].hop as usize;
        (ports[k % ports.len()], ports[k / ports.len()])
    }

    /// The bit of port `p` of a switch.
    pub(crate) fn bit_of_port(&self, p: PortId) -> usize {
        self.bit(self.t.switch_of(p), usize::from(self.slot[p as usize]))
    }
}

impl<'t> std::ops::Deref for Dags<'t> {
    type Target = Numbering<'t>;

    fn deref(&self) -> &Numbering<'t> {
        &self.numbering
    }
}

/// One thread's scratch space for walking destinations' DAGs.
pub(crate) struct Walker<'d, 't> {
    dags: &'d Dags<'t>,
    /// The reachable switches toward the destination, farthest first.
    pub(crate) order: Vec<SwitchId>,
    /// Per switch: its latest hop on any route toward the destination (`u16::MAX`: none).
    level: Vec<u16>,
    /// A walk that entered at a group's entries rather than at the starts visits only the
    /// switches its routes reach: those waiting, by their distance to the destination
    /// (farthest taken first), each once (`waiting`). After greedy's first groups, most
    /// destinations' routes reach few switches, and a walk over every switch read each
    /// one's ports for nothing.
    sparse: bool,
    by_distance: Vec<Vec<SwitchId>>,
    waiting: Vec<bool>,
}

impl<'d, 't> Walker<'d, 't> {
    pub(crate) fn new(dags: &'d Dags<'t>) -> Walker<'d, 't> {
        let n = dags.t.switches.len();
        Walker {
            dags,
            order: Vec::new(),
            level: vec![u16::MAX; n],
            sparse: false,
            by_distance: vec![Vec::new(); 256],
            waiting: vec![false; n],
        }
    }

    /// Switch `a` has routes toward `d` to walk: it waits for its turn, once.
    fn wait(&mut self, d: usize, a: SwitchId) {
        if !std::mem::replace(&mut self.waiting[a as usize], true) {
            let x = self.dags.dist.row(self.dags.dests[d])[a as usize];
            self.by_distance[usize::from(x)].push(a);
        }
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

    /// Sets the first of `layers` to where the current group's routes toward `d` enter
    /// it (`entries`' slice for `d`, or the starts for group 0) and clears the others.
    pub(crate) fn enter<const L: usize>(
        &mut self,
        d: usize,
        entries: Option<&[u64]>,
        words: usize,
        layers: &mut Layers<L>,
    ) {
        for bits in layers.iter_mut() {
            bits.clear();
            bits.resize(words, 0);
        }
        match entries {
            Some(e) => {
                layers[0].copy_from_slice(&e[d * words..(d + 1) * words]);
                self.sparse = true;
                for (w, &word) in layers[0].iter().enumerate() {
                    let mut bits = word;
                    while bits != 0 {
                        let b = w * 64 + bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        self.wait(d, self.dags.switch_of_bit(b));
                    }
                }
            }
            None => {
                self.starts(d, &mut layers[0]);
                self.sparse = false;
                self.order(d);
            }
        }
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

    /// Walks the routes toward `d` from the ingress ports in each of `layers`, farthest
    /// switch first, a switch's ingress ports at a time. For each way on from a switch
    /// with ingress ports in a layer, `hops(base, ins, next)` is told of the hops out of
    /// the way's egress port from the ingress ports in `ins`, a mask a layer whose bit
    /// `b` is the hop `base + b` (a switch with more than 64 ports takes a call per 64),
    /// and `next`, the next port's bit, or `None` for a delivery (never back out of the
    /// port it came in by). It returns a mask a layer: when one has any hop and the way
    /// leads to a switch, the next port joins that layer. Every layer's ports at a switch
    /// are known when the walk reaches it, since routes come to it only from farther
    /// switches: a hop may move a route from one layer to another.
    ///
    /// With `depth`, raises each port's depth to the latest hop at which it is an
    /// ingress on a route toward `d` from the first layer's ports, as greedy orders its
    /// nodes by: a switch's latest hop is the longest way to it from a switch where
    /// routes start, one more than its farther neighbours' (its level).
    pub(crate) fn walk<const L: usize>(
        &mut self,
        d: usize,
        layers: &mut Layers<L>,
        depth: Option<&mut [u16]>,
        mut hops: impl FnMut(usize, [u64; L], Option<u32>) -> [u64; L],
    ) {
        // Depths are of the routes from where they start: a walk entered at the starts.
        debug_assert!(depth.is_none() || !self.sparse, "depths from a group's entries");
        if depth.is_some() {
            for &a in &self.order {
                self.level[a as usize] = u16::MAX;
            }
        }
        if !self.sparse {
            let order = std::mem::take(&mut self.order);
            self.walk_in(d, &order, layers, depth, &mut hops);
            self.order = order;
            return;
        }
        for x in (0..self.by_distance.len()).rev() {
            let list = std::mem::take(&mut self.by_distance[x]);
            for &a in &list {
                self.waiting[a as usize] = false;
            }
            self.walk_in(d, &list, layers, None, &mut hops);
            self.by_distance[x] = list;
            self.by_distance[x].clear();
        }
    }

    /// Walks the switches of `order` (farthest first); in a sparse walk, those its
    /// routes go on to wait for their turn.
    fn walk_in<const L: usize>(
        &mut self,
        d: usize,
        order: &[SwitchId],
        layers: &mut Layers<L>,
        mut depth: Option<&mut [u16]>,
        hops: &mut impl FnMut(usize, [u64; L], Option<u32>) -> [u64; L],
    ) {
        // The switch's ingress ports in each layer, 64 places a mask, and its ways on.
        let (mut ins, mut ways): (Vec<[u64; L]>, Ways) = (Vec::new(), Vec::new());
        let dest = self.dags.dests[d];
        for &a in order {
            let n = self.dags.ports(a);
            let at = self.dags.bit(a, 0);
            ins.clear();
            let mut any = 0;
            for c in (0..n).step_by(64) {
                let masks = std::array::from_fn(|l| bits_at(&layers[l], at + c, (n - c).min(64)));
                any |= masks.iter().fold(0, |x, m| x | m);
                ins.push(masks);
            }
            if any == 0 {
                continue;
            }
            if let (Some(depth), false) = (depth.as_deref_mut(), a == dest) {
                // Reached from no farther switch, a switch is where routes start.
                let here = match self.level[a as usize] {
                    u16::MAX => 0,
                    l => l,
                };
                let l = here.saturating_add(1);
                for link in self.closer(d, a) {
                    depth[link.next as usize] = depth[link.next as usize].max(l);
                    let b = &mut self.level[link.to as usize];
                    *b = if *b == u16::MAX { l } else { (*b).max(l) };
                }
            }
            self.onward(d, a, &mut ways);
            for &(j, next) in &ways {
                let mut on = [0u64; L];
                for (k, masks) in ins.iter().enumerate() {
                    let c = k * 64;
                    let own = if next.is_none() && (c..c + 64).contains(&j) { 1 << (j - c) } else { 0 };
                    let masks = masks.map(|m| m & !own);
                    if masks.iter().any(|&m| m != 0) {
                        let r = hops(self.dags.hop(a, c, j), masks, next);
                        for (o, r) in on.iter_mut().zip(r) {
                            *o |= r;
                        }
                    }
                }
                if let Some(p2) = next {
                    for (bits, &o) in layers.iter_mut().zip(&on) {
                        if o != 0 {
                            set(bits, p2 as usize);
                        }
                    }
                    if self.sparse && on.iter().any(|&o| o != 0) {
                        self.wait(d, self.dags.switch_of_bit(p2 as usize));
                    }
                }
            }
        }
    }
}
