//! From a scenario to a fabric: nodes, ports and links, each switch's configuration with
//! its forwarding entries and (optionally) Tagger's table, and the flows' endpoints.

use std::collections::BTreeMap;
use std::time::Duration;

use pfcswitch_core::config::{max_frame_for_mtu, sonic, Config, Multipath, PortRole};
use pfcswitch_core::ecmp::{self, FlowKey};
use pfcswitch_core::mac::MacAddr;
use pfcswitch_core::ports::PortId;
use pfcswitch_core::speed::Speed;
use pfcswitch_core::tagging::TagTable;
use pfcswitch_core::Priority;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tagger::algo::Algorithm;
use tagger::routes::explicit::Explicit;
use tagger::system::{TagPriorities, TagSystem};
use tagger::topology::{Peer, Topology};

use pfctestkit::topology::TestbedTopology;

use crate::ids::{FabricPort, HostIx, SwitchIx};
use crate::scenario::{invalid, OutOfOrder, Routing, Scenario, ScenarioError, TopologySource};

/// A port whose link is not known yet.
const UNLINKED: FabricPort = FabricPort::from_raw(u32::MAX);

/// Propagation in a cable, ns per metre.
const NS_PER_M: f64 = 5.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// A switch and the port's number there.
    Switch(SwitchIx, PortId),
    Host(HostIx),
}

/// One end of a link.
///
/// In declared order (`repr(C)`), what a frame's send and arrival read first, in one
/// cache line: the compiler had put the names between them.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct PortSpec {
    pub owner: Owner,
    pub peer: FabricPort,
    pub speed: Speed,
    pub propagation: Duration,
    pub failed: bool,
    pub mac: MacAddr,
    /// The switch or host it belongs to.
    pub node: String,
    /// "sw1:cw", "h1".
    pub label: String,
}

impl PortSpec {
    /// A port before its link is known; its MAC is locally administered from `mac_id`.
    fn unlinked(owner: Owner, node: &str, label: String, mac_id: u64, speed: Speed) -> PortSpec {
        PortSpec {
            owner,
            node: node.to_string(),
            label,
            mac: MacAddr::local(mac_id),
            peer: UNLINKED,
            speed,
            propagation: Duration::ZERO,
            failed: false,
        }
    }
}

#[derive(Debug)]
pub struct SwitchSpec {
    pub name: String,
    pub config: Config,
    pub tags: Option<TagTable>,
    /// Each of its ports (by the switch's own numbering) in the fabric's.
    pub ports: Vec<FabricPort>,
    /// The routes the fabric computed, added to the switch as static entries
    /// ([`pfcswitch_core::switch::Switch::add_static_route`]), not written into `config`.
    pub routes: Routes,
}

/// A switch's computed routes: for each host, the index of its set of next hops (a
/// switch has a few sets, shared by all its destinations). Two bytes a host, the
/// address left to the host: the fabric keeps its switches' routes while it runs, and a
/// k=16 fat-tree's 320 switches have 1 024 each.
#[derive(Debug, Default)]
pub struct Routes {
    by_host: Vec<u16>,
    next_hops: Vec<Box<[PortId]>>,
}

impl Routes {
    /// No route to the host.
    const NONE: u16 = u16::MAX;

    /// No routes yet, to any of `hosts` hosts.
    fn for_hosts(hosts: usize) -> Routes {
        Routes { by_host: vec![Routes::NONE; hosts], next_hops: Vec::new() }
    }

    /// Host `h`'s next hops are `set`.
    fn add(&mut self, h: HostIx, set: &[PortId]) -> Result<(), ScenarioError> {
        let i = match self.next_hops.iter().position(|s| s[..] == set[..]) {
            Some(i) => i,
            None => {
                self.next_hops.push(set.into());
                self.next_hops.len() - 1
            }
        };
        let i = u16::try_from(i).ok().filter(|&i| i != Routes::NONE);
        let i = i.ok_or_else(|| invalid("routes", "a switch with more than 65 534 sets of next hops"))?;
        self.by_host[h.index()] = i;
        Ok(())
    }

    /// Each destination (by its address, of `fabric`'s hosts) and its next hops, in the
    /// order of the hosts.
    pub fn iter<'a>(&'a self, fabric: &'a Fabric) -> impl Iterator<Item = (MacAddr, &'a [PortId])> {
        let hosts = self.by_host.iter().enumerate().filter(|&(_, &set)| set != Routes::NONE);
        hosts.map(|(h, &set)| (fabric.ports[fabric.hosts[h].port].mac, &self.next_hops[usize::from(set)][..]))
    }
}

#[derive(Debug)]
pub struct HostNode {
    pub name: String,
    pub port: FabricPort,
    pub response_delay: Duration,
    pub queue_frames: usize,
    pub out_of_order: OutOfOrder,
}

