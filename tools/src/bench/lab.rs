//! `pfctools deadlock-lab`: a three-switch ring driven into a real PFC deadlock by a brief
//! block, what DCFIT makes of it, and the same ring with Tagger's tables, where the
//! deadlock cannot form.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use serde::{Deserialize, Serialize};

use pfcswitch::core::config::DeadlockResolution;
use pfcswitch::core::slowpath::DeadlockRecord;
use pfcswitch::core::speed::Speed;
use pfcswitch::stats::Stats;
use pfcswitch_table::Table;

use crate::harness::{ring_routes, RingLab, RingOptions, TAGGER_PRIORITIES};
use crate::tagging;
use crate::testbed::TestbedTopology;
use crate::testbed::Topology;

#[derive(Args, Clone, Debug)]
pub struct LabArgs {
    /// Speed of every port (at 1G the deadlock forms every time, even on a small VM).
    #[arg(long, default_value = "1G")]
    pub speed: Speed,
    /// Break the deadlock by dropping the stopped lossless queue on the detecting port.
    #[arg(long)]
    pub resolve: bool,
    /// Keep the ring running afterwards for `pfcswitch ctl`, until Ctrl-C.
    #[arg(long)]
    pub keep: bool,
    /// Do not block anything: the control experiment (the ring runs without deadlocking).
    #[arg(long)]
    pub no_block: bool,
    /// Frames per second each host sends.
    #[arg(long, default_value_t = RingOptions::default().rate)]
    pub rate: u64,
    /// Apply Tagger's tables for the ring's routes, computed on the spot (tags 1 and 2 on
    /// priorities 3 and 4): deadlock prevention.
    #[arg(long)]
    pub tagger: bool,
    /// Run the lab without and with Tagger's tables, --runs times each (alternating), and
    /// compare.
    #[arg(long, conflicts_with_all = ["tagger", "keep", "no_block"])]
    pub compare: bool,
    /// Attempts of each kind for --compare.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write the ring's testbed file and the lab's routes (what `tagger compute` takes) to
    /// this directory, print the commands that use them, and exit.
    #[arg(long)]
    pub export: Option<PathBuf>,
}

/// What one run of the lab showed. The JSON keys are stable.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LabRun {
    /// The switches applied Tagger's tables.
    pub tagger: bool,
    /// sw2's clockwise port was blocked for 500 ms (false for --no-block).
    pub blocked: bool,
    /// Deadlocks DCFIT detected, over the three switches.
    pub deadlocks: u64,
    /// The ring stood still at the end: every switch was paused on its clockwise port by
    /// the next one, with frames waiting there, after the senders had stopped.
    pub deadlock_formed: bool,
    /// Lossless frames sent that never arrived: stuck in a deadlock or dropped.
    pub lossless_lost: u64,
    /// Lossless frames the switches dropped (headroom exhausted).
    pub lossless_drops: u64,
    /// Frames the switches delivered to their hosts after the unblock.
    pub delivered_after_unblock: u64,
    /// Every host kept receiving until the senders stopped (1.5 s or more after the unblock).
    pub kept_flowing: bool,
    /// Frames whose tag each switch rewrote (Tagger).
    pub rewrites: BTreeMap<String, u64>,
    pub hosts: Vec<HostFigures>,
    pub switches: Vec<SwitchFigures>,
    /// The switches' `ctl deadlocks` entries.
    pub dcfit_events: Vec<DeadlockRecord>,
    /// The longest any switch's loop was kept from running during the run, ms.
    pub longest_stall_ms: f64,
    /// That stall was long enough for the traffic waiting meanwhile to fill a ring port's
    /// XOFF and headroom: lossless drops in this run show the machine, not the switch.
    pub machine_stalled: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostFigures {
    pub host: String,
    pub sent: u64,
    pub received: u64,
    /// Frames its own socket could not take (the host's rx ring was full).
    pub socket_dropped: u64,
    /// The last frame it received, ms after the unblock.
    pub last_after_unblock_ms: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwitchFigures {
    pub switch: String,
    pub ccw_pausing_upstream: bool,
    pub cw_paused_by_next: bool,
    pub stuck_at_cw: u64,
    /// Frames the kernel could not hand to the switch (its rx rings full), all ports.
    pub socket_drops: u64,
    /// Frames the switch dropped, all ports and reasons.
    pub drops: u64,
}

/// With and without the tables, side by side.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub without_tagger: Summary,
    pub with_tagger: Summary,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub attempts: usize,
    pub deadlocks_formed: usize,
    pub deadlocks: u64,
    pub lossless_lost: u64,
    pub delivered_after_unblock: u64,
    /// Runs in which a switch stalled past the ring's headroom budget.
    pub machine_stalled: usize,
    pub runs: Vec<LabRun>,
}

