//! The PFC pause-response test plan on a `tx — DUT — rx` testbed:
//!
//! 1. a PFC storm from the rx side keeps the lossless priorities under test paused at the
//!    DUT's egress;
//! 2. after a settle time the tx side sends test traffic on those priorities (50 % of line
//!    rate) and background traffic on the priorities that are neither under test nor
//!    lossless on the DUT (50 %), honouring the DUT's pauses after a response delay of N
//!    quanta;
//! 3. traffic stops after a fixed time, then the storm;
//! 4. all background frames must arrive and no test frame may; the test bytes all sit in
//!    the DUT's buffer; lossless ingress drops stay zero while the headroom holds.
//!
//! Sweeping N finds the largest delay that stays lossless and the headroom each delay needs.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use pfcswitch::cli::RunArgs;
use pfcswitch::core::config::{max_frame_for_mtu, BufferProfile, DEFAULT_LOSSLESS};
use pfcswitch::core::pfcwd::WatchdogAction;
use pfcswitch::core::priorities::Priorities;
use pfcswitch::core::speed::Speed;
use pfcswitch::core::Priority;
use serde::{Deserialize, Serialize};

use super::calc::CalcInput;
use crate::bench::median;
use crate::cli::{GenArgs, SinkArgs};
use crate::harness::{self, SinkProc, SwitchProc};
use crate::storm::{StormArgs, StormReport};
use crate::testbed::TestbedTopology;
use crate::testbed::{at_mtu, mtu_for, unique_name, Testbed, Topology};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepOptions {
    pub speed: Speed,
    /// Lossless priorities under test (3, 4 or both); DSCP p marks priority p.
    pub prios: Vec<Priority>,
    /// Sender response delays to try, in quanta.
    pub delays: Vec<u32>,
    /// Headroom configured per (port, lossless priority).
    pub headroom_bytes: u64,
    pub xoff_bytes: u64,
    /// A priority under test's own headroom and XOFF where they differ from the above
    /// (its `[buffer.priority.N]` profile on the DUT).
    #[serde(default)]
    pub prio_headroom: BTreeMap<Priority, u64>,
    #[serde(default)]
    pub prio_xoff: BTreeMap<Priority, u64>,
    pub shared_bytes: u64,
    /// Test traffic in percent of line rate, shared equally among the priorities under test.
    pub test_load: f64,
    /// Background traffic in percent of line rate, shared equally among its priorities.
    pub background_load: f64,
    /// The background's priorities; by default every priority neither under test nor
    /// lossless on the DUT, as the plan has it.
    #[serde(default)]
    pub background_prios: Option<Vec<Priority>>,
    /// Test and background frame size on the wire, FCS included.
    pub frame_size: usize,
    pub traffic: Duration,
    pub settle: Duration,
    pub repeats: usize,
    /// A run in which test frames kept arriving at the DUT after XOFF for longer than the
    /// sender's delay + this, or stopped more than this (and a frame interval) short of
    /// it, was disturbed by the host: the DUT or the sender lost its CPU. So was a run
    /// whose storm had a gap. Zero accepts every run.
    pub max_overhead: Duration,
    /// How many times a disturbed run is repeated before it is kept as it is.
    pub retries: usize,
    /// Judge a run disturbed only when the testbed moved a priority's response by more
    /// than could have changed whether it drops ([`verdict_allowance`]), never by less
    /// than `max_overhead`: for the plan and the tests, whose verdicts are drops or none
    /// at delays chosen far from the boundary. Off for the sweep, which measures the
    /// need itself, and needs every run's response within `max_overhead`.
    #[serde(default)]
    pub judge_by_margin: bool,
}

impl Default for SweepOptions {
    fn default() -> SweepOptions {
        SweepOptions {
            speed: Speed::gbps(1),
            prios: vec![Priority::new(3)],
            delays: vec![0, 250, 500, 750, 1000, 1500, 2000, 3000],
            headroom_bytes: 48 << 10,
            xoff_bytes: 64 << 10,
            prio_headroom: BTreeMap::new(),
            prio_xoff: BTreeMap::new(),
            shared_bytes: 4 << 20,
            test_load: 50.0,
            background_load: 50.0,
            background_prios: None,
            frame_size: 1000,
            traffic: Duration::from_millis(400),
            settle: Duration::from_millis(300),
            repeats: 1,
            // Undisturbed, this testbed adds 0-70 µs (the DUT's reaction, veth, the
            // sender's loop); a lost time slice adds or hides hundreds of µs to ms.
            max_overhead: Duration::from_micros(150),
            // Beside one busy process on two cores, 1 run in 18 was still disturbed with
            // the run's processes raised above it (`CpuPlan`): a run takes under a second,
            // and one the machine spoiled says nothing.
            retries: 4,
            judge_by_margin: false,
        }
    }
}

impl SweepOptions {
    /// The headroom `prio` has on the DUT.
    pub fn headroom_for(&self, prio: Priority) -> u64 {
        self.prio_headroom.get(&prio).copied().unwrap_or(self.headroom_bytes)
    }

    /// The XOFF threshold `prio` has on the DUT.
    pub fn xoff_for(&self, prio: Priority) -> u64 {
        self.prio_xoff.get(&prio).copied().unwrap_or(self.xoff_bytes)
    }

    /// The DUT's lossless priorities: its defaults and those under test.
    pub fn dut_lossless(&self) -> Vec<Priority> {
        let mut l: Vec<Priority> = DEFAULT_LOSSLESS.iter().chain(&self.prios).copied().collect();
        l.sort_unstable();
        l.dedup();
        l
    }

    /// The background's priorities (none without background load).
    pub fn background(&self) -> Vec<Priority> {
        if self.background_load <= 0.0 {
            return Vec::new();
        }
        self.background_prios.clone().unwrap_or_else(|| {
            let lossless = self.dut_lossless();
            Priority::all().filter(|p| !lossless.contains(p)).collect()
        })
    }