/// A flow with its endpoints resolved.
#[derive(Clone, Debug)]
pub struct FlowPlan {
    pub id: u16,
    pub from: HostIx,
    pub to: HostIx,
    /// The host's queue for it: as given, or under Tagger the initial tag's priority.
    pub priority: Priority,
    /// As given; else the priority, or under Tagger the initial tag.
    pub dscp: Option<u8>,
    /// As given; else Not-ECT, or ECT(0) under DCQCN.
    pub ecn: Option<u8>,
    pub size: usize,
    pub interval: Duration,
    pub start: Duration,
    pub stop: Duration,
    pub count: Option<u64>,
    /// A workload's flow: its size in bytes of UDP payload (the frames before the last
    /// carry `size - 46` each).
    pub bytes: Option<u64>,
    /// The last frame's size on the wire (`size` unless a workload's flow ends short).
    pub last_size: usize,
    /// With a count: how long it would take on an empty fabric, from its start to its last
    /// frame's last bit at the receiver (`None` if that is beyond the run's end).
    pub ideal: Option<Duration>,
}

/// What an untagged test frame carries besides its UDP payload: Ethernet (14), IPv4 (20),
/// UDP (8) and the FCS (4).
const FRAME_OVERHEAD: usize = 14 + 20 + 8 + 4;

/// UDP payload bytes of an untagged test frame of `wire_size` bytes with FCS.
pub fn payload_of(wire_size: usize) -> usize {
    wire_size.saturating_sub(FRAME_OVERHEAD)
}

#[derive(Debug)]
pub struct Fabric {
    pub ports: Vec<PortSpec>,
    pub switches: Vec<SwitchSpec>,
    pub hosts: Vec<HostNode>,
    pub flows: Vec<FlowPlan>,
    /// Every host-to-host path a flow takes, as node names.
    pub paths: Vec<Vec<String>>,
    /// Under Tagger: the tag hosts stamp.
    pub initial_tag: Option<u8>,
}

fn topology_of(s: &Scenario) -> Result<Topology, ScenarioError> {
    let bad = |e: String| invalid("topology", e);
    match &s.topology {
        TopologySource::Spec(spec) => tagger::load_topology(spec).map_err(|e| bad(e.to_string())),
        TopologySource::Inline(t) => {
            t.interfaces().map_err(|e| bad(e.to_string()))?;
            t.build().map_err(|e| bad(e.to_string()))
        }
    }
}

/// Merges `over` into `base`, tables key by key; a `port` table (rather than the
/// `[[port]]` array) applies to the ports by name (`port.cw.xoff_bytes = ...`).
fn merge(base: &mut toml::Table, over: &toml::Table) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(toml::Value::Array(ports)), toml::Value::Table(by_name)) if k == "port" => {
                for p in ports.iter_mut().filter_map(toml::Value::as_table_mut) {
                    let name = p.get("name").or_else(|| p.get("iface")).and_then(|n| n.as_str()).map(str::to_string);
                    if let Some(o) = name.and_then(|n| by_name.get(&n).or_else(|| by_name.get("*"))) {
                        if let Some(o) = o.as_table() {
                            merge(p, o);
                        }
                    }
                }
            }
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

