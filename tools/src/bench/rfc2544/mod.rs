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

mod plot;
mod search;
mod testbed;
mod text;

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
use pfcswitch::control::Request;
use pfcswitch::stats::StageLatency;
use pfctestkit::progress::Progress;

use plot::*;
pub use search::{confirm, loss_rates, search, Confirmed};
use search::{CONFIRM_STEP, CONFIRM_STEPS};
pub(crate) use testbed::Bed;
use testbed::*;
pub use text::text;
use text::*;

/// RFC 2544's frame sizes for Ethernet (§9.1), FCS included.
const SIZES: &str = "64,128,256,512,1024,1280,1518";

#[derive(Args, Clone, Debug)]
pub struct Rfc2544Args {
    /// Frame sizes on the wire, FCS included.
    #[arg(long, value_delimiter = ',', default_value = SIZES)]
    pub sizes: Vec<usize>,
    /// Seconds per trial (at least 1; RFC 2544 asks for 60 on real links). A shorter trial
    /// meets fewer of the machine's stalls, so it may pass a rate that a longer one loses
    /// frames at: the default is a compromise, one second is for a quick look.
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
    /// No throughput search: every DUT's latency at 10, 50 and 90 % of this rate
    /// (frames/s, e.g. the lowest zero-loss rate of an earlier run), with pfcswitch's
    /// stages. RFC 2544's latency test at loads you choose, in minutes instead of ten.
    #[arg(long, value_parser = crate::cli::parse_positive, conflicts_with_all = ["replot", "plot"])]
    pub equal_loads_of: Option<f64>,
    /// The tester on CPUs of its own: the sender and the sink on every CPU but the last,
    /// each DUT's forwarding thread on the last (pfcswitch's `dataplane.cpu`, Open
    /// vSwitch's `pmd-cpu-mask`), as the tester and the DUT are two boxes in RFC 2544.
    /// Without it, all share the machine's CPUs as the scheduler places them. Needs two
    /// CPUs.
    #[arg(long)]
    pub isolate: bool,
}