    /// The calculator's input for one test priority of this run, given the sender's
    /// response: no cable (veth), the test frames as the largest, each flow's load.
    pub fn calc_input(&self, response: Duration) -> CalcInput {
        CalcInput {
            speed: self.speed,
            cable_m: 0.0,
            max_frame: self.frame_size.saturating_sub(4) as u32,
            response,
            switch_delay: Duration::ZERO,
            load: self.test_load_per_prio() / 100.0,
        }
    }

    /// Each test flow's share of line rate, percent.
    pub fn test_load_per_prio(&self) -> f64 {
        self.test_load / self.prios.len().max(1) as f64
    }

    pub fn validate(&self) -> Result<()> {
        if self.prios.is_empty() {
            bail!("give the priorities to test");
        }
        let bg = self.background();
        if let Some(p) = bg.iter().find(|p| self.prios.contains(p)) {
            bail!("background priority {p} is under test");
        }
        if !(self.test_load > 0.0 && self.background_load >= 0.0 && self.test_load + self.background_load <= 100.0) {
            bail!("test and background load are percent of line rate: test above 0, together at most 100");
        }
        if self.background_load > 0.0 && bg.is_empty() {
            bail!("background load without background priorities");
        }
        for (p, _) in self.prio_headroom.iter().chain(&self.prio_xoff) {
            if !self.prios.contains(p) {
                bail!("a profile for priority {p}, which is not under test");
            }
        }
        if self.delays.is_empty() {
            bail!("no delays to sweep");
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrioOutcome {
    pub prio: Priority,
    pub test_sent_frames: u64,
    pub test_sent_bytes: u64,
    pub test_received: u64,
    /// Lossless ingress drops at the DUT.
    pub drops: u64,
    pub headroom_watermark: u64,
    /// What the DUT held for this priority at most (shared + headroom).
    pub held_bytes: u64,
    pub xoff_sent: u64,
    /// How long test frames kept arriving at the DUT after it crossed XOFF, µs: the
    /// configured delay plus the testbed's own (the DUT, veth, the sender's loop).
    pub upstream_response_us: f64,
}

impl PrioOutcome {
    /// The upstream response, µs, when there was one to measure: only a priority the DUT
    /// paused has one.
    pub fn measured_response_us(&self) -> Option<f64> {
        (self.xoff_sent > 0).then_some(self.upstream_response_us)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    pub delay_quanta: u32,
    pub delay_us: f64,
    pub prios: Vec<PrioOutcome>,
    pub background_sent: u64,
    pub background_received: u64,
    /// The storm never let the paused priorities resume.
    pub storm_continuous: bool,
    /// Where frames were lost, if anywhere: the DUT's drop counters (both ports), the
    /// kernel's drops at the DUT's and at the sink's sockets.
    pub dut_drops: u64,
    /// The DUT's drops per port, by reason.
    pub dut_drop_reasons: Vec<pfcswitch::core::stats::DropCounters>,
    pub dut_socket_drops: u64,
    /// Loop turns in which the DUT's kernel tx queues took nothing.
    pub dut_tx_busy: u64,
    pub sink_socket_drops: u64,
    /// The DUT's slowest reaction: from the arrival of a frame that crossed XOFF to its
    /// pause frame handed to the kernel, µs.
    pub dut_reaction_max_us: f64,
    /// The DUT's longest loop stall during the run (its `ctl stats` stalls), µs.
    #[serde(default)]
    pub dut_longest_stall_us: u64,
    /// How long the DUT's loop waited for a CPU during the traffic, in all, µs (where the
    /// kernel tells): a DUT sharing its CPU falls behind without one long stall.
    #[serde(default)]
    pub dut_cpu_wait_us: Option<u64>,
    /// What the testbed added to the configured delay, µs: the longest upstream response
    /// among the paused priorities, less the delay (0 when every one was shorter).
    pub overhead_us: f64,
    /// The host disturbed the run: test frames arrived for longer or shorter than the
    /// sender's delay by more than the allowance (see [`SweepOptions::max_overhead`]), the
    /// storm generator lost its CPU long enough to let the paused priorities resume, or
    /// (with three repeats or more) its need lay more than two frames from the other
    /// runs' at the same delay.
    pub disturbed: bool,
}

impl RunOutcome {
    /// What the host did to the DUT during the run, for a progress line.
    pub fn dut_off_cpu(&self) -> String {
        let wait =
            self.dut_cpu_wait_us.map_or(String::new(), |us| format!(", waited {:.1} ms for a CPU", us as f64 / 1e3));
        format!("DUT's longest stall {:.1} ms{wait}", self.dut_longest_stall_us as f64 / 1e3)
    }

    pub fn lossless(&self) -> bool {
        self.prios.iter().all(|p| p.drops == 0)
    }

    /// The upstream's response, µs: the longest among the priorities the DUT paused; the
    /// configured delay when none was measured.
    pub fn response_us(&self) -> f64 {
        self.prios.iter().filter_map(PrioOutcome::measured_response_us).reduce(f64::max).unwrap_or(self.delay_us)
    }

    /// Headroom this run needed for `p` ([`headroom_needed`]).
    pub fn needed(&self, p: &PrioOutcome, configured: u64, frame_len: u64) -> u64 {
        headroom_needed(p.drops, p.headroom_watermark, configured, frame_len)
    }
}

/// Headroom a lossless priority needed in a run: its watermark when nothing was dropped,
/// else at least the `configured` headroom plus the `drops` frames of `frame_len` bytes.
pub fn headroom_needed(drops: u64, watermark: u64, configured: u64, frame_len: u64) -> u64 {
    if drops == 0 {
        watermark
    } else {
        configured + drops * frame_len
    }
}

/// The calculator against the sweep, for one delay and one priority under test.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CalcCheck {
    pub delay_quanta: u32,
    pub prio: Priority,
    /// The priority's headroom on the DUT.
    pub headroom_configured: u64,
    /// The priority's need, averaged over the repeats without the lowest and the highest.
    pub measured_bytes: u64,
    pub lossless: bool,
    /// The upstream's response the DUT measured on this priority (the sender's delay and
    /// what the testbed adds), averaged like the need, µs: the calculator's response-time
    /// input.
    pub response_us: f64,
    pub predicted_bytes: u64,
    /// Lossless runs: measured within one maximum frame of the prediction. Runs that
    /// dropped: the calculator also said the configured headroom was (within a frame)
    /// too small.
    pub agrees: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    pub speed: String,
    pub prios: Vec<Priority>,
    /// The buffer-wide headroom, and each priority under test's (its own or this).
    pub headroom_configured: u64,
    #[serde(default)]
    pub prio_headroom: BTreeMap<Priority, u64>,
    pub xoff_bytes: u64,
    pub shared_bytes: u64,
    pub frame_size: usize,
    pub runs: Vec<RunOutcome>,
    /// The testbed's allowance either side of the sender's delay, µs (see
    /// [`SweepOptions::max_overhead`]).
    pub max_overhead_us: f64,
    /// Disturbed runs that were set aside and repeated (see [`SweepOptions::max_overhead`]).
    pub disturbed: Vec<RunOutcome>,
    /// The largest delay with no lossless drop in any repeat.
    pub largest_lossless_delay_quanta: Option<u32>,
    /// What the calculator's fixed terms (the frames in flight around the pause) miss on
    /// this testbed, fitted over the lossless delays and added to every prediction.
    pub testbed_offset_bytes: i64,
    pub checks: Vec<CalcCheck>,
}

/// One run of the plan at sender delay `delay` on `tb` (a star of two hosts).
pub(super) fn trial(tb: &Testbed, opts: &SweepOptions, delay: u32) -> Result<RunOutcome> {
    // A DUT preempted for a few milliseconds would let frames pile up unseen in its rx
    // ring, like a longer cable: the switch gets a CPU of its own, and it and the tools
    // run above the machine's ordinary processes.
    let cpus = harness::CpuPlan::split();
    let mut config = harness::switch_config(tb, "sw1");
    config.dataplane.cpu = cpus.switch;
    for p in &mut config.ports {
        p.speed = Some(opts.speed);
    }
    let background = opts.background();
    config.pfc.lossless = Some(opts.dut_lossless());
    // DSCP p marks priority p.
    config.classify.dscp = opts.prios.iter().chain(&background).map(|p| (p.to_string(), *p)).collect();
    config.buffer.xoff_bytes = Some(opts.xoff_bytes);
    config.buffer.xon_offset_bytes = Some(opts.xoff_bytes / 4);
    config.buffer.headroom_bytes = opts.headroom_bytes;
    config.buffer.shared_bytes = opts.shared_bytes;
    for &p in &opts.prios {
        let (headroom, xoff) = (opts.prio_headroom.get(&p).copied(), opts.prio_xoff.get(&p).copied());
        if headroom.is_some() || xoff.is_some() {
            let profile = BufferProfile {
                headroom_bytes: headroom,
                xoff_bytes: xoff,
                xon_offset_bytes: xoff.map(|x| x / 4),
                ..Default::default()
            };
            config.buffer.priority.insert(p, profile);
        }
    }
    // The background must all arrive, but a userspace DUT sharing two cores with a sender,
    // a storm and a sink now and then loses its core for a few ms: half of the shared pool
    // for the lossy queue (about 30 ms at 1G) keeps that from dropping background frames.
    let by_default = config.buffer.lossy_queue_limit(max_frame_for_mtu(mtu_for(opts.frame_size)));
    config.buffer.lossy_queue_bytes = Some(by_default.max(opts.shared_bytes / 2));
    // The plan's storm holds the test priority for longer than the PFC watchdog allows;
    // SONiC's plan stops the watchdog too, or it would drop what the test measures.
    config.pfcwd.action = WatchdogAction::Off;
    let sw = SwitchProc::start_on(tb, "sw1", &config, &RunArgs::default(), &cpus.switch_process)
        .context("starting the DUT")?;
    let (settle, traffic) = (opts.settle.as_secs_f64(), opts.traffic.as_secs_f64());
    let sink_args =
        SinkArgs { duration: Some(Duration::from_secs_f64(settle + traffic + 0.4)), ..harness::sink_defaults() };
    let sink = SinkProc::start_on(tb, "h2", "sink", cpus.hosts(), &sink_args)?;
    let storm_args = StormArgs {
        bitmap: Some(opts.prios.iter().copied().collect::<Priorities>().bits()),
        duration: Some(Duration::from_secs_f64(settle + traffic + 0.8)),
        speed: opts.speed,
        json: true,
        ..harness::storm_defaults(&tb.host_iface("h2")?.name)
    };
    let storm = tb.spawn_on("h2", "storm", cpus.hosts(), &harness::command_line("pfctools", "storm", &storm_args)?)?;
    std::thread::sleep(opts.settle);
    let waited_before = sw.stats()?.stalls.cpu_wait_us;

    // The test flows share their load, and the background flows theirs.
    let test_load = opts.test_load_per_prio();
    // DSCP p marks priority p.
    let mut dscp: Vec<u8> = opts.prios.iter().map(|p| p.get()).collect();
    let mut flow_load: Vec<f64> = opts.prios.iter().map(|_| test_load).collect();
    for &b in &background {
        dscp.push(b.get());
        flow_load.push(opts.background_load / background.len() as f64);
    }
    let args = GenArgs {
        flows: u16::try_from(dscp.len())?,
        dscp,
        flow_load,
        size: opts.frame_size,
        duration: Some(opts.traffic),
        speed: opts.speed,
        pause_delay_quanta: delay,
        spin: true,
        ..harness::gen_to(tb.host_iface("h2")?.mac)
    };
    let gen = harness::start_gen_on(tb, "h1", "gen", cpus.hosts(), &args)?.finish(Duration::from_secs(60))?;
    // The test frames are still held by the DUT: read its buffers before the storm ends.
    std::thread::sleep(Duration::from_millis(100));
    let stats = sw.stats()?;
    let storm = storm.wait(Duration::from_secs(30));
    let storm: StormReport = serde_json::from_str(storm.stdout.trim())
        .with_context(|| format!("storm report unreadable: {}", storm.stderr.trim()))?;
    let rx = sink.finish(Duration::from_secs(30))?;
    let finished = sw.stop();
    if !finished.success() {
        bail!("the DUT did not stop cleanly: {}", finished.stderr.trim());
    }

    let p1 = &stats.ports[0];
    let received = |flow: u16| rx.flows.iter().find(|f| f.flow == flow).map_or(0, |f| f.received);
    let prios: Vec<PrioOutcome> = opts
        .prios
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let tx = &gen.flows[i];
            let q = &p1.priorities[p.index()];
            PrioOutcome {
                prio: p,
                test_sent_frames: tx.sent,
                test_sent_bytes: tx.bytes,
                test_received: received(tx.flow),
                drops: q.counters.lossless_drops,
                headroom_watermark: q.headroom_watermark,
                held_bytes: q.ingress_watermark,
                xoff_sent: q.counters.xoff_sent,
                upstream_response_us: q.upstream_response_max_us,
            }
        })
        .collect();
    let bg = &gen.flows[opts.prios.len()..];
    let delay_us = opts.speed.bit_times(u64::from(delay) * 512).as_secs_f64() * 1e6;
    // Per priority with a measured response: how far the testbed moved it, and how far
    // it may before the run says nothing.
    let overheads_us: Vec<(f64, Allowance)> = prios
        .iter()
        .filter_map(|p| Some((p.measured_response_us()? - delay_us, verdict_allowance(opts, delay, p.prio))))
        .collect();
    let frame_interval = opts.speed.wire_time(opts.frame_size.saturating_sub(4)).mul_f64(100.0 / test_load);
    let mut outcome = RunOutcome {
        delay_quanta: delay,
        delay_us,
        prios,
        background_sent: bg.iter().map(|f| f.sent).sum(),
        background_received: bg.iter().map(|f| received(f.flow)).sum(),
        storm_continuous: storm.continuous,
        dut_drops: stats.ports.iter().map(|p| p.counters.drops.total()).sum(),
        dut_drop_reasons: stats.ports.iter().map(|p| p.counters.drops).collect(),
        dut_socket_drops: stats.ports.iter().map(|p| p.socket.rx_lost()).sum(),
        dut_tx_busy: stats.ports.iter().map(|p| p.socket.tx_kernel_busy).sum(),
        sink_socket_drops: rx.socket_dropped,
        dut_reaction_max_us: stats.pfc_reaction.max_us,
        dut_longest_stall_us: stats.stalls.longest_us,
        dut_cpu_wait_us: waited_before.zip(stats.stalls.cpu_wait_us).map(|(a, b)| b.saturating_sub(a)),
        overhead_us: overheads_us.iter().map(|&(o, _)| o).fold(0.0, f64::max),
        disturbed: false,
    };
    outcome.disturbed = !opts.max_overhead.is_zero() && disturbed(frame_interval, &overheads_us, storm.continuous)
        || (!opts.max_overhead.is_zero() && machine_explains_background_loss(opts, &outcome));
    Ok(outcome)
}

/// Whether the DUT was kept off its CPU for long enough to lose background frames on its
/// own. What arrives while the switch is off its CPU waits in its rx ring, and is admitted
/// all at once when it returns: a stall of T puts T of background into the queues at
/// once, more than the shared pool holds (less what the test priorities hold) once T
/// exceeds the pool's time at the background's rate. Many short waits for a CPU add up
/// the same way when the DUT, sharing its CPU, cannot catch up between them; below the
/// pool's time in all they cannot fill it, and a loss is the switch's. The headroom is not
/// to blame for either.
fn machine_explains_background_loss(opts: &SweepOptions, r: &RunOutcome) -> bool {
    if r.background_received >= r.background_sent || opts.background_load <= 0.0 {
        return false;
    }
    let frame = opts.frame_size.saturating_sub(4);
    let per_s = opts.speed.bps() as f64 / 8.0 * opts.background_load / 100.0 * frame as f64
        / pfcswitch::core::speed::wire_bytes(frame) as f64;
    let held: u64 = r.prios.iter().map(|p| p.held_bytes).sum();
    let pool_lasts_us = opts.shared_bytes.saturating_sub(held) as f64 / per_s * 1e6;
    // A tenth off for the frames that keep arriving while the backlog is admitted.
    let off_cpu_us = r.dut_longest_stall_us.max(r.dut_cpu_wait_us.unwrap_or(0));
    off_cpu_us as f64 >= 0.9 * pool_lasts_us
}

/// Whether the host disturbed a run. `overheads_us` holds, per paused priority, how much
/// longer than the sender's delay its frames kept arriving after XOFF, and how far it
/// may be from the delay ([`verdict_allowance`]). Later by more than its `late`: the DUT
/// or the sender lost its CPU after the pause, and the headroom would be blamed for it.
/// Short of the delay by more than its `early` and one of the sender's frame intervals
/// (its last frame before the deadline may come that early): the sender fell behind its
/// rate when it should still have been sending, which hides part of what the delay
/// needs. A storm gap let the paused priorities resume.
fn disturbed(frame_interval: Duration, overheads_us: &[(f64, Allowance)], storm_continuous: bool) -> bool {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    !storm_continuous
        || overheads_us.iter().any(|&(o, a)| o > us(a.late) || o < -us(a.early.saturating_add(frame_interval)))
}

/// How far the testbed may move a priority's response, later or earlier than the
/// sender's delay, before a run says nothing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Allowance {
    pub late: Duration,
    pub early: Duration,
}

