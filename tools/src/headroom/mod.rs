//! Headroom and pause-response testing: the calculator, the sweep on a netns testbed, the
//! DUT's response-time measurement, and their reports.

pub use pfctestkit::headroom as calc;
pub mod compare;
pub mod plan;
pub mod plot;
pub mod sweep;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use pfcswitch::core::speed::Speed;
use pfcswitch::core::Priority;
use pfcswitch_table::Table;

use calc::CalcInput;
use sweep::{SweepOptions, SweepReport};

#[derive(Args, Clone, Debug)]
pub struct HeadroomArgs {
    /// Only compute the headroom a port needs (no testbed).
    #[arg(long)]
    pub calc: bool,
    /// Measure how long the DUT takes from receiving a pause to stopping the priority.
    #[arg(long, conflicts_with = "calc")]
    pub response_time: bool,
    /// Sweep: run the sweep on the testbed and in the simulator, and print both side by
    /// side with the testbed's disturbance (a benchmark: where the real path departs
    /// from the model).
    #[arg(long, conflicts_with_all = ["calc", "response_time"])]
    pub compare: bool,
    /// Run the pause-response test plan as written: a lossless and a lossy case, each
    /// check PASS or FAIL; exits non-zero unless every check passes.
    #[arg(long, conflicts_with_all = ["calc", "response_time", "compare"])]
    pub plan: bool,
    /// Plan: the sender's response delay, quanta, that the headroom must absorb (default:
    /// the calculator's delay needing half the headroom).
    #[arg(long, requires = "plan")]
    pub lossless_delay: Option<u32>,
    /// Plan: a delay the headroom must not absorb (default: the calculator's delay
    /// needing twice the headroom).
    #[arg(long, requires = "plan")]
    pub lossy_delay: Option<u32>,
    /// Plan and sweep: seconds of storm before the traffic starts (default: the plan's
    /// 1 s with --plan, else 0.3 s).
    #[arg(long, value_parser = crate::cli::parse_positive)]
    pub settle_s: Option<f64>,
    /// Plan and sweep: seconds of traffic (default: the plan's 5 s with --plan, else 0.4 s).
    #[arg(long, value_parser = crate::cli::parse_positive)]
    pub traffic_s: Option<f64>,
    /// Plan and sweep: test traffic, percent of line rate shared by the test priorities.
    #[arg(long, default_value_t = 50.0, value_parser = crate::cli::parse_percent)]
    pub test_load: f64,
    /// Plan and sweep: background traffic, percent of line rate (0: none).
    #[arg(long, default_value_t = 50.0, value_parser = crate::cli::parse_percent_or_zero)]
    pub background_load: f64,
    /// Plan and sweep: the background's priorities (default: every priority neither under
    /// test nor lossless on the DUT, whose lossless priorities are 3, 4 and those tested).
    #[arg(long, value_delimiter = ',')]
    pub background_prios: Option<Vec<Priority>>,
    /// Plan and sweep: a test priority's own headroom on the DUT, PRIO=BYTES (its
    /// `[buffer.priority.N]` profile), e.g. 3=32768,4=98304.
    #[arg(long, value_delimiter = ',', value_parser = crate::cli::parse_prio_bytes)]
    pub prio_headroom: Vec<(Priority, u64)>,
    /// Plan and sweep: a test priority's own XOFF on the DUT, PRIO=BYTES.
    #[arg(long, value_delimiter = ',', value_parser = crate::cli::parse_prio_bytes)]
    pub prio_xoff: Vec<(Priority, u64)>,
    /// Port speed.
    #[arg(long, default_value = "1G")]
    pub speed: Speed,
    /// Calculator: cable length in metres.
    #[arg(long, default_value_t = 100.0, value_parser = crate::cli::parse_non_negative)]
    pub cable_m: f64,
    /// Calculator: MTU (IP packet size); frames are MTU + 14 bytes (+ 4 tagged).
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// Calculator: frames carry a VLAN tag.
    #[arg(long)]
    pub tagged: bool,
    /// Calculator: the sender's response time in quanta...
    #[arg(long, default_value_t = 0)]
    pub response_quanta: u32,
    /// ...plus this many µs.
    #[arg(long, default_value_t = 0.0, value_parser = crate::cli::parse_non_negative)]
    pub response_us: f64,
    /// Calculator: add the response `bench pause-response --json` measured at --speed
    /// (its longest stop), read from this file.
    #[arg(long)]
    pub response_from: Option<PathBuf>,
    /// Calculator: the switch's delay from XOFF to sending the pause, µs.
    #[arg(long, default_value_t = 0.0, value_parser = crate::cli::parse_non_negative)]
    pub switch_delay_us: f64,
    /// Calculator: load of the paused traffic in percent of line rate.
    #[arg(long, default_value_t = 100.0, value_parser = crate::cli::parse_percent)]
    pub load: f64,
    /// Sweep: lossless priorities under test, e.g. 3 or 3,4.
    #[arg(long, value_delimiter = ',', default_value = "3")]
    pub prios: Vec<Priority>,
    /// Sweep: sender response delays in quanta.
    #[arg(long, value_delimiter = ',', default_value = "0,250,500,750,1000,1500,2000,3000")]
    pub delays: Vec<u32>,
    /// Plan and sweep: headroom configured in the DUT per (port, priority).
    #[arg(long, default_value_t = 48 << 10)]
    pub headroom_bytes: u64,
    /// Plan and sweep: XOFF threshold in the DUT.
    #[arg(long, default_value_t = 64 << 10)]
    pub xoff_bytes: u64,
    /// Sweep: frame size on the wire.
    #[arg(long, default_value_t = 1000)]
    pub frame_size: usize,
    /// Sweep: runs per delay (response-time: pauses sent).
    #[arg(long, default_value_t = 1)]
    pub repeats: usize,
    /// Sweep: a run in which test frames kept arriving after XOFF for longer than the
    /// sender's delay + this, or stopped more than this (and a frame interval) short of
    /// it, was disturbed by the host and is repeated, as is a run whose storm had a gap;
    /// 0 keeps every run.
    #[arg(long, default_value_t = 150.0, value_parser = crate::cli::parse_non_negative)]
    pub max_overhead_us: f64,
    /// Sweep and plan: how many times a disturbed run is repeated (default: 4 for the
    /// sweep, whose runs take under a second; 5 for the plan, whose runs take 5 s).
    #[arg(long)]
    pub retries: Option<usize>,
    /// Sweep: write a chart of the sweep (SVG).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

impl HeadroomArgs {
    pub fn calc_input(&self) -> CalcInput {
        let mut i = CalcInput {
            speed: self.speed,
            cable_m: self.cable_m,
            max_frame: CalcInput::max_frame_for_mtu(self.mtu, self.tagged),
            response: Duration::ZERO,
            switch_delay: Duration::from_secs_f64(self.switch_delay_us / 1e6),
            load: self.load / 100.0,
        };
        i.response = i.quanta(self.response_quanta) + Duration::from_secs_f64(self.response_us / 1e6);
        i
    }

