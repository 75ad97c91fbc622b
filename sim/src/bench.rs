//! `pfctools bench sim`: how fast the simulator runs, on one core — events and frame hops
//! per second of wall time, and the memory it takes, for fabrics from three switches to
//! a k=16 fat-tree (320 switches, 1024 hosts).

use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use serde::Serialize;

use pfcswitch_table::Table;

use crate::alloc::{peak_rss_mib, reset_peak_rss};
use crate::engine::Sim;
use crate::fabric::Fabric;
use crate::scenario::Scenario;
use crate::simulate;
use crate::trace::Trace;

#[derive(Args, Debug)]
pub struct SimBenchArgs {
    /// Only the cases whose name contains this.
    #[arg(long)]
    pub only: Option<String>,
    #[arg(long)]
    pub json: bool,
    /// Also run the fat-trees split over these rank counts (threads of this process),
    /// e.g. `1,2`: wall time against one rank, events per rank, frames that cross, time
    /// waited at window ends, and the scaling that gives on paper.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub ranks: Vec<usize>,
}

/// One fat-tree split over some ranks.
#[derive(Clone, Debug, Serialize)]
pub struct SplitCase {
    pub name: String,
    pub ranks: usize,
    pub wall_s: f64,
    /// Its wall time over the one-rank run's.
    pub against_one: f64,
    pub events: u64,
    pub frame_hops: u64,
    /// Of the frame hops, the share that crossed ranks.
    pub crossing: f64,
    pub windows: u64,
    pub per_rank: Vec<crate::split::RankStats>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Case {
    pub name: String,
    pub switches: usize,
    pub hosts: usize,
    pub simulated_ms: f64,
    pub events: u64,
    pub frame_hops: u64,
    pub wall_s: f64,
    pub events_per_s: f64,
    pub frame_hops_per_s: f64,
    /// The process's peak resident memory during the case, MiB (the peak is reset before
    /// each case; what earlier cases left to the allocator counts too, and the cases run
    /// from the smallest up).
    pub peak_rss_mib: Option<f64>,
}

/// One fabric's share of a [`side_by_side`] run.
#[derive(Clone, Debug, Serialize)]
pub struct Turns {
    pub name: String,
    pub events: u64,
    /// Wall time of its own turns only (no setup, no report).
    pub run_s: f64,
    pub events_per_s: f64,
}

/// How much simulated time each fabric runs in one turn of [`side_by_side`]: k=4's
/// millisecond takes some 150 ms of wall time, against the other's turn having emptied
/// the caches. Measured on 60 ms of k=4 taking twenty pairs of turns after a turn of k=8,
/// the first of each pair (after k=8) took from 1 % less to 3 % more time per event than
/// the second (after its own), in three runs: the refill is lost in the noise.
pub const TURN: Duration = Duration::from_millis(1);

/// Runs `a` and `b` (seed 1) in one process, taking turns of [`TURN`] simulated time each,
/// and times each one's turns. Run one after the other, the two see different loads on a
/// shared machine (k=4 alone took 1.2 to 1.8 s here from one run to the next), and their
/// ratio moves by a fifth; in turns, whatever else the machine does slows both alike.
pub fn side_by_side(a: &Scenario, b: &Scenario) -> Result<[Turns; 2]> {
    let fabrics = [Fabric::build(a, 1)?, Fabric::build(b, 1)?];
    let scenarios = [a, b];
    let mut sims = Vec::new();
    for (s, f) in scenarios.iter().zip(&fabrics) {
        sims.push(Sim::new(s, f, Trace::new(f.ports.len(), None))?);
    }
    let ends = scenarios.map(Scenario::run_time);
    let mut spent = [Duration::ZERO; 2];
    let mut until = Duration::ZERO;
    while until < ends[0].max(ends[1]) {
        until += TURN;
        // A run past its end returns at once (its time stays at the end).
        for (i, sim) in sims.iter_mut().enumerate() {
            let started = Instant::now();
            sim.run_until(until.min(ends[i]));
            spent[i] += started.elapsed();
        }
    }
    Ok([0, 1].map(|i| {
        let events = sims[i].counts.events;
        let run_s = spent[i].as_secs_f64();
        Turns { name: scenarios[i].name.clone(), events, run_s, events_per_s: events as f64 / run_s }
    }))
}

/// A fat-tree of parameter `k` at 100G, every host sending MTU frames at `load` percent
/// to another (a random permutation) on lossless priority 3 for `ms`.
pub fn fattree(k: u32, load: f64, ms: f64) -> Scenario {
    let text = format!(
        r#"
        name = "fattree-k{k}"
        topology = "fattree:k={k}"
        speed = "100G"
        cable_m = 10
        duration_ms = {ms}
        drain_ms = 0
        [switch_defaults.pfc]
        lossless = [3]
        [[flow]]
        from = "*"
        to = "*"
        size = 1518
        load = {load}
        "#
    );
    Scenario::from_toml(&text).expect("a valid scenario")
}

/// [`fattree`] with every host running DCQCN (the paper's 10 MB byte counter: see the
/// README) and the switches' CNPs (DSCP 48) on priority 6: what the host model costs.
pub fn fattree_dcqcn(k: u32, load: f64, ms: f64) -> Scenario {
    let mut s = fattree(k, load, ms);
    s.name = format!("fattree-k{k}-dcqcn");
    s.dcqcn = Some(roce::DcqcnParams { rpg_byte_reset: 10_000_000, ..Default::default() });
    let classify: toml::Table = toml::from_str("[dscp]\n3 = 3\n48 = 6\n").expect("a valid table");
    s.switch_defaults.insert("classify".into(), toml::Value::Table(classify));
    s
}

fn cases() -> Vec<Scenario> {
    let mut v: Vec<Scenario> = ["ring-deadlock", "headroom", "fattree-storm"]
        .iter()
        .map(|n| Scenario::built_in(n).expect("built in"))
        .collect();
    v.push(fattree(4, 50.0, 10.0));
    v.push(fattree_dcqcn(4, 50.0, 10.0));
    v.push(fattree(8, 50.0, 10.0));
    v.push(fattree(16, 50.0, 10.0));
    v
}

pub fn run(args: &SimBenchArgs) -> Result<()> {
    let selected = |name: &str| args.only.as_ref().is_none_or(|o| name.contains(o.as_str()));
    let cases: Vec<Scenario> = cases().into_iter().filter(|s| selected(&s.name)).collect();
    let mut out = Vec::new();
    for s in &cases {
        eprintln!("  {} ...", s.name);
        reset_peak_rss();
        let started = Instant::now();
        let outcome = simulate(s, 1, None)?;
        let wall = started.elapsed().as_secs_f64();
        let r = &outcome.report;
        out.push(Case {
            name: s.name.clone(),
            switches: r.switches.len(),
            hosts: r.links.iter().filter(|l| !l.from.contains(':')).count(),
            simulated_ms: r.simulated_ms,
            events: r.events,
            frame_hops: r.frame_hops,
            wall_s: wall,
            events_per_s: r.events as f64 / wall,
            frame_hops_per_s: r.frame_hops as f64 / wall,
            peak_rss_mib: peak_rss_mib(),
        });
    }
    let split_cases = split_cases(args, &cases, &out)?;
    // k=8 against k=4 once more, in turns: the target compares their rates, and the
    // cases above, one after the other, may have met different loads.
    let case = |name: &str| cases.iter().find(|s| s.name == name);
    let turns = match (case("fattree-k4"), case("fattree-k8")) {
        (Some(small), Some(big)) => {
            eprintln!("  {} and {} in turns ...", small.name, big.name);
            Some(side_by_side(small, big)?)
        }
        _ => None,
    };
    if args.json {
        let report = serde_json::json!({ "cases": out, "side_by_side": turns, "split": split_cases });
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let mut t = Table::new(&[
        "case",
        "switches",
        "hosts",
        "simulated ms",
        "events",
        "frame hops",
        "wall s",
        "M events/s",
        "M hops/s",
        "peak MiB",
    ]);
    for c in &out {
        t.row(vec![
            c.name.clone(),
            c.switches.to_string(),
            c.hosts.to_string(),
            format!("{:.1}", c.simulated_ms),
            c.events.to_string(),
            c.frame_hops.to_string(),
            format!("{:.2}", c.wall_s),
            format!("{:.2}", c.events_per_s / 1e6),
            format!("{:.2}", c.frame_hops_per_s / 1e6),
            c.peak_rss_mib.map_or("-".into(), |m| format!("{m:.0}")),
        ]);
    }
    print!("{}", t.render());
    let rate = |name: &str| out.iter().find(|c| c.name == name).map(|c| c.events_per_s);
    for (big, small) in [("fattree-k8", "fattree-k4"), ("fattree-k16", "fattree-k4")] {
        if let (Some(b), Some(s)) = (rate(big), rate(small)) {
            println!("{big} runs at {:.0} % of {small}'s events per second", 100.0 * b / s);
        }
    }
    if let Some([small, big]) = &turns {
        println!(
            "in turns of {} ms in one process: {} {:.2} M events/s, {} {:.2} M/s: {:.0} %",
            TURN.as_millis(),
            small.name,
            small.events_per_s / 1e6,
            big.name,
            big.events_per_s / 1e6,
            100.0 * big.events_per_s / small.events_per_s
        );
    }
    if !split_cases.is_empty() {
        println!();
        print!("{}", split_table(&split_cases));
    }
    let wall = |name: &str| out.iter().find(|c| c.name == name).map(|c| c.wall_s);
    if let (Some(d), Some(o)) = (wall("fattree-k4-dcqcn"), wall("fattree-k4")) {
        println!("fattree-k4-dcqcn takes {:.2} times fattree-k4's wall time (DCQCN at every host)", d / o);
    }
    Ok(())
}

/// The fat-trees among `cases` over each rank count of `--ranks` above one, against
/// their one-rank runs in `one`.
fn split_cases(args: &SimBenchArgs, cases: &[Scenario], one: &[Case]) -> Result<Vec<SplitCase>> {
    let mut out = Vec::new();
    for s in cases.iter().filter(|s| s.name.starts_with("fattree-k")) {
        let Some(base) = one.iter().find(|c| c.name == s.name) else { continue };
        for &ranks in args.ranks.iter().filter(|&&r| r > 1) {
            eprintln!("  {} over {ranks} ranks ...", s.name);
            reset_peak_rss();
            let started = Instant::now();
            let (outcome, _) = crate::simulate_split(s, 1, None, &[], ranks)?;
            let wall = started.elapsed().as_secs_f64();
            let r = &outcome.report;
            let posted: u64 = outcome.ranks.iter().map(|k| k.frames_posted).sum();
            out.push(SplitCase {
                name: s.name.clone(),
                ranks,
                wall_s: wall,
                against_one: wall / base.wall_s,
                events: r.events,
                frame_hops: r.frame_hops,
                crossing: posted as f64 / r.frame_hops.max(1) as f64,
                windows: outcome.ranks.first().map_or(0, |k| k.windows),
                per_rank: outcome.ranks.clone(),
            });
        }
    }
    Ok(out)
}

/// The split runs, and what they give on paper at 16 and 64 ranks: each rank's share of
/// the one-rank work, plus, per window, what the fastest rank waited at the window's end
/// at this rank count (the exchange itself, no one else's work), taken to grow with the
/// rank count's logarithm as an all-to-all's rounds do. A model, to be checked on a
/// cluster; the event rate per rank and the share of frames that cross are measured.
fn split_table(cases: &[SplitCase]) -> String {
    let mut t = Table::new(&[
        "case",
        "ranks",
        "wall s",
        "× one rank",
        "M events/s per rank",
        "frames crossing",
        "waited at window ends",
        "windows",
        "peak MiB",
        "on paper: 16 / 64 ranks",
    ]);
    for c in cases {
        let rates: Vec<String> =
            c.per_rank.iter().map(|k| format!("{:.2}", k.events as f64 / k.wall_s.max(1e-9) / 1e6)).collect();
        let waited: Vec<String> =
            c.per_rank.iter().map(|k| format!("{:.0} %", 100.0 * k.exchange_s / k.wall_s.max(1e-9))).collect();
        let one = c.wall_s / c.against_one;
        let sync = c.per_rank.iter().map(|k| k.exchange_s).fold(f64::MAX, f64::min) / c.windows.max(1) as f64;
        let paper = |n: f64| one / n + c.windows as f64 * sync * n.log2() / (c.ranks as f64).log2();
        let peak = c.per_rank.iter().filter_map(|k| k.peak_rss_mib).fold(0.0, f64::max);
        t.row(vec![
            c.name.clone(),
            c.ranks.to_string(),
            format!("{:.2}", c.wall_s),
            format!("{:.2}", c.against_one),
            rates.join(" / "),
            format!("{:.1} %", 100.0 * c.crossing),
            waited.join(" / "),
            c.windows.to_string(),
            format!("{peak:.0}"),
            format!("{:.2} / {:.2} s", paper(16.0), paper(64.0)),
        ]);
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_taking_turns_do_what_each_does_alone_and_a_shorter_one_stops_at_its_end() {
        // The ring: 180 ms, so 180 turns; the fat-tree: 1.5 ms, its last turn a half.
        let (a, b) = (Scenario::built_in("ring-deadlock").expect("built in"), fattree(4, 50.0, 1.5));
        let [ta, tb] = side_by_side(&a, &b).expect("runs");
        assert_eq!((ta.name.as_str(), tb.name.as_str()), ("ring-deadlock", "fattree-k4"));
        for (turns, alone) in [(&ta, &a), (&tb, &b)] {
            let report = simulate(alone, 1, None).expect("runs").report;
            assert_eq!(turns.events, report.events, "{}", turns.name);
            assert!(turns.run_s > 0.0 && turns.events_per_s > 0.0);
        }
    }
}