/// What this testbed adds to a sender's delay when nothing disturbs it (the DUT's
/// reaction, veth, the sender's loop: 0-70 µs, see [`SweepOptions::max_overhead`]).
const TESTBED_ADDS: Duration = Duration::from_micros(70);

/// How far the testbed may move `prio`'s response at `delay` quanta before it could
/// change whether the run drops on it, by the calculator (whose agreement with the
/// engine the simulator checks to a frame): where the headroom exceeds the need, half
/// the time the surplus lasts at the priority's rate, later (earlier only hides need);
/// where the need exceeds the headroom, half the time the shortfall lasts, earlier.
/// Never less than `max_overhead`; just that without `judge_by_margin`.
pub fn verdict_allowance(opts: &SweepOptions, delay: u32, prio: Priority) -> Allowance {
    let floor = opts.max_overhead;
    if !opts.judge_by_margin {
        return Allowance { late: floor, early: floor };
    }
    let delay = opts.speed.bit_times(u64::from(delay) * 512) + TESTBED_ADDS;
    let need = opts.calc_input(delay).calculate().total_bytes;
    let headroom = opts.headroom_for(prio);
    let bytes_per_s = opts.speed.bps() as f64 / 8.0 * opts.test_load_per_prio() / 100.0;
    let lasts = |bytes: u64| Duration::from_secs_f64(bytes as f64 / bytes_per_s / 2.0).max(floor);
    if need < headroom {
        Allowance { late: lasts(headroom - need), early: Duration::MAX }
    } else {
        Allowance { late: Duration::MAX, early: lasts(need - headroom) }
    }
}