    pub fn sweep_options(&self) -> Result<SweepOptions> {
        if !(self.max_overhead_us >= 0.0 && self.max_overhead_us.is_finite()) {
            bail!("--max-overhead-us must be a finite number of µs, 0 or more");
        }
        let defaults = SweepOptions::default();
        let (settle, traffic) =
            if self.plan { (plan::PLAN_SETTLE, plan::PLAN_TRAFFIC) } else { (defaults.settle, defaults.traffic) };
        let opts = SweepOptions {
            speed: self.speed,
            prios: self.prios.clone(),
            delays: self.delays.clone(),
            headroom_bytes: self.headroom_bytes,
            xoff_bytes: self.xoff_bytes,
            prio_headroom: self.prio_headroom.iter().copied().collect(),
            prio_xoff: self.prio_xoff.iter().copied().collect(),
            test_load: self.test_load,
            background_load: self.background_load,
            background_prios: self.background_prios.clone(),
            frame_size: self.frame_size,
            settle: self.settle_s.map_or(settle, Duration::from_secs_f64),
            traffic: self.traffic_s.map_or(traffic, Duration::from_secs_f64),
            repeats: self.repeats,
            max_overhead: Duration::from_secs_f64(self.max_overhead_us / 1e6),
            retries: self.retries.unwrap_or(if self.plan { 5 } else { defaults.retries }),
            // The plan's verdicts are drops or none, at delays far from the boundary.
            judge_by_margin: self.plan,
            ..defaults
        };
        opts.validate()?;
        Ok(opts)
    }
}

pub fn run(args: &HeadroomArgs) -> Result<()> {
    if args.calc {
        let mut input = args.calc_input();
        if let Some(path) = &args.response_from {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let measured: crate::bench::response::ResponseResult = serde_json::from_str(&text)
                .with_context(|| format!("{}: not a `bench pause-response --json` report", path.display()))?;
            let Some(us) = measured.stop_max_us(args.speed) else {
                bail!("{}: no row at {} with a placed stop", path.display(), args.speed);
            };
            eprintln!("the response at {} from {}: {us:.1} µs added", args.speed, path.display());
            input.response += Duration::from_secs_f64(us / 1e6);
        }
        if !(args.load > 0.0 && args.load <= 100.0) {
            bail!("--load is a percentage: 0 < load <= 100");
        }
        let c = input.calculate();
        if args.json {
            println!("{}", serde_json::to_string_pretty(&c)?);
        } else {
            print!("{}", c.text(&input));
        }
        return Ok(());
    }
    if args.compare {
        return compare::run(&args.sweep_options()?, args.json);
    }
    if args.response_time {
        let r = crate::bench::pfc::response_time(args.speed, args.repeats.max(5))?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&r)?);
        } else {
            println!(
                "DUT response time at {} ({} pauses), from a pause's arrival to the priority's last frame out: \
                 p50 {:.2} µs = {:.0} quanta, max {:.2} µs = {:.0} quanta (the DUT's own account)",
                args.speed, r.dut.count, r.dut.p50_us, r.dut_p50_quanta, r.dut.max_us, r.dut_max_quanta
            );
            println!(
                "seen from a receiver behind it (veth transit both ways included; {} of {} trials placeable): \
                 p50 {:.1} µs = {:.0} quanta, max {:.1} µs",
                r.external_count, r.external_trials, r.external_p50_us, r.external_p50_quanta, r.external_max_us
            );
            println!(
                "what still left after the pause was sent: p50 {:.0} frames ({:.0} B), at most {} frames ({} B) of {} B",
                r.after_pause_p50_frames,
                r.after_pause_p50_frames * r.frame_bytes as f64,
                r.after_pause_max_frames,
                r.after_pause_max_frames as usize * r.frame_bytes,
                r.frame_bytes
            );
        }
        return Ok(());
    }
    let opts = args.sweep_options()?;
    if args.plan {
        return run_plan(args, &opts);
    }
    eprintln!(
        "headroom sweep at {}: priorities {:?}, headroom {} B, XOFF {} B, {} B frames, delays {:?} quanta",
        opts.speed, opts.prios, opts.headroom_bytes, opts.xoff_bytes, opts.frame_size, opts.delays
    );
    let runs = (opts.delays.len() * opts.repeats.max(1)) as u64;
    let bar = pfctestkit::progress::Progress::new(runs, "runs", args.json);
    bar.message("the first delay");
    let report = sweep::run(&opts, &|r| {
        bar.inc(1);
        bar.message(format!("after {} quanta", r.delay_quanta));
        bar.println(format!(
            "  delay {:>6} quanta: drops {:>4}, headroom used {:>7} B, testbed added {:>6.0} µs{}",
            r.delay_quanta,
            r.prios.iter().map(|p| p.drops).sum::<u64>(),
            r.prios.iter().map(|p| p.headroom_watermark).max().unwrap_or(0),
            r.overhead_us,
            if r.disturbed { format!(" (disturbed by the host: {})", r.dut_off_cpu()) } else { String::new() }
        ))
    })?;
    drop(bar);
    if let Some(path) = &args.plot {
        plot::svg(&report, path)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", text(&report));
        if let Some(path) = &args.plot {
            println!("chart: {}", path.display());
        }
    }
    Ok(())
}

