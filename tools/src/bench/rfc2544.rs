//! `bench rfc2544`: the throughput tests of RFC 2544 §26 on veth, through pfcswitch with
//! the configuration a user gets without a file, through a Linux bridge, and straight
//! from host to host (no switch), in one run:
//!
//! - throughput (§26.1): the highest offered rate at which every frame arrives, found by
//!   a binary search over trials of a few seconds each, and confirmed by a trial after
//!   it (lowered in steps until one holds);
//! - latency (§26.2): one-way, in that confirmation trial (sender and sink share the
//!   monotonic clock);
//! - frame loss rate (§26.3): at steps of 10 % of the sender's ceiling above the
//!   throughput.
//!
//! The offered rate cannot exceed what the sender produces on this machine, so each
//! search starts with an unpaced trial: the sender's ceiling, and the upper bound. A
//! DUT that loses nothing there is reported as limited by the sender, not by itself.
//! Each size visits the DUTs in a rotated order, so that slow drifts of the machine do
//! not always favour the same one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use pfcswitch::core::histogram::Percentiles;
use pfcswitch_table::Table;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::harness::{self, SwitchLosses, SwitchProc};
use crate::testbed::topology::{Endpoint, EndpointSpec, HostSpec, Link};
use crate::testbed::TestbedTopology;
use crate::testbed::{at_mtu, mtu_for, unique_name, Testbed, Topology};
use crate::traffic::latency::us3;
use pfclab::progress::Progress;
use pfcswitch::control::Request;
use pfcswitch::stats::StageLatency;

/// RFC 2544's frame sizes for Ethernet (§9.1), FCS included.
const SIZES: &str = "64,128,256,512,1024,1280,1518";

#[derive(Args, Clone, Debug)]
pub struct Rfc2544Args {
    /// Frame sizes on the wire, FCS included.
    #[arg(long, value_delimiter = ',', default_value = SIZES)]
    pub sizes: Vec<usize>,
    /// Seconds per trial (at least 3; RFC 2544 asks for 60 on real links).
    #[arg(long, default_value_t = 3.0, value_parser = parse_trial_s)]
    pub trial_s: f64,
    /// The search stops when its bounds are this close, as a share of the upper one.
    #[arg(long, default_value_t = 0.02, value_parser = crate::cli::parse_positive)]
    pub resolution: f64,
    /// The most trials one search makes (the unpaced one included, retries not).
    #[arg(long, default_value_t = 10)]
    pub max_trials: usize,
    /// How many times a rate that lost frames is tried again before it counts as lost:
    /// on a shared VM the hypervisor takes a vCPU away for 100 ms now and then, which no
    /// DUT survives at a high rate. 0 for RFC 2544's single trial.
    #[arg(long, default_value_t = 1)]
    pub retries: usize,
    /// The devices under test (default: pfcswitch, Open vSwitch's AF_XDP datapath when
    /// `ovs-vswitchd` is installed, the Linux bridge and the direct path).
    #[arg(long, value_delimiter = ',')]
    pub duts: Vec<Dut>,
    #[arg(long)]
    pub json: bool,
    /// Draw throughput and latency against frame size into this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Measure nothing: print (and with --plot draw) the report an earlier run wrote with
    /// --json into this file.
    #[arg(long)]
    pub replot: Option<PathBuf>,
}

fn parse_trial_s(s: &str) -> Result<f64, String> {
    let v = crate::cli::parse_positive(s)?;
    if v < 3.0 {
        return Err(format!("{s} s is too short for a trial: at least 3"));
    }
    Ok(v)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Dut {
    /// pfcswitch with its defaults.
    Pfcswitch,
    /// A Linux bridge in the switch's namespace.
    Bridge,
    /// A veth from host to host: what the sender and the sink do alone.
    Direct,
    /// Open vSwitch's userspace datapath with AF_XDP ports (see `testbed::ovs`).
    Ovs,
}

impl Dut {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Dut::Pfcswitch => "pfcswitch",
            Dut::Bridge => "bridge",
            Dut::Direct => "direct",
            Dut::Ovs => "ovs-afxdp",
        }
    }

    /// What the bench compares when not told: OVS too where it is installed.
    pub fn defaults() -> Vec<Dut> {
        let mut d = vec![Dut::Pfcswitch];
        if crate::testbed::ovs::installed() {
            d.push(Dut::Ovs);
        }
        d.extend([Dut::Bridge, Dut::Direct]);
        d
    }
}

/// One trial: a rate offered for a while, and what arrived.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// The rate asked of the sender, frames/s; `None`: unpaced.
    pub asked_fps: Option<f64>,
    /// The rate the sender achieved, frames/s.
    pub offered_fps: f64,
    pub sent: u64,
    pub received: u64,
    pub latency: Percentiles,
    /// Frames the sink's socket could not take (its rx ring full, or no free frame).
    #[serde(default)]
    pub sink_dropped: u64,
    /// Through pfcswitch: what its own counters and loop say about the trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<SwitchSide>,
    /// CPU time (user and system, all threads) the DUT's process had during the trial:
    /// pfcswitch's or OVS's; the bridge and the direct path work in the kernel, on no
    /// process of their own. ns, at the kernel's tick (10 ms) resolution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_cpu_ns: Option<u64>,
    /// The most the hypervisor took from one of the machine's vCPUs during the trial
    /// (steal time, `/proc/stat`), ms, at the kernel's tick (10 ms).
    #[serde(default)]
    pub host_took_ms: u64,
}

/// What pfcswitch saw of one trial through it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwitchSide {
    /// Frames the kernel could not put on its rx rings (ring full, or no free frame).
    pub rx_lost: u64,
    /// Frames the switch dropped itself (egress tail drops and the rest).
    pub dropped: u64,
    /// Of `rx_lost`, those lost in backlog spells in which the machine kept the switch
    /// off its CPU for at least as long as its rx ring lasts at the trial's rate: lost
    /// to the machine, not to the switch.
    pub machine_explains: u64,
    /// The longest stall of its loop in the trial, µs.
    pub longest_stall_us: u64,
    /// How much of that stall its loop's thread was runnable but waiting for a CPU, µs
    /// (the rest it spent in the kernel, or blocked).
    #[serde(default)]
    pub longest_stall_cpu_wait_us: u64,
    /// Where the trial's frames waited inside the switch, stage by stage.
    #[serde(default)]
    pub stages: StageLatency,
    /// The most frames any port had on its tx ring at once in the trial (the switch
    /// holds at most two batches there; the rest wait in its queues).
    #[serde(default)]
    pub tx_in_flight_max: u32,
}

