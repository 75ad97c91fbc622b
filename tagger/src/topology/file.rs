//! Topology files, TOML or JSON (by extension; JSON also when the text starts with `{`).
//!
//! ```toml
//! [[switch]]
//! name = "leaf1"
//! layer = 0                                # optional; for up-down routes
//! [[switch]]
//! name = "spine1"
//! layer = 1
//! [[host]]
//! name = "h1"
//! [[link]]
//! a = { node = "leaf1", port = 1 }
//! b = { node = "spine1", port = 1 }
//! [[link]]
//! a = "h1"
//! b = "leaf1:2"                            # node:port shorthand
//! ```
//!
//! Ports left out are numbered from 1 upwards around the given ones. This is also the
//! schema of pfctools' testbed files and of the simulator's inline topologies, one schema
//! for all three: an interface `pN` is port N, other interface names are kept as port
//! names; what only a testbed uses (MACs, addresses, MTUs, queues, IPv6) the routing
//! ignores.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Builder, End, Peer, Topology, TopologyError};

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TopologyFile {
    #[serde(rename = "switch", default)]
    pub switches: Vec<SwitchSpec>,
    #[serde(rename = "host", default)]
    pub hosts: Vec<HostSpec>,
    #[serde(rename = "link", default)]
    pub links: Vec<LinkSpec>,
    /// A testbed keeps IPv6 on its interfaces (off by default: router solicitations and
    /// MLD reports would add frames no test asked for); not used for routing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ipv6: bool,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<u32>,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    pub name: String,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub a: EndSpec,
    pub b: EndSpec,
    /// A testbed's MTU for the link's interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// A testbed's rx and tx queues for each end (a multi-queue veth spreads flows over
    /// them, as a NIC's RSS does); one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<u32>,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum EndSpec {
    /// "node", "node:3" or "node:p3".
    Short(String),
    Full(FullEnd),
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FullEnd {
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface: Option<String>,
    /// A testbed interface's MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// A testbed interface's address with prefix length ("10.0.0.1/24").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
}

/// `p12` or `12` is port 12.
fn port_number(s: &str) -> Option<u16> {
    s.strip_prefix('p').unwrap_or(s).parse().ok()
}

impl EndSpec {
    /// The end with its shorthand spelled out: "node" or "node:iface" is that node and
    /// interface.
    pub fn spelled_out(&self) -> FullEnd {
        match self {
            EndSpec::Full(f) => f.clone(),
            EndSpec::Short(s) => {
                let (node, iface) = match s.split_once(':') {
                    Some((n, i)) => (n.to_string(), Some(i.to_string())),
                    None => (s.clone(), None),
                };
                FullEnd { node, port: None, iface, mac: None, addr: None }
            }
        }
    }

    fn end(&self) -> End {
        let FullEnd { node, port, iface, .. } = self.spelled_out();
        let named = iface.as_deref().and_then(port_number);
        let name = if named.is_none() { iface } else { None };
        End { node, port: port.or(named), name }
    }
}

impl TopologyFile {
    pub fn parse(text: &str, json: bool) -> Result<TopologyFile, TopologyError> {
        if json {
            serde_json::from_str(text).map_err(|e| TopologyError::Parse(e.to_string()))
        } else {
            toml::from_str(text).map_err(|e| TopologyError::Parse(e.to_string()))
        }
    }

    pub fn build(&self) -> Result<Topology, TopologyError> {
        let mut b = Builder::new();
        for s in &self.switches {
            b.switch(s.name.clone(), s.layer);
        }
        for h in &self.hosts {
            b.host(h.name.clone());
        }
        for l in &self.links {
            b.link(l.a.end(), l.b.end());
        }
        b.build()
    }

    /// The file that describes `t` with every port numbered.
    pub fn from_topology(t: &Topology) -> TopologyFile {
        let switches = t.switches.iter().map(|s| SwitchSpec { name: s.name.clone(), layer: s.layer }).collect();
        let hosts = t.hosts.iter().map(|h| HostSpec { name: h.name.clone() }).collect();
        let end = |p: u32| {
            let port = t.port(p);
            EndSpec::Full(FullEnd {
                node: t.switches[port.switch as usize].name.clone(),
                port: Some(port.number),
                iface: port.name.clone(),
                mac: None,
                addr: None,
            })
        };
        let mut links = Vec::new();
        for (id, port) in t.ports.iter().enumerate() {
            let id = id as u32;
            match port.peer {
                Peer::Switch(q) if q > id => links.push(LinkSpec { a: end(id), b: end(q), mtu: None, queues: None }),
                Peer::Host(h) => links.push(LinkSpec {
                    a: EndSpec::Short(t.hosts[h as usize].name.clone()),
                    b: end(id),
                    mtu: None,
                    queues: None,
                }),
                Peer::Switch(_) => {}
            }
        }
        TopologyFile { switches, hosts, links, ipv6: false }
    }

    pub fn to_text(&self, json: bool) -> String {
        if json {
            serde_json::to_string_pretty(self).expect("a topology file always serializes")
        } else {
            toml::to_string(self).expect("a topology file always serializes")
        }
    }
}

/// Whether `path` names a JSON file (by extension, or by content for other names).
pub fn is_json(path: &Path, text: &str) -> bool {
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => true,
        Some("toml") => false,
        _ => text.trim_start().starts_with('{'),
    }
}

pub fn read(path: &Path) -> Result<Topology, TopologyError> {
    let text = std::fs::read_to_string(path).map_err(|e| TopologyError::Parse(format!("{}: {e}", path.display())))?;
    let file = TopologyFile::parse(&text, is_json(path, &text))
        .map_err(|e| TopologyError::Parse(format!("{}: {e}", path.display())))?;
    file.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TESTBED: &str = r#"
        [[host]]
        name = "h1"
        [[host]]
        name = "h2"
        [[switch]]
        name = "sw1"
        [[switch]]
        name = "sw2"
        [[link]]
        a = { node = "h1", iface = "eth0", addr = "10.0.0.1/24" }
        b = "sw1:p1"
        [[link]]
        a = "sw1:p2"
        b = { node = "sw2", iface = "cw" }
        mtu = 3000
        [[link]]
        a = "h2"
        b = "sw2"
    "#;

    #[test]
    fn a_pfctools_testbed_file_reads_with_its_port_numbers_and_names() {
        let t = TopologyFile::parse(TESTBED, false).unwrap().build().unwrap();
        let sw1 = t.node("sw1").unwrap();
        let super::super::NodeRef::Switch(sw1) = sw1 else { panic!() };
        assert!(t.faces_host(t.port_by_number(sw1, 1).unwrap()));
        let p2 = t.port_by_number(sw1, 2).unwrap();
        assert_eq!(t.port_label(t.peer_port(p2).unwrap()), "sw2:cw");
    }

    #[test]
    fn toml_and_json_round_trip() {
        let t = TopologyFile::parse(TESTBED, false).unwrap().build().unwrap();
        for json in [false, true] {
            let text = TopologyFile::from_topology(&t).to_text(json);
            let back = TopologyFile::parse(&text, json).unwrap().build().unwrap();
            assert_eq!(back.switches, t.switches);
            assert_eq!(back.ports, t.ports);
        }
    }

    #[test]
    fn unknown_fields_are_errors() {
        let e = TopologyFile::parse("[[switch]]\nname = \"a\"\nlayers = 1\n", false).unwrap_err();
        assert!(e.to_string().contains("layers"), "{e}");
    }
}
