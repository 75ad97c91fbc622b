//! `pfctools sim`: pfcswitch's engine on a simulated fabric.
//!
//! Every switch is a [`pfcswitch_core::switch::Switch`] with its
//! [`pfcswitch_core::slowpath::Slowpath`] — the code `pfcswitch run` forwards real frames
//! with — on links that serialize at their rate and delay by their length; hosts send
//! paced, stamped flows and answer pauses like test equipment. Time is simulated and
//! the run is deterministic: a scenario and a seed give the same output, byte for byte.

pub mod agreement;
pub mod alloc;
pub mod bench;
pub mod engine;
pub use engine::SimPortStats;
pub mod fabric;
pub mod ids;
pub mod monitor;
pub mod scenario;
pub mod split;
pub mod sweep;
pub mod trace;
pub mod workload;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use pfcswitch_core::histogram::Percentiles;
use pfcswitch_core::slowpath::DeadlockRecord;
use pfcswitch_core::stats::SwitchStats;
use pfcswitch_core::time::Time;
use pfcswitch_core::Priority;
use pfcswitch_table::Table;

use engine::{Gathered, RunCounts, Sim};
use fabric::{Fabric, Owner};
use scenario::{Scenario, BUILT_IN};
use trace::{PauseTimeline, Trace};

#[derive(Args, Debug, Clone)]
pub struct SimArgs {
    /// A scenario file (TOML).
    #[arg(conflicts_with_all = ["scenario", "list"])]
    pub file: Option<PathBuf>,
    /// A built-in scenario (see --list).
    #[arg(long)]
    pub scenario: Option<String>,
    /// List the built-in scenarios.
    #[arg(long)]
    pub list: bool,
    /// Print the scenario file of a built-in scenario (a start for your own).
    #[arg(long, requires = "scenario")]
    pub show: bool,
    /// Seeds what the scenario leaves to chance (which host sends to which under `to = "*"`).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write every link's frames, one pcap file per direction, into this directory.
    #[arg(long)]
    pub pcap: Option<PathBuf>,
    /// Draw the pause timeline of every port (SVG); with a workload, also FCT slowdown by
    /// flow size (`NAME-fct.svg`), and with a `[monitor]`, its queues and rates over time
    /// (`NAME-series.svg`).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Write every sized flow's completion to this CSV file, a row per flow: src, dst,
    /// size_bytes, start_us, fct_us, ideal_fct_us, slowdown (empty where the flow did not
    /// complete), as pandas' `read_csv` takes it.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Run without the scenario's `[dcqcn]` table: PFC alone, the senders open loop (the
    /// same flows, to compare).
    #[arg(long)]
    pub no_dcqcn: bool,
    /// Every workload's load, percent of the senders' links (instead of the scenario's).
    #[arg(long)]
    pub load: Option<f64>,
    /// Split the fabric over this many ranks, threads of this process, each running its
    /// part (a fat-tree's pods whole, hosts with their switch): the same report and
    /// captures as one rank, sooner on several cores where the lookahead allows.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub ranks: u16,
    /// Run as one rank of an MPI job (`mpirun -np N pfcsim --mpi ...`): the fabric split
    /// over the job's ranks, rank 0 printing the report. Needs a build with `--features mpi`.
    #[arg(long, conflicts_with = "ranks")]
    pub mpi: bool,
}

/// One flow's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct FlowReport {
    pub id: u16,
    pub from: String,
    pub to: String,
    pub priority: Priority,
    pub lossless: bool,
    /// Frames sent, each counted once.
    pub sent: u64,
    /// Frames sent again after its receiver asked for an earlier one (go-back-N).
    #[serde(skip_serializing_if = "is_zero")]
    pub sent_again: u64,
    pub received: u64,
    pub lost: u64,
    /// Frames that arrived before one sent earlier: taken, or under go-back-N dropped.
    pub reordered: u64,
    pub latency: Percentiles,
    /// Frames that arrived marked Congestion Experienced.
    #[serde(skip_serializing_if = "is_zero")]
    pub ce: u64,
    /// A workload's flow: its size, bytes of UDP payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// A workload's flow: when it started, µs into the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_us: Option<f64>,
    /// A flow with a count that arrived whole: from its start to its last frame's last
    /// bit at the receiver, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fct_us: Option<f64>,
    /// The same alone on an empty fabric, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ideal_fct_us: Option<f64>,
    /// `fct_us` over `ideal_fct_us`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<f64>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One direction of a link.