impl Summary {
    fn of(runs: Vec<LabRun>) -> Summary {
        Summary {
            attempts: runs.len(),
            deadlocks_formed: runs.iter().filter(|r| r.deadlock_formed).count(),
            deadlocks: runs.iter().map(|r| r.deadlocks).sum(),
            lossless_lost: runs.iter().map(|r| r.lossless_lost).sum(),
            delivered_after_unblock: runs.iter().map(|r| r.delivered_after_unblock).sum(),
            machine_stalled: runs.iter().filter(|r| r.machine_stalled).count(),
            runs,
        }
    }
}

/// How long the senders run, and how long after they start the block begins and lasts.
const TRAFFIC_S: f64 = 3.0;
const BLOCK_AFTER: Duration = Duration::from_millis(400);
const BLOCK_FOR: Duration = Duration::from_millis(500);
/// A host that received a frame this long after the unblock kept receiving to the end
/// (the senders go on for 2.1 s after it).
const FLOWING_AFTER: Duration = Duration::from_millis(1500);

pub fn run(args: &LabArgs) -> Result<()> {
    if let Some(dir) = &args.export {
        return export(dir);
    }
    if args.compare {
        return compare(args);
    }
    let lab = RingLab::start("lab", &options(args, args.tagger))?;
    let quiet = args.json;
    if !quiet {
        println!("ring: sw1 → sw2 → sw3 → sw1 (cw ports to the next switch's ccw), host h_i on sw_i's host port");
        let marking = match lab.tables.as_ref().and_then(|t| t.tables.first()) {
            Some(t) => format!(
                "Tagger's initial tag (DSCP {}, priority {})",
                t.initial_tag,
                t.priority_of(t.initial_tag).map_or("?".into(), |p| p.to_string())
            ),
            None => "lossless priority 3".into(),
        };
        println!("traffic: h1 → h3, h2 → h1, h3 → h2, {marking}, {} frames/s each, all clockwise", args.rate);
        if let Some(t) = &lab.tables {
            println!("Tagger tables computed for these routes in {}", t.dir.join("tables").display());
        }
    }
    let result = drive(&lab, !args.no_block, quiet);
    let figures = match result {
        Ok(f) => f,
        Err(e) => {
            stop(lab);
            return Err(e);
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&figures)?);
    } else {
        print_run(&figures);
    }
    if args.keep {
        keep(&lab)?;
    }
    stop(lab);
    Ok(())
}

fn options(args: &LabArgs, tagger: bool) -> RingOptions {
    let resolution = if args.resolve { DeadlockResolution::Drop } else { DeadlockResolution::Report };
    RingOptions {
        speed: args.speed,
        resolution,
        drop_ms: 100,
        refresh_us: Some(500),
        rate: args.rate,
        tagger,
        ..RingOptions::default()
    }
}

fn stop(lab: RingLab) {
    for sw in lab.switches {
        sw.stop();
    }
}

