//! The testbed topology file: hosts, switches and the veth links between them.
//!
//! ```toml
//! [[host]]
//! name = "h1"
//! [[host]]
//! name = "h2"
//! [[switch]]
//! name = "sw1"
//! [[link]]
//! a = { node = "h1", iface = "eth0", addr = "10.0.0.1/24" }
//! b = "sw1:p1"                 # node:iface shorthand
//! [[link]]
//! a = "h2"                     # interface name defaulted (eth0, eth1... / p1, p2...)
//! b = "sw1"
//! ```

use std::collections::{BTreeMap, HashSet};

use pfcswitch_core::mac::MacAddr;
use serde::{Deserialize, Serialize};

/// The testbed file is tagger's topology file: one schema for testbeds, Tagger and the
/// simulator. The testbed's own reading of it is [`TestbedTopology`].
pub use tagger::topology::file::{
    EndSpec as Endpoint, FullEnd as EndpointSpec, HostSpec, LinkSpec as Link, SwitchSpec, TopologyFile as Topology,
};

/// One end of a link, every shorthand spelled out: "node" or "node:iface" reads as that
/// node and interface, and a port number N without an interface name as interface `pN`
/// (the name Tagger reads as port N).
fn end_spec(e: &Endpoint) -> EndpointSpec {
    let s = e.spelled_out();
    EndpointSpec { iface: s.iface.clone().or(s.port.map(|p| format!("p{p}"))), ..s }
}

/// An interface as it will exist: fully resolved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    pub node: String,
    pub name: String,
    pub mac: MacAddr,
    pub addr: Option<String>,
    pub mtu: Option<u32>,
    /// Rx and tx queues (see [`Link::queues`]).
    #[serde(default)]
    pub queues: Option<u32>,
    /// The node and interface at the other end of the veth.
    pub peer_node: String,
    pub peer_iface: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopologyError {
    #[error("{0}")]
    Parse(String),
    #[error("{field}: {problem}")]
    Invalid { field: String, problem: String },
}

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> TopologyError {
    TopologyError::Invalid { field: field.into(), problem: problem.into() }
}

/// What a testbed reads in a topology file: its nodes, its interfaces resolved (names,
/// MACs, addresses, MTUs, queues), and the standard testbeds.
pub trait TestbedTopology: Sized {
    /// Parses and checks a testbed file.
    fn from_toml(text: &str) -> Result<Self, TopologyError>;
    /// Whether `node` is a switch.
    fn is_switch(&self, node: &str) -> bool;
    /// Every node's name, hosts first.
    fn node_names(&self) -> impl Iterator<Item = &str>;
    /// Every interface with names and MACs filled in, in link order; checks the file.
    fn interfaces(&self) -> Result<Vec<Interface>, TopologyError>;
    /// Switches sw1..swN in a ring (sw_i:cw — sw_{i+1}:ccw), host h_i on sw_i:host.
    fn ring(n: usize) -> Self;
    /// Switches sw1..swN in a line (sw_i:right — sw_{i+1}:left), host h1 on sw1:host and
    /// host hN on swN:host.
    fn line(n: usize) -> Self;
    /// Hosts h1..hN around one switch sw1: host h_i's eth0 (10.0.0.i/24) on port p_i.
    fn star(hosts: usize) -> Self;
}

impl TestbedTopology for Topology {
    fn from_toml(text: &str) -> Result<Topology, TopologyError> {
        let t: Topology = toml::from_str(text).map_err(|e| TopologyError::Parse(e.to_string()))?;
        t.interfaces()?;
        Ok(t)
    }

    fn is_switch(&self, node: &str) -> bool {
        self.switches.iter().any(|s| s.name == node)
    }

    fn node_names(&self) -> impl Iterator<Item = &str> {
        self.hosts.iter().map(|h| h.name.as_str()).chain(self.switches.iter().map(|s| s.name.as_str()))
    }

