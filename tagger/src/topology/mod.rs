//! The network Tagger works on: switches (anything that forwards frames and holds them in
//! lossless ingress queues — in BCube the servers too), hosts (where traffic starts and
//! ends, always draining), and links between numbered ports.
//!
//! Every switch port is a [`PortId`]: a dense index used as "ingress port" throughout the
//! crate. A port's number is what the switch calls it (pfcswitch's `pN` is port N).

pub mod file;
pub mod generate;

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

pub type SwitchId = u32;
pub type HostId = u32;
/// A switch port, as a dense index over all switch ports of the topology.
pub type PortId = u32;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switch {
    pub name: String,
    /// Position in a Clos (0 = leaf/edge); used by up-down routes.
    pub layer: Option<u32>,
    /// Its ports, in port-number order.
    pub ports: Vec<PortId>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    pub name: String,
}

/// What is at the other end of a switch port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    Switch(PortId),
    Host(HostId),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    pub switch: SwitchId,
    pub number: u16,
    /// The interface name when the file gave one that is not `pN`.
    pub name: Option<String>,
    pub peer: Peer,
}

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("the name {0:?} is used by two nodes")]
    DuplicateName(String),
    #[error("link {link}: no switch or host called {name:?}")]
    UnknownNode { link: usize, name: String },
    #[error("link {link}: {switch} port {port} is already linked")]
    PortTaken { link: usize, switch: String, port: u16 },
    #[error("link {link}: {switch} has no free port numbers left")]
    NoFreePort { link: usize, switch: String },
    #[error("link {link}: links host {a} to host {b}; one end must be a switch")]
    HostToHost { link: usize, a: String, b: String },
    #[error("link {link}: links {switch} to itself")]
    SelfLoop { link: usize, switch: String },
    #[error("the topology has no switches")]
    NoSwitches,
    #[error("{0}")]
    Parse(String),
    #[error("generator {spec:?}: {problem}")]
    Generator { spec: String, problem: String },
    #[error("switch {0} has a layer and others do not: give every switch a layer, or none")]
    PartialLayers(String),
    #[error("the switch graph's diameter exceeds 254 hops")]
    TooDeep,
    #[error("switch {0} has more than 65 535 ports")]
    TooManyPorts(String),
    #[error("the switches have more than 2^32 pairs of ports of one switch (from switch {0} on)")]
    TooManyHops(String),
}

/// Which node a name refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeRef {
    Switch(SwitchId),
    Host(HostId),
}

#[derive(Clone, Debug)]
pub struct Topology {
    pub switches: Vec<Switch>,
    pub hosts: Vec<Host>,
    pub ports: Vec<Port>,
    names: FxHashMap<String, NodeRef>,
    by_number: FxHashMap<(SwitchId, u16), PortId>,
}

/// One end of a link being added: a node and, on a switch, maybe a port number or name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct End {
    pub node: String,
    pub port: Option<u16>,
    pub name: Option<String>,
}

impl End {
    pub fn node(node: impl Into<String>) -> End {
        End { node: node.into(), port: None, name: None }
    }

    pub fn port(node: impl Into<String>, port: u16) -> End {
        End { node: node.into(), port: Some(port), name: None }
    }
}

/// A link end once resolved: the node, its port number on a switch, the port's name.
type NumberedEnd = (NodeRef, Option<u16>, Option<String>);

/// Collects nodes and links; [`build`](Builder::build) numbers the ports left open and
/// checks everything.
#[derive(Clone, Debug, Default)]
pub struct Builder {
    switches: Vec<(String, Option<u32>)>,
    hosts: Vec<String>,
    links: Vec<(End, End)>,
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    pub fn switch(&mut self, name: impl Into<String>, layer: Option<u32>) -> &mut Builder {
        self.switches.push((name.into(), layer));
        self
    }

    pub fn host(&mut self, name: impl Into<String>) -> &mut Builder {
        self.hosts.push(name.into());
        self
    }

    pub fn link(&mut self, a: End, b: End) -> &mut Builder {
        self.links.push((a, b));
        self
    }

