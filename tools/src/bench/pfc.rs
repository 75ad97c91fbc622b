//! `bench pfc`: how fast the switch reacts to congestion with a pause, and how exactly it
//! obeys the pauses it receives, at 1G–100G.

use pfcswitch::config::ArrivalStamp;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use pfcswitch::cli::RunArgs;
use pfcswitch::core::histogram::Percentiles;
use pfcswitch::core::speed::Speed;
use pfcswitch::core::Priority;
use pfcswitch_table::Table;

use super::median;
use crate::cli::{GenArgs, SinkArgs};
use crate::harness::{self, SinkProc, SwitchProc};
use crate::testbed::TestbedTopology;
use crate::testbed::{unique_name, Testbed, Topology};
use crate::traffic::probe::{ProbeArgs, ProbeTrial};

#[derive(Args, Clone, Debug)]
pub struct PfcArgs {
    /// Port speeds at which pause durations are measured.
    #[arg(long, value_delimiter = ',', default_value = "1G,10G,25G,40G,100G")]
    pub speeds: Vec<Speed>,
    /// Pauses sent per quanta value.
    #[arg(long, default_value_t = 15)]
    pub repeats: usize,
    /// Frames per ring per loop turn in the switch under test during the duration runs
    /// (small batches let the first frame after a resume reach the probe sooner).
    #[arg(long, default_value_t = 8)]
    pub batch: usize,
    /// Seconds of congestion for the reaction-time measurement.
    #[arg(long, default_value_t = 3.0, value_parser = crate::cli::parse_positive)]
    pub congestion_seconds: f64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct DurationRow {
    pub speed: String,
    pub quanta: u16,
    pub expected_us: f64,
    pub measured_median_us: f64,
    pub measured_min_us: f64,
    pub measured_max_us: f64,
    pub error_pct: f64,
    /// Trials measured within ±5 % of the expected pause.
    pub within_5pct: String,
    /// The switch's own view at this speed: from a pause's expiry to the first waiting
    /// frame it sent (all quanta of the run).
    pub switch_resume_late_p50_us: f64,
    pub switch_resume_late_p99_us: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct PfcResult {
    pub reaction: Percentiles,
    pub pauses_sent: u64,
    pub durations: Vec<DurationRow>,
}

fn star(tag: &str, hosts: usize) -> Result<Testbed> {
    Ok(Testbed::up(&unique_name(tag), Topology::star(hosts))?)
}

/// Two lossless senders into a slow port: every XOFF is a reaction to time.
fn reaction(seconds: f64) -> Result<(Percentiles, u64)> {
    let tb = star("bench-react", 3)?;
    let mut config = harness::switch_config(&tb, "sw1");
    for p in &mut config.ports {
        p.speed = Some(Speed::mbps(100));
    }
    config.buffer.xoff_bytes = Some(64 << 10);
    config.buffer.xon_offset_bytes = Some(16 << 10);
    config.buffer.headroom_bytes = 256 << 10;
    let sw = SwitchProc::start(&tb, "sw1", &config, &RunArgs::default())?;
    let sink =
        SinkProc::start(&tb, "h3", "sink", &SinkArgs { idle: Duration::from_secs(1), ..harness::sink_defaults() })?;
    let args = GenArgs {
        size: 1000,
        dscp: vec![3],
        speed: Speed::mbps(100),
        load: Some(80.0),
        duration: Some(Duration::from_secs_f64(seconds)),
        ..harness::gen_to(tb.host_iface("h3")?.mac)
    };
    let g1 = harness::start_gen(&tb, "h1", "gen1", &args)?;
    let g2 = harness::start_gen(&tb, "h2", "gen2", &args)?;
    g1.finish(Duration::from_secs_f64(seconds + 30.0))?;
    g2.finish(Duration::from_secs_f64(seconds + 30.0))?;
    sink.finish(Duration::from_secs(30))?;
    let stats = sw.stats()?;
    sw.stop();
    let sent = stats.ports.iter().map(|p| p.counters.mac_control.pfc_sent).sum();
    Ok((stats.pfc_reaction, sent))
}

/// Quanta that pause for about 1 ms, 5 ms and 20 ms at `speed`, and the maximum.
pub fn quanta_for_speed(speed: Speed) -> Vec<u16> {
    let mut q: Vec<u16> = [1, 5, 20].iter().map(|&ms| speed.quanta_for(Duration::from_millis(ms))).collect();
    q.push(u16::MAX);
    q.sort_unstable();
    q.dedup();
    q
}

/// Runs the pause probe against a fresh DUT at `speed` (a steady flow of `rate` frames/s
/// on priority 3): the probe's trials, the DUT's own view of how late it resumed, and
/// the DUT's statistics at the end.
/// `smooth` sends the flow from a spinning sender with the DUT on a CPU of its own, so
/// that the flow has no bursts (needed to place the moment the DUT stopped); otherwise
/// the sender sleeps between small bursts and leaves the CPUs to the DUT and the probe.
pub fn probe_switch(
    speed: Speed,
    quanta: &[u16],
    repeats: usize,
    batch: usize,
    rate: f64,
    smooth: bool,
) -> Result<(Vec<ProbeTrial>, Percentiles, pfcswitch::stats::Stats)> {
    let flow = ProbedFlow { speed, batch: Some(batch), rate, size: None, smooth, stamp: None };
    let (report, stats) = run_probe(&flow, quanta, repeats, None)?;
    let trials = serde_json::from_str(&report).context("reading the pause probe's report")?;
    Ok((trials, stats.resume_lateness, stats))
}

/// The switch and flow a pause probe runs against.
#[derive(Clone, Copy, Debug)]
pub struct ProbedFlow {
    /// Every port's speed.
    pub speed: Speed,
    /// The dataplane's batch; None: the default.
    pub batch: Option<usize>,
    /// The flow's frames per second, on priority 3.
    pub rate: f64,
    /// The flow's frame size on the wire; None: the generator's default.
    pub size: Option<usize>,
    /// See [`probe_switch`].
    pub smooth: bool,
    /// How the switch and the probe stamp arrivals; None: the best the kernel allows.
    pub stamp: Option<ArrivalStamp>,
}

impl ProbedFlow {
    /// The flow's frame size on the wire (FCS included).
    pub fn frame_bytes(&self) -> usize {
        frame_bytes(self.size)
    }
}

/// A probed flow's frame size on the wire (FCS included): `size`, or the generator's
/// default.
pub fn frame_bytes(size: Option<usize>) -> usize {
    size.unwrap_or_else(|| harness::gen_to(Default::default()).size)
}

/// Runs `pfctools pause-probe` (single pauses, or storms of `storm_ms`) against a fresh
/// DUT carrying `flow`; returns the probe's JSON report and the DUT's statistics.
pub fn run_probe(
    flow: &ProbedFlow,
    quanta: &[u16],
    repeats: usize,
    storm_ms: Option<u64>,
) -> Result<(String, pfcswitch::stats::Stats)> {
    let speed = flow.speed;
    let tb = star("bench-pause", 2)?;
    let cpus = if flow.smooth { harness::CpuPlan::split() } else { harness::CpuPlan::default() };
    let mut config = harness::switch_config(&tb, "sw1");
    for p in &mut config.ports {
        p.speed = Some(speed);
    }
    config.buffer.headroom_bytes = 512 << 10;
    if let Some(batch) = flow.batch {
        config.dataplane.batch = batch;
    }
    config.dataplane.cpu = cpus.switch;
    config.dataplane.arrival_stamp = flow.stamp;
    let sw = SwitchProc::start_on(&tb, "sw1", &config, &RunArgs::default(), &cpus.switch_process)?;
    let gen_args = GenArgs {
        dscp: vec![3],
        rate: Some(flow.rate),
        duration: Some(Duration::from_secs(300)),
        speed,
        spin: flow.smooth,
        size: flow.frame_bytes(),
        ..harness::gen_to(tb.host_iface("h2")?.mac)
    };
    let gen = harness::start_gen_on(&tb, "h1", "gen", cpus.hosts(), &gen_args)?;
    let probe_args = ProbeArgs {
        iface: tb.host_iface("h2")?.name.clone(),
        prio: Priority::new(3),
        speed,
        quanta: quanta.to_vec(),
        repeats,
        storm_ms,
        arrival_stamp: flow.stamp,
    };
    let probe =
        tb.spawn_on("h2", "probe", cpus.hosts(), &harness::command_line("pfctools", "pause-probe", &probe_args)?)?;
    let finished = probe.wait(Duration::from_secs(300));
    let _ = gen.stop();
    let stats = sw.stats()?;
    sw.stop();
    if !finished.success() {
        bail!("pause probe at {speed} failed: {}", finished.stderr.trim());
    }
    Ok((finished.stdout.trim().to_string(), stats))
}

fn durations(speed: Speed, repeats: usize, batch: usize) -> Result<Vec<DurationRow>> {
    let quanta = quanta_for_speed(speed);
    let (trials, late, _) = probe_switch(speed, &quanta, repeats, batch, 50e3, false)?;
    Ok(quanta
        .iter()
        .map(|&q| {
            let m: Vec<f64> = trials.iter().filter(|t| t.quanta == q).map(|t| t.measured_us).collect();
            let expected = speed.quanta_duration(q).as_secs_f64() * 1e6;
            let med = median(&m);
            let within = m.iter().filter(|v| ((*v - expected) / expected).abs() <= 0.05).count();
            DurationRow {
                speed: speed.to_string(),
                quanta: q,
                expected_us: expected,
                measured_median_us: med,
                measured_min_us: m.iter().copied().fold(f64::INFINITY, f64::min),
                measured_max_us: m.iter().copied().fold(0.0, f64::max),
                error_pct: (med - expected) / expected * 100.0,
                within_5pct: format!("{within}/{}", m.len()),
                switch_resume_late_p50_us: late.p50_us,
                switch_resume_late_p99_us: late.p99_us,
            }
        })
        .collect())
}

/// How long the DUT takes from a pause to stopping the priority: its own account (from
/// the pause's arrival stamp to the last frame of the priority it handed out after it),
/// and what a receiver behind it sees (veth transit both ways included).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ResponseTime {
    pub speed: String,
    /// The DUT's own measurement.
    pub dut: Percentiles,
    pub dut_p50_quanta: f64,
    pub dut_max_quanta: f64,
    /// Seen from the receiver: trials where the stop could be placed.
    pub external_count: usize,
    pub external_trials: usize,
    pub external_p50_us: f64,
    pub external_max_us: f64,
    pub external_p50_quanta: f64,
    pub samples_us: Vec<f64>,
    /// Trials that placed no stop (see [`ProbeTrial::response_us`]; also a pause that
    /// reached the switch late), left out: extra trials stand in for them.
    #[serde(default)]
    pub external_disturbed: usize,
    /// Frames of the paused priority the receiver still got after the pause was sent
    /// ([`ProbeTrial::after_pause`]), median and most over the placed trials.
    #[serde(default)]
    pub after_pause_p50_frames: f64,
    #[serde(default)]
    pub after_pause_max_frames: u32,
    /// The size of the flow's frames on the wire (FCS included), bytes.
    #[serde(default)]
    pub frame_bytes: usize,
    /// How the switch stamped arrivals, which its figures count from (the probe stamps
    /// as it does: the same choice on the same kernel). None: a switch that did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_stamp: Option<ArrivalStamp>,
}

/// `headroom --response-time`: [`response_time_of`] a dense, smooth flow of the
/// generator's default frames (the stop can only be placed to within one interval),
/// with batches of 8.
pub fn response_time(speed: Speed, repeats: usize) -> Result<ResponseTime> {
    let flow = ProbedFlow { speed, batch: Some(8), rate: 200e3, size: None, smooth: true, stamp: None };
    let r = response_time_of(&flow, repeats)?.0;
    if r.external_count == 0 {
        bail!(
            "none of {} trials placed the stop (the machine disturbed them: a pause sent or delivered late, or \
             a flow with holes around the pause); run again on a quieter machine",
            r.external_trials
        );
    }
    Ok(r)
}

/// The DUT's response to single pauses into `flow`, and its statistics at the end. Twice
/// the trials asked for are run, so that those a busy machine disturbs can be left out
/// (`external_count` says how many placed the stop: maybe none).
pub fn response_time_of(flow: &ProbedFlow, repeats: usize) -> Result<(ResponseTime, pfcswitch::stats::Stats)> {
    let speed = flow.speed;
    let (report, stats) = run_probe(flow, &[u16::MAX], repeats * 2, None)?;
    let trials: Vec<ProbeTrial> = serde_json::from_str(&report).context("reading the pause probe's report")?;
    let (dut, arrivals) = (stats.pause_response, stats.ports[1].pause_arrivals_ns.clone());
    // The testbed may hold the pause back too (its softirq work waits for a CPU): a
    // trial whose pause reached the switch late says nothing about the switch.
    let judged: Vec<&ProbeTrial> = trials
        .iter()
        .filter(|t| {
            let arrived = arrivals.iter().copied().find(|&a| a >= t.sent_ns);
            arrived.is_some_and(|a| Duration::from_nanos(a - t.sent_ns) <= crate::traffic::probe::PAUSE_WITHIN)
        })
        .collect();
    let samples: Vec<f64> = judged.iter().filter_map(|t| t.response_us).collect();
    let after: Vec<u32> = judged.iter().filter_map(|t| t.after_pause).collect();
    let quantum_us = pfcswitch::core::speed::BITS_PER_QUANTUM as f64 / speed.bps() as f64 * 1e6;
    let unplaced = trials.len() - samples.len();
    let (p50, max) = (median(&samples), samples.iter().copied().fold(0.0, f64::max));
    let r = ResponseTime {
        speed: speed.to_string(),
        dut_p50_quanta: dut.p50_us / quantum_us,
        dut_max_quanta: dut.max_us / quantum_us,
        dut,
        external_count: samples.len(),
        external_trials: trials.len(),
        external_p50_us: p50,
        external_max_us: max,
        external_p50_quanta: p50 / quantum_us,
        samples_us: samples,
        external_disturbed: unplaced,
        after_pause_p50_frames: median(&after.iter().map(|&n| f64::from(n)).collect::<Vec<_>>()),
        after_pause_max_frames: after.iter().copied().max().unwrap_or(0),
        frame_bytes: flow.frame_bytes(),
        arrival_stamp: stats.kernel_paths.as_ref().map(|k| k.arrival_stamp.path),
    };
    Ok((r, stats))
}

pub fn run(args: &PfcArgs) -> Result<()> {
    let (reaction, pauses_sent) = reaction(args.congestion_seconds)?;
    let mut rows = Vec::new();
    for &speed in &args.speeds {
        eprintln!("  measuring pause durations at {speed}");
        rows.extend(durations(speed, args.repeats, args.batch)?);
    }
    let result = PfcResult { reaction, pauses_sent, durations: rows };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
        return Ok(());
    }
    let r = &result.reaction;
    println!(
        "PFC reaction, XOFF-crossing frame read off the rx ring → its pause frame handed to the kernel \
         ({} pauses over {} s of congestion): p50 {:.0} µs, p90 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
        r.count, args.congestion_seconds, r.p50_us, r.p90_us, r.p99_us, r.max_us
    );
    println!(
        "\nPause durations obeyed: one PFC frame into a steady 50k frames/s flow, the gap timed at the receiver \
         ({} pauses per row; measured = median). The last columns are the switch's own view: how late after \
         the pause expired it sent the first waiting frame.",
        args.repeats
    );
    let mut t = Table::new(&[
        "speed",
        "quanta",
        "expected µs",
        "measured µs",
        "min",
        "max",
        "error %",
        "±5 % (≥ 1 ms)",
        "trials in ±5 %",
        "resume late p50 µs",
        "p99 µs",
    ]);
    for d in &result.durations {
        let verdict = if d.expected_us < 1000.0 {
            "n/a (< 1 ms)".to_string()
        } else if d.error_pct.abs() <= 5.0 {
            "yes".to_string()
        } else {
            "NO".to_string()
        };
        t.row(vec![
            d.speed.clone(),
            d.quanta.to_string(),
            format!("{:.1}", d.expected_us),
            format!("{:.1}", d.measured_median_us),
            format!("{:.1}", d.measured_min_us),
            format!("{:.1}", d.measured_max_us),
            format!("{:+.2}", d.error_pct),
            verdict,
            d.within_5pct.clone(),
            format!("{:.0}", d.switch_resume_late_p50_us),
            format!("{:.0}", d.switch_resume_late_p99_us),
        ]);
    }
    print!("{}", t.render());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quanta_cover_1_to_20_ms_where_the_speed_allows() {
        assert_eq!(quanta_for_speed(Speed::gbps(1)), vec![1954, 9766, 39063, 65535]);
        // 65535 quanta last 0.34 ms at 100G: only the maximum remains.
        assert_eq!(quanta_for_speed(Speed::gbps(100)), vec![65535]);
    }
}