impl Fabric {
    pub fn build(s: &Scenario, seed: u64) -> Result<Fabric, ScenarioError> {
        let t = topology_of(s)?;
        if t.switches.is_empty() || t.hosts.is_empty() {
            return Err(invalid("topology", "needs switches and hosts"));
        }
        // Global ports: every switch port in order, then one per host.
        let mut ports = Vec::new();
        let mut host_port = vec![usize::MAX; t.hosts.len()];
        for (pi, p) in t.ports.iter().enumerate() {
            let sw = p.switch as usize;
            let local = t.switches[sw].ports.iter().position(|&q| q as usize == pi).expect("a switch lists its ports");
            let label =
                format!("{}:{}", t.switches[sw].name, p.name.clone().unwrap_or_else(|| format!("p{}", p.number)));
            let node = &t.switches[sw].name;
            ports.push(PortSpec::unlinked(
                Owner::Switch(SwitchIx::new(sw), PortId::new(local)),
                node,
                label,
                0x02_0000 + pi as u64,
                s.speed,
            ));
        }
        for (h, host) in t.hosts.iter().enumerate() {
            host_port[h] = ports.len();
            ports.push(PortSpec::unlinked(
                Owner::Host(HostIx::new(h)),
                &host.name,
                host.name.clone(),
                0x01_0000 + h as u64,
                s.speed,
            ));
        }
        for (pi, p) in t.ports.iter().enumerate() {
            let peer = match p.peer {
                Peer::Switch(q) => q as usize,
                Peer::Host(h) => {
                    let hp = host_port[h as usize];
                    if ports[hp].peer != UNLINKED {
                        return Err(invalid(
                            "topology",
                            format!("host {} has more than one link", t.hosts[h as usize].name),
                        ));
                    }
                    ports[hp].peer = FabricPort::new(pi);
                    hp
                }
            };
            ports[pi].peer = FabricPort::new(peer);
        }
        if let Some(h) = (0..t.hosts.len()).find(|&h| ports[host_port[h]].peer == UNLINKED) {
            return Err(invalid("topology", format!("host {} has no link", t.hosts[h].name)));
        }
        let cable = |m: f64| Duration::from_nanos((m * NS_PER_M).round() as u64);
        for p in &mut ports {
            p.propagation = cable(s.cable_m);
        }
        for (i, l) in s.link.iter().enumerate() {
            if l.cable_m.is_some_and(|m| !(m.is_finite() && m >= 0.0)) {
                return Err(invalid(format!("link[{i}].cable_m"), "must be a number of at least 0"));
            }
            let ends = links_between(&ports, &l.a, &l.b);
            if ends.is_empty() {
                return Err(invalid(format!("link[{i}]"), format!("no link between {} and {}", l.a, l.b)));
            }
            for e in ends {
                for q in [e, ports[e].peer] {
                    if let Some(speed) = l.speed {
                        ports[q].speed = speed;
                    }
                    if let Some(m) = l.cable_m {
                        ports[q].propagation = cable(m);
                    }
                }
            }
        }
        for (i, [a, b]) in s.failed_links.iter().enumerate() {
            let ends = links_between(&ports, a, b);
            if ends.is_empty() {
                return Err(invalid(format!("failed_links[{i}]"), format!("no link between {a} and {b}")));
            }
            for e in ends {
                ports[e].failed = true;
                let peer = ports[e].peer;
                ports[peer].failed = true;
            }
        }

        let host_index: BTreeMap<&str, usize> = t.hosts.iter().enumerate().map(|(i, h)| (h.name.as_str(), i)).collect();
        let hosts: Vec<HostNode> = t
            .hosts
            .iter()
            .enumerate()
            .map(|(h, host)| {
                let spec = s.host.get(&host.name);
                let delay = spec.and_then(|x| x.response_delay_ns).or(s.host_defaults.response_delay_ns).unwrap_or(0);
                let queue = spec.and_then(|x| x.queue_frames).or(s.host_defaults.queue_frames).unwrap_or(16);
                let out_of_order =
                    spec.and_then(|x| x.out_of_order).or(s.host_defaults.out_of_order).unwrap_or_default();
                HostNode {
                    name: host.name.clone(),
                    port: FabricPort::new(host_port[h]),
                    response_delay: Duration::from_nanos(delay),
                    queue_frames: queue.max(1),
                    out_of_order,
                }
            })
            .collect();
        for name in s.host.keys() {
            if !host_index.contains_key(name.as_str()) {
                return Err(invalid(format!("host.{name}"), "no such host"));
            }
        }

        let end = secs("duration_ms", "the run", (s.duration_ms + s.drain_ms) / 1e3)?;
        let mut flows = plan_flows(s, &t, &host_index, &ports, &hosts, seed, end)?;

        // Forwarding: every switch gets a static entry per destination host, of one port
        // or (ECMP) of every equal-cost next hop.
        let mut fdb: Vec<BTreeMap<usize, Vec<FabricPort>>> = vec![BTreeMap::new(); t.switches.len()];
        if s.routes.is_empty() {
            shortest_routes(&t, &ports, &hosts, s.routing, &mut fdb)?;
        } else {
            explicit_routes(s, &t, &ports, &hosts, &host_index, &mut fdb)?;
        }
        // The paths the flows take, walked through the entries, and how long a flow with
        // a count would take alone on them (under adaptive routing a flow's frames may
        // take any equal-cost path: they are as long, the ideal is the same).
        let mut paths = Vec::new();
        for f in &mut flows {
            let path =
                walk(&t, &ports, &hosts, &fdb, f, s.ecmp_seed).map_err(|e| invalid(format!("flow {}", f.id), e))?;
            f.ideal = ideal_fct(&ports, &path, f, end);
            let names = path_names(&ports, &path);
            if !paths.contains(&names) {
                paths.push(names);
            }
        }

        let tables = if s.tagger { Some(tag_tables(s, &t, &paths)?) } else { None };
        let sonic = match &s.sonic_config {
            Some(path) => {
                let file = std::fs::File::open(path).map_err(|e| invalid("sonic_config", format!("{path}: {e}")))?;
                Some(sonic::read_document(file).map_err(|e| invalid("sonic_config", format!("{path}: {e}")))?)
            }
            None => None,
        };
        let mut switches = Vec::new();
        for (sw, spec) in t.switches.iter().enumerate() {
            let local: Vec<FabricPort> = spec.ports.iter().map(|&p| FabricPort::new(p as usize)).collect();
            let names: Vec<String> = spec
                .ports
                .iter()
                .map(|&p| {
                    t.ports[p as usize].name.clone().unwrap_or_else(|| format!("p{}", t.ports[p as usize].number))
                })
                .collect();
            let mut c = match &sonic {
                Some(text) => {
                    if s.sonic_ports.len() < names.len() {
                        return Err(invalid(
                            "sonic_ports",
                            format!(
                                "switch {} has {} ports; {} are named",
                                spec.name,
                                names.len(),
                                s.sonic_ports.len()
                            ),
                        ));
                    }
                    let maps: Vec<sonic::PortMap> = names
                        .iter()
                        .zip(&s.sonic_ports)
                        .map(|(iface, name)| sonic::PortMap { sonic: name.clone(), iface: iface.clone() })
                        .collect();
                    sonic::translate(text, &maps).map_err(|e| invalid("sonic_config", e.to_string()))?.config
                }
                None => {
                    let mut c = Config::for_interfaces(&names);
                    c.pfc.lossless = Some(vec![Priority::new(3)]);
                    c
                }
            };
            c.name = spec.name.clone();
            for (k, p) in c.ports.iter_mut().enumerate() {
                let g = &ports[local[k]];
                p.speed = Some(g.speed);
                if s.mtu != 1500 {
                    p.max_frame = Some(max_frame_for_mtu(s.mtu));
                }
                p.cable_m = g.propagation.as_nanos() as f64 / NS_PER_M;
                p.mac = Some(g.mac);
                if matches!(ports[g.peer].owner, Owner::Switch(..)) {
                    p.role = PortRole::Switch;
                }
                // The fabric may loop: static entries do the forwarding.
                p.flood = false;
            }
            // Each switch its own seed: with one seed for all, every tier would split
            // flows alike (see pfcswitch_core::ecmp).
            c.fdb.ecmp_seed = ecmp_seed(s.ecmp_seed, sw);
            c.fdb.multipath = match s.routing {
                Routing::Adaptive => Multipath::Adaptive,
                Routing::Flowlet => Multipath::Flowlet,
                Routing::Ecmp | Routing::Single | Routing::Dmodk => Multipath::Hash,
            };
            let mut table =
                toml::Table::try_from(&c).map_err(|e| invalid(format!("switch {}", spec.name), e.to_string()))?;
            merge(&mut table, &s.switch_defaults);
            if let Some(over) = s.switch.get(&spec.name) {
                merge(&mut table, over);
            }
            let field = format!("switch {}", spec.name);
            let mut config: Config =
                table.try_into().map_err(|e: toml::de::Error| invalid(&field, e.message().to_string()))?;
            let tags = match &tables {
                Some(all) => {
                    let st =
                        all.iter().find(|x| x.switch == spec.name).ok_or_else(|| invalid(&field, "no Tagger table"))?;
                    config.pfc.lossless = None;
                    if st.ingress.is_empty() {
                        // No flow's route crosses it: no table, the tags' priorities lossless.
                        config.pfc.lossless = Some(s.tagger_priorities.clone());
                        None
                    } else {
                        Some(
                            TagTable::apply(&mut config, st, "tagger (computed)", false)
                                .map_err(|e| invalid(&field, e.to_string()))?,
                        )
                    }
                }
                None => None,
            };
            if tags.is_some() && config.fdb.multipath != Multipath::Hash && s.routes.is_empty() {
                // The tables are computed for the paths the flows' hashes pick (routes
                // a scenario names have one next hop a destination: nothing to pick).
                return Err(invalid(&field, "Tagger's tables need each flow on its hashed path: not adaptive routing"));
            }
            config.validate().map_err(|e| invalid(&field, e.to_string()))?;
            // The routes go to the switch as ports, not names through the TOML above (a
            // k=16 fat-tree's took 1.4 s and 48 MiB that way). A destination the
            // scenario gives the switch an entry for keeps that entry.
            let own: std::collections::HashSet<MacAddr> =
                config.fdb_entries.iter().map(|e| e.mac).chain(config.fdb_groups.iter().map(|g| g.mac)).collect();
            let mut routes = Routes::for_hosts(hosts.len());
            for (h, next) in std::mem::take(&mut fdb[sw]) {
                let mac = ports[hosts[h].port].mac;
                if own.contains(&mac) {
                    continue;
                }
                let set: Vec<PortId> = next
                    .iter()
                    .map(|port| {
                        let k = local.iter().position(|p| p == port).expect("an entry names one of the switch's ports");
                        PortId::new(k)
                    })
                    .collect();
                routes.add(HostIx::new(h), &set)?;
            }
            switches.push(SwitchSpec { name: spec.name.clone(), config, tags, ports: local, routes });
        }
        for name in s.switch.keys() {
            if !t.switches.iter().any(|x| &x.name == name) {
                return Err(invalid(format!("switch.{name}"), "no such switch"));
            }
        }
        let first = tables.as_ref().and_then(|all| all.first());
        let initial_tag = first.map(|st| st.initial_tag);
        // Under Tagger a host stamps the initial tag and queues (and honours pauses) on
        // that tag's priority, as a NIC set up for the tables would.
        let initial_prio = first
            .and_then(|st| st.priorities.get(usize::from(st.initial_tag).checked_sub(1)?).copied())
            .and_then(Priority::checked);
        if let Some(prio) = initial_prio {
            for f in flows.iter_mut().filter(|f| f.dscp.is_none()) {
                f.priority = prio;
            }
        }
        Ok(Fabric { ports, switches, hosts, flows, paths, initial_tag })
    }