    pub fn build(&self) -> Result<Topology, TopologyError> {
        if self.switches.is_empty() {
            return Err(TopologyError::NoSwitches);
        }
        let mut names = FxHashMap::default();
        for (i, (name, _)) in self.switches.iter().enumerate() {
            if names.insert(name.clone(), NodeRef::Switch(i as SwitchId)).is_some() {
                return Err(TopologyError::DuplicateName(name.clone()));
            }
        }
        for (i, name) in self.hosts.iter().enumerate() {
            if names.insert(name.clone(), NodeRef::Host(i as HostId)).is_some() {
                return Err(TopologyError::DuplicateName(name.clone()));
            }
        }
        let resolve = |link: usize, e: &End| {
            names.get(&e.node).copied().ok_or_else(|| TopologyError::UnknownNode { link, name: e.node.clone() })
        };
        // Explicit port numbers first, so that numbering the others never collides.
        let mut taken: FxHashMap<(SwitchId, u16), usize> = FxHashMap::default();
        let mut ends = Vec::with_capacity(self.links.len());
        for (link, (a, b)) in self.links.iter().enumerate() {
            let (na, nb) = (resolve(link, a)?, resolve(link, b)?);
            match (na, nb) {
                (NodeRef::Host(_), NodeRef::Host(_)) => {
                    return Err(TopologyError::HostToHost { link, a: a.node.clone(), b: b.node.clone() })
                }
                (NodeRef::Switch(x), NodeRef::Switch(y)) if x == y => {
                    return Err(TopologyError::SelfLoop { link, switch: a.node.clone() })
                }
                _ => {}
            }
            for (n, e) in [(na, a), (nb, b)] {
                if let (NodeRef::Switch(s), Some(p)) = (n, e.port) {
                    if taken.insert((s, p), link).is_some() {
                        return Err(TopologyError::PortTaken { link, switch: e.node.clone(), port: p });
                    }
                }
            }
            ends.push([(na, a), (nb, b)]);
        }
        let mut next_free: FxHashMap<SwitchId, u32> = FxHashMap::default();
        let mut numbered: Vec<[NumberedEnd; 2]> = Vec::with_capacity(ends.len());
        for (link, pair) in ends.iter().enumerate() {
            let mut out: [NumberedEnd; 2] = Default::default();
            for (k, (n, e)) in pair.iter().enumerate() {
                let number = match (n, e.port) {
                    (NodeRef::Switch(s), None) => {
                        let next = next_free.entry(*s).or_insert(1);
                        while *next <= u16::MAX as u32 && taken.contains_key(&(*s, *next as u16)) {
                            *next += 1;
                        }
                        if *next > u16::MAX as u32 {
                            return Err(TopologyError::NoFreePort { link, switch: e.node.clone() });
                        }
                        taken.insert((*s, *next as u16), link);
                        Some(*next as u16)
                    }
                    (_, p) => p,
                };
                out[k] = (*n, number, e.name.clone());
            }
            numbered.push(out);
        }

        let mut switches: Vec<Switch> = self
            .switches
            .iter()
            .map(|(name, layer)| Switch { name: name.clone(), layer: *layer, ports: Vec::new() })
            .collect();
        let hosts: Vec<Host> = self.hosts.iter().map(|name| Host { name: name.clone() }).collect();
        let mut ports: Vec<Port> = Vec::new();
        let mut by_number = FxHashMap::default();
        // Each link makes one port per switch end; a switch-switch link's ports point at
        // each other.
        for pair in &numbered {
            let mut ids = [None, None];
            for (k, (n, number, name)) in pair.iter().enumerate() {
                if let NodeRef::Switch(s) = n {
                    let id = ports.len() as PortId;
                    let number = number.expect("switch ends were numbered above");
                    ports.push(Port { switch: *s, number, name: name.clone(), peer: Peer::Host(0) });
                    by_number.insert((*s, number), id);
                    switches[*s as usize].ports.push(id);
                    ids[k] = Some(id);
                }
            }
            for k in 0..2 {
                let Some(id) = ids[k] else { continue };
                ports[id as usize].peer = match (pair[1 - k].0, ids[1 - k]) {
                    (NodeRef::Switch(_), Some(other)) => Peer::Switch(other),
                    (NodeRef::Host(h), _) => Peer::Host(h),
                    (NodeRef::Switch(_), None) => unreachable!("a switch end always gets a port"),
                };
            }
        }
        for s in &mut switches {
            s.ports.sort_by_key(|&p| ports[p as usize].number);
        }
        let with_layer = switches.iter().filter(|s| s.layer.is_some()).count();
        if with_layer != 0 && with_layer != switches.len() {
            let s = switches.iter().find(|s| s.layer.is_some()).expect("counted above");
            return Err(TopologyError::PartialLayers(s.name.clone()));
        }
        Ok(Topology { switches, hosts, ports, names, by_number })
    }
}