/// What [`harness::undisturbed`] asks of a run.
pub(super) fn is_disturbed(r: &RunOutcome) -> bool {
    r.disturbed
}

/// Runs the sweep; `progress` hears about each run.
pub fn run(opts: &SweepOptions, progress: &dyn Fn(&RunOutcome)) -> Result<SweepReport> {
    opts.validate()?;
    // Jumbo test frames need links at a jumbo MTU (the switch then carries them as
    // multi-buffer frames).
    let tb = Testbed::up(&unique_name("headroom"), at_mtu(Topology::star(2), mtu_for(opts.frame_size)))?;
    let (mut runs, mut disturbed) = (Vec::new(), Vec::new());
    for &delay in &opts.delays {
        let repeats = opts.repeats.max(1);
        let mut these = Vec::new();
        // Runs set aside as out of line with the others at this delay, at most as many
        // as the runs themselves may be retried.
        let mut replacements = opts.retries * repeats;
        while these.len() < repeats {
            let r = harness::undisturbed(
                opts.retries,
                harness::RETRY_PAUSE,
                is_disturbed,
                |r| disturbed.push(r),
                || {
                    let r = trial(&tb, opts, delay)?;
                    progress(&r);
                    Ok(r)
                },
            )?;
            these.push(r);
            if these.len() == repeats {
                for i in out_of_line(opts, &these).into_iter().rev().take(replacements) {
                    let mut r = these.remove(i);
                    r.disturbed = true;
                    disturbed.push(r);
                    replacements -= 1;
                }
            }
        }
        runs.extend(these);
    }
    let mut report = report(opts, runs);
    report.disturbed = disturbed;
    Ok(report)
}