fn parse_trial_s(s: &str) -> Result<f64, String> {
    let v = crate::cli::parse_positive(s)?;
    if v < 1.0 {
        return Err(format!("{s} s is too short for a trial: at least 1"));
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

impl SizeResult {
    /// A DUT measured only at equal loads (`--equal-loads-of`): no search, no throughput.
    fn unsearched(dut: Dut, size: usize, equal_load: Vec<LoadPoint>) -> SizeResult {
        SizeResult {
            dut,
            size,
            throughput_fps: 0.0,
            search_fps: 0.0,
            throughput_bps: 0.0,
            sender_max_fps: 0.0,
            sender_limited: false,
            latency: Percentiles::default(),
            latency_trial_lost: 0,
            confirmed: false,
            latency_trials: Vec::new(),
            host_disturbed: Vec::new(),
            dut_cpu_ns_per_frame: None,
            loss: Vec::new(),
            trials: Vec::new(),
            equal_load,
        }
    }

    /// Whether the throughput was searched for: a search's first trial is the sender's
    /// unpaced one, and `--equal-loads-of` makes no search.
    pub(crate) fn searched(&self) -> bool {
        !self.trials.is_empty()
    }
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
    /// Whether the tester had CPUs of its own (`--isolate`).
    #[serde(default)]
    pub isolate: bool,
    pub trial_s: f64,
    pub resolution: f64,
    pub retries: usize,
    pub results: Vec<SizeResult>,
    pub ratios: Vec<Ratio>,
}

/// pfcswitch's throughput over the others', per size.
pub fn ratios(results: &[SizeResult]) -> Vec<Ratio> {
    let mut sizes: Vec<usize> = results.iter().map(|r| r.size).collect();
    sizes.dedup();
    let of =
        |dut, size| results.iter().find(|r| r.dut == dut && r.size == size && r.searched()).map(|r| r.throughput_fps);
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
    let cpus = cpu_plan(args.isolate)?;
    let mut beds: Vec<Bed> = Vec::new();
    let mut results = Vec::new();
    let progress = Progress::new((args.sizes.len() * duts.len()) as u64, "frame sizes × DUTs", args.json);
    for (i, &size) in args.sizes.iter().enumerate() {
        let mtu = mtu_for(size);
        if !beds.iter().any(|b| b.mtu == mtu) {
            for &dut in &duts {
                beds.push(Bed::up(dut, mtu, &cpus)?);
            }
        }
        // This size's beds, in an order rotated by one per size.
        let at: Vec<usize> = (0..beds.len()).filter(|&b| beds[b].mtu == mtu).collect();
        let order: Vec<usize> = (0..at.len()).map(|k| at[(i + k) % at.len()]).collect();
        if args.equal_loads_of.is_none() {
            for &b in &order {
                let bed = &mut beds[b];
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
        }
        // The equal loads' base: the rate given, or the lowest zero-loss rate found.
        let base = args.equal_loads_of.unwrap_or_else(|| {
            results.iter().filter(|r| r.size == size).map(|r| r.throughput_fps).fold(f64::INFINITY, f64::min)
        });
        if base.is_finite() && base > 0.0 {
            for &b in &order {
                let bed = &mut beds[b];
                progress.message(format!("{size} B through {} at equal loads", bed.dut.as_str()));
                let points = measure_equal_load(bed, size, base, args)?;
                if args.equal_loads_of.is_some() {
                    progress.inc(1);
                    results.push(SizeResult::unsearched(bed.dut, size, points));
                } else {
                    let r =
                        results.iter_mut().rev().find(|r| r.size == size && r.dut == bed.dut).expect("measured above");
                    r.equal_load = points;
                }
            }
        }
    }
    for bed in beds {
        bed.down();
    }
    results.sort_by_key(|r| (r.size, duts.iter().position(|&d| d == r.dut)));
    let report = Report {
        isolate: args.isolate,
        trial_s: args.trial_s,
        resolution: args.resolution,
        retries: args.retries,
        ratios: ratios(&results),
        results,
    };
    output(&report, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isolation_gives_the_dut_the_last_cpu_and_the_tester_the_others() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let shared = cpu_plan(false).unwrap();
        assert_eq!((shared.hosts.cpus, shared.switch), (None, None));
        match cpu_plan(true) {
            Ok(plan) if n >= 2 => {
                assert_eq!(plan.switch, Some(n - 1));
                let tester = plan.hosts.cpus.unwrap();
                assert_eq!(tester, if n == 2 { "0".to_string() } else { format!("0-{}", n - 2) });
            }
            Err(e) if n < 2 => assert!(e.to_string().contains("two CPUs")),
            other => panic!("{n} CPUs: {other:?}"),
        }
    }

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

    /// A confirmed result of `fps` frames a second for `dut` at `size`, searched for (its
    /// unpaced trial), nothing else known.
    fn result(dut: Dut, size: usize, fps: f64) -> SizeResult {
        SizeResult {
            throughput_fps: fps,
            search_fps: fps,
            confirmed: true,
            trials: vec![Trial::default()],
            ..SizeResult::unsearched(dut, size, vec![])
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
        let report =
            Report { isolate: false, trial_s: 3.0, resolution: 0.02, retries: 1, ratios: ratios(&results), results };
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
    fn a_run_at_equal_loads_alone_shows_those_loads_and_no_throughput_it_did_not_search_for() {
        let points =
            |p99: f64| EQUAL_LOADS.iter().map(move |&share| LoadPoint { share, trial: at(share * 200e3, p99, None) });
        let results = vec![
            SizeResult::unsearched(Dut::Pfcswitch, 64, points(50.0).collect()),
            SizeResult::unsearched(Dut::Ovs, 64, points(60.0).collect()),
        ];
        let report =
            Report { isolate: false, trial_s: 3.0, resolution: 0.02, retries: 1, ratios: ratios(&results), results };
        assert!(report.ratios.is_empty(), "no throughput to compare");
        let text = text(&report);
        assert!(!text.contains("throughput f/s") && !text.contains("pfcswitch / OVS"), "{text}");
        assert!(text.contains("shares of the rate given to --equal-loads-of"), "{text}");
        let ninety = text.lines().find(|l| l.starts_with("64") && l.contains("180000")).unwrap_or_default();
        assert!(ninety.contains("10.0 / 50.0 / 100") && ninety.contains("10.0 / 60.0 / 120"), "{text}");
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
        let report =
            Report { isolate: false, trial_s: 3.0, resolution: 0.02, retries: 1, ratios: ratios(&results), results };
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
