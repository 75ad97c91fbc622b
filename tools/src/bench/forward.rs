//! `bench forward`: delivered frames per second host → switch → host, pfcswitch against
//! a Linux bridge and, where `ovs-vswitchd` is installed, Open vSwitch's AF_XDP datapath,
//! on identical testbeds, in rotating rounds of one run each; each switch process's CPU
//! time per forwarded frame; and a zero-loss check at 80 % of pfcswitch's maximum, made
//! again (up to three times) when frames were lost while the switch was off its CPU for
//! longer than its rx ring lasts.

use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use pfcswitch::stats::Backlog;
use pfcswitch_table::Table;

use super::median;
use super::rfc2544::Dut;
use crate::harness::{self, SwitchLosses, SwitchProc};
use crate::testbed::TestbedTopology;
use crate::testbed::{at_mtu, mtu_for, unique_name, Testbed, Topology};

#[derive(Args, Clone, Debug)]
pub struct ForwardArgs {
    /// Seconds of traffic per measurement.
    #[arg(long, default_value_t = 3.0, value_parser = crate::cli::parse_positive)]
    pub seconds: f64,
    /// Rounds; each measures every switch once, in a rotating order.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Frame sizes on the wire (FCS included).
    #[arg(long, value_delimiter = ',', default_value = "64,1500")]
    pub sizes: Vec<usize>,
    /// Skip the zero-loss check at 80 % of the measured maximum.
    #[arg(long)]
    pub no_loss_check: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct SizeResult {
    pub size: usize,
    pub pfcswitch_pps: Vec<f64>,
    pub bridge_pps: Vec<f64>,
    pub pfcswitch_median_pps: f64,
    pub bridge_median_pps: f64,
    pub ratio: f64,
    /// pfcswitch CPU time (user + system) per delivered frame, ns.
    pub cpu_ns_per_frame: f64,
    /// Open vSwitch (AF_XDP ports), where installed: the same measures.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ovs_pps: Vec<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ovs_median_pps: Option<f64>,
    /// pfcswitch's median over OVS's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_vs_ovs: Option<f64>,
    /// `ovs-vswitchd`'s CPU time (all threads) per delivered frame, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ovs_cpu_ns_per_frame: Option<f64>,
    /// Sender rate in the same runs, for context: the sender's ceiling bounds both.
    pub sender_pps: f64,
    pub loss_check: Option<LossCheck>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct LossCheck {
    pub rate_pps: f64,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    /// Where lost frames went: the kernel could not queue them on the switch's full rx
    /// ring, or had no free frame on its fill ring to put them in; the switch dropped
    /// them; or the sink's socket could not take them.
    pub switch_rx_ring_full: u64,
    pub switch_rx_no_frame: u64,
    pub switch_drops: u64,
    pub sink_socket_dropped: u64,
    /// Of the frames lost on the switch's rx rings, those lost in backlog spells in which
    /// the machine kept the switch off its CPU for at least the time its ring lasts at
    /// the check's rate: a ring that holds that long fills without any fault of the
    /// switch's. A check whose every lost frame is such is made again.
    pub machine_explains: u64,
    /// The switch's backlog spells during the check in which its rx rings lost frames.
    pub lossy_backlogs: Vec<Backlog>,
    /// The switch's longest loop stall during the check, µs.
    pub longest_switch_stall_us: u64,
    /// How long the switch's loop waited for a CPU during the check (runnable, not
    /// running), µs, where the kernel keeps that figure.
    pub switch_cpu_wait_us: Option<u64>,
    /// The switch process's CPU time during the check, µs.
    pub switch_cpu_us: Option<u64>,
    /// Checks made: one the machine disturbed (see `machine_explains`) is made again.
    pub attempts: u32,
}

impl LossCheck {
    /// One line: what was lost, and what the switch's loop went through.
    fn summary(&self, ring_lasts: Duration) -> String {
        let ms = |us: u64| us as f64 / 1e3;
        let mut line = format!("{:.0} frames/s, {} sent, {} lost", self.rate_pps, self.sent, self.lost);
        if self.lost > 0 {
            line += &format!(
                " ({} on the switch's full rx rings, {} with no free frame on its fill rings, {} switch drops, {} at the \
                 sink's socket)",
                self.switch_rx_ring_full, self.switch_rx_no_frame, self.switch_drops, self.sink_socket_dropped
            );
        }
        line += &format!("; switch: longest stall {:.1} ms", ms(self.longest_switch_stall_us));
        if let Some(us) = self.switch_cpu_wait_us {
            line += &format!(", waited {:.0} ms for a CPU in all", ms(us));
        }
        if !self.lossy_backlogs.is_empty() {
            let mut spells = self.lossy_backlogs.clone();
            spells.sort_by_key(|b| std::cmp::Reverse(b.rx_lost));
            let shown: Vec<String> = spells
                .iter()
                .take(4)
                .map(|b| {
                    let pace =
                        b.on_cpu_rate_fps().map_or(String::new(), |r| format!(", {:.0} k/s while on it", r / 1e3));
                    format!(
                        "{} of {} in {:.1} ms with {:.1} ms off its CPU{pace}",
                        b.rx_lost,
                        b.arrived(),
                        ms(b.us),
                        ms(b.off_cpu_us)
                    )
                })
                .collect();
            line += &format!(
                "; lost while behind its rx rings (which last {:.1} ms at this rate): {}{}",
                ring_lasts.as_secs_f64() * 1e3,
                shown.join(", "),
                if spells.len() > shown.len() {
                    format!(" and {} more spells", spells.len() - shown.len())
                } else {
                    String::new()
                }
            );
        }
        let in_spells: u64 = self.lossy_backlogs.iter().map(|b| b.rx_lost).sum();
        let unplaced = (self.switch_rx_ring_full + self.switch_rx_no_frame).saturating_sub(in_spells);
        if unplaced > 0 {
            line += &format!("; {unplaced} lost on its rx rings in no spell it kept a record of");
        }
        line
    }
}

/// How many times the zero-loss check is made when the machine disturbs it.
const LOSS_CHECK_ATTEMPTS: u32 = 3;

struct Measurement {
    delivered_pps: f64,
    sender_pps: f64,
    delivered: u64,
    cpu: Option<Duration>,
}

/// One run through the switch on `tb`; `pid` is the switch's process, whose CPU time is
/// measured (none for the bridge).
fn measure(
    tb: &Testbed,
    pid: Option<u32>,
    size: usize,
    seconds: f64,
    rate: Option<f64>,
) -> Result<(Measurement, crate::traffic::sink::SinkReport, u64)> {
    let run = harness::one_flow_h1_to_h2(tb, size, seconds, rate, pid)?;
    let flow = run.sink.flows.first().cloned().unwrap_or_default();
    let m = Measurement { delivered_pps: flow.pps, sender_pps: run.gen.pps, delivered: flow.received, cpu: run.cpu };
    Ok((m, run.sink, run.gen.sent))
}

pub fn run(args: &ForwardArgs) -> Result<()> {
    // Jumbo sizes run on testbeds whose links have a jumbo MTU, the others at the standard
    // one, as a user's testbed would be (see `testbed::mtu_for`).
    let mut mtus: Vec<u32> = args.sizes.iter().map(|&s| mtu_for(s)).collect();
    mtus.sort_unstable();
    mtus.dedup();
    let (mut results, mut overload, mut ring_size) = (Vec::new(), SwitchLosses::default(), 0);
    for mtu in mtus {
        let sizes: Vec<usize> = args.sizes.iter().copied().filter(|&s| mtu_for(s) == mtu).collect();
        let (at, losses, ring) = run_at(args, mtu, &sizes)?;
        results.extend(at);
        overload = overload.plus(losses);
        ring_size = ring;
    }
    results.sort_by_key(|r| args.sizes.iter().position(|&s| s == r.size));
    print_report(args, &results, overload, ring_size)
}

/// The sizes that run at `mtu`: their results, the switch's losses in the unpaced rounds,
/// and its rx ring size.
fn run_at(args: &ForwardArgs, mtu: u32, sizes: &[usize]) -> Result<(Vec<SizeResult>, SwitchLosses, u32)> {
    let tb_switch = Testbed::up(&unique_name("bench-sw"), at_mtu(Topology::star(2), mtu))?;
    let tb_bridge = Testbed::up(&unique_name("bench-br"), at_mtu(Topology::star(2), mtu))?;
    tb_bridge.make_linux_bridge("sw1")?;
    // OVS runs only during its own runs: its PMD thread polls with a whole CPU even when
    // idle, which would take it from the others' runs on this 2-core machine.
    let tb_ovs = match crate::testbed::ovs::installed() {
        true => Some(Testbed::up(&unique_name("bench-ovs"), at_mtu(Topology::star(2), mtu))?),
        false => None,
    };
    // The configuration a user gets without a file: nothing tuned for the bench.
    let config = harness::switch_config(&tb_switch, "sw1");
    let switch = SwitchProc::start_as_service(&tb_switch, "sw1", &config, &pfcswitch::cli::RunArgs::default())
        .context("starting pfcswitch")?;

    let mut results = Vec::new();
    // Losses during the zero-loss checks, kept apart from the overload rounds'.
    let mut in_checks = SwitchLosses::default();
    for &size in sizes {
        let mut r = SizeResult { size, ..Default::default() };
        let (mut cpu_ns, mut ovs_cpu_ns) = (Vec::new(), Vec::new());
        let mut sender = Vec::new();
        let mut duts = vec![Dut::Pfcswitch, Dut::Bridge];
        if tb_ovs.is_some() {
            duts.push(Dut::Ovs);
        }
        for round in 0..args.rounds {
            for k in 0..duts.len() {
                let dut = duts[(round + k) % duts.len()];
                let mut ovs = None;
                let (tb, pid) = match (dut, &tb_ovs) {
                    (Dut::Ovs, Some(tb)) => {
                        let o = crate::testbed::ovs::Ovs::start(tb, "sw1").context("starting Open vSwitch")?;
                        let pid = o.pid();
                        ovs = Some(o);
                        (tb, Some(pid))
                    }
                    (Dut::Bridge, _) => (&tb_bridge, None),
                    _ => (&tb_switch, Some(switch.proc.pid())),
                };
                let (m, _, _) = measure(tb, pid, size, args.seconds, None)?;
                drop(ovs);
                sender.push(m.sender_pps);
                let per_frame = m.cpu.map(|cpu| cpu.as_nanos() as f64 / m.delivered.max(1) as f64);
                match dut {
                    Dut::Pfcswitch => {
                        r.pfcswitch_pps.push(m.delivered_pps);
                        cpu_ns.extend(per_frame);
                    }
                    Dut::Bridge => r.bridge_pps.push(m.delivered_pps),
                    Dut::Ovs => {
                        r.ovs_pps.push(m.delivered_pps);
                        ovs_cpu_ns.extend(per_frame);
                    }
                    // Not among this bench's switches (`duts` above).
                    Dut::Direct => {}
                }
                eprintln!(
                    "  {size} B round {round}: {:<9} {:.0} frames/s (sender {:.0})",
                    dut.as_str(),
                    m.delivered_pps,
                    m.sender_pps
                );
            }
        }
        r.pfcswitch_median_pps = median(&r.pfcswitch_pps);
        r.bridge_median_pps = median(&r.bridge_pps);
        r.ratio = r.pfcswitch_median_pps / r.bridge_median_pps.max(1.0);
        r.cpu_ns_per_frame = median(&cpu_ns);
        if !r.ovs_pps.is_empty() {
            let o = median(&r.ovs_pps);
            r.ovs_median_pps = Some(o);
            r.ratio_vs_ovs = Some(r.pfcswitch_median_pps / o.max(1.0));
            r.ovs_cpu_ns_per_frame = (!ovs_cpu_ns.is_empty()).then(|| median(&ovs_cpu_ns));
        }
        r.sender_pps = median(&sender);
        if !args.no_loss_check {
            let rate = r.pfcswitch_median_pps * 0.8;
            let ring_lasts = Duration::from_secs_f64(f64::from(config.dataplane.ring_size) / rate);
            let mut attempts = 0;
            let check = harness::undisturbed(
                LOSS_CHECK_ATTEMPTS as usize - 1,
                harness::RETRY_PAUSE,
                |c: &LossCheck| c.lost > 0 && c.lost <= c.machine_explains,
                |_| {
                    eprintln!(
                        "  {size} B 80 % check: every frame lost was lost while the switch was behind and off its CPU \
                         for longer than its rx ring lasts at this rate ({:.1} ms): the machine's, checked again",
                        ring_lasts.as_secs_f64() * 1e3
                    )
                },
                || {
                    attempts += 1;
                    let start_ns = pfcswitch::sys::now().as_nanos();
                    let before = SwitchLosses::read(&switch)?;
                    let waited_before = switch.stats()?.stalls.cpu_wait_us;
                    let (m, report, sent) =
                        measure(&tb_switch, Some(switch.proc.pid()), size, args.seconds, Some(rate))?;
                    let after = SwitchLosses::read(&switch)?;
                    let stalls = switch.stats()?.stalls;
                    let stall = stalls.longest_since(start_ns).map_or(0, |s| s.us);
                    let waited = waited_before.zip(stalls.cpu_wait_us).map(|(a, b)| b.saturating_sub(a));
                    let lost = after.minus(before);
                    in_checks = in_checks.plus(lost);
                    let f = report.flows.first().cloned().unwrap_or_default();
                    let lossy: Vec<Backlog> = stalls.backlogs_since(start_ns).copied().collect();
                    let machines = stalls.rx_lost_off_cpu(start_ns, ring_lasts);
                    let check = LossCheck {
                        rate_pps: rate,
                        sent,
                        received: f.received,
                        lost: sent.saturating_sub(f.received),
                        reordered: f.reordered,
                        duplicates: f.duplicates,
                        switch_rx_ring_full: lost.rx_ring_full,
                        switch_rx_no_frame: lost.rx_no_frame,
                        switch_drops: lost.dropped(),
                        sink_socket_dropped: report.socket_dropped,
                        machine_explains: machines.min(lost.rx_lost()),
                        lossy_backlogs: lossy,
                        longest_switch_stall_us: stall,
                        switch_cpu_wait_us: waited,
                        switch_cpu_us: m.cpu.map(|d| d.as_micros() as u64),
                        attempts,
                    };
                    eprintln!("  {size} B 80 % check {attempts}: {}", check.summary(ring_lasts));
                    Ok(check)
                },
            )?;
            r.loss_check = Some(check);
        }
        results.push(r);
    }
    let overload = SwitchLosses::read(&switch)?.minus(in_checks);
    let finished = switch.stop();
    if !finished.success() {
        eprintln!("pfcswitch exited with {}: {}", finished.status, finished.stderr.trim());
    }
    Ok((results, overload, config.dataplane.ring_size))
}

fn print_report(args: &ForwardArgs, results: &[SizeResult], overload: SwitchLosses, ring_size: u32) -> Result<()> {
    if args.json {
        println!("{}", serde_json::to_string_pretty(results)?);
        return Ok(());
    }
    println!(
        "bench forward: h1 → switch → h2 on veth, {} s per run, {} alternating rounds, medians",
        args.seconds, args.rounds
    );
    let mut t = Table::new(&[
        "frame B",
        "pfcswitch f/s",
        "linux bridge f/s",
        "ratio",
        "switch CPU ns/frame",
        "OVS-AF_XDP f/s",
        "pfcswitch / OVS",
        "OVS CPU ns/frame",
        "sender f/s",
        "80% check",
    ]);
    for r in results {
        let check = match &r.loss_check {
            Some(c) if c.lost > 0 => format!(
                "{}; check {} of {LOSS_CHECK_ATTEMPTS}, {} reordered, {} dup",
                c.summary(Duration::from_secs_f64(f64::from(ring_size) / c.rate_pps.max(1.0))),
                c.attempts,
                c.reordered,
                c.duplicates
            ),
            Some(c) => format!(
                "{:.0} f/s: {} sent, {} lost, {} reordered, {} dup",
                c.rate_pps, c.sent, c.lost, c.reordered, c.duplicates
            ),
            None => "-".into(),
        };
        t.row(vec![
            r.size.to_string(),
            format!("{:.0}", r.pfcswitch_median_pps),
            format!("{:.0}", r.bridge_median_pps),
            format!("{:.2}", r.ratio),
            format!("{:.0}", r.cpu_ns_per_frame),
            r.ovs_median_pps.map_or("-".into(), |o| format!("{o:.0}")),
            r.ratio_vs_ovs.map_or("-".into(), |x| format!("{x:.2}")),
            r.ovs_cpu_ns_per_frame.map_or("-".into(), |ns| format!("{ns:.0}")),
            format!("{:.0}", r.sender_pps),
            check,
        ]);
    }
    print!("{}", t.render());
    let jumbo: Vec<String> = results
        .iter()
        .filter(|r| mtu_for(r.size) != 1500)
        .map(|r| format!("{} B at MTU {}", r.size, mtu_for(r.size)))
        .collect();
    if !jumbo.is_empty() {
        println!(
            "frames above 1518 B ran on testbeds at the smallest standard MTU they fit: {} (AF_XDP multi-buffer in \
             pfcswitch)",
            jumbo.join(", ")
        );
    }
    println!(
        "pfcswitch under the unpaced (overload) rounds: {} egress tail drops, {} frames the kernel could not queue on a \
         full rx ring, {} it had no free frame for, {} other drops",
        overload.tail_drops, overload.rx_ring_full, overload.rx_no_frame, overload.other_drops
    );
    Ok(())
}
