//! Enumerated routes: read from a file, or the k shortest paths of every pair.
//!
//! A routes file (TOML or JSON) lists each route either hop by hop, as (switch, ingress
//! port), or as a path of node names from host to host:
//!
//! ```toml
//! [[route]]
//! hops = [{ switch = "leaf0", port = 3 }, { switch = "spine0", port = 1 }, { switch = "leaf1", port = 1 }]
//! deliver = 3            # the egress port to the host; default: every host port of the last switch
//!
//! [[route]]
//! path = ["h-leaf0-0", "leaf0", "spine1", "leaf1", "h-leaf1-0"]
//! ```
//!
//! The first hop's port must face a host: that host stamps the initial tag.

use std::collections::{BTreeSet, VecDeque};
use std::path::Path;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use super::{RouteError, RouteModel, State};
use crate::topology::{NodeRef, Peer, PortId, SwitchId, Topology};

/// Routes as a list of hops; a state is the index of a hop.
pub struct Explicit {
    hops: Vec<PortId>,
    /// Where each route's hops end (exclusive), ascending.
    ends: Vec<u32>,
    deliver: Vec<Vec<PortId>>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RoutesFile {
    #[serde(rename = "route", default)]
    pub routes: Vec<RouteEntry>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouteEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hops: Option<Vec<HopSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver: Option<u16>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HopSpec {
    pub switch: String,
    pub port: u16,
}

impl Explicit {
    /// Routes as (hops, delivery ports); an empty delivery list means every host port of
    /// the last switch but the one the route came in on.
    pub fn new(t: &Topology, routes: Vec<(Vec<PortId>, Vec<PortId>)>) -> Result<Explicit, RouteError> {
        let mut m = Explicit { hops: Vec::new(), ends: Vec::new(), deliver: Vec::new() };
        for (i, (hops, deliver)) in routes.into_iter().enumerate() {
            let bad = |problem: String| RouteError::BadRoute { route: i, problem };
            let (&first, &last) = match (hops.first(), hops.last()) {
                (Some(f), Some(l)) => (f, l),
                _ => return Err(bad("has no hops".into())),
            };
            if !t.faces_host(first) {
                return Err(bad(format!("starts at {}, which does not face a host", t.port_label(first))));
            }
            for w in hops.windows(2) {
                let linked = t.peer_port(w[1]).is_some_and(|e| t.switch_of(e) == t.switch_of(w[0]));
                if !linked {
                    return Err(bad(format!(
                        "{} does not lead to {}",
                        t.switches[t.switch_of(w[0]) as usize].name,
                        t.port_label(w[1])
                    )));
                }
            }
            let end = t.switch_of(last);
            let deliver = if deliver.is_empty() {
                let all: Vec<PortId> = t.host_ports(end).filter(|&e| e != last).collect();
                if all.is_empty() {
                    return Err(bad(format!("ends at {}, which has no other host", t.switches[end as usize].name)));
                }
                all
            } else {
                for &e in &deliver {
                    if t.switch_of(e) != end || !t.faces_host(e) {
                        return Err(bad(format!(
                            "delivers to {}, not a host port of its last switch",
                            t.port_label(e)
                        )));
                    }
                }
                deliver
            };
            m.hops.extend(hops);
            if m.hops.len() > u32::MAX as usize {
                return Err(RouteError::TooManyStates(m.hops.len() as u64));
            }
            m.ends.push(m.hops.len() as u32);
            m.deliver.push(deliver);
        }
        if m.ends.is_empty() {
            return Err(RouteError::BadRoute { route: 0, problem: "the route set is empty".into() });
        }
        Ok(m)
    }

    pub fn read(t: &Topology, path: &Path) -> Result<Explicit, RouteError> {
        let file_err = |problem: String| RouteError::File { path: path.display().to_string(), problem };
        let text = std::fs::read_to_string(path).map_err(|e| file_err(e.to_string()))?;
        let file: RoutesFile = if crate::topology::file::is_json(path, &text) {
            serde_json::from_str(&text).map_err(|e| file_err(e.to_string()))?
        } else {
            toml::from_str(&text).map_err(|e| file_err(e.to_string()))?
        };
        Explicit::from_file(t, &file)
    }

    pub fn from_file(t: &Topology, file: &RoutesFile) -> Result<Explicit, RouteError> {
        let links = PortBetween::new(t);
        let mut routes = Vec::new();
        for (i, r) in file.routes.iter().enumerate() {
            let bad = |problem: String| RouteError::BadRoute { route: i, problem };
            let switch = |name: &str| match t.node(name) {
                Some(NodeRef::Switch(s)) => Ok(s),
                _ => Err(bad(format!("no switch called {name:?}"))),
            };
            let (hops, mut deliver) = match (&r.hops, &r.path) {
                (Some(hops), None) => {
                    let mut out = Vec::new();
                    for h in hops {
                        let s = switch(&h.switch)?;
                        out.push(
                            t.port_by_number(s, h.port)
                                .ok_or_else(|| bad(format!("{} has no port {}", h.switch, h.port)))?,
                        );
                    }
                    (out, Vec::new())
                }
                (None, Some(path)) => links.resolve(t, path).map_err(bad)?,
                _ => return Err(bad("give either hops or path".into())),
            };
            if let Some(d) = r.deliver {
                let last = hops.last().ok_or_else(|| bad("has no hops".into()))?;
                let s = t.switch_of(*last);
                deliver = vec![t.port_by_number(s, d).ok_or_else(|| bad(format!("no port {d} to deliver to")))?];
            }
            routes.push((hops, deliver));
        }
        Explicit::new(t, routes)
    }

    /// The `k` shortest loop-free switch paths (Yen's algorithm) between every pair of
    /// switches with hosts, from every host port of the first. Parallel links count once
    /// (the lowest-numbered port is used).
    pub fn k_shortest(t: &Topology, k: usize) -> Result<Explicit, RouteError> {
        let links = PortBetween::new(t);
        let edges: Vec<SwitchId> = (0..t.switches.len() as SwitchId).filter(|&s| t.has_hosts(s)).collect();
        let mut routes = Vec::new();
        for &a in &edges {
            let host_ports: Vec<PortId> = t.host_ports(a).collect();
            for &d in &edges {
                let paths = if a == d {
                    if host_ports.len() < 2 {
                        continue;
                    }
                    vec![vec![a]]
                } else {
                    yen(&links.neighbours, a, d, k)
                };
                for path in paths {
                    for &p in &host_ports {
                        let mut hops = vec![p];
                        hops.extend(path.windows(2).map(|w| links.get(w[0], w[1])));
                        routes.push((hops, Vec::new()));
                    }
                }
            }
        }
        Explicit::new(t, routes)
    }

    pub fn routes(&self) -> usize {
        self.ends.len()
    }
}

impl RouteModel for Explicit {
    fn num_states(&self) -> usize {
        self.hops.len()
    }

    fn port(&self, s: State) -> PortId {
        self.hops[s as usize]
    }

    fn starts(&self, out: &mut Vec<State>) {
        out.push(0);
        out.extend(self.ends[..self.ends.len() - 1].iter().copied());
    }

    fn successors(&self, s: State, out: &mut Vec<State>) {
        if self.ends.binary_search(&(s + 1)).is_err() {
            out.push(s + 1);
        }
    }

    fn deliveries(&self, s: State, out: &mut Vec<PortId>) {
        if let Ok(route) = self.ends.binary_search(&(s + 1)) {
            out.extend_from_slice(&self.deliver[route]);
        }
    }
}

/// The switch graph, and which port of `b` a link from `a` arrives on.
struct PortBetween {
    neighbours: Vec<Vec<SwitchId>>,
    port: FxHashMap<(SwitchId, SwitchId), PortId>,
}

impl PortBetween {
    fn new(t: &Topology) -> PortBetween {
        let mut port: FxHashMap<(SwitchId, SwitchId), PortId> = FxHashMap::default();
        let mut neighbours = vec![BTreeSet::new(); t.switches.len()];
        for (id, p) in t.ports.iter().enumerate() {
            if let Peer::Switch(q) = p.peer {
                let from = t.switch_of(q);
                neighbours[from as usize].insert(p.switch);
                let e = port.entry((from, p.switch)).or_insert(id as PortId);
                if t.port(*e).number > p.number {
                    *e = id as PortId;
                }
            }
        }
        PortBetween { neighbours: neighbours.into_iter().map(|n| n.into_iter().collect()).collect(), port }
    }

    fn get(&self, a: SwitchId, b: SwitchId) -> PortId {
        self.port[&(a, b)]
    }

    /// `path`: host, switches..., and optionally a host at the end.
    fn resolve(&self, t: &Topology, path: &[String]) -> Result<(Vec<PortId>, Vec<PortId>), String> {
        let node = |n: &String| t.node(n).ok_or_else(|| format!("no node called {n:?}"));
        let Some(NodeRef::Host(h)) = path.first().map(node).transpose()? else {
            return Err("a path starts at a host".into());
        };
        let facing = |s: SwitchId, host: u32| t.host_ports(s).find(|&p| t.ports[p as usize].peer == Peer::Host(host));
        let mut hops = Vec::new();
        let mut deliver = Vec::new();
        let mut prev: Option<SwitchId> = None;
        for (i, n) in path.iter().enumerate().skip(1) {
            match (node(n)?, prev) {
                (NodeRef::Switch(s), None) => {
                    hops.push(facing(s, h).ok_or_else(|| format!("{} is not linked to {}", n, path[0]))?);
                    prev = Some(s);
                }
                (NodeRef::Switch(s), Some(a)) => {
                    let count = t.switches[s as usize]
                        .ports
                        .iter()
                        .filter(|&&p| t.peer_port(p).is_some_and(|q| t.switch_of(q) == a))
                        .count();
                    match count {
                        0 => return Err(format!("{} is not linked to {}", t.switches[a as usize].name, n)),
                        1 => hops.push(self.get(a, s)),
                        _ => {
                            return Err(format!(
                                "{} and {} have parallel links: give hops",
                                t.switches[a as usize].name, n
                            ))
                        }
                    }
                    prev = Some(s);
                }
                (NodeRef::Host(dst), Some(a)) if i == path.len() - 1 => {
                    deliver.push(facing(a, dst).ok_or_else(|| format!("{n} is not linked to the last switch"))?);
                }
                _ => return Err(format!("{n}: hosts only at the ends of a path")),
            }
        }
        Ok((hops, deliver))
    }
}

fn bfs_path(
    nb: &[Vec<SwitchId>],
    src: SwitchId,
    dst: SwitchId,
    banned_node: &[bool],
    banned_edge: &FxHashSet<(SwitchId, SwitchId)>,
) -> Option<Vec<SwitchId>> {
    let mut parent = vec![u32::MAX; nb.len()];
    parent[src as usize] = src;
    let mut q = VecDeque::from([src]);
    while let Some(a) = q.pop_front() {
        if a == dst {
            let mut path = vec![dst];
            let mut x = dst;
            while x != src {
                x = parent[x as usize];
                path.push(x);
            }
            path.reverse();
            return Some(path);
        }
        for &b in &nb[a as usize] {
            if parent[b as usize] == u32::MAX && !banned_node[b as usize] && !banned_edge.contains(&(a, b)) {
                parent[b as usize] = a;
                q.push_back(b);
            }
        }
    }
    None
}

/// Yen's k shortest loop-free paths, unit link weights; ties broken by the paths' nodes.
fn yen(nb: &[Vec<SwitchId>], src: SwitchId, dst: SwitchId, k: usize) -> Vec<Vec<SwitchId>> {
    let mut banned_node = vec![false; nb.len()];
    let Some(first) = bfs_path(nb, src, dst, &banned_node, &FxHashSet::default()) else { return Vec::new() };
    let mut found = vec![first];
    let mut candidates: BTreeSet<(usize, Vec<SwitchId>)> = BTreeSet::new();
    while found.len() < k {
        let prev = found.last().expect("one path at least").clone();
        for j in 0..prev.len() - 1 {
            let root = &prev[..=j];
            let mut banned_edge = FxHashSet::default();
            for p in &found {
                if p.len() > j + 1 && p[..=j] == *root {
                    banned_edge.insert((p[j], p[j + 1]));
                }
            }
            for &n in &root[..j] {
                banned_node[n as usize] = true;
            }
            if let Some(spur) = bfs_path(nb, prev[j], dst, &banned_node, &banned_edge) {
                let mut path = root[..j].to_vec();
                path.extend(spur);
                if !found.contains(&path) {
                    candidates.insert((path.len(), path));
                }
            }
            for &n in &root[..j] {
                banned_node[n as usize] = false;
            }
        }
        match candidates.pop_first() {
            Some((_, p)) => found.push(p),
            None => break,
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::testing::enumerate;
    use crate::topology::generate::Generator;

    fn ring(n: u32) -> Topology {
        format!("ring:n={n}").parse::<Generator>().unwrap().build().unwrap()
    }

    #[test]
    fn yen_finds_both_ways_around_a_ring() {
        let t = ring(5);
        let m = Explicit::k_shortest(&t, 3).unwrap();
        // Each of 5 × 4 pairs has exactly two loop-free paths.
        assert_eq!(m.routes(), 40);
        let routes = enumerate(&m);
        let lengths: BTreeSet<usize> = routes.iter().map(|r| r.len()).collect();
        // 1..4 switch hops, plus the delivery.
        assert_eq!(lengths, BTreeSet::from([3, 4, 5, 6]));
    }

    #[test]
    fn a_routes_file_by_hops_and_by_path() {
        let t = ring(4);
        let text = r#"
            [[route]]
            path = ["h-s0-0", "s0", "s1", "s2", "h-s2-0"]
            [[route]]
            hops = [{ switch = "s3", port = 1 }, { switch = "s0", port = 3 }]
        "#;
        let file: RoutesFile = toml::from_str(text).unwrap();
        let m = Explicit::from_file(&t, &file).unwrap();
        let routes = enumerate(&m);
        let labels: Vec<Vec<String>> = routes.iter().map(|r| r.iter().map(|&p| t.port_label(p)).collect()).collect();
        assert_eq!(labels[0], ["s0:1", "s1:2", "s2:2", "s2:1"]);
        assert_eq!(labels[1], ["s3:1", "s0:3", "s0:1"]);
    }

    #[test]
    fn bad_routes_say_what_is_wrong() {
        let t = ring(4);
        let cases = [
            (r#"path = ["s0", "s1"]"#, "starts at a host"),
            (r#"path = ["h-s0-0", "s0", "s2"]"#, "not linked"),
            (r#"hops = [{ switch = "s0", port = 2 }]"#, "does not face a host"),
            (r#"hops = [{ switch = "s0", port = 1 }, { switch = "s2", port = 2 }]"#, "does not lead to"),
            (r#"hops = [{ switch = "s0", port = 9 }]"#, "no port 9"),
            (r#"hops = [{ switch = "s0", port = 1 }]"#, "no other host"),
        ];
        for (route, msg) in cases {
            let file: RoutesFile = toml::from_str(&format!("[[route]]\n{route}\n")).unwrap();
            let e = Explicit::from_file(&t, &file).err().expect(route).to_string();
            assert!(e.contains(msg), "{route}: {e}");
        }
    }
}