/// Sends, blocks (unless `block` is false), and gathers what happened.
pub fn drive(lab: &RingLab, block: bool, quiet: bool) -> Result<LabRun> {
    let say = |s: &str| {
        if !quiet {
            println!("{s}");
        }
    };
    let started = pfcswitch::sys::now().as_nanos();
    let gens = lab.traffic(TRAFFIC_S)?;
    std::thread::sleep(BLOCK_AFTER);
    let unblocked = if block {
        say("blocking sw2's cw port for 500 ms...");
        let t = lab.block_briefly(BLOCK_FOR)?;
        say("unblocked; the senders run on for 2 s");
        t
    } else {
        std::thread::sleep(BLOCK_FOR);
        say("(no block: the ring should keep flowing)");
        pfcswitch::sys::now().as_nanos()
    };
    let at_unblock = lab.switches.iter().map(|s| s.stats()).collect::<Result<Vec<_>>>()?;
    let reports: Vec<_> = gens.into_iter().map(|g| g.finish(Duration::from_secs(60))).collect::<Result<_>>()?;
    let at_end = lab.switches.iter().map(|s| s.stats()).collect::<Result<Vec<_>>>()?;

    let received: Vec<u64> = reports.iter().map(|r| r.received.iter().map(|f| f.received).sum()).collect();
    let hosts: Vec<HostFigures> = reports
        .iter()
        .enumerate()
        .map(|(i, r)| HostFigures {
            host: format!("h{}", i + 1),
            sent: r.sent,
            received: received[i],
            socket_dropped: r.socket_dropped,
            last_after_unblock_ms: r
                .received
                .iter()
                .map(|f| f.last_ns)
                .max()
                .filter(|&ns| ns > 0)
                .map(|ns| (ns as f64 - unblocked as f64) / 1e6),
        })
        .collect();
    let lossless_lost = (1..=3).map(|i| hosts[i - 1].sent.saturating_sub(received[RingLab::destination(i) - 1])).sum();
    let kept_flowing =
        hosts.iter().all(|h| h.last_after_unblock_ms.is_some_and(|ms| ms >= FLOWING_AFTER.as_secs_f64() * 1e3));
    let switches: Vec<SwitchFigures> = at_end.iter().map(ring_state).collect();
    let deadlock_formed = switches.iter().all(|s| s.cw_paused_by_next && s.stuck_at_cw > 0);
    let host_tx = |s: &Stats| s.ports.iter().find(|p| p.name == "host").map_or(0, |p| p.counters.tx_frames);
    let delivered_after_unblock =
        at_end.iter().zip(&at_unblock).map(|(e, u)| host_tx(e).saturating_sub(host_tx(u))).sum();
    let mut dcfit_events = Vec::new();
    for report in lab.deadlocks()? {
        dcfit_events.extend(report.deadlocks);
    }
    let stall = lab.longest_stall_since(started)?.map_or(Duration::ZERO, |(_, s)| Duration::from_micros(s.us));
    Ok(LabRun {
        longest_stall_ms: stall.as_secs_f64() * 1e3,
        machine_stalled: stall >= lab.headroom_budget(),
        tagger: lab.tables.is_some(),
        blocked: block,
        deadlocks: at_end.iter().map(|s| s.deadlocks_detected).sum(),
        deadlock_formed,
        lossless_lost,
        lossless_drops: at_end.iter().flat_map(|s| &s.ports).map(|p| p.counters.drops.lossless).sum(),
        delivered_after_unblock,
        kept_flowing,
        rewrites: lab
            .switches
            .iter()
            .zip(&at_end)
            .map(|(sw, s)| (sw.name.clone(), s.tagger.as_ref().map_or(0, |t| t.totals().rewritten)))
            .collect(),
        hosts,
        switches,
        dcfit_events,
    })
}

/// Whether a ring switch pauses its upstream, is paused by the next switch, and what waits.
fn ring_state(s: &Stats) -> SwitchFigures {
    let port = |n: &str| s.ports.iter().find(|p| p.name == n).cloned().unwrap_or_default();
    let (ccw, cw) = (port("ccw"), port("cw"));
    let lossless = |p: &pfcswitch::core::stats::PrioStats| p.lossless;
    SwitchFigures {
        switch: s.name.clone(),
        ccw_pausing_upstream: ccw.priorities.iter().filter(|q| lossless(q)).any(|q| q.xoff),
        cw_paused_by_next: cw.priorities.iter().filter(|q| lossless(q)).any(|q| q.egress_paused),
        stuck_at_cw: cw.queues_total() + cw.held_by_slowpath,
        socket_drops: s.ports.iter().map(|p| p.socket.rx_lost()).sum(),
        drops: s.ports.iter().map(|p| p.counters.drops.total()).sum(),
    }
}