/// The runs (indices, ascending) whose need for some priority lies more than two frames
/// from the median of the runs at the same delay; none with fewer than three runs.
///
/// At one delay the switch needs the same to within a frame in every undisturbed run (the
/// simulator gives exactly that, and runs on a quiet machine scatter by ±1 frame). A run
/// further out had the test frames around its pause bunched or thinned by the host (the
/// sender, or the DUT's rx ring, losing its CPU for a few hundred µs) in a way its measured
/// response does not show: the host disturbed it, and it is repeated, like a run whose
/// response was out of bounds.
fn out_of_line(opts: &SweepOptions, runs: &[RunOutcome]) -> Vec<usize> {
    if runs.len() < 3 {
        return Vec::new();
    }
    let frame_len = opts.frame_size as u64 - 4;
    let mut out = vec![false; runs.len()];
    for (i, &prio) in opts.prios.iter().enumerate() {
        let needs: Vec<Option<f64>> =
            runs.iter().map(|r| Some(r.needed(r.prios.get(i)?, opts.headroom_for(prio), frame_len) as f64)).collect();
        let m = median(&needs.iter().flatten().copied().collect::<Vec<f64>>());
        for (far, need) in out.iter_mut().zip(&needs) {
            *far |= need.is_some_and(|n| (n - m).abs() > 2.0 * frame_len as f64);
        }
    }
    (0..runs.len()).filter(|&k| out[k]).collect()
}

/// The mean without the lowest and the highest value (with three values or more).
///
/// A run's need is a whole number of frames, and which whole number depends on where the
/// sender's frames fall against the moment the pause takes effect: averaging recovers the
/// fraction in between, which one frame of tolerance leaves no room to lose; dropping the
/// extremes keeps a run disturbed by the machine from moving it.
fn trimmed_mean(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let kept = if s.len() >= 3 { &s[1..s.len() - 1] } else { &s[..] };
    if kept.is_empty() {
        0.0
    } else {
        kept.iter().sum::<f64>() / kept.len() as f64
    }
}