    /// The DSCP flow `f`'s frames carry: as given; else under Tagger the initial tag,
    /// otherwise its priority.
    pub fn dscp_of(&self, f: &FlowPlan) -> u8 {
        f.dscp.unwrap_or(self.initial_tag.unwrap_or(f.priority.get()))
    }

    /// The global port called `node:port` (a switch port) or `host` (a host's NIC).
    pub fn port_named(&self, label: &str) -> Option<FabricPort> {
        self.ports.iter().position(|p| p.label == label).map(FabricPort::new).or_else(|| {
            let (node, port) = label.split_once(':')?;
            let sw = self.switches.iter().position(|s| s.name == node)?;
            let k = self.switches[sw].config.port_index(port)?;
            Some(self.switches[sw].ports[k])
        })
    }

    pub fn host_named(&self, name: &str) -> Option<HostIx> {
        self.hosts.iter().position(|h| h.name == name).map(HostIx::new)
    }

    /// The ports of node `a` linked to node `b`.
    pub fn link_ports(&self, a: &str, b: &str) -> Vec<FabricPort> {
        links_between(&self.ports, a, b)
    }
}

/// `v` seconds as a duration, or an error naming what it is (negative, not a number, or
/// too long).
fn secs(field: &str, what: &str, v: f64) -> Result<Duration, ScenarioError> {
    Duration::try_from_secs_f64(v).map_err(|_| invalid(field, format!("{what}: {v} s is not a usable duration")))
}

