//! Running the real binaries on a testbed: a switch in a node's namespace, the sink and
//! the generator on hosts. Shared by the netns tests, the demo and the benchmarks.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use pfcswitch::cli::RunArgs;
use pfcswitch::config::RunConfig;
use pfcswitch::control::{self, client, Request};
use pfcswitch::core::config::{PortRole, StaticFdbEntry, TaggerConfig};
use pfcswitch::core::fdb::FdbRow;
use pfcswitch::core::mac::MacAddr;
use pfcswitch::core::slowpath::DeadlockReport;
use pfcswitch::core::speed::Speed;
use pfcswitch::core::traffic_map::TrafficMapView;
use pfcswitch::stats::Stall;
use pfcswitch::stats::Stats;

use crate::argv;
use crate::cli::{GenArgs, SinkArgs};
use crate::storm::StormArgs;
use crate::tagging::{self, TestbedTables};
use crate::testbed::TestbedTopology;
use crate::testbed::{Finished, Placement, Proc, Testbed, Topology};
use crate::traffic::gen::GenReport;
use crate::traffic::sink::{SinkReport, READY_LINE};

/// Path of a binary built alongside this one (`pfcswitch`, `pfctools`), or from
/// `PFCSWITCH_BIN_DIR`.
pub fn bin(name: &str) -> Result<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("PFCSWITCH_BIN_DIR") {
        dirs.push(PathBuf::from(d));
    }
    if let Ok(exe) = std::env::current_exe() {
        // target/<profile>/pfctools, or target/<profile>/deps/<test> for test binaries.
        for d in exe.ancestors().skip(1).take(2) {
            dirs.push(d.to_path_buf());
        }
    }
    for d in &dirs {
        let p = d.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!("cannot find the {name} binary (looked in {dirs:?}); build it first: cargo build --release --workspace")
}

/// A pfcswitch process in a testbed node.
pub struct SwitchProc {
    pub name: String,
    pub socket: PathBuf,
    pub proc: Proc,
}

impl SwitchProc {
    /// Starts pfcswitch in `node` with `config` (its name and ports as given) and waits
    /// until its control socket answers.
    /// `args` are `pfcswitch run`'s other arguments (`RunArgs::default()` for none); the
    /// config file and the control socket are the harness's, in the testbed's directory.
    pub fn start(tb: &Testbed, node: &str, config: &RunConfig, args: &RunArgs) -> Result<SwitchProc> {
        SwitchProc::start_on(tb, node, config, args, &Placement::default())
    }

    /// [`SwitchProc::start`] in a session of its own, as a service or a daemon runs
    /// ([`Placement::own_session`] says why it matters). The benches that measure it
    /// beside Open vSwitch start it so, as OVS's daemons run.
    pub fn start_as_service(tb: &Testbed, node: &str, config: &RunConfig, args: &RunArgs) -> Result<SwitchProc> {
        let own = Placement { own_session: true, ..Placement::default() };
        SwitchProc::start_on(tb, node, config, args, &own)
    }

