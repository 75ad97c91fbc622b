//! `pfcsim sweep`: a grid of runs (scenarios × workload loads × seeds), each on one rank,
//! spread over this machine's cores or over the ranks of an MPI job. Every run writes its
//! report (`--json`'s) to a file of its own; the sweep then writes a summary table
//! (`summary.md`, `summary.json`) and, when the grid has loads, a plot of each
//! scenario's FCT slowdown by load (`summary.svg`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use plotters::prelude::*;

use pfcswitch_table::Table;

use crate::scenario::Scenario;
use crate::SimReport;

#[derive(Args, Debug, Clone)]
pub struct SweepArgs {
    /// The scenarios: built-in names or scenario files, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub scenarios: Vec<String>,
    /// Workload loads, percent of the senders' links: each scenario with a `[[workload]]`
    /// runs at each (a scenario without one runs once per seed).
    #[arg(long, value_delimiter = ',')]
    pub loads: Vec<f64>,
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub seeds: Vec<u64>,
    /// Runs at once on this machine (default: one per core).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// The directory for each run's report and the summary.
    #[arg(long)]
    pub out: PathBuf,
    /// Run as one rank of an MPI job (`mpirun -np N pfcsim sweep --mpi ...`): rank r
    /// takes every N-th run; rank 0 writes the summary. Needs `--features mpi`.
    #[arg(long)]
    pub mpi: bool,
}

/// One run of the grid.
#[derive(Clone, Debug)]
struct Run {
    scenario: Scenario,
    /// The scenario's name as asked for (a built-in name or a file's stem).
    name: String,
    load: Option<f64>,
    seed: u64,
}

impl Run {
    /// Its report's file name.
    fn file(&self) -> String {
        let load = self.load.map_or(String::new(), |l| format!("-load{l}"));
        format!("{}{load}-seed{}.json", self.name, self.seed).replace(['/', ' '], "_")
    }
}

/// A run's line in the summary.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub scenario: String,
    pub load: Option<f64>,
    pub seed: u64,
    pub report: String,
    pub events: u64,
    pub lossless_lost: u64,
    pub lossless_dropped: u64,
    pub lossy_dropped: u64,
    pub deadlocks: u64,
    pub pause_frames: u64,
    pub flows_completed: Option<String>,
    pub slowdown_p50: Option<f64>,
    pub slowdown_p99: Option<f64>,
    pub wall_s: f64,
}

/// The grid, in a fixed order (scenario, load, seed), so every rank of a job agrees on it.
fn grid(args: &SweepArgs) -> Result<Vec<Run>> {
    let mut runs = Vec::new();
    for name in &args.scenarios {
        let path = Path::new(name);
        let (base, label) = if path.exists() {
            let stem = path.file_stem().map_or(name.clone(), |s| s.to_string_lossy().into_owned());
            (Scenario::read(path)?, stem)
        } else {
            (Scenario::built_in(name).map_err(|e| anyhow!("{name}: {e}"))?, name.clone())
        };
        let loads: Vec<Option<f64>> = if base.workload.is_empty() || args.loads.is_empty() {
            vec![None]
        } else {
            args.loads.iter().map(|&l| Some(l)).collect()
        };
        for load in loads {
            let scenario = match load {
                Some(l) => base.clone().with_workload_load(l).with_context(|| format!("{name} at load {l}"))?,
                None => base.clone(),
            };
            for &seed in &args.seeds {
                runs.push(Run { scenario: scenario.clone(), name: label.clone(), load, seed });
            }
        }
    }
    Ok(runs)
}

/// Runs `run`, writes its report into `out`, and returns its summary line.
fn one(run: &Run, out: &Path) -> Result<Row> {
    let started = Instant::now();
    let outcome = crate::simulate(&run.scenario, run.seed, None)?;
    let wall_s = started.elapsed().as_secs_f64();
    let r: &SimReport = &outcome.report;
    let file = run.file();
    std::fs::write(out.join(&file), serde_json::to_string_pretty(r)?)?;
    Ok(Row {
        scenario: run.name.clone(),
        load: run.load,
        seed: run.seed,
        report: file,
        events: r.events,
        lossless_lost: r.lossless_lost,
        lossless_dropped: r.lossless_dropped,
        lossy_dropped: r.lossy_dropped,
        deadlocks: r.deadlocks,
        pause_frames: r.links.iter().map(|l| l.pause_frames).sum(),
        flows_completed: r.fct.as_ref().map(|f| format!("{}/{}", f.completed, f.flows)),
        slowdown_p50: r.fct.as_ref().map(|f| f.all.slowdown_p50),
        slowdown_p99: r.fct.as_ref().map(|f| f.all.slowdown_p99),
        wall_s,
    })
}