/// The ports of node `a` linked to node `b`.
fn links_between(ports: &[PortSpec], a: &str, b: &str) -> Vec<FabricPort> {
    (0..ports.len()).map(FabricPort::new).filter(|&p| ports[p].node == a && ports[ports[p].peer].node == b).collect()
}

fn plan_flows(
    s: &Scenario,
    t: &Topology,
    host_index: &BTreeMap<&str, usize>,
    ports: &[PortSpec],
    hosts: &[HostNode],
    seed: u64,
    end: Duration,
) -> Result<Vec<FlowPlan>, ScenarioError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = t.hosts.len();
    let mut flows = Vec::new();
    for (i, f) in s.flow.iter().enumerate() {
        let field = format!("flow[{i}]");
        let host =
            |name: &str| host_index.get(name).copied().ok_or_else(|| invalid(&field, format!("no host {name:?}")));
        let pairs: Vec<(usize, usize)> = match (f.from.as_str(), f.to.as_str()) {
            ("*", "*") => {
                if n < 2 {
                    return Err(invalid(&field, "a permutation needs two hosts"));
                }
                // A derangement: shuffle until no host sends to itself.
                let mut to: Vec<usize> = (0..n).collect();
                loop {
                    to.shuffle(&mut rng);
                    if to.iter().enumerate().all(|(a, &b)| a != b) {
                        break;
                    }
                }
                (0..n).map(|a| (a, to[a])).collect()
            }
            ("*", to) => {
                let b = host(to)?;
                (0..n).filter(|&a| a != b).map(|a| (a, b)).collect()
            }
            (from, "*") => {
                return Err(invalid(&field, format!("from = {from:?} with to = \"*\": use from = \"*\" too")))
            }
            (from, to) => vec![(host(from)?, host(to)?)],
        };
        // Untagged frames on the wire: the MTU, the Ethernet header and the FCS.
        let largest = s.mtu as usize + 18;
        if f.size > largest {
            return Err(invalid(
                &field,
                format!("size {} is above what MTU {} carries ({largest} bytes)", f.size, s.mtu),
            ));
        }
        for (a, b) in pairs {
            if a == b {
                return Err(invalid(&field, "a host cannot send to itself"));
            }
            let speed = ports[hosts[a].port].speed;
            let wire = pfcswitch_core::speed::wire_bytes(f.size.saturating_sub(4)) as f64;
            let fps = match (f.rate_fps, f.load) {
                (Some(r), _) => r,
                (None, Some(load)) => speed.bps() as f64 * load / 100.0 / (wire * 8.0),
                _ => unreachable!("checked"),
            };
            let id = u16::try_from(flows.len()).map_err(|_| invalid(&field, "at most 65536 flows"))?;
            flows.push(FlowPlan {
                id,
                from: HostIx::new(a),
                to: HostIx::new(b),
                priority: f.priority,
                dscp: f.dscp,
                ecn: f.ecn,
                size: f.size,
                interval: secs(&field, "the interval between frames", 1.0 / fps)?,
                start: secs(&field, "start_ms", f.start_ms / 1e3)?,
                stop: secs(&field, "stop_ms", f.stop_ms.unwrap_or(s.duration_ms) / 1e3)?,
                count: f.count,
                bytes: None,
                last_size: f.size,
                ideal: None,
            });
        }
    }
    for (i, w) in s.workload.iter().enumerate() {
        plan_workload(s, i, w, host_index, ports, hosts, &mut rng, end, &mut flows)?;
    }
    for (i, spec) in s.flow_file.iter().enumerate() {
        plan_flow_file(s, i, spec, ports, hosts, end, &mut flows)?;
    }
    Ok(flows)
}

