//! Switch configurations for testbeds: a node's ports as the testbed made them, the
//! ring and the line of the deadlock lab, and the lab itself.

use super::*;
use pfcswitch::core::Priority;

/// The config of a pfcswitch on every interface of testbed node `node`, in link order.
/// Ports whose peer is a switch of the testbed face a switch (DCFIT crosses them).
pub fn switch_config(tb: &Testbed, node: &str) -> RunConfig {
    let ifaces = tb.interfaces_of(node);
    let names: Vec<&str> = ifaces.iter().map(|i| i.name.as_str()).collect();
    let mut c = RunConfig::for_interfaces(&names);
    c.name = format!("{}-{node}", tb.name());
    for (p, i) in c.ports.iter_mut().zip(&ifaces) {
        if tb.topology().is_switch(&i.peer_node) {
            p.role = PortRole::Switch;
        }
    }
    c
}

/// Switch `sw{index}` with every port at `speed`, nothing flooded (the topology would
/// loop; static FDB entries do the forwarding) and lossless priority 3.
pub(super) fn static_config(tb: &Testbed, index: usize, speed: Speed) -> RunConfig {
    let mut c = switch_config(tb, &format!("sw{index}"));
    for p in &mut c.ports {
        p.speed = Some(speed);
        p.flood = false;
    }
    c.pfc.lossless = Some(vec![Priority::new(3)]);
    c
}

/// The config of switch `sw{index}` of a [`Topology::ring`](crate::testbed::Topology::ring):
/// its own host on `host`, every other host clockwise (`cw`), nothing flooded (a ring
/// would loop), lossless priority 3, every port at `speed`.
pub fn ring_config(tb: &Testbed, index: usize, hosts: usize, speed: Speed) -> Result<RunConfig> {
    let mut c = static_config(tb, index, speed);
    // Host ports hold a lot before pausing their host, ring ports little: when a stopped
    // ring link resumes, the host traffic it held reaches the next switch first and makes
    // it pause promptly, while the through traffic behind it still waits.
    for p in &mut c.ports {
        if p.iface == "host" {
            p.xoff_bytes = Some(512 << 10);
        }
    }
    for h in 1..=hosts {
        let mac = tb.host_iface(&format!("h{h}"))?.mac;
        let port = if h == index { "host" } else { "cw" };
        c.fdb_entries.push(StaticFdbEntry { mac, port: port.into() });
    }
    Ok(c)
}

/// The config of switch `sw{index}` of a [`Topology::line`](crate::testbed::Topology::line)
/// of `n` switches: h1 to the left, hN to the right.
pub fn line_config(tb: &Testbed, index: usize, n: usize, speed: Speed) -> Result<RunConfig> {
    let mut c = static_config(tb, index, speed);
    let (first, last) = (tb.host_iface("h1")?.mac, tb.host_iface(&format!("h{n}"))?.mac);
    let toward = |host_here: bool, side: &str| if host_here { "host".to_string() } else { side.to_string() };
    c.fdb_entries.push(StaticFdbEntry { mac: first, port: toward(index == 1, "left") });
    c.fdb_entries.push(StaticFdbEntry { mac: last, port: toward(index == n, "right") });
    Ok(c)
}

/// How to set up a [`RingLab`].
#[derive(Clone, Debug)]
pub struct RingOptions {
    pub speed: Speed,
    pub resolution: pfcswitch::core::config::DeadlockResolution,
    pub drop_ms: u64,
    /// Pause refresh interval (default: half the pause at the port's speed).
    pub refresh_us: Option<u64>,
    /// Frames per second each host sends (default 10k of 1000 bytes: each ring link carries
    /// two flows, 16 % of 1G; at twice that, three switches and three senders sharing two
    /// cores now and then stall long enough to pause the whole ring without any block).
    pub rate: u64,
    /// Apply Tagger's tables for the ring's routes (tags 1 and 2 on priorities 3 and 4).
    pub tagger: bool,
    /// Where the lab's switches and senders run ([`Testbed::with_processes`]).
    pub processes: Placement,
}