    /// [`SwitchProc::start`], the process placed as `placement` says.
    pub fn start_on(
        tb: &Testbed,
        node: &str,
        config: &RunConfig,
        args: &RunArgs,
        placement: &Placement,
    ) -> Result<SwitchProc> {
        let path = tb.work_dir().join(format!("{}.toml", config.name));
        std::fs::write(&path, config.to_toml()).with_context(|| format!("writing {}", path.display()))?;
        let socket = tb.work_dir().join(format!("{}.sock", config.name));
        let run = RunArgs { config: Some(path), socket: Some(socket.clone()), ..args.clone() };
        let mut proc = tb.spawn_on(node, &config.name, placement, &command_line("pfcswitch", "run", &run)?)?;
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if client::request(&socket, &Request::Stats).is_ok() {
                return Ok(SwitchProc { name: config.name.clone(), socket, proc });
            }
            if !proc.is_running() {
                bail!("pfcswitch {} exited at start-up: {}", config.name, proc.stderr_so_far().trim());
            }
            if Instant::now() > deadline {
                bail!("pfcswitch {} did not come up: {}", config.name, proc.stderr_so_far().trim());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stats(&self) -> Result<Stats> {
        Ok(client::stats(&self.socket)?)
    }

    pub fn fdb(&self) -> Result<Vec<FdbRow>> {
        Ok(client::fdb(&self.socket)?)
    }

    pub fn traffic_map(&self) -> Result<TrafficMapView> {
        Ok(client::traffic_map(&self.socket)?)
    }

    pub fn deadlocks(&self) -> Result<DeadlockReport> {
        Ok(client::deadlocks(&self.socket)?)
    }

    /// Sends a command (block, unblock, clear-watermarks); returns what was done.
    pub fn command(&self, req: &Request) -> Result<String> {
        Ok(client::command(&self.socket, req)?)
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(self) -> Finished {
        self.proc.stop(Duration::from_secs(10))
    }
}

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
fn static_config(tb: &Testbed, index: usize, speed: Speed) -> RunConfig {
    let mut c = switch_config(tb, &format!("sw{index}"));
    for p in &mut c.ports {
        p.speed = Some(speed);
        p.flood = false;
    }
    c.pfc.lossless = Some(vec![3]);
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
}

/// The ring ports' XOFF threshold.
const RING_XOFF: u64 = 128 << 10;
/// The ring ports' headroom above XOFF.
const RING_HEADROOM: u64 = 1 << 20;

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
        let tb = Testbed::up(&crate::testbed::unique_name(tag), Topology::ring(3))?;
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
    fn time_to_receive(&self, bytes: u64) -> Duration {
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

/// Which CPUs a timing-sensitive run gives the switch and the host-side tools, so that a
/// busy-polling switch is never preempted by a busy-polling generator, and how far above
/// the machine's other processes they run.
#[derive(Clone, Debug, Default)]
pub struct CpuPlan {
    /// The switch's dataplane thread.
    pub switch: Option<usize>,
    /// The switch's process (its forwarding thread pinned by `switch` in its config).
    pub switch_process: Placement,
    /// Everything else.
    pub hosts: Placement,
}

/// The nice value of a timing-sensitive run's processes. Beside one busy process on two
/// cores, the scheduler put it on the switch's CPU and gave it half: the switch waited
/// 200 ms for its CPU in 400 ms of traffic, in stalls of 5.5 ms, and every headroom run
/// at a long delay was disturbed; at -15 the busy process gets a few percent and 6 runs
/// in 6 were not (DEVELOPERS.md).
pub const TIMING_NICE: i32 = -15;

impl CpuPlan {
    /// The last CPU for the switch, the others for the tools, all at [`TIMING_NICE`];
    /// nothing pinned on one CPU.
    pub fn split() -> CpuPlan {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let raised = |cpus: Option<String>| Placement { cpus, nice: Some(TIMING_NICE), ..Placement::default() };
        if n < 2 {
            return CpuPlan { switch: None, switch_process: raised(None), hosts: raised(None) };
        }
        let hosts = if n == 2 { "0".into() } else { format!("0-{}", n - 2) };
        CpuPlan { switch: Some(n - 1), switch_process: raised(None), hosts: raised(Some(hosts)) }
    }

    pub fn hosts(&self) -> &Placement {
        &self.hosts
    }
}

/// The command line that runs binary `exe`'s `subcommand` with `args`.
pub fn command_line<T: clap::Args + serde::Serialize>(exe: &str, subcommand: &str, args: &T) -> Result<Vec<String>> {
    let mut line = vec![bin(exe)?.display().to_string(), subcommand.to_string()];
    line.extend(argv::to_args(args)?);
    Ok(line)
}

/// `pfctools gen` sending to `dst_mac` with every other argument at its default (the
/// harness fills in the interface).
pub fn gen_to(dst_mac: MacAddr) -> GenArgs {
    argv::with_defaults(serde_json::json!({ "iface": "", "dst_mac": dst_mac })).expect("gen's defaults parse")
}

/// `pfctools sink` with every argument at its default (the harness fills in the interface).
pub fn sink_defaults() -> SinkArgs {
    argv::with_defaults(serde_json::json!({ "iface": "" })).expect("sink's defaults parse")
}

/// `pfctools storm` on `iface` with every other argument at its default.
pub fn storm_defaults(iface: &str) -> StormArgs {
    argv::with_defaults(serde_json::json!({ "iface": [iface] })).expect("storm's defaults parse")
}

/// A sink started in `node` on the node's host interface; it reports JSON.
pub struct SinkProc {
    proc: Proc,
}

impl SinkProc {
    pub fn start(tb: &Testbed, node: &str, label: &str, args: &SinkArgs) -> Result<SinkProc> {
        SinkProc::start_on(tb, node, label, &Placement::default(), args)
    }

    /// [`SinkProc::start`] on the CPUs in `cpus`.
    pub fn start_on(tb: &Testbed, node: &str, label: &str, placement: &Placement, args: &SinkArgs) -> Result<SinkProc> {
        let args = SinkArgs { iface: tb.host_iface(node)?.name.clone(), json: true, ..args.clone() };
        let mut proc = tb.spawn_on(node, label, placement, &command_line("pfctools", "sink", &args)?)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !proc.stderr_so_far().contains(READY_LINE) {
            if !proc.is_running() || Instant::now() > deadline {
                bail!("sink on {node} did not start: {}", proc.stderr_so_far().trim());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(SinkProc { proc })
    }

    /// Waits for the sink to finish by itself (idle timeout, count, duration).
    pub fn finish(self, timeout: Duration) -> Result<SinkReport> {
        parse_report(self.proc.wait(timeout), "sink")
    }

    /// Stops the sink now and returns what it saw.
    pub fn stop(self) -> Result<SinkReport> {
        parse_report(self.proc.stop(Duration::from_secs(5)), "sink")
    }
}

fn parse_report<T: serde::de::DeserializeOwned>(f: Finished, what: &str) -> Result<T> {
    let line = f.stdout.lines().last().unwrap_or("");
    serde_json::from_str(line).with_context(|| format!("{what} report unreadable ({}): {}", f.status, f.stderr.trim()))
}

/// The wait before the first repeat of a run the machine spoiled ([`retry_pause`]).
pub const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// How long to wait before repeat `n` (1 for the first) of a run the machine spoiled:
/// `first`, doubled at each repeat up to eight times `first`. A busy host disturbs in
/// spells of seconds (DEVELOPERS.md), and runs repeated back to back fall in the same
/// spell: on 2026-11-27 all five attempts of a headroom test, made one after another,
/// were disturbed, and the same test passed at its first attempt ten minutes later.
pub fn retry_pause(first: Duration, n: u32) -> Duration {
    first * (1 << n.saturating_sub(1).min(3))
}

/// Runs `trial` until `disturbed` says the machine did not spoil the run, at most
/// `retries` times more, waiting [`retry_pause`] from `pause` before each; each spoiled
/// run goes to `set_aside`. The last run is kept even when it, too, was disturbed: a host
/// that disturbs every attempt shows in the result.
pub fn undisturbed<T>(
    retries: usize,
    pause: Duration,
    disturbed: impl Fn(&T) -> bool,
    mut set_aside: impl FnMut(T),
    mut trial: impl FnMut() -> Result<T>,
) -> Result<T> {
    let mut repeats = 0;
    loop {
        let r = trial()?;
        if !disturbed(&r) || repeats as usize == retries {
            return Ok(r);
        }
        set_aside(r);
        repeats += 1;
        std::thread::sleep(retry_pause(pause, repeats));
    }
}

/// The switch's counters that account for lost frames, summed over its ports.
#[derive(Clone, Copy, Debug, Default)]
pub struct SwitchLosses {
    /// Frames the kernel could not queue on a full rx ring.
    pub rx_ring_full: u64,
    /// Frames the kernel had no frame from the fill ring for.
    pub rx_no_frame: u64,
    /// Egress tail drops.
    pub tail_drops: u64,
    pub other_drops: u64,
}

impl SwitchLosses {
    pub fn read(switch: &SwitchProc) -> Result<SwitchLosses> {
        Ok(SwitchLosses::of(&switch.stats()?))
    }

    pub fn of(stats: &Stats) -> SwitchLosses {
        let mut l = SwitchLosses::default();
        for p in &stats.ports {
            l.rx_ring_full += p.socket.rx_ring_full;
            l.rx_no_frame += p.socket.rx_dropped;
            l.tail_drops += p.counters.drops.lossy;
            l.other_drops += p.counters.drops.total() - p.counters.drops.lossy;
        }
        l
    }

    pub fn minus(self, o: SwitchLosses) -> SwitchLosses {
        SwitchLosses {
            rx_ring_full: self.rx_ring_full - o.rx_ring_full,
            rx_no_frame: self.rx_no_frame - o.rx_no_frame,
            tail_drops: self.tail_drops - o.tail_drops,
            other_drops: self.other_drops - o.other_drops,
        }
    }

    pub fn plus(self, o: SwitchLosses) -> SwitchLosses {
        SwitchLosses {
            rx_ring_full: self.rx_ring_full + o.rx_ring_full,
            rx_no_frame: self.rx_no_frame + o.rx_no_frame,
            tail_drops: self.tail_drops + o.tail_drops,
            other_drops: self.other_drops + o.other_drops,
        }
    }
}

/// What one flow from h1 to a sink on h2 gave (see [`one_flow_h1_to_h2`]).
pub struct OneFlowRun {
    pub gen: GenReport,
    pub sink: SinkReport,
    /// The CPU time the process asked about spent while the generator ran.
    pub cpu: Option<Duration>,
}

/// One flow of `size`-byte frames from h1 to a sink on h2 (tx-only): at `rate` frames/s
/// for `seconds`, or unpaced for that long. The CPU time of process `cpu_of` (a switch)
/// is measured around the generator.
pub fn one_flow_h1_to_h2(
    tb: &Testbed,
    size: usize,
    seconds: f64,
    rate: Option<f64>,
    cpu_of: Option<u32>,
) -> Result<OneFlowRun> {
    one_flow_h1_to_h2_on(tb, size, seconds, rate, cpu_of, &Placement::default())
}

/// [`one_flow_h1_to_h2`] with the generator and the sink placed as `placement` says.
pub fn one_flow_h1_to_h2_on(
    tb: &Testbed,
    size: usize,
    seconds: f64,
    rate: Option<f64>,
    cpu_of: Option<u32>,
    placement: &Placement,
) -> Result<OneFlowRun> {
    let sink_args = SinkArgs {
        idle: Duration::from_secs(1),
        duration: Some(Duration::from_secs_f64(seconds + 10.0)),
        ..sink_defaults()
    };
    let sink = SinkProc::start_on(tb, "h2", "sink", placement, &sink_args)?;
    let args = GenArgs {
        size,
        tx_only: true,
        rate,
        // Paced: as many frames as the rate gives in `seconds`; unpaced: for `seconds`.
        count: rate.map(|r| (r * seconds).max(1.0) as u64),
        duration: rate.is_none().then(|| Duration::from_secs_f64(seconds)),
        ..gen_to(tb.host_iface("h2")?.mac)
    };
    let cpu_before = cpu_of.and_then(cpu_time);
    let gen = start_gen_on(tb, "h1", "gen", placement, &args)?.finish(Duration::from_secs_f64(seconds + 30.0))?;
    let cpu_after = cpu_of.and_then(cpu_time);
    let sink = sink.finish(Duration::from_secs_f64(seconds + 20.0))?;
    let cpu = cpu_before.zip(cpu_after).map(|(a, b)| b.saturating_sub(a));
    Ok(OneFlowRun { gen, sink, cpu })
}

/// Runs `pfctools gen` in `node` to completion, on the node's host interface.
pub fn run_gen(tb: &Testbed, node: &str, label: &str, args: &GenArgs, timeout: Duration) -> Result<GenReport> {
    start_gen(tb, node, label, args)?.finish(timeout)
}

/// A generator running in the background.
pub struct GenProc {
    proc: Proc,
}

/// Starts `pfctools gen` in `node` on the node's host interface; it reports JSON.
pub fn start_gen(tb: &Testbed, node: &str, label: &str, args: &GenArgs) -> Result<GenProc> {
    start_gen_on(tb, node, label, &Placement::default(), args)
}

/// [`start_gen`] on the CPUs in `cpus`.
pub fn start_gen_on(tb: &Testbed, node: &str, label: &str, placement: &Placement, args: &GenArgs) -> Result<GenProc> {
    let args = GenArgs { iface: tb.host_iface(node)?.name.clone(), json: true, ..args.clone() };
    Ok(GenProc { proc: tb.spawn_on(node, label, placement, &command_line("pfctools", "gen", &args)?)? })
}

impl GenProc {
    pub fn finish(self, timeout: Duration) -> Result<GenReport> {
        let f = self.proc.wait(timeout);
        if !f.success() {
            bail!("generator failed ({}): {}", f.status, f.stderr.trim());
        }
        parse_report(f, "generator")
    }

    pub fn stop(self) -> Result<GenReport> {
        parse_report(self.proc.stop(Duration::from_secs(5)), "generator")
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }
}

/// CPU time (user + system) a process has used so far.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces) start after ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(user_ticks(ticks, user_tick()))
}

/// The tick `/proc` counts CPU times in (USER_HZ; 10 ms on Linux here).
fn user_tick() -> Duration {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Duration::from_secs(1) / u32::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

fn user_ticks(n: u64, tick: Duration) -> Duration {
    Duration::from_nanos(n.saturating_mul(tick.as_nanos() as u64))
}

/// Default control socket of a switch named `name` (when not started by the harness).
pub fn default_socket(name: &str) -> PathBuf {
    control::socket_path(name)
}

/// How long the hypervisor has kept each of this VM's CPUs from running so far: the
/// `steal` column of `/proc/stat`, time a vCPU had work and the host ran something else.
/// On the 2-core development VMs the host takes a vCPU for about 100 ms at a time, and
/// only while both are busy; a trial at a DUT's limit keeps both busy. Empty where the
/// file cannot be read (then nothing is ever put down to the host).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostSteal(Vec<Duration>);

impl HostSteal {
    pub fn read() -> HostSteal {
        std::fs::read_to_string("/proc/stat").map(|s| HostSteal::parse(&s, user_tick())).unwrap_or_default()
    }

    /// The per-CPU lines (`cpu0`, `cpu1`, ...; not the `cpu` total), ticks of `tick`.
    fn parse(stat: &str, tick: Duration) -> HostSteal {
        let steal = |line: &str| {
            let mut fields = line.split_ascii_whitespace();
            let name = fields.next()?;
            let per_cpu =
                name.strip_prefix("cpu").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            // user nice system idle iowait irq softirq steal
            per_cpu.then(|| fields.nth(7)?.parse::<u64>().ok()).flatten().map(|t| user_ticks(t, tick))
        };
        HostSteal(stat.lines().filter_map(steal).collect())
    }

    /// The most the host took from any one CPU between `earlier` and this reading.
    pub fn most_since(&self, earlier: &HostSteal) -> Duration {
        self.0.iter().zip(&earlier.0).map(|(now, then)| now.saturating_sub(*then)).max().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  2073375 0 358177 1805162 4362 0 493600 20204 0 0
cpu0 1009757 0 194071 915917 2623 0 242625 10366 0 0
cpu1 1063618 0 164105 889244 1739 0 250975 9838 0 0
intr 1 2 3
ctxt 88
";

    #[test]
    fn repeats_wait_longer_each_time_up_to_eight_times_the_first_pause() {
        let waits: Vec<u64> = (1..=6).map(|n| retry_pause(RETRY_PAUSE, n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 8, 8]);
        assert_eq!(retry_pause(Duration::ZERO, 3), Duration::ZERO);
    }

    #[test]
    fn steal_is_read_per_cpu_from_the_eighth_column_and_the_total_line_is_left_out() {
        let s = HostSteal::parse(STAT, Duration::from_millis(10));
        assert_eq!(s, HostSteal(vec![Duration::from_millis(103_660), Duration::from_millis(98_380)]));
    }

    #[test]
    fn what_the_host_took_is_the_largest_growth_on_one_cpu() {
        let tick = Duration::from_millis(10);
        let before = HostSteal::parse(STAT, tick);
        let after = HostSteal::parse(&STAT.replace(" 10366 ", " 10368 ").replace(" 9838 ", " 9848 "), tick);
        assert_eq!(after.most_since(&before), Duration::from_millis(100));
        assert_eq!(before.most_since(&before), Duration::ZERO);
        assert_eq!(after.most_since(&HostSteal::default()), Duration::ZERO, "nothing to compare with");
    }
}