/// Workload `i`'s flows ([`crate::scenario::WorkloadSpec`]), appended to `flows`; each
/// sends to its end, which the run's `end` bounds.
#[allow(clippy::too_many_arguments)]
fn plan_workload(
    s: &Scenario,
    i: usize,
    w: &crate::scenario::WorkloadSpec,
    host_index: &BTreeMap<&str, usize>,
    ports: &[PortSpec],
    hosts: &[HostNode],
    rng: &mut ChaCha8Rng,
    end: Duration,
    flows: &mut Vec<FlowPlan>,
) -> Result<(), ScenarioError> {
    let field = format!("workload[{i}]");
    let n = hosts.len();
    let host = |name: &str| host_index.get(name).copied().ok_or_else(|| invalid(&field, format!("no host {name:?}")));
    let senders: Vec<usize> = if w.from == "*" { (0..n).collect() } else { vec![host(&w.from)?] };
    let receiver = if w.to == "*" { None } else { Some(host(&w.to)?) };
    if n < 2 {
        return Err(invalid(&field, "a workload needs two hosts"));
    }
    check_frame(&field, w.frame, s.mtu)?;
    let cdf = crate::workload::SizeCdf::named(&w.sizes, &format!("{field}.sizes"))?;
    let per_frame = payload_of(w.frame) as u64;
    let wire = pfcswitch_core::speed::wire_bytes(w.frame - 4) as f64;
    // A flow's mean bytes on the wire: its payload's, with every frame's headers, FCS,
    // preamble and gap.
    let mean_wire = cdf.mean() * wire / per_frame as f64;
    let start = (w.start_ms * 1e6).round() as u64;
    let stop = (w.stop_ms.unwrap_or(s.duration_ms) * 1e6).round() as u64;
    for a in senders {
        let speed = ports[hosts[a].port].speed;
        let per_s = w.load / 100.0 * speed.bps() as f64 / 8.0 / mean_wire;
        for at in crate::workload::arrivals(rng, per_s, start, stop) {
            let bytes = cdf.sample(rng);
            let b = match receiver {
                Some(b) => b,
                None => {
                    let b = rng.random_range(0..n - 1);
                    b + usize::from(b >= a)
                }
            };
            if a == b {
                continue;
            }
            let sized = Sized { bytes, frame: w.frame, priority: w.priority, dscp: w.dscp };
            flows.push(sized_flow(&field, flows.len(), (a, b), sized, Duration::from_nanos(at), speed, end)?);
        }
    }
    Ok(())
}

/// A sized flow's largest frame, `frame` bytes on the wire with FCS, checked against the
/// scenario's MTU.
fn check_frame(field: &str, frame: usize, mtu: u32) -> Result<(), ScenarioError> {
    let largest = mtu as usize + 18;
    if !(64..=largest).contains(&frame) {
        return Err(invalid(format!("{field}.frame"), format!("must be 64..={largest} (MTU {mtu})")));
    }
    Ok(())
}

/// A flow of a known size: its bytes of UDP payload, in frames of `frame` bytes on the
/// wire and a last one with the rest, on `priority`.
struct Sized {
    bytes: u64,
    frame: usize,
    priority: Priority,
    dscp: Option<u8>,
}

/// The plan of flow number `id` from host `ends.0` to `ends.1` sending `sized` from
/// `start` at `speed`'s line rate until it is done (or the run's `end`).
fn sized_flow(
    field: &str,
    id: usize,
    (a, b): (usize, usize),
    sized: Sized,
    start: Duration,
    speed: Speed,
    end: Duration,
) -> Result<FlowPlan, ScenarioError> {
    let per_frame = payload_of(sized.frame) as u64;
    let wire = pfcswitch_core::speed::wire_bytes(sized.frame - 4) as f64;
    let frames = sized.bytes.div_ceil(per_frame).max(1);
    let last = sized.bytes.saturating_sub((frames - 1) * per_frame);
    let id = u16::try_from(id).map_err(|_| invalid(field, "at most 65536 flows in a run"))?;
    Ok(FlowPlan {
        id,
        from: HostIx::new(a),
        to: HostIx::new(b),
        priority: sized.priority,
        dscp: sized.dscp,
        ecn: None,
        size: sized.frame,
        interval: secs(field, "a frame's time at line rate", wire * 8.0 / speed.bps() as f64)?,
        start,
        stop: end,
        count: Some(frames),
        bytes: Some(sized.bytes),
        last_size: (last as usize + FRAME_OVERHEAD).max(64),
        ideal: None,
    })
}