fn run_plan(args: &HeadroomArgs, opts: &sweep::SweepOptions) -> Result<()> {
    let (picked_lossless, picked_lossy) = plan::pick_delays(opts);
    let delays = (args.lossless_delay.unwrap_or(picked_lossless), args.lossy_delay.unwrap_or(picked_lossy));
    eprintln!(
        "test plan at {}: priorities {:?}, lossless case {} quanta, lossy case {} quanta{}",
        opts.speed,
        opts.prios,
        delays.0,
        delays.1,
        if args.lossless_delay.is_none() || args.lossy_delay.is_none() { " (calculator's choice)" } else { "" }
    );
    let report = plan::run(opts, delays, &|case, r| {
        eprintln!(
            "  {case:?} case, delay {} quanta: drops {}, headroom used {} B{}",
            r.delay_quanta,
            r.prios.iter().map(|p| p.drops).sum::<u64>(),
            r.prios.iter().map(|p| p.headroom_watermark).max().unwrap_or(0),
            if r.disturbed {
                format!(" (disturbed by the host, repeated: {})", r.dut_off_cpu())
            } else {
                String::new()
            }
        )
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", plan::text(&report));
    }
    match report.verdict {
        plan::Verdict::Pass => Ok(()),
        plan::Verdict::Fail => {
            let failed = report.checks.iter().filter(|k| !k.passed).count();
            bail!("the DUT failed the plan: {failed} of {} checks", report.checks.len())
        }
        plan::Verdict::NoVerdict => {
            bail!("no verdict: the testbed disturbed a case in every attempt; run again on a quieter machine")
        }
    }
}

/// The sweep as the test plan's table.
pub fn text(r: &SweepReport) -> String {
    let mut t = Table::new(&[
        "delay q",
        "delay µs",
        "prio",
        "test sent B",
        "test rx",
        "held B",
        "lossless drops",
        "headroom used B",
        "testbed µs",
        "bg sent",
        "bg rx",
        "storm ok",
    ]);
    for run in &r.runs {
        for p in &run.prios {
            t.row(vec![
                run.delay_quanta.to_string(),
                format!("{:.1}", run.delay_us),
                p.prio.to_string(),
                p.test_sent_bytes.to_string(),
                p.test_received.to_string(),
                p.held_bytes.to_string(),
                p.drops.to_string(),
                p.headroom_watermark.to_string(),
                format!(
                    "{:.0}{}",
                    p.upstream_response_us - run.delay_us,
                    if run.disturbed { " DISTURBED" } else { "" }
                ),
                run.background_sent.to_string(),
                run.background_received.to_string(),
                if run.storm_continuous { "yes" } else { "GAP" }.to_string(),
            ]);
        }
    }
    let mut out = format!(
        "PFC headroom sweep at {}, priorities {:?}: DUT shared buffer {} B, XOFF {} B, headroom {}\n",
        r.speed,
        r.prios,
        r.shared_bytes,
        r.xoff_bytes,
        r.prio_headroom.iter().map(|(p, h)| format!("{h} B on priority {p}")).collect::<Vec<_>>().join(", ")
    );
    out += &t.render();
    out += "(testbed µs: how much longer than the sender's delay test frames kept arriving after XOFF: the DUT's \
            reaction, veth and the sender's loop)\n";
    if !r.disturbed.is_empty() {
        out += &format!(
            "{} run(s) in which test frames arrived for more than {:.0} µs longer or shorter than the sender's \
             delay, or the storm had a gap (the host took a program's CPU), were repeated; the JSON lists them \
             under \"disturbed\"\n",
            r.disturbed.len(),
            r.max_overhead_us
        );
    }
    let mut c = Table::new(&[
        "delay q",
        "prio",
        "headroom B",
        "response µs",
        "needed B",
        "calculated B",
        "difference B",
        "lossless",
        "agrees",
    ]);
    for k in &r.checks {
        c.row(vec![
            k.delay_quanta.to_string(),
            k.prio.to_string(),
            k.headroom_configured.to_string(),
            format!("{:.1}", k.response_us),
            if k.lossless { k.measured_bytes.to_string() } else { format!("> {}", k.measured_bytes) },
            k.predicted_bytes.to_string(),
            format!("{:+}", k.measured_bytes as i64 - k.predicted_bytes as i64),
            if k.lossless { "yes" } else { "NO" }.to_string(),
            if k.agrees { "yes" } else { "NO" }.to_string(),
        ]);
    }
    out += &format!(
        "\nheadroom needed against the calculator, given the response the DUT measured (the sender's delay and \
         the testbed's) and an offset of {:+} B for the frames around the pause, fitted over the lossless delays; \
         agreement: within one {} B frame, or both over the configured headroom:\n",
        r.testbed_offset_bytes,
        r.frame_size - 4
    );
    out += &c.render();
    out += &match r.largest_lossless_delay_quanta {
        Some(d) => format!("largest sender delay lossless on every priority: {d} quanta\n"),
        None => "no delay was lossless: the headroom is too small even for an immediate response\n".into(),
    };
    out
}