impl Default for Peer {
    fn default() -> Peer {
        Peer::Host(0)
    }
}

impl Default for NodeRef {
    fn default() -> NodeRef {
        NodeRef::Host(0)
    }
}

impl Topology {
    pub fn node(&self, name: &str) -> Option<NodeRef> {
        self.names.get(name).copied()
    }

    pub fn port(&self, p: PortId) -> &Port {
        &self.ports[p as usize]
    }

    /// The port of `switch` numbered `number`.
    pub fn port_by_number(&self, switch: SwitchId, number: u16) -> Option<PortId> {
        self.by_number.get(&(switch, number)).copied()
    }

    /// The switch port at the other end, if the link goes to a switch.
    pub fn peer_port(&self, p: PortId) -> Option<PortId> {
        match self.ports[p as usize].peer {
            Peer::Switch(q) => Some(q),
            Peer::Host(_) => None,
        }
    }

    pub fn faces_host(&self, p: PortId) -> bool {
        matches!(self.ports[p as usize].peer, Peer::Host(_))
    }

    pub fn switch_of(&self, p: PortId) -> SwitchId {
        self.ports[p as usize].switch
    }

    /// The ports of switch `s` that face hosts.
    pub fn host_ports(&self, s: SwitchId) -> impl Iterator<Item = PortId> + '_ {
        self.switches[s as usize].ports.iter().copied().filter(|&p| self.faces_host(p))
    }

    pub fn has_hosts(&self, s: SwitchId) -> bool {
        self.host_ports(s).next().is_some()
    }

    /// "sw1:3" (or "sw1:cw" when the port has a name).
    pub fn port_label(&self, p: PortId) -> String {
        let port = &self.ports[p as usize];
        let sw = &self.switches[port.switch as usize].name;
        match &port.name {
            Some(n) => format!("{sw}:{n}"),
            None => format!("{sw}:{}", port.number),
        }
    }

    pub fn switch_links(&self) -> usize {
        self.ports.iter().filter(|p| matches!(p.peer, Peer::Switch(_))).count() / 2
    }

    /// Hop counts between switches (over switch-switch links), `u8::MAX` when unreachable.
    pub fn distances(&self) -> Result<Distances, TopologyError> {
        self.distances_over(1)
    }

    /// [`Topology::distances`], a breadth-first search per switch, the searches spread
    /// over `threads` threads (rows are independent; the result is the same for any
    /// number). A Jellyfish of 10 000 switches has 10⁸ of them.
    pub fn distances_over(&self, threads: usize) -> Result<Distances, TopologyError> {
        use rayon::prelude::*;
        let n = self.switches.len();
        let links = self.neighbours();
        let mut d = vec![u8::MAX; n * n];
        let search = |(src, row): (usize, &mut [u8])| -> Result<(), TopologyError> {
            let mut queue = VecDeque::new();
            row[src] = 0;
            queue.push_back(src as u32);
            while let Some(a) = queue.pop_front() {
                let next = row[a as usize] + 1;
                for &b in links.of(a) {
                    if row[b as usize] == u8::MAX {
                        if next == u8::MAX {
                            return Err(TopologyError::TooDeep);
                        }
                        row[b as usize] = next;
                        queue.push_back(b);
                    }
                }
            }
            Ok(())
        };
        if n > 0 {
            crate::threads::in_pool(threads, || d.par_chunks_mut(n).enumerate().try_for_each(search))?;
        }
        Ok(Distances { n, d })
    }

    /// Whether every switch reaches every other over switch-switch links.
    pub fn connected(&self) -> bool {
        self.switch_components().iter().all(|&c| c == 0)
    }

    /// Each switch's connected component over switch-switch links, numbered from 0 in
    /// the order of their lowest switch.
    pub fn switch_components(&self) -> Vec<u32> {
        let links = self.neighbours();
        let mut component = vec![u32::MAX; self.switches.len()];
        let mut count = 0;
        let mut stack: Vec<SwitchId> = Vec::new();
        for start in 0..self.switches.len() {
            if component[start] != u32::MAX {
                continue;
            }
            component[start] = count;
            stack.push(start as SwitchId);
            while let Some(a) = stack.pop() {
                for &b in links.of(a) {
                    if component[b as usize] == u32::MAX {
                        component[b as usize] = count;
                        stack.push(b);
                    }
                }
            }
            count += 1;
        }
        component
    }

    /// Each switch's neighbouring switches, one entry per link, in a flat list: what a
    /// search over switches reads, without the ports' records on the way.
    fn neighbours(&self) -> Neighbours {
        let mut at = Vec::with_capacity(self.switches.len() + 1);
        let mut to = Vec::new();
        at.push(0);
        for s in &self.switches {
            to.extend(s.ports.iter().filter_map(|&p| self.peer_port(p)).map(|q| self.switch_of(q)));
            at.push(to.len() as u32);
        }
        Neighbours { at, to }
    }

    /// Every switch's layer: as given, or inferred as the distance from the nearest switch
    /// with hosts (leaves 0, the next tier 1, ...).
    pub fn layers(&self) -> Result<Vec<u32>, TopologyError> {
        if self.switches.iter().all(|s| s.layer.is_some()) {
            return Ok(self.switches.iter().map(|s| s.layer.unwrap_or(0)).collect());
        }
        let mut layer = vec![u32::MAX; self.switches.len()];
        let mut queue = VecDeque::new();
        for s in 0..self.switches.len() as SwitchId {
            if self.has_hosts(s) {
                layer[s as usize] = 0;
                queue.push_back(s);
            }
        }
        while let Some(a) = queue.pop_front() {
            for &p in &self.switches[a as usize].ports {
                let Some(q) = self.peer_port(p) else { continue };
                let b = self.switch_of(q) as usize;
                if layer[b] == u32::MAX {
                    layer[b] = layer[a as usize] + 1;
                    queue.push_back(b as SwitchId);
                }
            }
        }
        Ok(layer)
    }
}