/// Flow file `i`'s flows ([`crate::scenario::FlowFileSpec`]), appended to `flows`.
fn plan_flow_file(
    s: &Scenario,
    i: usize,
    spec: &crate::scenario::FlowFileSpec,
    ports: &[PortSpec],
    hosts: &[HostNode],
    end: Duration,
    flows: &mut Vec<FlowPlan>,
) -> Result<(), ScenarioError> {
    use crate::scenario::FlowFileFormat;
    let field = format!("flow_file[{i}]");
    check_frame(&field, spec.frame, s.mtu)?;
    let text = std::fs::read_to_string(&spec.path).map_err(|e| invalid(&field, format!("{}: {e}", spec.path)))?;
    let listed = match spec.format {
        FlowFileFormat::Htsim => crate::workload::parse_htsim_matrix(&text),
        FlowFileFormat::Hpcc => crate::workload::parse_hpcc_flows(&text),
    }
    .map_err(|e| invalid(&field, format!("{}: {e}", spec.path)))?;
    for f in listed {
        if f.from >= hosts.len() || f.to >= hosts.len() {
            return Err(invalid(
                &field,
                format!("flow {}->{}: the topology has {} hosts (numbered from 0)", f.from, f.to, hosts.len()),
            ));
        }
        if f.from == f.to {
            return Err(invalid(&field, format!("flow {}->{} sends to itself", f.from, f.to)));
        }
        let priority = spec.priority.or(f.priority.map(Priority::new)).unwrap_or(crate::scenario::default_priority());
        let sized = Sized { bytes: f.bytes, frame: spec.frame, priority, dscp: spec.dscp };
        let speed = ports[hosts[f.from].port].speed;
        let start = Duration::from_nanos(f.start_ns);
        flows.push(sized_flow(&field, flows.len(), (f.from, f.to), sized, start, speed, end)?);
    }
    Ok(())
}

/// Shortest paths over the working links: per (switch, destination host) every
/// equal-cost next hop, or one of them, as `routing` says.
fn shortest_routes(
    t: &Topology,
    ports: &[PortSpec],
    hosts: &[HostNode],
    routing: Routing,
    fdb: &mut [BTreeMap<usize, Vec<FabricPort>>],
) -> Result<(), ScenarioError> {
    let ns = t.switches.len();
    for (h, host) in hosts.iter().enumerate() {
        let attach = ports[host.port].peer;
        let Owner::Switch(home, _) = ports[attach].owner else { unreachable!("hosts attach to switches") };
        let mut dist = vec![u32::MAX; ns];
        dist[home] = 0;
        let mut frontier: Vec<SwitchIx> = vec![home];
        while !frontier.is_empty() {
            let mut next = Vec::new();
            for &sw in &frontier {
                for &p in &t.switches[sw].ports {
                    let g = &ports[p as usize];
                    if g.failed {
                        continue;
                    }
                    if let Owner::Switch(other, _) = ports[g.peer].owner {
                        if dist[other] == u32::MAX {
                            dist[other] = dist[sw] + 1;
                            next.push(other);
                        }
                    }
                }
            }
            frontier = next;
        }
        for sw in 0..ns {
            if sw == home.index() {
                fdb[sw].insert(h, vec![attach]);
                continue;
            }
            if dist[sw] == u32::MAX {
                continue;
            }
            let candidates: Vec<FabricPort> = t.switches[sw]
                .ports
                .iter()
                .map(|&p| FabricPort::new(p as usize))
                .filter(|&p| {
                    !ports[p].failed
                        && matches!(ports[ports[p].peer].owner, Owner::Switch(o, _) if dist[o] + 1 == dist[sw])
                })
                .collect();
            let n = candidates.len();
            let next = match routing {
                Routing::Ecmp | Routing::Adaptive | Routing::Flowlet => candidates,
                Routing::Single => vec![candidates[h % n]],
                Routing::Dmodk if dist[sw] % 2 == 1 => vec![candidates[(h / n) % n]],
                Routing::Dmodk => vec![candidates[h % n]],
            };
            fdb[sw].insert(h, next);
        }
    }
    Ok(())
}

fn explicit_routes(
    s: &Scenario,
    t: &Topology,
    ports: &[PortSpec],
    hosts: &[HostNode],
    host_index: &BTreeMap<&str, usize>,
    fdb: &mut [BTreeMap<usize, Vec<FabricPort>>],
) -> Result<(), ScenarioError> {
    let switch_index: BTreeMap<&str, usize> =
        t.switches.iter().enumerate().map(|(i, x)| (x.name.as_str(), i)).collect();
    for (i, path) in s.routes.iter().enumerate() {
        let field = format!("routes[{i}]");
        if path.len() < 3 {
            return Err(invalid(&field, "a route is host, switch..., host"));
        }
        let dst =
            *host_index.get(path[path.len() - 1].as_str()).ok_or_else(|| invalid(&field, "must end at a host"))?;
        for w in path.windows(2).skip(1) {
            let sw =
                *switch_index.get(w[0].as_str()).ok_or_else(|| invalid(&field, format!("{} is no switch", w[0])))?;
            let port = t.switches[sw]
                .ports
                .iter()
                .map(|&p| FabricPort::new(p as usize))
                .find(|&p| {
                    let peer = ports[p].peer;
                    match ports[peer].owner {
                        Owner::Switch(o, _) => t.switches[o].name == w[1],
                        Owner::Host(h) => hosts[h].name == w[1],
                    }
                })
                .ok_or_else(|| invalid(&field, format!("no link from {} to {}", w[0], w[1])))?;
            if let Some(other) = fdb[sw].get(&dst) {
                if other[..] != [port] {
                    return Err(invalid(&field, format!("{} already sends {} another way", w[0], hosts[dst].name)));
                }
            }
            fdb[sw].insert(dst, vec![port]);
        }
    }
    Ok(())
}