impl Trial {
    pub fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }

    pub fn loss_pct(&self) -> f64 {
        100.0 * self.lost() as f64 / self.sent.max(1) as f64
    }

    /// Lost frames while the host held one of the vCPUs for [`HOST_TOOK`] or more: the
    /// trial says nothing about the DUT.
    pub fn host_disturbed(&self) -> bool {
        self.lost() > 0 && Duration::from_millis(self.host_took_ms) >= HOST_TOOK
    }
}

/// A zero-loss verdict the host disturbed is not one: a trial that lost frames while the
/// hypervisor took one of the vCPUs for this long is made again ...
pub const HOST_TOOK: Duration = Duration::from_millis(30);
/// ... up to this many times, for every DUT alike.
pub const HOST_REPEATS: usize = 3;

/// One trial from `trial`, made again (up to [`HOST_REPEATS`] times) while it is
/// [`Trial::host_disturbed`]; the disturbed ones go to `set_aside`. The last one counts,
/// disturbed or not: a machine that disturbs every attempt does not pass a rate. The
/// repeats follow at once, unlike the tests' ([`harness::retry_pause`]): a search's trials
/// are a measurement over minutes, and the steal it reads tells a disturbed trial apart.
pub fn undisturbed(set_aside: &mut Vec<Trial>, trial: impl FnMut() -> Result<Trial>) -> Result<Trial> {
    harness::undisturbed(HOST_REPEATS, Duration::ZERO, Trial::host_disturbed, |t| set_aside.push(t), trial)
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossPoint {
    pub offered_fps: f64,
    pub loss_pct: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SizeResult {
    pub dut: Dut,
    pub size: usize,
    /// The highest rate with zero loss, frames/s (0: none found): the search's, confirmed
    /// or lowered until confirmed (see `confirmed`).
    pub throughput_fps: f64,
    /// The rate the search found, before its confirmation.
    pub search_fps: f64,
    /// The same in bits/s on the wire (preamble and gap included, as RFC 2544 counts).
    pub throughput_bps: f64,
    /// What the sender produced unpaced: the highest rate this machine can offer.
    pub sender_max_fps: f64,
    /// Nothing was lost at the sender's ceiling: the DUT's own limit lies above it.
    pub sender_limited: bool,
    /// One-way latency in the last confirmation trial.
    pub latency: Percentiles,
    /// Frames lost in that trial.
    pub latency_trial_lost: u64,
    /// The throughput held in a trial after the search as well. Not so, no rate down to
    /// `CONFIRM_STEPS` steps below the search's held, and `throughput_fps` is the
    /// search's.
    pub confirmed: bool,
    /// The confirmation trials, which also give the latency, in order.
    pub latency_trials: Vec<Trial>,
    /// Search and confirmation trials the host disturbed ([`Trial::host_disturbed`]),
    /// each made again; they count for nothing.
    #[serde(default)]
    pub host_disturbed: Vec<Trial>,
    /// The DUT's CPU time per frame it forwarded in the last confirmation trial, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_cpu_ns_per_frame: Option<f64>,
    pub loss: Vec<LossPoint>,
    pub trials: Vec<Trial>,
    /// Trials at the same offered loads for every DUT of the run: shares
    /// ([`EQUAL_LOADS`]) of the lowest zero-loss rate any of them had at this size.
    #[serde(default)]
    pub equal_load: Vec<LoadPoint>,
}

/// The offered loads at which every DUT's latency is measured, as shares of the lowest
/// zero-loss rate in the run (RFC 2544's latency test at loads a user compares).
pub const EQUAL_LOADS: [f64; 3] = [0.1, 0.5, 0.9];

/// One trial at an offered load every DUT of the run was given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadPoint {
    /// The share of the lowest zero-loss rate in the run.
    pub share: f64,
    pub trial: Trial,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    pub size: usize,
    /// pfcswitch's throughput over the bridge's.
    pub vs_bridge: Option<f64>,
    /// pfcswitch's throughput over the direct path's.
    pub vs_direct: Option<f64>,
    /// pfcswitch's throughput over Open vSwitch's.
    #[serde(default)]
    pub vs_ovs: Option<f64>,
    /// pfcswitch's frames per CPU-second over Open vSwitch's.
    #[serde(default)]
    pub cpu_efficiency_vs_ovs: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub trial_s: f64,
    pub resolution: f64,
    pub retries: usize,
    pub results: Vec<SizeResult>,
    pub ratios: Vec<Ratio>,
}

/// The binary search of §26.1 over `trial`, given the unpaced trial `ceiling`: the
/// highest rate that lost nothing (0 when none did), and every trial it made after the
/// unpaced one. A trial the sender could not keep up with counts at the rate it offered.
/// A rate that lost frames is tried up to `retries` more times, and passes if one of
/// them loses nothing.
pub fn search(
    ceiling: &Trial,
    resolution: f64,
    max_trials: usize,
    retries: usize,
    mut trial: impl FnMut(f64) -> Result<Trial>,
) -> Result<(f64, Vec<Trial>)> {
    let mut trials = Vec::new();
    if ceiling.lost() == 0 {
        return Ok((ceiling.offered_fps, trials));
    }
    let (mut lo, mut hi) = (0.0, ceiling.offered_fps);
    let mut rates = 0;
    while rates + 1 < max_trials && hi > 0.0 && (hi - lo) / hi > resolution {
        rates += 1;
        let rate = (lo + hi) / 2.0;
        let mut t = trial(rate)?;
        for _ in 0..retries {
            if t.lost() == 0 {
                break;
            }
            trials.push(t);
            t = trial(rate)?;
        }
        if t.lost() == 0 {
            lo = t.offered_fps.max(lo);
        } else {
            hi = t.offered_fps.min(hi);
        }
        trials.push(t);
    }
    Ok((lo, trials))
}

/// A confirmation that lost frames at a rate lowers it by this share of itself ...
const CONFIRM_STEP: f64 = 0.05;
/// ... up to this many times.
const CONFIRM_STEPS: usize = 4;

/// The search's answer after [`confirm`].
#[derive(Clone, Debug, PartialEq)]
pub struct Confirmed {
    /// The rate that held, or the search's when none did.
    pub rate: f64,
    pub held: bool,
    /// Every confirmation trial, in order; the last gives the latency.
    pub trials: Vec<Trial>,
}

/// Confirms the rate the search `found`: a zero-loss trial at a rate where the DUT is at
/// its limit can be luck, and the same rate may lose frames in the next. Trials at the
/// rate (which also give its latency) must lose nothing, a lossy one made again as a
/// search trial is (`retries`); a rate that still lost frames gives way to one
/// `CONFIRM_STEP` lower, up to `CONFIRM_STEPS` times.
pub fn confirm(found: f64, retries: usize, mut trial: impl FnMut(f64) -> Result<Trial>) -> Result<Confirmed> {
    let mut trials = Vec::new();
    let mut rate = found;
    for _ in 0..=CONFIRM_STEPS {
        for _ in 0..=retries {
            let t = trial(rate)?;
            let clean = t.lost() == 0;
            let offered = t.offered_fps;
            trials.push(t);
            if clean {
                return Ok(Confirmed { rate: offered.min(rate), held: true, trials });
            }
        }
        rate *= 1.0 - CONFIRM_STEP;
    }
    Ok(Confirmed { rate: found, held: false, trials })
}

/// The rates of the loss curve: steps of a tenth of `ceiling` above `throughput`, then
/// the ceiling itself.
pub fn loss_rates(throughput: f64, ceiling: f64) -> Vec<f64> {
    let step = ceiling / 10.0;
    let mut rates: Vec<f64> =
        (1..10).map(|k| throughput + step * k as f64).take_while(|&r| r < ceiling * 0.99).collect();
    if throughput < ceiling * 0.99 {
        rates.push(ceiling);
    }
    rates
}

/// A testbed for `dut`: two hosts, and between them a switch, a bridge, or nothing, every
/// link at `mtu`.
struct Bed {
    dut: Dut,
    mtu: u32,
    switch: Option<SwitchProc>,
    /// Dropped before the testbed: its daemons stop before the namespace goes.
    ovs: Option<crate::testbed::ovs::Ovs>,
    tb: Testbed,
    /// The switch's rx ring, frames: how long it lasts at a rate tells the machine's
    /// losses from the switch's.
    ring_size: u32,
}

impl Bed {
    fn up(dut: Dut, mtu: u32) -> Result<Bed> {
        let name = unique_name(&format!("rfc-{}", &dut.as_str()[..2]));
        let topology = match dut {
            Dut::Direct => direct_topology(),
            Dut::Pfcswitch | Dut::Bridge | Dut::Ovs => Topology::star(2),
        };
        let tb = Testbed::up(&name, at_mtu(topology, mtu))?;
        // What a user gets without a file: nothing tuned.
        let config = harness::switch_config(&tb, "sw1");
        let ring_size = config.dataplane.ring_size;
        let switch = match dut {
            Dut::Pfcswitch => Some(
                SwitchProc::start_as_service(&tb, "sw1", &config, &pfcswitch::cli::RunArgs::default())
                    .context("starting pfcswitch")?,
            ),
            Dut::Bridge => {
                tb.make_linux_bridge("sw1")?;
                None
            }
            Dut::Direct | Dut::Ovs => None,
        };
        Ok(Bed { dut, mtu, switch, ovs: None, tb, ring_size })
    }

    /// Starts what runs only while this DUT is measured: OVS, whose PMD thread polls its
    /// rings with a whole CPU even when idle, and would take it from the other DUTs'
    /// trials on this 2-core machine.
    fn measuring(&mut self) -> Result<()> {
        if self.dut == Dut::Ovs && self.ovs.is_none() {
            self.ovs = Some(crate::testbed::ovs::Ovs::start(&self.tb, "sw1").context("starting Open vSwitch")?);
        }
        Ok(())
    }

    /// Stops what [`Bed::measuring`] started.
    fn idle(&mut self) {
        self.ovs = None;
    }

    /// The DUT's process, where it has one.
    fn dut_pid(&self) -> Option<u32> {
        self.switch.as_ref().map(|s| s.proc.pid()).or(self.ovs.as_ref().map(|o| o.pid()))
    }

    /// One trial of `size`-byte frames at `rate` (unpaced when `None`).
    fn trial(&self, size: usize, seconds: f64, rate: Option<f64>) -> Result<Trial> {
        let before = match &self.switch {
            Some(s) => Some((SwitchLosses::read(s)?, pfcswitch::sys::now().as_nanos())),
            None => None,
        };
        if let Some(s) = &self.switch {
            // The stage figures start from nothing, so that they are this trial's alone.
            s.command(&Request::ClearWatermarks)?;
        }
        let steal = harness::HostSteal::read();
        let run = harness::one_flow_h1_to_h2(&self.tb, size, seconds, rate, self.dut_pid())?;
        let host_took = harness::HostSteal::read().most_since(&steal);
        let dut_cpu_ns = run.cpu.map(|d| d.as_nanos() as u64);
        let switch = match (&self.switch, before) {
            (Some(s), Some((before, start_ns))) => {
                let stats = s.stats()?;
                let lost = SwitchLosses::of(&stats).minus(before);
                let rx_lost = lost.rx_ring_full + lost.rx_no_frame;
                let longest = stats.stalls.longest_since(start_ns);
                let ring_lasts = Duration::from_secs_f64(f64::from(self.ring_size) / run.gen.pps.max(1.0));
                Some(SwitchSide {
                    rx_lost,
                    dropped: lost.tail_drops + lost.other_drops,
                    machine_explains: stats.stalls.rx_lost_off_cpu(start_ns, ring_lasts).min(rx_lost),
                    longest_stall_us: longest.map_or(0, |st| st.us),
                    longest_stall_cpu_wait_us: longest.map_or(0, |st| st.cpu_wait_us),
                    stages: stats.latency,
                    tx_in_flight_max: stats.ports.iter().map(|p| p.socket.tx_in_flight_max).max().unwrap_or(0),
                })
            }
            _ => None,
        };
        let flow = run.sink.flows.first().cloned().unwrap_or_default();
        Ok(Trial {
            asked_fps: rate,
            offered_fps: run.gen.pps,
            sent: run.gen.sent,
            received: flow.received.saturating_sub(flow.duplicates),
            latency: flow.latency,
            sink_dropped: run.sink.socket_dropped,
            switch,
            dut_cpu_ns,
            host_took_ms: host_took.as_millis() as u64,
        })
    }

    fn down(self) {
        drop(self.ovs);
        if let Some(s) = self.switch {
            let finished = s.stop();
            if !finished.success() {
                eprintln!("pfcswitch exited with {}: {}", finished.status, finished.stderr.trim());
            }
        }
    }
}

fn direct_topology() -> Topology {
    let host = |i: usize| {
        Endpoint::Full(EndpointSpec {
            node: format!("h{i}"),
            port: None,
            iface: Some("eth0".into()),
            mac: None,
            addr: Some(format!("10.0.0.{i}/24")),
        })
    };
    Topology {
        hosts: vec![HostSpec { name: "h1".into() }, HostSpec { name: "h2".into() }],
        links: vec![Link { a: host(1), b: host(2), mtu: None, queues: None }],
        ..Topology::default()
    }
}

/// Bits a frame of `size` bytes (FCS included) takes on the wire, preamble, SFD and
/// inter-frame gap with it.
fn wire_bits(size: usize) -> f64 {
    pfcswitch::core::speed::wire_bytes(size.saturating_sub(4)) as f64 * 8.0
}

fn measure(bed: &Bed, size: usize, args: &Rfc2544Args) -> Result<SizeResult> {
    // The unpaced trial loses frames by design, and is not judged.
    let ceiling = bed.trial(size, args.trial_s, None)?;
    let mut host_disturbed = Vec::new();
    let mut paced = |rate| undisturbed(&mut host_disturbed, || bed.trial(size, args.trial_s, Some(rate)));
    let (throughput, mut trials) = search(&ceiling, args.resolution, args.max_trials, args.retries, &mut paced)?;
    trials.insert(0, ceiling.clone());
    let found = throughput;
    let confirmed = if found > 0.0 {
        confirm(found, args.retries, &mut paced)?
    } else {
        Confirmed { rate: 0.0, held: false, trials: Vec::new() }
    };
    let throughput = confirmed.rate;
    let latency_trials = confirmed.trials;
    let at_throughput = latency_trials.last();
    let mut loss = Vec::new();
    for rate in loss_rates(throughput, ceiling.offered_fps) {
        let t = if rate >= ceiling.offered_fps * 0.99 {
            ceiling.clone()
        } else {
            bed.trial(size, args.trial_s, Some(rate))?
        };
        loss.push(LossPoint { offered_fps: t.offered_fps, loss_pct: t.loss_pct() });
    }
    Ok(SizeResult {
        dut: bed.dut,
        size,
        throughput_fps: throughput,
        search_fps: found,
        throughput_bps: throughput * wire_bits(size),
        sender_max_fps: ceiling.offered_fps,
        sender_limited: ceiling.lost() == 0,
        latency: at_throughput.map(|t| t.latency).unwrap_or_default(),
        latency_trial_lost: at_throughput.map_or(0, Trial::lost),
        confirmed: confirmed.held,
        dut_cpu_ns_per_frame: at_throughput.and_then(|t| t.dut_cpu_ns.map(|ns| ns as f64 / t.received.max(1) as f64)),
        latency_trials,
        host_disturbed,
        loss,
        trials,
        equal_load: Vec::new(),
    })
}

/// Trials of every DUT at [`EQUAL_LOADS`] of `lowest`, the lowest zero-loss rate of the
/// size: latency compared at the same offered load, not each at its own limit.
fn measure_equal_load(bed: &mut Bed, size: usize, lowest: f64, args: &Rfc2544Args) -> Result<Vec<LoadPoint>> {
    bed.measuring()?;
    let points = EQUAL_LOADS
        .iter()
        .map(|&share| Ok(LoadPoint { share, trial: bed.trial(size, args.trial_s, Some(lowest * share))? }))
        .collect();
    bed.idle();
    points
}

/// pfcswitch's throughput over the others', per size.
pub fn ratios(results: &[SizeResult]) -> Vec<Ratio> {
    let mut sizes: Vec<usize> = results.iter().map(|r| r.size).collect();
    sizes.dedup();
    let of = |dut, size| results.iter().find(|r| r.dut == dut && r.size == size).map(|r| r.throughput_fps);
    sizes
        .into_iter()
        .filter_map(|size| {
            let own = of(Dut::Pfcswitch, size)?;
            let over = |other: Option<f64>| other.filter(|&o| o > 0.0).map(|o| own / o);
            let ns = |dut| results.iter().find(|r| r.dut == dut && r.size == size).and_then(|r| r.dut_cpu_ns_per_frame);
            // Frames per CPU-second are the inverse of CPU per frame.
            let efficiency = ns(Dut::Ovs).zip(ns(Dut::Pfcswitch)).filter(|(_, own)| *own > 0.0).map(|(o, own)| o / own);
            Some(Ratio {
                size,
                vs_bridge: over(of(Dut::Bridge, size)),
                vs_direct: over(of(Dut::Direct, size)),
                vs_ovs: over(of(Dut::Ovs, size)),
                cpu_efficiency_vs_ovs: efficiency,
            })
        })
        .collect()
}

pub fn run(args: &Rfc2544Args) -> Result<()> {
    if let Some(file) = &args.replot {
        let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let report: Report = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a bench rfc2544 --json report", file.display()))?;
        return output(&report, args);
    }
    // One testbed per DUT and MTU: jumbo sizes run on links at a jumbo MTU, the others at
    // the standard one, as a user's testbed would be.
    let duts = if args.duts.is_empty() { Dut::defaults() } else { args.duts.clone() };
    let mut beds: Vec<Bed> = Vec::new();
    let mut results = Vec::new();
    let progress = Progress::new((args.sizes.len() * duts.len()) as u64, "frame sizes × DUTs", args.json);
    for (i, &size) in args.sizes.iter().enumerate() {
        let mtu = mtu_for(size);
        if !beds.iter().any(|b| b.mtu == mtu) {
            for &dut in &duts {
                beds.push(Bed::up(dut, mtu)?);
            }
        }
        let at: Vec<usize> = (0..beds.len()).filter(|&b| beds[b].mtu == mtu).collect();
        for k in 0..at.len() {
            let bed = &mut beds[at[(i + k) % at.len()]];
            progress.message(format!("{size} B through {}", bed.dut.as_str()));
            bed.measuring()?;
            let r = measure(bed, size, args);
            bed.idle();
            let r = r?;
            progress.inc(1);
            progress.println(format!(
                "  {size:>5} B {:<9}: throughput {:>8.0} f/s{} (sender's ceiling {:.0}), latency p50 {} µs p99 {} \
                 µs p99.9 {} µs{}{}",
                bed.dut.as_str(),
                r.throughput_fps,
                if r.sender_limited { " (the sender's ceiling)" } else { "" },
                r.sender_max_fps,
                us3(r.latency.p50_us),
                us3(r.latency.p99_us),
                us3(r.latency.p999_us),
                confirmation_note(&r),
                host_note(&r)
            ));
            results.push(r);
        }
        let lowest = results.iter().filter(|r| r.size == size).map(|r| r.throughput_fps).fold(f64::INFINITY, f64::min);
        if lowest.is_finite() && lowest > 0.0 {
            for k in 0..at.len() {
                let bed = &mut beds[at[(i + k) % at.len()]];
                progress.message(format!("{size} B through {} at equal loads", bed.dut.as_str()));
                let points = measure_equal_load(bed, size, lowest, args)?;
                let r = results.iter_mut().rev().find(|r| r.size == size && r.dut == bed.dut).expect("measured above");
                r.equal_load = points;
            }
        }
    }
    for bed in beds {
        bed.down();
    }
    results.sort_by_key(|r| (r.size, duts.iter().position(|&d| d == r.dut)));
    let report = Report {
        trial_s: args.trial_s,
        resolution: args.resolution,
        retries: args.retries,
        ratios: ratios(&results),
        results,
    };
    output(&report, args)
}

/// The report as text or JSON, and its chart if asked for.
fn output(report: &Report, args: &Rfc2544Args) -> Result<()> {
    if let Some(path) = &args.plot {
        plot(report, path).map_err(|e| anyhow!("drawing {}: {e}", path.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", text(report));
    }
    Ok(())
}

/// The confirmation trials, when any lost frames: each one's rate, what it lost and where,
/// and what the switch saw of it.
fn confirmation_note(r: &SizeResult) -> String {
    if r.latency_trials.iter().all(|t| t.lost() == 0) {
        return String::new();
    }
    let each: Vec<String> = r
        .latency_trials
        .iter()
        .map(|t| {
            let at = format!("at {:.0} f/s", t.asked_fps.unwrap_or(t.offered_fps));
            match &t.switch {
                _ if t.lost() == 0 => format!("{at} nothing"),
                Some(sw) => format!(
                    "{at} {} ({} on the switch's rx rings, {} of them while it was off its CPU for longer than a ring \
                     lasts; {} dropped by it; {} at the sink's socket; its longest stall {:.1} ms)",
                    t.lost(),
                    sw.rx_lost,
                    sw.machine_explains,
                    sw.dropped,
                    t.sink_dropped,
                    sw.longest_stall_us as f64 / 1e3
                ),
                None => format!("{at} {} ({} at the sink's socket)", t.lost(), t.sink_dropped),
            }
        })
        .collect();
    format!("; confirming, lost {}{}", each.join(", "), if r.confirmed { "" } else { ": not confirmed" })
}

/// The trials the host disturbed, when there were any: how many, and the most it took.
fn host_note(r: &SizeResult) -> String {
    let took = r.host_disturbed.iter().map(|t| t.host_took_ms).max().unwrap_or(0);
    match r.host_disturbed.len() {
        0 => String::new(),
        n => format!(
            "; {n} trial(s) made again, having lost frames while the host held a vCPU (up to {took} ms of steal)"
        ),
    }
}

pub fn text(r: &Report) -> String {
    let mut out = format!(
        "bench rfc2544: h1 → DUT → h2 on veth, {} s trials, search to {:.0} %, a lossy rate tried {} more time(s); \
         pfcswitch with its defaults\n",
        r.trial_s,
        r.resolution * 100.0,
        r.retries
    );
    let mut t = Table::new(&[
        "frame B",
        "DUT",
        "throughput f/s",
        "Mb/s",
        "sender max f/s",
        "latency p50/p99/p99.9/max µs",
        "DUT CPU ns/frame",
        "loss % above (offered f/s)",
    ]);
    for s in &r.results {
        let loss: Vec<String> = s.loss.iter().map(|l| format!("{:.1} ({:.0})", l.loss_pct, l.offered_fps)).collect();
        t.row(vec![
            s.size.to_string(),
            s.dut.as_str().into(),
            format!(
                "{:.0}{}{}",
                s.throughput_fps,
                if s.sender_limited { "*" } else { "" },
                if s.throughput_fps > 0.0 && !s.confirmed { "†" } else { "" }
            ),
            format!("{:.0}", s.throughput_bps / 1e6),
            format!("{:.0}", s.sender_max_fps),
            [s.latency.p50_us, s.latency.p99_us, s.latency.p999_us, s.latency.max_us].map(us3).join(" / "),
            s.dut_cpu_ns_per_frame.map_or("-".into(), |ns| format!("{ns:.0}")),
            if loss.is_empty() { "-".into() } else { loss.join(", ") },
        ]);
    }
    out += &t.render();
    out += "* nothing lost at the sender's ceiling: the DUT's own limit is higher\n";
    let jumbo: Vec<String> = r
        .results
        .iter()
        .filter(|s| mtu_for(s.size) != 1500)
        .map(|s| format!("{} B at MTU {}", s.size, mtu_for(s.size)))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !jumbo.is_empty() {
        out += &format!(
            "frames above 1518 B ran on testbeds whose links have the smallest standard MTU they fit: {} \
             (pfcswitch carries them as AF_XDP multi-buffer frames)\n",
            jumbo.join(", ")
        );
    }
    let disturbed: Vec<String> = r
        .results
        .iter()
        .filter(|s| !s.host_disturbed.is_empty())
        .map(|s| format!("{} at {} B {}", s.dut.as_str(), s.size, s.host_disturbed.len()))
        .collect();
    if !disturbed.is_empty() {
        out += &format!(
            "trials that lost frames while the host held one of the vCPUs for {} ms or more (steal, /proc/stat) were \
             made again, up to {HOST_REPEATS} times each, for every DUT alike: {}\n",
            HOST_TOOK.as_millis(),
            disturbed.join(", ")
        );
    }
    if r.results.iter().any(|s| s.throughput_fps > 0.0 && !s.confirmed) {
        out += &format!(
            "† not confirmed: trials after the search lost frames at its rate and at {CONFIRM_STEPS} steps of {:.0} % \
             below it (see --json)\n",
            CONFIRM_STEP * 100.0
        );
    }
    out += &equal_load_text(r);
    out += &stages_text(r);
    let mut t = Table::new(&[
        "frame B",
        "pfcswitch / bridge",
        "pfcswitch / direct",
        "pfcswitch / OVS",
        "frames per CPU-s, pfcswitch / OVS",
    ]);
    for x in &r.ratios {
        let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        t.row(vec![x.size.to_string(), f(x.vs_bridge), f(x.vs_direct), f(x.vs_ovs), f(x.cpu_efficiency_vs_ovs)]);
    }
    out += "DUT CPU: the DUT process's CPU time (user and system, all its threads) per frame forwarded in the \
            last confirmation trial; none for the bridge and the direct path, which run in the kernel\n";
    out += &t.render();
    out
}

/// The equal-load trials' p99 against the load, a line per DUT and size (labelled with
/// the size at its end), on a logarithmic scale: tails differ by orders of magnitude.
fn plot_by_load<DB: DrawingBackend>(
    r: &Report,
    area: &DrawingArea<DB, plotters::coord::Shift>,
    duts: &[Dut],
    palette: &[RGBColor],
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let p99s = r.results.iter().flat_map(|s| s.equal_load.iter().map(|p| p.trial.latency.p99_us));
    let ymax = p99s.clone().fold(10.0, f64::max) * 2.0;
    let ymin = p99s.fold(ymax, f64::min).clamp(1.0, 10.0) / 2.0;
    let mut chart = ChartBuilder::on(area)
        .caption("one-way latency at equal offered loads (p99)", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..100f64, (ymin..ymax).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("offered load (% of the lowest zero-loss rate)")
        .y_desc("µs")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    for (i, &dut) in duts.iter().enumerate() {
        let colour = palette[i % palette.len()];
        for s in r.results.iter().filter(|s| s.dut == dut && !s.equal_load.is_empty()) {
            let points: Vec<(f64, f64)> =
                s.equal_load.iter().map(|p| (p.share * 100.0, p.trial.latency.p99_us.max(ymin))).collect();
            chart.draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?;
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, colour.filled())))?;
            if let Some(&(x, y)) = points.last() {
                chart.draw_series(std::iter::once(Text::new(
                    format!("{} B", s.size),
                    (x + 1.5, y),
                    ("sans-serif", 12),
                )))?;
            }
        }
    }
    Ok(())
}

/// p50 / p99 of a latency summary, µs.
fn p50_p99(p: &Percentiles) -> String {
    format!("{} / {}", us3(p.p50_us), us3(p.p99_us))
}

/// Every DUT's one-way latency at the same offered loads, a row per size and load.
fn equal_load_text(r: &Report) -> String {
    let mut duts: Vec<Dut> = r.results.iter().filter(|s| !s.equal_load.is_empty()).map(|s| s.dut).collect();
    if duts.is_empty() {
        return String::new();
    }
    duts.sort_by_key(|d| r.results.iter().position(|s| s.dut == *d));
    duts.dedup();
    let mut head = vec!["frame B".to_string(), "load".to_string(), "offered f/s".to_string()];
    head.extend(duts.iter().map(|d| format!("{} p50 / p99 / p99.9 µs", d.as_str())));
    let mut t = Table::new(&head);
    let mut sizes: Vec<usize> = r.results.iter().map(|s| s.size).collect();
    sizes.dedup();
    for size in sizes {
        for (k, share) in EQUAL_LOADS.iter().enumerate() {
            let at =
                |dut: Dut| r.results.iter().find(|s| s.size == size && s.dut == dut).and_then(|s| s.equal_load.get(k));
            let Some(first) = duts.iter().find_map(|&d| at(d)) else { continue };
            let mut row = vec![
                size.to_string(),
                format!("{:.0} %", share * 100.0),
                format!("{:.0}", first.trial.asked_fps.unwrap_or(first.trial.offered_fps)),
            ];
            for &d in &duts {
                row.push(at(d).map_or("-".into(), |p| {
                    let l = &p.trial.latency;
                    let lost = if p.trial.lost() > 0 { format!(" ({} lost)", p.trial.lost()) } else { String::new() };
                    format!("{} / {} / {}{lost}", us3(l.p50_us), us3(l.p99_us), us3(l.p999_us))
                }));
            }
            t.row(row);
        }
    }
    format!("latency at equal offered loads (shares of the lowest zero-loss rate at each size):\n{}", t.render())
}

/// Where pfcswitch's frames waited, stage by stage, at the equal loads and at its own
/// zero-loss rate: what of the one-way latency its rings hold, out of its queues' reach.
fn stages_text(r: &Report) -> String {
    let mut t = Table::new(&[
        "frame B",
        "load",
        "offered f/s",
        "one-way p50 / p99 µs",
        "rx ring p50 / p99",
        "engine p50 / p99",
        "tx ring p50 / p99",
    ]);
    for s in r.results.iter().filter(|s| s.dut == Dut::Pfcswitch) {
        let own = s.latency_trials.last().map(|t| ("zero-loss".to_string(), t));
        let loads = s.equal_load.iter().map(|p| (format!("{:.0} %", p.share * 100.0), &p.trial));
        for (load, trial) in loads.chain(own) {
            let Some(sw) = &trial.switch else { continue };
            t.row(vec![
                s.size.to_string(),
                load,
                format!("{:.0}", trial.offered_fps),
                p50_p99(&trial.latency),
                p50_p99(&sw.stages.rx_ring),
                p50_p99(&sw.stages.engine),
                p50_p99(&sw.stages.tx_ring),
            ]);
        }
    }
    if t.is_empty() {
        return String::new();
    }
    format!(
        "where pfcswitch's frames waited (µs): on its rx ring (from the XDP program's stamp), in the engine (its \
         queues), on its tx ring (until the kernel completed the send):\n{}",
        t.render()
    )
}

fn plot(r: &Report, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1000, 1080)).into_drawing_area();
    root.fill(&WHITE)?;
    // The legend gets a column of its own: inside the plot it covered a line.
    let (plots, legend) = root.split_horizontally(860);
    let (top, rest) = plots.split_vertically(360);
    let (bottom, by_load) = rest.split_vertically(360);
    let xmax = r.results.iter().map(|s| s.size).max().unwrap_or(1518) as f64 * 1.05;
    let duts: Vec<Dut> = {
        let mut d: Vec<Dut> = r.results.iter().map(|s| s.dut).collect();
        d.sort_by_key(|d| d.as_str());
        d.dedup();
        d
    };
    let palette = [RED, BLUE, GREEN, MAGENTA];
    let series = |dut: Dut, y: fn(&SizeResult) -> f64| -> Vec<(f64, f64)> {
        r.results.iter().filter(|s| s.dut == dut).map(|s| (s.size as f64, y(s))).collect()
    };
    for (area, title, y_desc, y) in [
        (
            &top,
            "RFC 2544 throughput (zero loss)",
            "frames/s (thousands)",
            (|s: &SizeResult| s.throughput_fps / 1e3) as fn(&SizeResult) -> f64,
        ),
        (&bottom, "one-way latency at the throughput rate (p50)", "µs", |s: &SizeResult| s.latency.p50_us),
    ] {
        let ymax = r.results.iter().map(y).fold(1.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
        chart
            .configure_mesh()
            .x_desc("frame size (bytes)")
            .y_desc(y_desc)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        for (i, &dut) in duts.iter().enumerate() {
            let colour = palette[i % palette.len()];
            let points = series(dut, y);
            chart.draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?;
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, colour.filled())))?;
        }
    }
    plot_by_load(r, &by_load, &duts, &palette)?;
    for (i, &dut) in duts.iter().enumerate() {
        let colour = palette[i % palette.len()];
        let y = 60 + 24 * i as i32;
        legend.draw(&PathElement::new(vec![(8, y), (36, y)], colour.stroke_width(3)))?;
        legend.draw(&Circle::new((22, y), 4, colour.filled()))?;
        legend.draw(&Text::new(dut.as_str(), (44, y - 7), ("sans-serif", 15)))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(limit: f64) -> impl FnMut(f64) -> Result<Trial> {
        move |rate| {
            let sent = (rate * 3.0) as u64;
            let received = if rate <= limit { sent } else { (limit * 3.0) as u64 };
            Ok(Trial { asked_fps: Some(rate), offered_fps: rate, sent, received, ..Default::default() })
        }
    }

    fn unpaced(rate: f64, lost: u64) -> Trial {
        Trial { offered_fps: rate, sent: 3_000_000, received: 3_000_000 - lost, ..Default::default() }
    }

    #[test]
    fn the_search_closes_in_on_the_highest_rate_without_loss() {
        let (t, trials) = search(&unpaced(500_000.0, 40_000), 0.02, 12, 0, fake(312_000.0)).unwrap();
        assert!((0.98 * 312_000.0..=312_000.0).contains(&t), "{t}");
        assert!(trials.iter().all(|x| (x.lost() == 0) == (x.offered_fps <= 312_000.0)));
        assert!(trials.len() <= 7, "2 % of the range takes log2(50) trials: {}", trials.len());
    }

    #[test]
    fn nothing_lost_at_the_senders_ceiling_ends_the_search_there() {
        let (t, trials) = search(&unpaced(480_000.0, 0), 0.02, 12, 0, fake(1e9)).unwrap();
        assert_eq!((t, trials.len()), (480_000.0, 0));
    }

    #[test]
    fn a_dut_that_always_loses_has_no_throughput_and_the_search_is_bounded() {
        let (t, trials) = search(&unpaced(480_000.0, 5), 0.0001, 6, 0, fake(0.0)).unwrap();
        assert_eq!((t, trials.len()), (0.0, 5));
    }

    #[test]
    fn a_sender_that_falls_short_of_the_asked_rate_counts_at_what_it_offered() {
        // The sender manages only 90 % of what is asked: the bound moves to what it sent.
        let short = |rate: f64| Ok(Trial { offered_fps: rate * 0.9, sent: 100, received: 100, ..Default::default() });
        let (t, trials) = search(&unpaced(400_000.0, 9), 0.05, 4, 0, short).unwrap();
        assert_eq!(t, trials.iter().map(|x| x.offered_fps).fold(0.0, f64::max));
    }

    #[test]
    fn a_rate_that_lost_frames_once_is_tried_again_and_passes_if_the_retry_loses_nothing() {
        // The machine disturbs the second trial only (a stall at 250 000 f/s).
        let mut n = 0;
        let flaky = |rate: f64| {
            n += 1;
            let received = if n == 2 || rate > 300_000.0 { 0 } else { 100 };
            Ok(Trial { offered_fps: rate, sent: 100, received, ..Default::default() })
        };
        let (t, trials) = search(&unpaced(400_000.0, 9), 0.05, 4, 1, flaky).unwrap();
        let tried: Vec<(f64, bool)> = trials.iter().map(|x| (x.offered_fps, x.lost() == 0)).collect();
        assert_eq!(
            tried,
            [(200_000.0, true), (300_000.0, false), (300_000.0, true), (350_000.0, false), (350_000.0, false)]
        );
        assert_eq!(t, 300_000.0);
    }

    /// A DUT that loses nothing up to `limit`, and frames above it.
    fn holds_up_to(limit: f64) -> impl FnMut(f64) -> Result<Trial> {
        move |rate| {
            let lost = if rate <= limit { 0 } else { 3 };
            Ok(Trial {
                asked_fps: Some(rate),
                offered_fps: rate,
                sent: 100,
                received: 100 - lost,
                ..Default::default()
            })
        }
    }

    #[test]
    fn a_rate_that_holds_in_its_confirmation_is_the_throughput_after_one_trial() {
        let c = confirm(300_000.0, 1, holds_up_to(300_000.0)).unwrap();
        assert_eq!((c.rate, c.held, c.trials.len()), (300_000.0, true, 1));
    }

    #[test]
    fn a_rate_that_loses_frames_in_its_confirmation_and_retry_gives_way_to_one_five_percent_lower() {
        // The search was lucky at 300 000: the DUT holds only up to 280 000.
        let c = confirm(300_000.0, 1, holds_up_to(280_000.0)).unwrap();
        let asked: Vec<f64> = c.trials.iter().map(|t| t.asked_fps.unwrap().round()).collect();
        assert_eq!(asked, [300_000.0, 300_000.0, 285_000.0, 285_000.0, 270_750.0]);
        assert_eq!((c.rate.round(), c.held), (270_750.0, true));
    }

    #[test]
    fn a_retry_that_loses_nothing_confirms_the_rate() {
        let mut losses = [5, 0].into_iter();
        let flaky = |rate: f64| {
            Ok(Trial { offered_fps: rate, sent: 100, received: 100 - losses.next().unwrap(), ..Default::default() })
        };
        let c = confirm(300_000.0, 1, flaky).unwrap();
        assert_eq!((c.rate, c.held, c.trials.len()), (300_000.0, true, 2));
    }

    #[test]
    fn when_no_step_holds_the_searchs_rate_stands_unconfirmed_after_a_bounded_number_of_trials() {
        let c = confirm(300_000.0, 1, holds_up_to(0.0)).unwrap();
        assert_eq!((c.rate, c.held), (300_000.0, false));
        assert_eq!(c.trials.len(), 2 * (CONFIRM_STEPS + 1));
    }

    #[test]
    fn the_loss_curve_steps_a_tenth_of_the_ceiling_up_to_it() {
        assert_eq!(loss_rates(300.0, 1000.0), vec![400.0, 500.0, 600.0, 700.0, 800.0, 900.0, 1000.0]);
        assert_eq!(loss_rates(950.0, 1000.0), vec![1000.0]);
        assert!(loss_rates(1000.0, 1000.0).is_empty(), "limited by the sender: nothing above");
    }

    /// Trials in the order given, each losing `lost` frames while the host took `took_ms`.
    fn host_sequence(trials: &[(u64, u64)]) -> impl FnMut() -> Result<Trial> + '_ {
        let mut next = trials.iter();
        move || {
            let &(lost, took_ms) = next.next().expect("no more trials than given");
            Ok(Trial { sent: 1000, received: 1000 - lost, host_took_ms: took_ms, ..Default::default() })
        }
    }

    #[test]
    fn a_trial_that_lost_frames_while_the_host_held_a_vcpu_is_made_again_and_set_aside() {
        let mut aside = Vec::new();
        let t = undisturbed(&mut aside, host_sequence(&[(50, 100), (7, 40), (0, 0)])).unwrap();
        assert_eq!((t.lost(), aside.len()), (0, 2));
        assert!(aside.iter().all(Trial::host_disturbed));
    }

    #[test]
    fn a_loss_the_host_does_not_explain_counts_at_once_and_so_does_a_clean_trial_the_host_disturbed() {
        let mut aside = Vec::new();
        let lossy = undisturbed(&mut aside, host_sequence(&[(50, 20)])).unwrap();
        assert_eq!((lossy.lost(), aside.len()), (50, 0), "20 ms is under HOST_TOOK: the DUT's loss");
        let clean = undisturbed(&mut aside, host_sequence(&[(0, 300)])).unwrap();
        assert_eq!((clean.lost(), aside.len()), (0, 0), "lossless despite the host: a pass");
    }

    #[test]
    fn a_host_that_disturbs_every_attempt_gets_a_bounded_number_and_the_last_counts() {
        let mut aside = Vec::new();
        let t = undisturbed(&mut aside, host_sequence(&[(9, 100); HOST_REPEATS + 1])).unwrap();
        assert_eq!((t.lost(), aside.len()), (9, HOST_REPEATS));
    }

    /// A confirmed result of `fps` frames a second for `dut` at `size`, nothing else known.
    fn result(dut: Dut, size: usize, fps: f64) -> SizeResult {
        SizeResult {
            dut,
            size,
            throughput_fps: fps,
            search_fps: fps,
            throughput_bps: 0.0,
            sender_max_fps: 0.0,
            sender_limited: false,
            latency: Percentiles::default(),
            latency_trial_lost: 0,
            confirmed: true,
            latency_trials: vec![],
            host_disturbed: vec![],
            dut_cpu_ns_per_frame: None,
            loss: vec![],
            trials: vec![],
            equal_load: vec![],
        }
    }

    /// A lossless trial at `fps` with `p99_us` one-way, through pfcswitch when `stages` says
    /// where its frames waited.
    fn at(fps: f64, p99_us: f64, stages: Option<StageLatency>) -> Trial {
        Trial {
            asked_fps: Some(fps),
            offered_fps: fps,
            sent: 100,
            received: 100,
            latency: Percentiles { p50_us: 10.0, p99_us, p999_us: p99_us * 2.0, ..Default::default() },
            switch: stages.map(|stages| SwitchSide { stages, ..Default::default() }),
            ..Default::default()
        }
    }

    #[test]
    fn every_dut_is_shown_at_the_same_loads_and_pfcswitchs_stages_at_those_and_at_its_own_limit() {
        let ring = |p99_us| StageLatency {
            rx_ring: Percentiles { p50_us: 5.0, p99_us, ..Default::default() },
            ..Default::default()
        };
        let loads = |dut_p99: [f64; 3], stages: bool| {
            EQUAL_LOADS
                .iter()
                .zip(dut_p99)
                .map(|(&share, p99)| LoadPoint { share, trial: at(share * 300e3, p99, stages.then(|| ring(p99))) })
                .collect()
        };
        let results = vec![
            SizeResult {
                equal_load: loads([20.0, 60.0, 900.0], true),
                latency_trials: vec![at(360e3, 1500.0, Some(ring(1400.0)))],
                ..result(Dut::Pfcswitch, 64, 360e3)
            },
            SizeResult { equal_load: loads([15.0, 40.0, 70.0], false), ..result(Dut::Ovs, 64, 300e3) },
        ];
        let report = Report { trial_s: 3.0, resolution: 0.02, retries: 1, ratios: ratios(&results), results };
        let text = text(&report);
        let row = |start: &str| {
            text.lines()
                .find(|l| l.split_whitespace().collect::<Vec<_>>().join(" ").starts_with(start))
                .unwrap_or_else(|| panic!("no row {start:?} in\n{text}"))
                .to_string()
        };
        // Both at 90 % of the lower zero-loss rate (OVS's 300 000): 270 000 f/s.
        let ninety = row("64 90 % 270000");
        assert!(ninety.contains("10.0 / 900 / 1800") && ninety.contains("10.0 / 70.0 / 140"), "{ninety}");
        // pfcswitch's stages: at the equal loads, then at its own zero-loss rate.
        assert!(!row("64 90 % 270000 10.0 / 900 5.00 / 900").is_empty(), "the rx ring's p99 in the stage table");
        assert!(row("64 zero-loss 360000").contains("5.00 / 1400"));
    }

    #[test]
    fn ratios_compare_pfcswitch_with_each_other_dut_per_size() {
        let r = result;
        let results = [r(Dut::Pfcswitch, 64, 300.0), r(Dut::Bridge, 64, 250.0), r(Dut::Direct, 64, 400.0)];
        let ratio =
            Ratio { size: 64, vs_bridge: Some(1.2), vs_direct: Some(0.75), vs_ovs: None, cpu_efficiency_vs_ovs: None };
        assert_eq!(ratios(&results), vec![ratio]);
        let cpu = |dut, fps, ns| SizeResult { dut_cpu_ns_per_frame: Some(ns), ..r(dut, 64, fps) };
        let with_ovs = [cpu(Dut::Pfcswitch, 360.0, 1500.0), cpu(Dut::Ovs, 300.0, 3000.0)];
        let x = &ratios(&with_ovs)[0];
        assert_eq!(
            (x.vs_ovs, x.cpu_efficiency_vs_ovs),
            (Some(1.2), Some(2.0)),
            "half the CPU a frame: twice the frames a CPU-second"
        );
        assert_eq!(wire_bits(64), 672.0);
    }

    #[test]
    fn the_chart_keeps_its_legend_beside_the_plots_and_labels_integer_axes_as_integers() {
        let result = |dut, size, fps| SizeResult {
            latency: Percentiles { p50_us: 40.0, ..Default::default() },
            ..result(dut, size, fps)
        };
        let results = vec![
            result(Dut::Pfcswitch, 64, 345e3),
            result(Dut::Bridge, 64, 207e3),
            result(Dut::Pfcswitch, 1518, 375e3),
        ];
        let report = Report { trial_s: 3.0, resolution: 0.02, retries: 1, ratios: ratios(&results), results };
        let path = std::env::temp_dir().join(format!("rfc2544-chart-{}.svg", std::process::id()));
        plot(&report, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        // Each text element: its attributes and what it says.
        let texts: Vec<(&str, &str)> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| {
                let (attrs, rest) = t.split_once('>')?;
                Some((attrs, rest.split("</text>").next()?.trim()))
            })
            .collect();
        let legend_x: Vec<f64> = texts
            .iter()
            .filter(|(_, said)| *said == "pfcswitch")
            .filter_map(|(attrs, _)| attrs.split("x=\"").nth(1)?.split('"').next()?.parse().ok())
            .collect();
        assert!(!legend_x.is_empty() && legend_x.iter().all(|&x| x > 860.0), "legend at {legend_x:?}");
        assert!(texts.iter().any(|(_, said)| *said == "1400"), "integer labels");
        assert!(!texts.iter().any(|(_, said)| said.ends_with(".0")), "no label with a needless decimal");
    }
}