/// The ring ports' XOFF threshold.
pub(super) const RING_XOFF: u64 = 128 << 10;
/// The ring ports' headroom above XOFF.
pub(super) const RING_HEADROOM: u64 = 1 << 20;

/// The lossless priorities of Tagger's tags 1, 2, ... in the labs.
pub const TAGGER_PRIORITIES: [u8; 2] = [3, 4];

/// The routes of a [`RingLab`] with `n` switches: host h_i to the host two switches
/// clockwise, through sw_i, sw_{i+1} and sw_{i+2}.
pub fn ring_routes(n: usize) -> Vec<Vec<String>> {
    (1..=n)
        .map(|i| {
            let at = |k: usize| (i - 1 + k) % n + 1;
            vec![
                format!("h{i}"),
                format!("sw{i}"),
                format!("sw{}", at(1)),
                format!("sw{}", at(2)),
                format!("h{}", at(2)),
            ]
        })
        .collect()
}

impl Default for RingOptions {
    fn default() -> RingOptions {
        RingOptions {
            speed: Speed::gbps(1),
            resolution: pfcswitch::core::config::DeadlockResolution::Report,
            drop_ms: 100,
            refresh_us: None,
            rate: 10_000,
            tagger: false,
            processes: Placement::default(),
        }
    }
}

/// Three switches in a ring ([`Topology::ring`](crate::testbed::Topology::ring)), host h_i
/// on sw_i, each host sending lossless traffic to the host two hops clockwise: sw_{i+1}
/// forwards h_i's frames from its `ccw` port to its `cw` port, so the ring's buffers depend
/// on each other in a cycle — the classic setting of a PFC deadlock.
pub struct RingLab {
    pub tb: Testbed,
    pub switches: Vec<SwitchProc>,
    /// Tagger's tables, when the lab applies them.
    pub tables: Option<TestbedTables>,
    speed: Speed,
    rate: u64,
}

impl RingLab {
    pub fn start(tag: &str, opts: &RingOptions) -> Result<RingLab> {
        let tb =
            Testbed::up(&crate::testbed::unique_name(tag), Topology::ring(3))?.with_processes(opts.processes.clone());
        let tables = if opts.tagger {
            let routes = tagging::routes_file(&ring_routes(3));
            Some(tagging::compute(&Topology::ring(3), &routes, &TAGGER_PRIORITIES, &tb.work_dir().join("tagger"))?)
        } else {
            None
        };
        let mut switches = Vec::new();
        for i in 1..=3 {
            let mut c = ring_config(&tb, i, 3, opts.speed)?;
            // Above a whole rx batch of backlog (64 frames), which a switch that lost its
            // core for a moment admits before it sends anything: a lower XOFF would pause
            // the ring spuriously, and spurious pauses can deadlock it on their own.
            c.buffer.xoff_bytes = Some(RING_XOFF);
            // A low XON: once the cycle holds frames, they alone keep every ring port paused.
            c.buffer.xon_bytes = Some(8 << 10);
            c.buffer.headroom_bytes = RING_HEADROOM;
            c.buffer.shared_bytes = 16 << 20;
            c.pfc.refresh_us = opts.refresh_us;
            // Three switches and three senders share the machine: a switch that spins
            // while idle steals the cores the others need, and a switch that loses its core
            // comes back to a burst — enough congestion to deadlock a ring by itself.
            c.dataplane.busy_poll_us = 0;
            c.dcfit.resolution = opts.resolution;
            c.dcfit.drop_ms = opts.drop_ms;
            // The lab studies deadlocks: a PFC watchdog would break each after 200 ms.
            c.pfcwd.action = pfcswitch::core::pfcwd::WatchdogAction::Off;
            if let Some(t) = &tables {
                // The table makes its priorities the lossless ones.
                c.pfc.lossless = None;
                let table = t.path(&format!("sw{i}")).display().to_string();
                c.tagger = Some(TaggerConfig { table, switch: Some(format!("sw{i}")) });
            }
            switches.push(SwitchProc::start(&tb, &format!("sw{i}"), &c, &RunArgs::default())?);
        }
        Ok(RingLab { tb, switches, tables, speed: opts.speed, rate: opts.rate })
    }