/// Summarises runs: the largest lossless delay and the calculator's agreement, per
/// priority under test (each against its own headroom).
pub fn report(opts: &SweepOptions, runs: Vec<RunOutcome>) -> SweepReport {
    let frame_len = opts.frame_size as u64 - 4;
    let mut delays: Vec<u32> = runs.iter().map(|r| r.delay_quanta).collect();
    delays.sort_unstable();
    delays.dedup();
    /// One (delay, priority)'s runs, summarised once.
    struct Entry {
        quanta: u32,
        prio: Priority,
        headroom: u64,
        measured: u64,
        lossless: bool,
        response_us: f64,
        calculated: f64,
    }
    let entries: Vec<Entry> = delays
        .iter()
        .flat_map(|&d| opts.prios.iter().enumerate().map(move |(i, &prio)| (d, i, prio)))
        .map(|(d, i, prio)| {
            let headroom = opts.headroom_for(prio);
            let these: Vec<(&RunOutcome, &PrioOutcome)> =
                runs.iter().filter(|r| r.delay_quanta == d).filter_map(|r| Some((r, r.prios.get(i)?))).collect();
            let needs: Vec<f64> = these.iter().map(|(r, p)| r.needed(p, headroom, frame_len) as f64).collect();
            // The calculator is given the response as it was: the sender's delay plus what
            // this testbed adds, which drifts by tens of µs (a frame or two) between runs.
            let responses: Vec<f64> =
                these.iter().map(|(r, p)| p.measured_response_us().unwrap_or(r.delay_us)).collect();
            let response_us = trimmed_mean(&responses);
            let calculated =
                opts.calc_input(Duration::from_secs_f64(response_us.max(0.0) / 1e6)).calculate().total_bytes as f64;
            Entry {
                quanta: d,
                prio,
                headroom,
                measured: trimmed_mean(&needs).round() as u64,
                lossless: these.iter().all(|(_, p)| p.drops == 0),
                response_us,
                calculated,
            }
        })
        .collect();
    let largest_lossless =
        delays.iter().copied().filter(|&d| runs.iter().filter(|r| r.delay_quanta == d).all(RunOutcome::lossless)).max();

    // What the model's fixed terms miss here is fitted as the median residual over the
    // lossless entries, so that one noisy delay does not move it for the others; what is
    // checked is that every entry then lands within one frame.
    let residuals: Vec<f64> = entries.iter().filter(|e| e.lossless).map(|e| e.measured as f64 - e.calculated).collect();
    let offset = median(&residuals);
    let checks = entries
        .iter()
        .map(|e| {
            let predicted = (e.calculated + offset).round().max(0.0) as u64;
            // Both sides are only known to a frame: a lossless run must land within one
            // frame of the prediction, a run that dropped must be predicted to need at
            // least the configured headroom less one frame.
            let agrees = if e.lossless {
                e.measured.abs_diff(predicted) <= frame_len
            } else {
                predicted + frame_len > e.headroom
            };
            CalcCheck {
                delay_quanta: e.quanta,
                prio: e.prio,
                headroom_configured: e.headroom,
                measured_bytes: e.measured,
                lossless: e.lossless,
                response_us: e.response_us,
                predicted_bytes: predicted,
                agrees,
            }
        })
        .collect();
    SweepReport {
        speed: opts.speed.to_string(),
        prios: opts.prios.clone(),
        headroom_configured: opts.headroom_bytes,
        prio_headroom: opts.prios.iter().map(|&p| (p, opts.headroom_for(p))).collect(),
        xoff_bytes: opts.xoff_bytes,
        shared_bytes: opts.shared_bytes,
        frame_size: opts.frame_size,
        runs,
        largest_lossless_delay_quanta: largest_lossless,
        testbed_offset_bytes: offset.round() as i64,
        checks,
        max_overhead_us: opts.max_overhead.as_secs_f64() * 1e6,
        disturbed: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run at 1G (a quantum is 0.512 µs) whose response the DUT did not measure.
    fn run(delay: u32, watermark: u64, drops: u64) -> RunOutcome {
        RunOutcome {
            delay_quanta: delay,
            delay_us: f64::from(delay) * 0.512,
            prios: vec![PrioOutcome {
                prio: Priority::new(3),
                drops,
                headroom_watermark: watermark,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// The same with the response the DUT measured: `extra_us` more than the delay.
    fn measured(delay: u32, watermark: u64, extra_us: f64) -> RunOutcome {
        let mut r = run(delay, watermark, 0);
        r.prios[0].xoff_sent = 1;
        r.prios[0].upstream_response_us = r.delay_us + extra_us;
        r
    }

    #[test]
    fn a_run_more_than_two_frames_from_the_others_at_its_delay_is_out_of_line() {
        let opts = SweepOptions::default();
        let frame = opts.frame_size as u64 - 4;
        let needs = [20, 21, 19, 20, 23, 20, 17, 22, 18].map(|frames| run(800, frames * frame, 0));
        // Median 20 frames: 23 and 17 lie three away, 22 and 18 two.
        assert_eq!(out_of_line(&opts, &needs), [4, 6]);
        // A run that dropped needs the headroom and what it dropped: far out here.
        let mut with_drops = needs[..3].to_vec();
        with_drops.push(run(800, 0, 30));
        with_drops.push(run(800, 20 * frame, 0));
        assert_eq!(out_of_line(&opts, &with_drops), [3]);
        assert!(out_of_line(&opts, &needs[..2]).is_empty(), "two runs have no majority to judge by");
    }

    #[test]
    fn the_calculator_is_given_the_response_the_dut_measured() {
        let opts = SweepOptions { headroom_bytes: 200_000, ..SweepOptions::default() };
        // 1G at 50 % load buffers 996 B per 16.3 µs: a testbed that adds 16 µs more at one
        // delay needs a frame more there, and the calculator follows it.
        let per_us = 0.5 * 1e9 / 8.0 / 1e6 * 996.0 / 1020.0;
        let at = |d: u32, extra: f64| measured(d, (6_000.0 + (f64::from(d) * 0.512 + extra) * per_us) as u64, extra);
        let r = report(&opts, vec![at(0, 20.0), at(500, 20.0), at(1000, 36.0)]);
        assert_eq!(r.checks[2].response_us, 512.0 + 36.0);
        for c in &r.checks {
            let off = c.measured_bytes.abs_diff(c.predicted_bytes);
            assert!(off < 100, "the residual is the model's, not the testbed's drift: {c:?}");
        }
        // Without a measurement the configured delay stands in for the response.
        assert_eq!(report(&opts, vec![run(1000, 40_000, 0)]).checks[0].response_us, 512.0);
    }

    #[test]
    fn summary_finds_the_limit_and_checks_the_calculator() {
        let opts = SweepOptions { headroom_bytes: 20_000, ..SweepOptions::default() };
        // 1G, 50 % load: 1000 quanta add 32 000 wire bytes × 996/1020 buffered.
        let per_quantum = 32.0 * 996.0 / 1020.0;
        let base = 6_000.0;
        let runs =
            vec![run(0, base as u64, 0), run(300, (base + 300.0 * per_quantum) as u64 + 500, 0), run(1000, 20_000, 7)];
        let r = report(&opts, runs);
        assert_eq!(r.largest_lossless_delay_quanta, Some(300));
        assert!(r.testbed_offset_bytes > 0);
        assert_eq!(r.checks.len(), 3);
        assert!(r.checks[0].agrees, "calibration point");
        assert!(r.checks[1].agrees, "{:?}", r.checks[1]);
        assert_eq!(r.checks[2].measured_bytes, 20_000 + 7 * 996);
        assert!(r.checks[2].agrees, "the calculator predicts the overflow too: {:?}", r.checks[2]);
    }

    #[test]
    fn a_slow_testbed_a_lagging_sender_or_a_storm_gap_disturbs_a_run() {
        // Every priority held to the same allowance both ways, as the sweep judges.
        let disturbed = |allowance: Duration, interval, overheads: &[f64], storm_continuous| {
            let both = Allowance { late: allowance, early: allowance };
            let judged: Vec<(f64, Allowance)> = overheads.iter().map(|&o| (o, both)).collect();
            !allowance.is_zero() && super::disturbed(interval, &judged, storm_continuous)
        };
        let (allowance, interval) = (Duration::from_micros(150), Duration::from_micros(16));
        assert!(!disturbed(allowance, interval, &[60.0], true));
        assert!(!disturbed(allowance, interval, &[-16.0, 40.0], true), "the last frame came one interval early");
        assert!(disturbed(allowance, interval, &[5700.0], true), "frames kept coming for ms");
        assert!(disturbed(allowance, interval, &[30.0, 5700.0], true), "either priority");
        assert!(disturbed(allowance, interval, &[-200.0], true), "the sender stopped 200 µs short of its delay");
        assert!(!disturbed(allowance, Duration::from_micros(300), &[-200.0], true), "slower senders stop earlier");
        assert!(disturbed(allowance, interval, &[30.0], false), "test frames got through a gap in the storm");
        assert!(!disturbed(Duration::ZERO, interval, &[5700.0], false), "a zero allowance keeps every run");
    }

    #[test]
    fn judged_by_margin_a_run_is_disturbed_only_by_what_could_turn_its_verdict() {
        // 1G, 48 KiB of headroom, test traffic at 50 %: 62.5 bytes per µs.
        let opts = SweepOptions { judge_by_margin: true, ..SweepOptions::default() };
        let need = |quanta: u32| {
            let delay = opts.speed.bit_times(u64::from(quanta) * 512) + TESTBED_ADDS;
            opts.calc_input(delay).calculate().total_bytes
        };
        // Without a delay the headroom holds with room to spare: only a late response
        // can turn it, by half the time the surplus lasts.
        let enough = verdict_allowance(&opts, 0, Priority::new(3));
        let surplus_us = (opts.headroom_bytes - need(0)) as f64 / 62.5 / 2.0;
        assert!((enough.late.as_secs_f64() * 1e6 - surplus_us).abs() < 1.0, "{enough:?} against {surplus_us}");
        assert!(enough.late > Duration::from_micros(150) && enough.early == Duration::MAX, "{enough:?}");
        // 3000 quanta need about twice the headroom: only an early stop can hide the drops.
        let short = verdict_allowance(&opts, 3000, Priority::new(3));
        assert!(need(3000) > opts.headroom_bytes && short.late == Duration::MAX, "{short:?}");
        let shortfall_us = (need(3000) - opts.headroom_bytes) as f64 / 62.5 / 2.0;
        assert!((short.early.as_secs_f64() * 1e6 - shortfall_us).abs() < 1.0, "{short:?}");
        // A run 2 ms late at delay 0 is disturbed; 200 µs late is not (it was at 150 µs).
        let interval = Duration::from_micros(16);
        assert!(disturbed(interval, &[(2000.0, enough)], true));
        assert!(!disturbed(interval, &[(200.0, enough)], true));
        assert!(!disturbed(interval, &[(5000.0, short)], true), "later only drops more");
        // Near the boundary the floor holds: never less than max_overhead.
        let edge = SweepOptions { headroom_bytes: need(1000) + 100, ..opts.clone() };
        assert_eq!(verdict_allowance(&edge, 1000, Priority::new(3)).late, opts.max_overhead);
        // The sweep judges as it always did.
        let sweep = SweepOptions::default();
        let a = verdict_allowance(&sweep, 0, Priority::new(3));
        assert_eq!((a.late, a.early), (sweep.max_overhead, sweep.max_overhead));
    }

    #[test]
    fn background_lost_while_the_dut_was_off_its_cpu_for_the_pools_time_disturbs_a_run() {
        // 1G, background at 50 %: 4 MiB less 100 kB held lasts about 67 ms.
        let opts = SweepOptions::default();
        let mut r = run(0, 1000, 0);
        r.prios[0].held_bytes = 100_000;
        (r.background_sent, r.background_received) = (24_000, 23_500);
        r.dut_longest_stall_us = 70_000;
        assert!(machine_explains_background_loss(&opts, &r));
        r.dut_longest_stall_us = 8_000;
        assert!(!machine_explains_background_loss(&opts, &r), "an 8 ms stall loses nothing: the loss is the DUT's");
        // Sharing its CPU, the DUT waited for it 70 ms in all, without one long stall.
        r.dut_cpu_wait_us = Some(70_000);
        assert!(machine_explains_background_loss(&opts, &r));
        r.dut_cpu_wait_us = Some(20_000);
        assert!(!machine_explains_background_loss(&opts, &r), "20 ms of waits cannot fill the pool");
        r.dut_longest_stall_us = 70_000;
        r.background_received = r.background_sent;
        assert!(!machine_explains_background_loss(&opts, &r), "nothing lost, nothing to explain");
    }

    #[test]
    fn disturbed_runs_are_repeated_a_bounded_number_of_times() {
        let outcome = |disturbed: bool, overhead_us: f64| RunOutcome { disturbed, overhead_us, ..Default::default() };
        // Disturbed twice, then clean: the clean run is kept, the others set aside.
        let mut script = vec![outcome(true, 900.0), outcome(true, 2800.0), outcome(false, 30.0)].into_iter();
        let mut aside = Vec::new();
        let kept =
            harness::undisturbed(2, Duration::ZERO, is_disturbed, |r| aside.push(r), || Ok(script.next().unwrap()))
                .unwrap();
        assert_eq!((kept.overhead_us, aside.len()), (30.0, 2));
        // Always disturbed: after the retries the last run stands, marked.
        let mut aside = Vec::new();
        let mut tries = 0;
        let kept = harness::undisturbed(
            2,
            Duration::ZERO,
            is_disturbed,
            |r| aside.push(r),
            || {
                tries += 1;
                Ok(outcome(true, 1000.0 + f64::from(tries)))
            },
        )
        .unwrap();
        assert!(kept.disturbed);
        assert_eq!((tries, aside.len(), kept.overhead_us), (3, 2, 1003.0));
        // No retries: the first run stands.
        let kept = harness::undisturbed(0, Duration::ZERO, is_disturbed, |_| {}, || Ok(outcome(true, 5.0))).unwrap();
        assert!(kept.disturbed);
    }

    #[test]
    fn each_priority_is_checked_against_its_own_headroom() {
        // Priority 3 with 20 000 B of headroom drops at 1000 quanta; priority 4 beside it
        // has 60 000 B and does not.
        let mut opts = SweepOptions {
            prios: vec![Priority::new(3), Priority::new(4)],
            headroom_bytes: 20_000,
            ..SweepOptions::default()
        };
        opts.prio_headroom.insert(Priority::new(4), 60_000);
        // 25 % of 1G each: 16 wire bytes per quantum.
        let per_quantum = 16.0 * 996.0 / 1020.0;
        let at = |d: u32, drops3: u64| {
            let need = (3_000.0 + f64::from(d) * per_quantum) as u64;
            let mut r = run(d, need.min(20_000), drops3);
            r.prios.push(PrioOutcome { prio: Priority::new(4), headroom_watermark: need, ..Default::default() });
            r
        };
        let r = report(&opts, vec![at(0, 0), at(1000, 0), at(2000, 5)]);
        assert_eq!(r.checks.len(), 6);
        let of = |d: u32, p: u8| r.checks.iter().find(|c| c.delay_quanta == d && c.prio.get() == p).unwrap();
        assert!(!of(2000, 3).lossless && of(2000, 4).lossless);
        assert_eq!((of(2000, 3).headroom_configured, of(2000, 4).headroom_configured), (20_000, 60_000));
        assert!(of(2000, 3).agrees, "the calculator, too, says 20 000 B are not enough: {:?}", of(2000, 3));
        assert!(of(2000, 4).agrees, "{:?}", of(2000, 4));
        assert_eq!(r.largest_lossless_delay_quanta, Some(1000));
        assert_eq!(r.prio_headroom, BTreeMap::from([(Priority::new(3), 20_000), (Priority::new(4), 60_000)]));
    }

    #[test]
    fn the_background_takes_the_priorities_neither_tested_nor_lossless() {
        let opts = SweepOptions { prios: vec![Priority::new(3)], ..SweepOptions::default() };
        assert_eq!(opts.background(), [0, 1, 2, 5, 6, 7].map(Priority::new));
        let opts = SweepOptions { prios: vec![Priority::new(5)], ..SweepOptions::default() };
        assert_eq!(
            (opts.dut_lossless(), opts.background()),
            ([3, 4, 5].map(Priority::new).to_vec(), [0, 1, 2, 6, 7].map(Priority::new).to_vec())
        );
        let none = SweepOptions { background_load: 0.0, ..SweepOptions::default() };
        assert!(none.background().is_empty());
        let mut bad = SweepOptions { background_prios: Some(vec![Priority::new(3)]), ..SweepOptions::default() };
        assert!(bad.validate().is_err(), "background on the priority under test");
        bad.background_prios = Some(vec![Priority::new(0)]);
        bad.test_load = 80.0;
        assert!(bad.validate().is_err(), "130 % of line rate");
        bad.test_load = 50.0;
        bad.prio_headroom.insert(Priority::new(4), 1);
        assert!(bad.validate().is_err(), "a profile for a priority not under test");
    }

    #[test]
    fn needs_are_averaged_without_the_extremes() {
        assert_eq!(trimmed_mean(&[2.0, 9.0, 3.0, 3.0, 4.0]), 10.0 / 3.0);
        assert_eq!(trimmed_mean(&[5.0, 7.0]), 6.0);
        assert_eq!(trimmed_mean(&[]), 0.0);
    }

    #[test]
    fn a_need_more_than_a_frame_off_the_calculator_disagrees() {
        let opts = SweepOptions { headroom_bytes: 200_000, ..SweepOptions::default() };
        let per_quantum = 32.0 * 996.0 / 1020.0;
        let at = |d: u32, off: f64| run(d, (6_000.0 + d as f64 * per_quantum + off) as u64, 0);
        // The offset is the median residual: the odd one out does not move it.
        let r = report(&opts, vec![at(0, 0.0), at(500, 1_500.0), at(1000, 0.0)]);
        assert_eq!(r.checks.iter().map(|c| c.agrees).collect::<Vec<_>>(), [true, false, true], "{:?}", r.checks);
        let r = report(&opts, vec![at(0, 0.0), at(500, 900.0), at(1000, 0.0)]);
        assert!(r.checks.iter().all(|c| c.agrees), "{:?}", r.checks);
    }
}