#[derive(Clone, Debug, Serialize)]
pub struct LinkReport {
    pub from: String,
    pub to: String,
    pub frames: u64,
    pub bytes: u64,
    pub pause_frames: u64,
    pub lost_link_down: u64,
    /// Per priority: how long the receiving end (`to`) kept `from` paused, µs.
    pub paused_us: [f64; 8],
}

#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    pub scenario: String,
    pub seed: u64,
    pub simulated_ms: f64,
    pub events: u64,
    pub frame_hops: u64,
    /// Deadlocks DCFIT detected, over all switches.
    pub deadlocks: u64,
    /// Lossless frames were still in the fabric at the end, after the senders stopped
    /// and the drain time passed: a deadlock held them (the ground truth, as the
    /// simulator sees every queue).
    pub deadlock_formed: bool,
    pub stuck_lossless_frames: u64,
    /// Lossless flows' frames sent and never received.
    pub lossless_lost: u64,
    /// Lossless frames switches dropped (headroom exhausted, or a deadlock broken).
    pub lossless_dropped: u64,
    pub lossy_dropped: u64,
    pub flows: Vec<FlowReport>,
    /// The workloads' flows' completion times by size (none without a workload).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fct: Option<workload::FctSummary>,
    /// What `[monitor]` sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<monitor::Series>,
    pub deadlock_events: Vec<DeadlockRecord>,
    pub links: Vec<LinkReport>,
    /// Per switch, the engine's snapshot (what `pfcswitch ctl stats` shows of it) with
    /// what the simulator knows of its frame pool.
    pub switches: Vec<SimSwitchStats>,
}

/// A switch in the report: the engine's snapshot, each port with what the simulator
/// knows of it, and the switch's frame pool.
#[derive(Clone, Debug, Serialize)]
pub struct SimSwitchStats {
    /// The engine's snapshot.
    #[serde(flatten)]
    pub switch: SwitchStats<SimPortStats>,
    /// Frames free in the switch's pool at the end.
    pub free_frames: u64,
}

/// Reads as the engine's snapshot for everything but the pool.
impl std::ops::Deref for SimSwitchStats {
    type Target = SwitchStats<SimPortStats>;

    fn deref(&self) -> &SwitchStats<SimPortStats> {
        &self.switch
    }
}

/// A finished run: the report and what the picture and the benchmark need.
pub struct Outcome {
    pub report: SimReport,
    pub counts: RunCounts,
    pub timelines: Vec<(String, PauseTimeline)>,
    /// Under a split: what each rank did (empty on one rank).
    pub ranks: Vec<split::RankStats>,
}

/// Runs `scenario` with `seed`; captures into `pcap` if given.
pub fn simulate(scenario: &Scenario, seed: u64, pcap: Option<&Path>) -> Result<Outcome> {
    Ok(simulate_recording(scenario, seed, pcap, &[])?.0)
}

/// [`simulate`], telling `progress` how far the run has come (its part of the simulated
/// time) as it goes.
pub fn simulate_with_progress(
    scenario: &Scenario,
    seed: u64,
    pcap: Option<&Path>,
    progress: &mut dyn FnMut(f64),
) -> Result<Outcome> {
    Ok(run_scenario(scenario, seed, pcap, &[], progress)?.0)
}

