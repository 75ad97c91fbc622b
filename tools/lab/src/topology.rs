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

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    #[serde(rename = "host", default)]
    pub hosts: Vec<Node>,
    #[serde(rename = "switch", default)]
    pub switches: Vec<Node>,
    #[serde(rename = "link", default)]
    pub links: Vec<Link>,
    /// Keep IPv6 on the interfaces (off by default: router solicitations and MLD reports
    /// would add frames no test asked for).
    #[serde(default)]
    pub ipv6: bool,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub name: String,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Link {
    pub a: Endpoint,
    pub b: Endpoint,
    #[serde(default)]
    pub mtu: Option<u32>,
    /// Rx and tx queues of each end (a multi-queue veth spreads flows over them, as a
    /// NIC's RSS does); one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<u32>,
}

/// One end of a link: a node, optionally with interface name, MAC and address.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Endpoint {
    /// "node" or "node:iface".
    Short(String),
    Full(EndpointSpec),
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EndpointSpec {
    pub node: String,
    #[serde(default)]
    pub iface: Option<String>,
    #[serde(default)]
    pub mac: Option<MacAddr>,
    /// An address with prefix length, e.g. "10.0.0.1/24", set inside the node's namespace.
    #[serde(default)]
    pub addr: Option<String>,
}

impl Endpoint {
    pub fn spec(&self) -> EndpointSpec {
        match self {
            Endpoint::Full(s) => s.clone(),
            Endpoint::Short(s) => {
                let (node, iface) = match s.split_once(':') {
                    Some((n, i)) => (n.to_string(), Some(i.to_string())),
                    None => (s.clone(), None),
                };
                EndpointSpec { node, iface, mac: None, addr: None }
            }
        }
    }
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

impl Topology {
    pub fn from_toml(text: &str) -> Result<Topology, TopologyError> {
        let t: Topology = toml::from_str(text).map_err(|e| TopologyError::Parse(e.to_string()))?;
        t.interfaces()?;
        Ok(t)
    }

    pub fn is_switch(&self, node: &str) -> bool {
        self.switches.iter().any(|s| s.name == node)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.hosts.iter().chain(&self.switches)
    }

    /// Every interface with names and MACs filled in, in link order; checks the file.
    pub fn interfaces(&self) -> Result<Vec<Interface>, TopologyError> {
        let mut names = HashSet::new();
        for (i, n) in self.nodes().enumerate() {
            if n.name.is_empty() || n.name.len() > 24 || !n.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            {
                return Err(invalid(
                    format!("node {i}"),
                    format!("name {:?}: use 1-24 letters, digits or '-'", n.name),
                ));
            }
            if !names.insert(n.name.clone()) {
                return Err(invalid(format!("node {}", n.name), "defined twice"));
            }
        }
        let node_index: BTreeMap<&str, usize> = self.nodes().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();
        let mut counters: BTreeMap<String, usize> = BTreeMap::new();
        let mut out = Vec::new();
        let mut taken = HashSet::new();
        for (li, link) in self.links.iter().enumerate() {
            let ends = [link.a.spec(), link.b.spec()];
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
                let mac = spec.mac.unwrap_or(MacAddr::local(((ni as u64 + 1) << 8) | *count as u64));
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

    /// Switches sw1..swN in a ring (sw_i:cw — sw_{i+1}:ccw), host h_i on sw_i:host.
    pub fn ring(n: usize) -> Topology {
        let mut t = Topology::default();
        for i in 1..=n {
            t.hosts.push(Node { name: format!("h{i}") });
            t.switches.push(Node { name: format!("sw{i}") });
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

    /// Switches sw1..swN in a line (sw_i:right — sw_{i+1}:left), host h1 on sw1:host and
    /// host hN on swN:host.
    pub fn line(n: usize) -> Topology {
        let mut t = Topology::default();
        t.hosts.push(Node { name: "h1".into() });
        t.hosts.push(Node { name: format!("h{n}") });
        for i in 1..=n {
            t.switches.push(Node { name: format!("sw{i}") });
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

    /// Hosts h1..hN around one switch sw1: host h_i's eth0 (10.0.0.i/24) on port p_i.
    pub fn star(hosts: usize) -> Topology {
        let mut t = Topology { switches: vec![Node { name: "sw1".into() }], ..Topology::default() };
        for i in 1..=hosts {
            t.hosts.push(Node { name: format!("h{i}") });
            t.links.push(Link {
                a: Endpoint::Full(EndpointSpec {
                    node: format!("h{i}"),
                    iface: Some("eth0".into()),
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