fn print_run(r: &LabRun) {
    let when = if r.blocked { "last one, ms after the unblock" } else { "last one, ms after 0.9 s in" };
    let mut t = Table::new(&["host", "frames sent", "frames received", when]);
    for h in &r.hosts {
        let last = h.last_after_unblock_ms.map_or("-".to_string(), |ms| format!("{ms:+.1}"));
        t.row(vec![h.host.clone(), h.sent.to_string(), h.received.to_string(), last]);
    }
    print!("{}", t.render());
    match (r.blocked, r.kept_flowing) {
        (false, _) => println!("(the control: frames kept arriving until the senders stopped)"),
        (true, true) => println!("(no deadlock: frames kept arriving after the unblock until the senders stopped)"),
        (true, false) => {
            println!("(a deadlock: nothing arrives after the unblock although the senders keep trying for 2 s)")
        }
    }
    let mut ports = Table::new(&[
        "switch",
        "ccw pausing upstream",
        "cw paused by next",
        "frames stuck at cw",
        "dropped",
        "rx ring overflow",
    ]);
    for s in &r.switches {
        ports.row(vec![
            s.switch.clone(),
            s.ccw_pausing_upstream.to_string(),
            s.cw_paused_by_next.to_string(),
            s.stuck_at_cw.to_string(),
            s.drops.to_string(),
            s.socket_drops.to_string(),
        ]);
    }
    print!("\n{}", ports.render());
    println!("\nDCFIT:");
    for d in &r.dcfit_events {
        println!(
            "  {}: deadlock #{} — its message left through {} and came back on {} after {} pauses; \
             confirmed {} more times; resolved: {}",
            d.switch,
            d.event.id,
            d.origin_port_name,
            d.return_port_name,
            d.event.path_length,
            d.event.confirmations,
            d.event.resolved
        );
    }
    if r.dcfit_events.is_empty() {
        println!("  no deadlock detected");
    }
    let rewrites: Vec<String> = r.rewrites.iter().map(|(s, n)| format!("{s} {n}")).collect();
    println!(
        "\n{}: deadlocks detected {}; deadlock formed: {}; lossless frames lost {} (dropped {}); \
         delivered after the unblock {}; kept flowing: {}{}",
        if r.tagger { "with Tagger's tables" } else { "without tables" },
        r.deadlocks,
        if r.deadlock_formed { "yes" } else { "no" },
        r.lossless_lost,
        r.lossless_drops,
        r.delivered_after_unblock,
        if r.kept_flowing { "yes" } else { "no" },
        if r.tagger { format!("; rewrites: {}", rewrites.join(", ")) } else { String::new() }
    );
    println!(
        "longest stall of a switch's loop: {:.1} ms{}",
        r.longest_stall_ms,
        if r.machine_stalled {
            " (long enough to overflow a ring port's headroom: the machine, not the switch)"
        } else {
            ""
        }
    );
}

fn keep(lab: &RingLab) -> Result<()> {
    println!("\nthe ring keeps running; for example:");
    for sw in &lab.switches {
        println!("  pfcswitch ctl --socket {} deadlocks", sw.socket.display());
    }
    println!("  pfcswitch ctl --socket {} traffic-map", lab.switches[1].socket.display());
    println!("Ctrl-C tears it down.");
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// `--compare`: alternating runs without and with the tables.
fn compare(args: &LabArgs) -> Result<()> {
    let (mut without, mut with) = (Vec::new(), Vec::new());
    let bar = pfctestkit::progress::Progress::new(2 * args.runs as u64, "runs", args.json);
    for k in 0..args.runs {
        for tagger in [false, true] {
            let what = format!("run {} of {}, {}", k + 1, args.runs, if tagger { "with tables" } else { "without" });
            bar.message(what);
            let lab = RingLab::start("lab", &options(args, tagger))?;
            let run = drive(&lab, true, true);
            stop(lab);
            bar.inc(1);
            let run = run?;
            if tagger {
                with.push(run)
            } else {
                without.push(run)
            }
        }
    }
    let c = Comparison { without_tagger: Summary::of(without), with_tagger: Summary::of(with) };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&c)?);
        return Ok(());
    }
    print!("{}", comparison_table(&c));
    Ok(())
}

pub fn comparison_table(c: &Comparison) -> String {
    let mut t = Table::new(&[
        "ring",
        "attempts",
        "deadlocks formed",
        "DCFIT detections",
        "lossless frames lost",
        "frames delivered after the unblock",
        "runs the machine stalled",
    ]);
    for (name, s) in [("without tables", &c.without_tagger), ("with Tagger's tables", &c.with_tagger)] {
        t.row(vec![
            name.to_string(),
            s.attempts.to_string(),
            s.deadlocks_formed.to_string(),
            s.deadlocks.to_string(),
            s.lossless_lost.to_string(),
            s.delivered_after_unblock.to_string(),
            s.machine_stalled.to_string(),
        ]);
    }
    t.render()
}

/// `--export DIR`: the lab's testbed and routes as files, and the commands that use them.
fn export(dir: &std::path::Path) -> Result<()> {
    let routes = tagging::routes_file(&ring_routes(3));
    let (topo, route) = tagging::export(&Topology::ring(3), &routes, dir)?;
    let prios: Vec<String> = TAGGER_PRIORITIES.iter().map(u8::to_string).collect();
    println!("wrote {} and {}", topo.display(), route.display());
    println!(
        "  tagger compute --topology {} --routes file:{} --priorities {} --out {}",
        topo.display(),
        route.display(),
        prios.join(","),
        dir.join("tables").display()
    );
    println!("  pfctools testbed up {} --name ring", topo.display());
    println!(
        "  # then in each switch's namespace: pfcswitch run --config {}/swN.toml, whose [tagger] table = \"tables/swN.toml\"",
        dir.display()
    );
    println!("  # (a relative table path is read from the config file's directory)");
    Ok(())
}