/// Runs the scenario recording its [`engine::Schedule`] (nothing else is kept).
pub fn record_schedule(scenario: &Scenario, seed: u64) -> Result<engine::Schedule> {
    let fabric = Fabric::build(scenario, seed)?;
    let mut sim = Sim::new(scenario, &fabric, Trace::new(fabric.ports.len(), None))?;
    sim.record_schedule();
    sim.run_until(scenario.run_time());
    Ok(sim.take_schedule().expect("recording"))
}

/// [`simulate`], keeping in memory every frame the ports labelled `record` send
/// ("switch:port", or a host's name).
pub fn simulate_recording(
    scenario: &Scenario,
    seed: u64,
    pcap: Option<&Path>,
    record: &[&str],
) -> Result<(Outcome, Vec<trace::Sent>)> {
    run_scenario(scenario, seed, pcap, record, &mut |_| {})
}

/// How many steps a run reports its progress in. The run stops at each step's end and
/// goes on: nothing happens between two events, so the steps change nothing in it.
const PROGRESS_STEPS: u32 = 200;

fn run_scenario(
    scenario: &Scenario,
    seed: u64,
    pcap: Option<&Path>,
    record: &[&str],
    progress: &mut dyn FnMut(f64),
) -> Result<(Outcome, Vec<trace::Sent>)> {
    let fabric = Fabric::build(scenario, seed)?;
    let mut trace = Trace::new(fabric.ports.len(), pcap);
    for label in record {
        let port = fabric.port_named(label).with_context(|| format!("no port {label:?} to record"))?;
        trace.record(port);
    }
    trace.open_captures(&capture_names(&fabric))?;
    let mut sim = Sim::new(scenario, &fabric, trace)?;
    let total = scenario.run_time();
    for step in 1..=PROGRESS_STEPS {
        sim.run_until(total * step / PROGRESS_STEPS);
        progress(f64::from(step) / f64::from(PROGRESS_STEPS));
    }
    sim.trace.finish()?;
    let mut gathered = sim.gather();
    let sent = std::mem::take(&mut gathered.recorded);
    Ok((report(scenario, seed, &fabric, gathered, total), sent))
}

/// [`simulate_recording`] with the fabric split over `ranks` threads of this process,
/// each running its part of the fabric ([`split`]): the same report and captures.
pub fn simulate_split(
    scenario: &Scenario,
    seed: u64,
    pcap: Option<&Path>,
    record: &[&str],
    ranks: usize,
) -> Result<(Outcome, Vec<trace::Sent>)> {
    let fabric = Fabric::build(scenario, seed)?;
    let partition = split::Partition::new(&fabric, ranks);
    let rank_of = std::sync::Arc::new(partition.by_key_node());
    let endpoints = split::Threads::new(partition.ranks);
    let parts: Vec<Gathered> = std::thread::scope(|scope| {
        let handles: Vec<_> = endpoints
            .into_iter()
            .map(|mut ex| {
                let (fabric, partition, rank_of) = (&fabric, &partition, rank_of.clone());
                scope.spawn(move || run_rank(scenario, fabric, partition, rank_of, pcap, record, &mut ex))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow::anyhow!("a rank panicked"))?)
            .collect::<Result<Vec<Gathered>>>()
    })?;
    // Each part travels as it would between the ranks of an MPI job.
    let parts = parts.iter().map(|p| Gathered::from_bytes(&p.to_bytes())).collect::<Result<Vec<_>>>()?;
    let mut gathered = Gathered::merge(parts, &fabric, &rank_of);
    let sent = std::mem::take(&mut gathered.recorded);
    Ok((report(scenario, seed, &fabric, gathered, scenario.run_time()), sent))
}