/// The runs numbered `rank`, `rank + ranks`, ..., `jobs` at a time on this machine; the
/// rows by run number.
fn run_share(runs: &[Run], out: &Path, rank: usize, ranks: usize, jobs: usize) -> Result<Vec<(usize, Row)>> {
    let mine: Vec<usize> = (rank..runs.len()).step_by(ranks.max(1)).collect();
    let next = AtomicUsize::new(0);
    let rows = Mutex::new(Vec::new());
    let failed = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1).min(mine.len().max(1)) {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&i) = mine.get(k) else { return };
                match one(&runs[i], out) {
                    Ok(row) => {
                        eprintln!("  {} ({:.1} s)", row.report, row.wall_s);
                        rows.lock().expect("a run panicked").push((i, row));
                    }
                    Err(e) => {
                        failed.lock().expect("a run panicked").get_or_insert(e.context(runs[i].file()));
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().expect("a run panicked") {
        return Err(e);
    }
    let mut rows = rows.into_inner().expect("a run panicked");
    rows.sort_by_key(|(i, _)| *i);
    Ok(rows)
}

pub fn run(args: &SweepArgs) -> Result<()> {
    let runs = grid(args)?;
    anyhow::ensure!(!runs.is_empty(), "an empty grid");
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let rows = if args.mpi { run_mpi(args, &runs, jobs)? } else { Some(run_share(&runs, &args.out, 0, 1, jobs)?) };
    let Some(rows) = rows else { return Ok(()) };
    let rows: Vec<Row> = rows.into_iter().map(|(_, r)| r).collect();
    write_summary(&args.out, &rows)
}

#[cfg(feature = "mpi")]
fn run_mpi(args: &SweepArgs, runs: &[Run], jobs: usize) -> Result<Option<Vec<(usize, Row)>>> {
    use crate::split::Exchange;
    let mpi = crate::split::mpi::Mpi::init().context("MPI was initialised already")?;
    let rows = run_share(runs, &args.out, mpi.rank(), mpi.ranks(), jobs)?;
    let Some(parts) = mpi.gather(&serde_json::to_vec(&rows)?) else { return Ok(None) };
    let mut all = Vec::new();
    for p in parts {
        all.extend(serde_json::from_slice::<Vec<(usize, Row)>>(&p)?);
    }
    all.sort_by_key(|(i, _)| *i);
    Ok(Some(all))
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &SweepArgs, _: &[Run], _: usize) -> Result<Option<Vec<(usize, Row)>>> {
    anyhow::bail!("--mpi needs pfcsim built with MPI: cargo build --release -p pfcsim --features mpi")
}

/// `summary.json`, `summary.md` (printed too) and, with loads, `summary.svg`.
fn write_summary(out: &Path, rows: &[Row]) -> Result<()> {
    std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(rows)?)?;
    let mut t = Table::new(&[
        "scenario",
        "load %",
        "seed",
        "lossless lost",
        "dropped lossless / lossy",
        "deadlocks",
        "pause frames",
        "flows done",
        "slowdown p50 / p99",
        "wall s",
        "report",
    ]);
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    for r in rows {
        t.row(vec![
            r.scenario.clone(),
            r.load.map_or("-".into(), |l| l.to_string()),
            r.seed.to_string(),
            r.lossless_lost.to_string(),
            format!("{} / {}", r.lossless_dropped, r.lossy_dropped),
            r.deadlocks.to_string(),
            r.pause_frames.to_string(),
            r.flows_completed.clone().unwrap_or_else(|| "-".into()),
            format!("{} / {}", opt(r.slowdown_p50), opt(r.slowdown_p99)),
            format!("{:.1}", r.wall_s),
            r.report.clone(),
        ]);
    }
    let table = t.render();
    print!("{table}");
    std::fs::write(out.join("summary.md"), &table)?;
    if rows.iter().any(|r| r.load.is_some() && r.slowdown_p99.is_some()) {
        let path = out.join("summary.svg");
        plot(&path, rows)?;
        eprintln!("FCT slowdown by load: {}", path.display());
    }
    Ok(())
}

/// A sweep's FCT slowdown by load: per scenario, the p99 (solid) and p50 (dashed) over
/// the seeds' mean at each load.
fn plot(path: &Path, rows: &[Row]) -> Result<()> {
    draw(path, rows).map_err(|e| anyhow!("drawing {}: {e}", path.display()))
}

fn draw(path: &Path, rows: &[Row]) -> Result<(), Box<dyn std::error::Error>> {
    // Only the scenarios with a workload: the others have no FCT to draw.
    let mut names: Vec<&str> =
        rows.iter().filter(|r| r.load.is_some() && r.slowdown_p99.is_some()).map(|r| r.scenario.as_str()).collect();
    names.dedup();
    let loads: Vec<f64> = rows.iter().filter_map(|r| r.load).collect();
    let (lo, hi) = loads.iter().fold((f64::MAX, f64::MIN), |(a, b), &l| (a.min(l), b.max(l)));
    let top = rows.iter().filter_map(|r| r.slowdown_p99).fold(2.0, f64::max) * 1.5;
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("FCT slowdown by load (mean over seeds)", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((lo - 5.0)..(hi + 5.0), (0.9f64..top).log_scale())?;
    chart.configure_mesh().x_desc("load, % of the senders' links").y_desc("FCT / ideal FCT").draw()?;
    for (k, name) in names.iter().enumerate() {
        let colour = crate::plot::COLOURS[k % crate::plot::COLOURS.len()];
        let mut at: Vec<f64> = rows.iter().filter(|r| r.scenario == *name).filter_map(|r| r.load).collect();
        at.sort_by(f64::total_cmp);
        at.dedup();
        let mean = |load: f64, pick: fn(&Row) -> Option<f64>| {
            let v: Vec<f64> =
                rows.iter().filter(|r| r.scenario == *name && r.load == Some(load)).filter_map(pick).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let p99: Vec<(f64, f64)> = at.iter().filter_map(|&l| Some((l, mean(l, |r| r.slowdown_p99)?))).collect();
        let p50: Vec<(f64, f64)> = at.iter().filter_map(|&l| Some((l, mean(l, |r| r.slowdown_p50)?))).collect();
        chart
            .draw_series(LineSeries::new(p99.clone(), colour.stroke_width(2)))?
            .label(format!("{name} p99"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2)));
        chart.draw_series(p99.into_iter().map(|p| Circle::new(p, 4, colour.filled())))?;
        chart
            .draw_series(DashedLineSeries::new(p50, 4, 4, colour.stroke_width(1)))?
            .label(format!("{name} p50"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 6, y)], colour.stroke_width(1)));
    }
    crate::plot::legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present()?;
    Ok(())
}