impl Topology {
    /// The topology without `n` of its switch-to-switch links, chosen at random from
    /// `seed` (the same seed, the same links), and the links it lost as port labels. The
    /// other ports keep their numbers, so that tables computed for it name the ports the
    /// switches have.
    pub fn fail_links(&self, n: usize, seed: u64) -> Result<(Topology, Vec<(String, String)>), TopologyError> {
        use rand::SeedableRng;
        let links: Vec<(PortId, PortId)> = (0..self.ports.len() as PortId)
            .filter_map(|p| self.peer_port(p).filter(|&q| q > p).map(|q| (p, q)))
            .collect();
        if n > links.len() {
            return Err(TopologyError::Parse(format!(
                "{n} links to fail, and the topology has {} switch links",
                links.len()
            )));
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut chosen: Vec<(PortId, PortId)> =
            rand::seq::index::sample(&mut rng, links.len(), n).into_iter().map(|i| links[i]).collect();
        chosen.sort_unstable();
        let failed: std::collections::HashSet<PortId> = chosen.iter().flat_map(|&(p, q)| [p, q]).collect();
        let mut file = file::TopologyFile::from_topology(self);
        let label = |end: &file::EndSpec| {
            let e = end.spelled_out();
            self.node(&e.node).and_then(|node| match node {
                NodeRef::Switch(s) => self.port_by_number(s, e.port?),
                NodeRef::Host(_) => None,
            })
        };
        file.links.retain(|l| !label(&l.a).is_some_and(|p| failed.contains(&p)));
        let lost = chosen.iter().map(|&(p, q)| (self.port_label(p), self.port_label(q))).collect();
        Ok((file.build()?, lost))
    }
}

/// Each switch's neighbours (`to[at[s]..at[s + 1]]`).
struct Neighbours {
    at: Vec<u32>,
    to: Vec<SwitchId>,
}

impl Neighbours {
    fn of(&self, s: SwitchId) -> &[SwitchId] {
        &self.to[self.at[s as usize] as usize..self.at[s as usize + 1] as usize]
    }
}

/// All-pairs switch hop counts.
#[derive(Clone, Debug)]
pub struct Distances {
    n: usize,
    d: Vec<u8>,
}

impl Distances {
    pub fn get(&self, a: SwitchId, b: SwitchId) -> u8 {
        self.d[a as usize * self.n + b as usize]
    }