/// [`simulate`] as one rank of an MPI job (`mpirun -np N`): every rank runs its part,
/// rank 0 gathers them and returns the report; the others return `None`.
#[cfg(feature = "mpi")]
pub fn simulate_mpi(
    scenario: &Scenario,
    seed: u64,
    pcap: Option<&Path>,
    mpi: &mut split::mpi::Mpi,
) -> Result<Option<Outcome>> {
    use split::Exchange;
    let fabric = Fabric::build(scenario, seed)?;
    let partition = split::Partition::new(&fabric, mpi.ranks());
    if mpi.rank() == 0 {
        eprintln!("{}", partition.describe(&fabric));
    }
    let rank_of = std::sync::Arc::new(partition.by_key_node());
    let part = run_rank(scenario, &fabric, &partition, rank_of.clone(), pcap, &[], mpi)?;
    let Some(parts) = mpi.gather(&part.to_bytes()) else { return Ok(None) };
    let parts = parts.iter().map(|p| Gathered::from_bytes(p)).collect::<Result<Vec<_>>>()?;
    let gathered = Gathered::merge(parts, &fabric, &rank_of);
    Ok(Some(report(scenario, seed, &fabric, gathered, scenario.run_time())))
}

/// One rank's part of a split run, meeting the others through `ex` at each window's end.
fn run_rank(
    scenario: &Scenario,
    fabric: &Fabric,
    partition: &split::Partition,
    rank_of: std::sync::Arc<Vec<u16>>,
    pcap: Option<&Path>,
    record: &[&str],
    ex: &mut dyn split::Exchange,
) -> Result<Gathered> {
    let started = Instant::now();
    let rank = ex.rank();
    let mut trace = Trace::new(fabric.ports.len(), pcap);
    for label in record {
        let port = fabric.port_named(label).with_context(|| format!("no port {label:?} to record"))?;
        trace.record(port);
    }
    trace.open_captures_of(&capture_names(fabric), |p| partition.port_rank(fabric, p) == rank)?;
    let mut sim = Sim::new(scenario, fabric, trace)?;
    sim.set_split(split::Split::shared(rank, rank_of, partition.ranks));
    let end = sim.now() + scenario.run_time();
    let windows = split::Windows::new(end, partition.lookahead(fabric));
    // Every rank starts at the start (each has its own first event; they must agree).
    let mut from = Some(sim.now().as_nanos());
    let (mut count, mut exchanging) = (0u64, Duration::ZERO);
    while let Some(start) = from {
        let last = windows.last(start);
        sim.run_to(Time::from_nanos(last));
        let out = sim.seal_posted();
        let mut earliest = u64::MAX;
        let met = Instant::now();
        let got = ex.all_to_all(out);
        exchanging += met.elapsed();
        count += 1;
        for bytes in &got {
            let (their_next, frames) = split::unstamp(bytes);
            earliest = earliest.min(their_next);
            sim.accept(frames);
        }
        sim.recycle_posted(got);
        from = windows.next(last, earliest);
    }
    sim.run_to(end);
    sim.trace.finish()?;
    let (events, frames_posted) = (sim.counts.events, sim.frames_posted());
    let mut part = sim.gather();
    part.ranks.push(split::RankStats {
        rank,
        switches: partition.switch_rank.iter().filter(|&&r| usize::from(r) == rank).count(),
        hosts: partition.host_rank.iter().filter(|&&r| usize::from(r) == rank).count(),
        events,
        frames_posted,
        windows: count,
        exchange_s: exchanging.as_secs_f64(),
        wall_s: started.elapsed().as_secs_f64(),
        peak_rss_mib: alloc::peak_rss_mib(),
    });
    Ok(part)
}

/// Each link direction's capture file.
fn capture_names(fabric: &Fabric) -> Vec<String> {
    (0..fabric.ports.len())
        .map(|p| {
            format!("{}-to-{}.pcapng", fabric.ports[p].label, fabric.ports[fabric.ports[p].peer].label)
                .replace(':', "_")
        })
        .collect()
}