/// The ports flow `f`'s frames leave by, its host's own first: at a switch with several
/// next hops, the one the switch's hash picks for the flow (as the engine will).
fn walk(
    t: &Topology,
    ports: &[PortSpec],
    hosts: &[HostNode],
    fdb: &[BTreeMap<usize, Vec<FabricPort>>],
    f: &FlowPlan,
    seed: u64,
) -> Result<Vec<FabricPort>, String> {
    let (a, b) = (f.from, f.to);
    let key = flow_key(f);
    let mut path = vec![hosts[a].port];
    let mut at = ports[hosts[a].port].peer;
    for _ in 0..=t.switches.len() {
        let Owner::Switch(sw, _) = ports[at].owner else { unreachable!() };
        let next = fdb[sw]
            .get(&b.index())
            .ok_or_else(|| format!("{} has no route to {}", t.switches[sw].name, hosts[b].name))?;
        let out = next[ecmp::member(key.hash(ecmp_seed(seed, sw.index())), next.len())];
        path.push(out);
        let next = ports[out].peer;
        match ports[next].owner {
            Owner::Host(h) if h == b => return Ok(path),
            Owner::Host(h) => return Err(format!("the route to {} ends at {}", hosts[b].name, hosts[h].name)),
            Owner::Switch(..) => at = next,
        }
    }
    Err(format!("the route from {} to {} loops", hosts[a].name, hosts[b].name))
}

/// Switch `sw`'s ECMP seed in a fabric seeded `base` (the scenario's `ecmp_seed`): its
/// index under the default 0. Below 2^62 plus the index: the seed goes through the
/// switch's TOML configuration, whose integers are signed 64-bit.
fn ecmp_seed(base: u64, sw: usize) -> u64 {
    (base.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 2) + sw as u64
}

/// Host `h`'s IPv4 address: 10.0.0.0/16 in host order.
pub fn host_ip(h: HostIx) -> std::net::Ipv4Addr {
    let h = h.raw();
    std::net::Ipv4Addr::new(10, 0, (h >> 8) as u8, h as u8)
}

/// The 5-tuple flow `f`'s frames carry (`pfctestkit::flow`'s test frames: UDP from the
/// flow's source port to the test port), as a switch's ECMP hash reads it.
pub fn flow_key(f: &FlowPlan) -> FlowKey {
    let ports = (roce::wire::flow_src_port(f.id), pfctestkit::flow::UDP_PORT);
    FlowKey::ipv4(host_ip(f.from).octets(), host_ip(f.to).octets(), 17, ports)
}

/// The node names along the ports `walk` gave, the receiver last.
fn path_names(ports: &[PortSpec], path: &[FabricPort]) -> Vec<String> {
    let mut names: Vec<String> = path.iter().map(|&p| ports[p].node.clone()).collect();
    if let Some(&last) = path.last() {
        names.push(ports[ports[last].peer].node.clone());
    }
    names
}

/// How long flow `f` takes on an empty fabric along `path` (the ports its frames leave
/// by), from its start to its last frame's last bit at the receiver: its frames leave
/// the host at its pace, and each link sends a frame once it has all of it and the
/// frame before has gone (store and forward, no other traffic). `None` without a count
/// or if that is past `end`.
fn ideal_fct(ports: &[PortSpec], path: &[FabricPort], f: &FlowPlan, end: Duration) -> Option<Duration> {
    let n = f.count?;
    // Beyond the run even at its own pace: no use working it out frame by frame.
    if n == 0 || f.start + f.interval.saturating_mul(u32::try_from(n - 1).ok()?) > end {
        return None;
    }
    let mut free = vec![0u64; path.len()];
    let mut done = 0;
    for k in 0..n {
        let len = if k + 1 == n { f.last_size } else { f.size } - 4;
        let mut t = (f.interval.as_nanos() as u64).saturating_mul(k);
        for (l, &p) in path.iter().enumerate() {
            let finish = t.max(free[l]) + ports[p].speed.wire_time(len).as_nanos() as u64;
            free[l] = finish;
            t = finish + ports[p].propagation.as_nanos() as u64;
        }
        done = t;
    }
    Some(Duration::from_nanos(done))
}

/// Tagger's tables for these paths (greedy, verified), tag t on the t-th priority.
fn tag_tables(
    s: &Scenario,
    t: &Topology,
    paths: &[Vec<String>],
) -> Result<Vec<tagger::system::SwitchTables>, ScenarioError> {
    let bad = |e: String| invalid("tagger", e);
    let file = pfctestkit::routes_file(paths);
    let model = Explicit::from_file(t, &file).map_err(|e| bad(e.to_string()))?;
    let tagging = Algorithm::Greedy.run(t, &model).map_err(|e| bad(e.to_string()))?;
    let priorities = TagPriorities { lossless: s.tagger_priorities.iter().map(|&p| p.get()).collect(), lossy: 0 };
    let sys = TagSystem::new(t, &tagging, &priorities).map_err(|e| bad(e.to_string()))?;
    tagger::verify::verify(t, &model, &sys).map_err(|v| bad(format!("the tables fail verification: {v}")))?;
    Ok(sys.tables(t))
}