    /// How long the senders wait, receiving, before they send.
    pub const START_DELAY: Duration = Duration::from_millis(300);

    /// The host h_i sends to (two switches clockwise).
    pub fn destination(i: usize) -> usize {
        (i + 1) % 3 + 1
    }

    /// Every host sends 1000-byte frames at the lab's rate for `secs` seconds, on priority 3
    /// (or with Tagger's initial tag), then goes on receiving for half a second. Returns
    /// when they start sending: each first waits until every host can receive.
    pub fn traffic(&self, secs: f64) -> Result<Vec<GenProc>> {
        let gens = (1..=3)
            .map(|i| {
                let dst = self.tb.host_iface(&format!("h{}", RingLab::destination(i)))?.mac;
                let (tagger_table, dscp) = match &self.tables {
                    Some(t) => (Some(t.path(&format!("sw{i}"))), vec![]),
                    None => (None, vec![3]),
                };
                let args = GenArgs {
                    tagger_table,
                    dscp,
                    start_delay: Self::START_DELAY,
                    linger: Duration::from_millis(500),
                    size: 1000,
                    rate: Some(self.rate as f64),
                    duration: Some(Duration::from_secs_f64(secs)),
                    speed: self.speed,
                    ..gen_to(dst)
                };
                start_gen(&self.tb, &format!("h{i}"), &format!("gen{i}"), &args)
            })
            .collect::<Result<Vec<_>>>()?;
        std::thread::sleep(Self::START_DELAY);
        Ok(gens)
    }

    /// Blocks sw2's clockwise port for `hold`; returns when it was unblocked (ns).
    ///
    /// While it is blocked, sw2 holds h1's through traffic and h2's traffic, and pauses
    /// sw1, which pauses sw3. On the unblock sw2 releases h2's frames first; at sw3 they
    /// are through traffic for its paused `cw` port, so sw3 pauses sw2 while sw2's through
    /// frames still wait: every ring ingress holds frames for a paused ring egress — a
    /// deadlock that outlives its cause.
    pub fn block_briefly(&self, hold: Duration) -> Result<u64> {
        self.switches[1].command(&Request::Block { port: "cw".into() })?;
        std::thread::sleep(hold);
        self.switches[1].command(&Request::Unblock { port: "cw".into() })?;
        Ok(pfcswitch::sys::now().as_nanos())
    }

    /// Each switch's `ctl deadlocks` document.
    pub fn deadlocks(&self) -> Result<Vec<DeadlockReport>> {
        self.switches.iter().map(SwitchProc::deadlocks).collect()
    }

    /// How long a ring port takes to receive `bytes` of the lab's traffic (two flows
    /// enter each one).
    pub(super) fn time_to_receive(&self, bytes: u64) -> Duration {
        Duration::from_secs_f64(bytes as f64 / (2.0 * self.rate as f64 * 1000.0))
    }

    /// The longest a switch may lose its CPU before the traffic waiting for it when it
    /// runs again crosses XOFF at a ring port: a stall that long pauses the ring as the
    /// block does, and may deadlock it by itself. A run with such a stall shows the
    /// machine, not the switch: tests repeat it.
    pub fn stall_budget(&self) -> Duration {
        self.time_to_receive(RING_XOFF)
    }

    /// The longest a switch may lose its CPU before what waits for it fills a ring port's
    /// headroom too: after a longer stall even a lossless ring drops.
    pub fn headroom_budget(&self) -> Duration {
        self.time_to_receive(RING_XOFF + RING_HEADROOM)
    }

    /// The longest stall of any switch's loop that ended after `since_ns` (monotonic
    /// clock), with the switch's name.
    pub fn longest_stall_since(&self, since_ns: u64) -> Result<Option<(String, Stall)>> {
        let mut longest: Option<(String, Stall)> = None;
        for sw in &self.switches {
            if let Some(s) = sw.stats()?.stalls.longest_since(since_ns) {
                if longest.as_ref().is_none_or(|(_, l)| s.us > l.us) {
                    longest = Some((sw.name.clone(), s));
                }
            }
        }
        Ok(longest)
    }
}