/// The run's report, made of its gathered parts: taken, not copied (a k=16 fat-tree's
/// switches report 15 MiB of counters).
fn report(scenario: &Scenario, seed: u64, fabric: &Fabric, mut g: Gathered, total: Duration) -> Outcome {
    fn part(what: &str, i: usize) -> ! {
        panic!("no rank gave {what} {i}: every part of a run has a rank")
    }
    let mut switches = Vec::new();
    let mut deadlock_events: Vec<DeadlockRecord> = Vec::new();
    let mut stuck = 0;
    let (mut lossless_dropped, mut lossy_dropped) = (0, 0);
    for (i, gs) in std::mem::take(&mut g.switches).into_iter().enumerate() {
        let Some(gs) = gs else { part("switch", i) };
        deadlock_events.extend(gs.deadlocks);
        let s = SimSwitchStats { switch: gs.stats, free_frames: gs.free_frames };
        for p in s.switch.ports.iter().map(|p| &p.engine) {
            stuck += p.held_by_slowpath;
            for q in p.priorities.iter().filter(|q| q.lossless) {
                stuck += u64::from(q.egress_queue_frames);
            }
            lossless_dropped += p.counters.drops.lossless + p.counters.drops.watchdog;
            lossy_dropped += p.counters.drops.lossy;
        }
        switches.push(s);
    }
    let mut flows = Vec::new();
    let mut sized = Vec::new();
    let mut lossless_lost = 0;
    for (i, f) in fabric.flows.iter().enumerate() {
        let first = fabric.ports[fabric.hosts[f.from].port].peer;
        let Owner::Switch(sw, local) = fabric.ports[first].owner else { unreachable!("hosts attach to switches") };
        let s = &fabric.switches[sw];
        let dscp = fabric.dscp_of(f);
        let lossless = match &s.tags {
            Some(t) => t.ingress(local, dscp).is_some(),
            None => s.config.lossless_priorities().contains(&s.config.classify.dscp_table()[usize::from(dscp & 63)]),
        };
        let Some(rx) = &g.received[i] else { part("flow received", i) };
        let Some(sent) = g.sent[i] else { part("flow sent", i) };
        let lost = sent.frames.saturating_sub(rx.frames);
        if lossless {
            lossless_lost += lost;
        }
        let start_ns = f.start.as_nanos() as u64;
        let fct = workload::FlowFct {
            bytes: f.bytes.unwrap_or(0),
            fct_ns: rx.completed_ns.map(|done| done.saturating_sub(start_ns)),
            ideal_ns: f.ideal.map(|d| d.as_nanos() as u64),
        };
        if f.bytes.is_some() {
            sized.push(fct);
        }
        flows.push(FlowReport {
            id: f.id,
            from: fabric.hosts[f.from].name.clone(),
            to: fabric.hosts[f.to].name.clone(),
            priority: f.priority,
            lossless,
            sent: sent.frames,
            sent_again: sent.again,
            received: rx.frames,
            lost,
            reordered: rx.reordered,
            latency: rx.latency.percentiles(),
            ce: rx.ce,
            bytes: f.bytes,
            start_us: f.bytes.map(|_| f.start.as_nanos() as f64 / 1e3),
            fct_us: fct.fct_ns.map(|n| n as f64 / 1e3),
            ideal_fct_us: fct.ideal_ns.map(|n| n as f64 / 1e3),
            slowdown: fct.slowdown(),
        });
    }
    let until = total.as_nanos() as u64;
    let links = (0..fabric.ports.len())
        .map(|p| {
            let [frames, bytes, pause_frames, lost_link_down] = g.links[p];
            // The pauses `from` obeyed are the ones its own port received.
            let Some(tl) = &g.timelines[p] else { part("port timeline", p) };
            let mut paused_us = [0.0; 8];
            for (prio, v) in Priority::all().zip(paused_us.iter_mut()) {
                *v = tl.paused_ns(prio, until) as f64 / 1e3;
            }
            LinkReport {
                from: fabric.ports[p].label.clone(),
                to: fabric.ports[fabric.ports[p].peer].label.clone(),
                frames,
                bytes,
                pause_frames,
                lost_link_down,
                paused_us,
            }
        })
        .collect();
    let timelines = std::mem::take(&mut g.timelines)
        .into_iter()
        .enumerate()
        .map(|(p, tl)| (fabric.ports[p].label.clone(), tl.unwrap_or_default()))
        .collect();
    Outcome {
        report: SimReport {
            scenario: scenario.name.clone(),
            seed,
            simulated_ms: total.as_secs_f64() * 1e3,
            events: g.counts.events,
            frame_hops: g.counts.frame_hops,
            deadlocks: switches.iter().map(|s| s.switch.deadlocks_detected).sum(),
            deadlock_formed: stuck > 0,
            stuck_lossless_frames: stuck,
            lossless_lost,
            lossless_dropped,
            lossy_dropped,
            flows,
            fct: workload::summarise(&sized),
            series: g.monitor.as_ref().map(|m| m.series(|i| fabric.flows[i].id, scenario.dcqcn.is_some())),
            deadlock_events,
            links,
            switches,
        },
        counts: g.counts,
        timelines,
        ranks: g.ranks,
    }
}