    /// Every switch's distance from `a` (links go both ways, so also to `a`).
    pub fn row(&self, a: SwitchId) -> &[u8] {
        &self.d[a as usize * self.n..(a as usize + 1) * self.n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_switches() -> Builder {
        let mut b = Builder::new();
        b.switch("s1", None).switch("s2", None).host("h1").host("h2");
        b.link(End::node("h1"), End::port("s1", 5));
        b.link(End::node("s1"), End::node("s2"));
        b.link(End::node("s2"), End::node("h2"));
        b
    }

    #[test]
    fn ports_are_numbered_around_the_explicit_ones_and_point_at_each_other() {
        let t = two_switches().build().unwrap();
        let s1 = &t.switches[0];
        let numbers: Vec<u16> = s1.ports.iter().map(|&p| t.port(p).number).collect();
        assert_eq!(numbers, vec![1, 5]);
        let up = t.port_by_number(0, 1).unwrap();
        let peer = t.peer_port(up).unwrap();
        assert_eq!((t.switch_of(peer), t.port(peer).number), (1, 1));
        assert_eq!(t.peer_port(peer), Some(up));
        assert!(t.faces_host(t.port_by_number(0, 5).unwrap()));
        assert_eq!(t.port_label(up), "s1:1");
        assert_eq!(t.switch_links(), 1);
        assert_eq!(t.distances().unwrap().get(0, 1), 1);
    }

    #[test]
    fn bad_links_are_named() {
        let mut b = two_switches();
        b.link(End::port("s1", 5), End::node("s2"));
        assert!(matches!(b.build(), Err(TopologyError::PortTaken { link: 3, port: 5, .. })));
        let mut b = two_switches();
        b.link(End::node("h1"), End::node("h2"));
        assert!(matches!(b.build(), Err(TopologyError::HostToHost { link: 3, .. })));
        let mut b = two_switches();
        b.link(End::node("s1"), End::node("s9"));
        let e = b.build().unwrap_err();
        assert_eq!(e.to_string(), "link 3: no switch or host called \"s9\"");
        let mut b = two_switches();
        b.link(End::node("s2"), End::node("s2"));
        assert!(matches!(b.build(), Err(TopologyError::SelfLoop { .. })));
        let mut b = two_switches();
        b.host("s1");
        assert!(matches!(b.build(), Err(TopologyError::DuplicateName(_))));
    }

    #[test]
    fn layers_are_inferred_from_the_hosts() {
        // h - leaf1 - spine - leaf2 - h
        let mut b = Builder::new();
        b.switch("leaf1", None).switch("spine", None).switch("leaf2", None).host("a").host("b");
        b.link(End::node("a"), End::node("leaf1"));
        b.link(End::node("leaf1"), End::node("spine"));
        b.link(End::node("spine"), End::node("leaf2"));
        b.link(End::node("leaf2"), End::node("b"));
        assert_eq!(b.build().unwrap().layers().unwrap(), vec![0, 1, 0]);
        let mut b2 = b.clone();
        b2.switches[1].1 = Some(1);
        assert!(matches!(b2.build(), Err(TopologyError::PartialLayers(_))));
    }
}