    fn interfaces(&self) -> Result<Vec<Interface>, TopologyError> {
        let mut names = HashSet::new();
        for (i, n) in self.node_names().enumerate() {
            if n.is_empty() || n.len() > 24 || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                return Err(invalid(format!("node {i}"), format!("name {n:?}: use 1-24 letters, digits or '-'")));
            }
            if !names.insert(n) {
                return Err(invalid(format!("node {n}"), "defined twice"));
            }
        }
        let node_index: BTreeMap<&str, usize> = self.node_names().enumerate().map(|(i, n)| (n, i)).collect();
        let mut counters: BTreeMap<String, usize> = BTreeMap::new();
        let mut out = Vec::new();
        let mut taken = HashSet::new();
        for (li, link) in self.links.iter().enumerate() {
            let ends = [end_spec(&link.a), end_spec(&link.b)];
            let mut resolved = Vec::new();
            for (side, spec) in ["a", "b"].iter().zip(&ends) {
                let field = format!("link[{li}].{side}");
                let Some(&ni) = node_index.get(spec.node.as_str()) else {
                    return Err(invalid(field, format!("unknown node {:?}", spec.node)));
                };
                let count = counters.entry(spec.node.clone()).or_default();
                *count += 1;
                let name = spec.iface.clone().unwrap_or_else(|| {
                    if self.is_switch(&spec.node) {
                        format!("p{count}")
                    } else {
                        format!("eth{}", *count - 1)
                    }
                });
                if name.is_empty() || name.len() > 15 || name.contains(['/', ' ', ':']) {
                    return Err(invalid(
                        field,
                        format!("interface name {name:?}: 1-15 characters, no '/', ' ' or ':'"),
                    ));
                }
                if !taken.insert((spec.node.clone(), name.clone())) {
                    return Err(invalid(field, format!("{}:{name} is used twice", spec.node)));
                }
                let mac = match &spec.mac {
                    Some(m) => m.parse().map_err(|e| invalid(format!("{field}.mac"), format!("{m:?}: {e}")))?,
                    None => MacAddr::local(((ni as u64 + 1) << 8) | *count as u64),
                };
                resolved.push((spec.node.clone(), name, mac, spec.addr.clone()));
            }
            let (a, b) = (&resolved[0], &resolved[1]);
            if a.0 == b.0 {
                return Err(invalid(format!("link[{li}]"), "a link needs two different nodes"));
            }
            if link.queues.is_some_and(|q| !(1..=64).contains(&q)) {
                return Err(invalid(format!("link[{li}].queues"), "1 to 64 queues"));
            }
            for (me, peer) in [(a, b), (b, a)] {
                out.push(Interface {
                    node: me.0.clone(),
                    name: me.1.clone(),
                    mac: me.2,
                    addr: me.3.clone(),
                    mtu: link.mtu,
                    queues: link.queues,
                    peer_node: peer.0.clone(),
                    peer_iface: peer.1.clone(),
                });
            }
        }
        Ok(out)
    }

    fn ring(n: usize) -> Topology {
        let mut t = Topology::default();
        for i in 1..=n {
            t.hosts.push(HostSpec { name: format!("h{i}") });
            t.switches.push(SwitchSpec { name: format!("sw{i}"), layer: None });
            t.links.push(Link {
                a: Endpoint::Short(format!("h{i}:eth0")),
                b: Endpoint::Short(format!("sw{i}:host")),
                mtu: None,
                queues: None,
            });
        }
        for i in 1..=n {
            let next = i % n + 1;
            t.links.push(Link {
                a: Endpoint::Short(format!("sw{i}:cw")),
                b: Endpoint::Short(format!("sw{next}:ccw")),
                mtu: None,
                queues: None,
            });
        }
        t
    }

    fn line(n: usize) -> Topology {
        let mut t = Topology::default();
        t.hosts.push(HostSpec { name: "h1".into() });
        t.hosts.push(HostSpec { name: format!("h{n}") });
        for i in 1..=n {
            t.switches.push(SwitchSpec { name: format!("sw{i}"), layer: None });
        }
        t.links.push(Link {
            a: Endpoint::Short("h1:eth0".into()),
            b: Endpoint::Short("sw1:host".into()),
            mtu: None,
            queues: None,
        });
        t.links.push(Link {
            a: Endpoint::Short(format!("h{n}:eth0")),
            b: Endpoint::Short(format!("sw{n}:host")),
            mtu: None,
            queues: None,
        });
        for i in 1..n {
            t.links.push(Link {
                a: Endpoint::Short(format!("sw{i}:right")),
                b: Endpoint::Short(format!("sw{}:left", i + 1)),
                mtu: None,
                queues: None,
            });
        }
        t
    }

    fn star(hosts: usize) -> Topology {
        let mut t = Topology { switches: vec![SwitchSpec { name: "sw1".into(), layer: None }], ..Topology::default() };
        for i in 1..=hosts {
            t.hosts.push(HostSpec { name: format!("h{i}") });
            t.links.push(Link {
                a: Endpoint::Full(EndpointSpec {
                    node: format!("h{i}"),
                    iface: Some("eth0".into()),
                    port: None,
                    mac: None,
                    addr: Some(format!("10.0.0.{i}/24")),
                }),
                b: Endpoint::Short(format!("sw1:p{i}")),
                mtu: None,
                queues: None,
            });
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_names_macs_and_peers() {
        let t = Topology::from_toml(
            r#"
            [[host]]
            name = "h1"
            [[switch]]
            name = "s"
            [[link]]
            a = "h1"
            b = "s"
            [[link]]
            a = { node = "h1", iface = "up", mac = "02:aa:00:00:00:01" }
            b = "s:uplink"
            mtu = 3000
            "#,
        )
        .unwrap();
        let ifs = t.interfaces().unwrap();
        let names: Vec<_> = ifs.iter().map(|i| format!("{}:{}", i.node, i.name)).collect();
        assert_eq!(names, ["h1:eth0", "s:p1", "h1:up", "s:uplink"]);
        assert_eq!(ifs[0].peer_iface, "p1");
        assert_eq!(ifs[2].mac.to_string(), "02:aa:00:00:00:01");
        assert_eq!(ifs[3].mtu, Some(3000));
        let macs: HashSet<_> = ifs.iter().map(|i| i.mac).collect();
        assert_eq!(macs.len(), 4);
    }

    #[test]
    fn one_file_serves_the_testbed_and_tagger() {
        let t = Topology::from_toml(
            r#"
            [[switch]]
            name = "leaf"
            layer = 0
            [[switch]]
            name = "spine"
            layer = 1
            [[host]]
            name = "h1"
            [[link]]
            a = "h1"
            b = { node = "leaf", port = 3 }
            [[link]]
            a = "leaf:up"
            b = { node = "spine", port = 1, mac = "02:aa:00:00:00:09" }
            "#,
        )
        .unwrap();
        let ifs = t.interfaces().unwrap();
        let names: Vec<_> = ifs.iter().map(|i| format!("{}:{}", i.node, i.name)).collect();
        assert_eq!(names, ["h1:eth0", "leaf:p3", "leaf:up", "spine:p1"]);
        assert_eq!(ifs[3].mac.to_string(), "02:aa:00:00:00:09");
        let g = t.build().unwrap();
        let tagger::topology::NodeRef::Switch(leaf) = g.node("leaf").unwrap() else { panic!("leaf is a switch") };
        assert!(g.faces_host(g.port_by_number(leaf, 3).unwrap()), "port 3 of the testbed is Tagger's port 3");
        let bad = Topology::from_toml("[[host]]\nname = \"h\"\n[[switch]]\nname = \"s\"\n[[link]]\na = { node = \"h\", mac = \"nope\" }\nb = \"s\"\n");
        assert!(bad.unwrap_err().to_string().contains("link[0].a.mac"));
    }

    #[test]
    fn rejects_bad_files_naming_the_field() {
        for (text, field) in [
            ("[[link]]\na = \"x\"\nb = \"y\"\n", "link[0].a"),
            ("[[host]]\nname = \"h\"\n[[host]]\nname = \"h\"\n", "node h"),
            ("[[host]]\nname = \"h\"\n[[host]]\nname = \"g\"\n[[link]]\na = \"h:e\"\nb = \"g\"\n[[link]]\na = \"h:e\"\nb = \"g\"\n", "link[1].a"),
            ("[[host]]\nname = \"h\"\n[[link]]\na = \"h\"\nb = \"h\"\n", "link[0]"),
            ("[[host]]\nname = \"h/1\"\n", "node 0"),
            ("[[hosts]]\nname = \"h\"\n", "hosts"),
        ] {
            let err = Topology::from_toml(text).unwrap_err().to_string();
            assert!(err.contains(field), "{text:?}: {err}");
        }
        let ring = Topology::ring(3).interfaces().unwrap();
        assert_eq!(ring.len(), 12);
        let cw = ring.iter().find(|i| i.node == "sw3" && i.name == "cw").unwrap();
        assert_eq!((cw.peer_node.as_str(), cw.peer_iface.as_str()), ("sw1", "ccw"));
        let line = Topology::line(3).interfaces().unwrap();
        assert_eq!(line.len(), 8);
        let star = Topology::star(3).interfaces().unwrap();
        assert_eq!(star.len(), 6);
        assert_eq!(
            (star[4].node.as_str(), star[4].addr.as_deref(), star[5].name.as_str()),
            ("h3", Some("10.0.0.3/24"), "p3")
        );
    }
}