fn load(args: &SimArgs) -> Result<Scenario> {
    let mut s = match (&args.file, &args.scenario) {
        (Some(path), _) => Scenario::read(path)?,
        (None, Some(name)) => Scenario::built_in(name)?,
        (None, None) => anyhow::bail!("give a scenario file or --scenario NAME (--list names them)"),
    };
    // The report names the run as it was asked for.
    if let Some(load) = args.load {
        anyhow::ensure!(!s.workload.is_empty(), "--load sets a workload's load, and {} has none", s.name);
        s = s.with_workload_load(load)?;
        s.name = format!("{} --load {load}", s.name);
    }
    if args.no_dcqcn {
        s.dcqcn = None;
        s.name = format!("{} --no-dcqcn", s.name);
    }
    Ok(s)
}

pub fn run(args: &SimArgs) -> Result<()> {
    if args.list {
        for (name, what, _) in BUILT_IN {
            println!("{name:<22} {what}");
        }
        return Ok(());
    }
    if args.show {
        let name = args.scenario.as_deref().unwrap_or_default();
        let (_, _, text) =
            BUILT_IN.iter().find(|(n, _, _)| *n == name).with_context(|| format!("no built-in scenario {name:?}"))?;
        print!("{text}");
        return Ok(());
    }
    let scenario = load(args)?;
    let started = Instant::now();
    let total_us = ((scenario.duration_ms + scenario.drain_ms) * 1e3) as u64;
    let bar = pfctestkit::progress::Progress::new(total_us, "µs simulated", args.json);
    bar.message(scenario.name.clone());
    // `mpirun -np N pfcsim ...` without `--mpi` ran N whole copies, each printing its
    // report: a process the launcher started as one of several ranks joins the job.
    let launched = launched_ranks();
    if args.mpi || launched.is_some_and(|(n, _)| n > 1) {
        if let (false, Some((n, var))) = (args.mpi, launched) {
            eprintln!("launched as one of {n} ranks ({var}): joining the MPI job, as with --mpi");
        }
        drop(bar);
        return run_mpi(args, &scenario, started);
    }
    let outcome = if args.ranks > 1 {
        let fabric = Fabric::build(&scenario, args.seed)?;
        let partition = split::Partition::new(&fabric, usize::from(args.ranks));
        eprintln!("{}", partition.describe(&fabric));
        drop(fabric);
        simulate_split(&scenario, args.seed, args.pcap.as_deref(), &[], usize::from(args.ranks))?.0
    } else {
        simulate_with_progress(&scenario, args.seed, args.pcap.as_deref(), &mut |done| {
            bar.set((done * total_us as f64) as u64);
        })?
    };
    drop(bar);
    present(args, &scenario, &outcome, started)
}

/// How many ranks an MPI launcher started this process among, and the variable that
/// says so (Open MPI's, MPICH's and PMIx's), if one did.
fn launched_ranks() -> Option<(usize, &'static str)> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"]
        .into_iter()
        .find_map(|var| Some((std::env::var(var).ok()?.parse().ok()?, var)))
}

/// `--mpi`: this process's rank of the job; rank 0 presents the report.
#[cfg(feature = "mpi")]
fn run_mpi(args: &SimArgs, scenario: &Scenario, started: Instant) -> Result<()> {
    let mut mpi = split::mpi::Mpi::init().context("MPI was initialised already")?;
    match simulate_mpi(scenario, args.seed, args.pcap.as_deref(), &mut mpi)? {
        Some(outcome) => present(args, scenario, &outcome, started),
        None => Ok(()),
    }
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &SimArgs, _: &Scenario, _: Instant) -> Result<()> {
    anyhow::bail!(
        "an MPI job (--mpi, or a launch by mpirun) needs pfcsim built with MPI: cargo build --release -p pfcsim \
         --features mpi; without it every rank would run the whole simulation"
    )
}

/// The sized flows' completions as CSV, a row per flow in the report's order.
pub fn fct_csv(flows: &[FlowReport]) -> String {
    let mut out = String::from("src,dst,size_bytes,start_us,fct_us,ideal_fct_us,slowdown\n");
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v}"));
    for f in flows {
        let Some(bytes) = f.bytes else { continue };
        out.push_str(&format!(
            "{},{},{bytes},{},{},{},{}\n",
            f.from,
            f.to,
            opt(f.start_us),
            opt(f.fct_us),
            opt(f.ideal_fct_us),
            opt(f.slowdown)
        ));
    }
    out
}

/// What a run prints: its counts and wall time on stderr, plots, the report.
fn present(args: &SimArgs, scenario: &Scenario, outcome: &Outcome, started: Instant) -> Result<()> {
    let wall = started.elapsed().as_secs_f64();
    // Wall time stays out of the report: the report is the same on every run.
    eprintln!(
        "simulated {:.1} ms in {wall:.2} s: {} events ({:.2} M/s), {} frame hops",
        outcome.report.simulated_ms,
        outcome.counts.events,
        outcome.counts.events as f64 / wall.max(1e-9) / 1e6,
        outcome.counts.frame_hops
    );
    if let Some(path) = &args.plot {
        plot::timeline(path, &scenario.name, &outcome.timelines, outcome.report.simulated_ms)?;
        eprintln!("pause timeline: {}", path.display());
        if let Some(fct) = &outcome.report.fct {
            let p = plot::beside(path, "fct");
            plot::fct(&p, &scenario.name, fct)?;
            eprintln!("FCT slowdown by flow size: {}", p.display());
        }
        if let Some(series) = &outcome.report.series {
            let p = plot::beside(path, "series");
            plot::series(&p, &scenario.name, series)?;
            eprintln!("queues and rates over time: {}", p.display());
        }
    }
    if let Some(path) = &args.csv {
        std::fs::write(path, fct_csv(&outcome.report.flows)).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("flow completions: {}", path.display());
    }
    if args.json {
        pfcswitch_table::to_stdout(|out| {
            serde_json::to_writer_pretty(&mut *out, &outcome.report)?;
            writeln!(out)
        })?;
    } else {
        print!("{}", text(&outcome.report));
    }
    Ok(())
}

/// The report for people.
pub fn text(r: &SimReport) -> String {
    let mut out = format!(
        "{} (seed {}): {:.1} ms simulated, {} events, {} frame hops\n\n",
        r.scenario, r.seed, r.simulated_ms, r.events, r.frame_hops
    );
    // A flow with a count finishes: its completion time is the figure to read.
    let sized = r.flows.iter().any(|f| f.fct_us.is_some());
    // Frames sent again only under go-back-N: the column then.
    let again = r.flows.iter().any(|f| f.sent_again > 0);
    let mut head = vec!["flow", "prio", "lossless", "sent", "received", "lost", "reordered", "p50 µs", "p99 µs"];
    if again {
        head.insert(4, "sent again");
    }
    if sized {
        head.push("FCT µs");
    }
    let mut flows = Table::new(&head);
    for f in &r.flows {
        let mut row = vec![
            format!("{} {}→{}", f.id, f.from, f.to),
            f.priority.to_string(),
            if f.lossless { "yes".into() } else { "no".into() },
            f.sent.to_string(),
            f.received.to_string(),
            f.lost.to_string(),
            f.reordered.to_string(),
            format!("{:.1}", f.latency.p50_us),
            format!("{:.1}", f.latency.p99_us),
        ];
        if again {
            row.insert(4, f.sent_again.to_string());
        }
        if sized {
            row.push(f.fct_us.map_or("-".into(), |t| format!("{t:.1}")));
        }
        flows.row(row);
    }
    if r.flows.len() <= 64 {
        out += &flows.render();
    } else {
        let sent: u64 = r.flows.iter().map(|f| f.sent).sum();
        let received: u64 = r.flows.iter().map(|f| f.received).sum();
        out += &format!("{} flows: {sent} frames sent, {received} received", r.flows.len());
        if again {
            let resent: u64 = r.flows.iter().map(|f| f.sent_again).sum();
            let reordered: u64 = r.flows.iter().map(|f| f.reordered).sum();
            out += &format!(" ({reordered} out of order, {resent} sent again)");
        }
        out += "\n";
    }
    if let Some(fct) = &r.fct {
        out += &format!(
            "\nflow completion: {} of {} sized flows completed; slowdown = FCT over the FCT alone on an empty fabric\n",
            fct.completed, fct.flows
        );
        let mut t = Table::new(&["flow size", "flows", "completed", "mean FCT µs", "p50", "p95", "p99"]);
        for b in fct.buckets.iter().chain([&fct.all]) {
            t.row(vec![
                b.sizes.clone(),
                b.flows.to_string(),
                b.completed.to_string(),
                format!("{:.1}", b.mean_fct_us),
                format!("{:.2}", b.slowdown_p50),
                format!("{:.2}", b.slowdown_p95),
                format!("{:.2}", b.slowdown_p99),
            ]);
        }
        out += &t.render();
    }
    let mut paused = Table::new(&["paused port", "by", "pause frames", "paused µs (per priority)"]);
    for l in r.links.iter().filter(|l| l.paused_us.iter().any(|&v| v > 0.0)) {
        let per: Vec<String> =
            l.paused_us.iter().enumerate().filter(|(_, &v)| v > 0.0).map(|(p, v)| format!("{p}: {v:.1}")).collect();
        let by = r.links.iter().find(|b| b.from == l.to && b.to == l.from);
        paused.row(vec![l.from.clone(), l.to.clone(), by.map_or(0, |b| b.pause_frames).to_string(), per.join(", ")]);
    }
    if !paused.is_empty() {
        out += "\n";
        out += &paused.render();
    }
    out += "\nDCFIT:\n";
    for d in &r.deadlock_events {
        out += &format!(
            "  {}: deadlock at {:.3} ms — its message left through {} and came back on {} after {} pauses; \
             confirmed {} more times; resolved: {}\n",
            d.switch,
            (d.event.detected_ns.saturating_sub(engine::EPOCH.as_nanos())) as f64 / 1e6,
            d.origin_port_name,
            d.return_port_name,
            d.event.path_length,
            d.event.confirmations,
            d.event.resolved
        );
    }
    if r.deadlock_events.is_empty() {
        out += "  no deadlock detected\n";
    }
    out += &format!(
        "\ndeadlocks detected {}; deadlock formed: {} ({} lossless frames stuck at the end); lossless frames lost {} \
         (dropped by switches {}); lossy dropped {}\n",
        r.deadlocks, r.deadlock_formed, r.stuck_lossless_frames, r.lossless_lost, r.lossless_dropped, r.lossy_dropped
    );
    out
}

pub mod plot;
pub mod queue;
