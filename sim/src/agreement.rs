//! `pfctools bench agreement`: the same fat-tree and the same flows in pfcsim and, given
//! a user-built `htsim_roce` (Broadcom's csg-htsim: RoCE senders, PFC on lossless input
//! queues, ECMP per flow), in htsim; wall time, peak memory and the distribution of flow
//! completion times side by side. htsim's runs differ from one to the next (its ECMP
//! follows memory addresses), so each of its figures is the median over several runs;
//! pfcsim's reports are the same on every run.
//!
//! The flows go to both as one htsim connection matrix (`-tm`), which pfcsim reads as a
//! `[[flow_file]]`: hosts numbered as htsim numbers them (host i under edge i / (k/2)).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use pfcswitch_table::Table;
use pfctestkit::{median, quantile};

use crate::alloc::{peak_rss_mib, reset_peak_rss, vm_hwm_kib};
use crate::scenario::{HostSpec, OutOfOrder, Routing, Scenario};

#[derive(Args, Debug)]
pub struct AgreementArgs {
    /// A built `htsim_roce` (csg-htsim's `sim/datacenter`); without it pfcsim runs alone.
    #[arg(long)]
    pub htsim: Option<PathBuf>,
    /// htsim runs per case (their figures are the medians).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub htsim_runs: u32,
    /// The cases: k8-permutation (10 MB flows), k16-permutation (2 MB), k8-incast (127:1 of
    /// 1 MB), k4-permutation (1 MB, a quick one).
    #[arg(long, value_delimiter = ',', default_value = "k8-permutation,k16-permutation,k8-incast")]
    pub cases: Vec<String>,
    /// How pfcsim's switches use equal-cost next hops. Beside `flowlet`, htsim's switches
    /// run their adaptive routing by flowlet (`-strat ecmp_ar`, 10 µs); beside
    /// `adaptive`, the same re-choosing at any gap (`-ar_sticky_delta 0`: frame by frame,
    /// half of the time at random); beside the others ECMP per flow (`-strat ecmp_host`).
    #[arg(long, value_enum, default_value_t = Routing::Ecmp)]
    pub routing: Routing,
    /// What pfcsim's receivers do with a frame that comes before one they wait for.
    /// htsim's RoCE receivers go back N, NAKing every frame after a gap.
    #[arg(long, value_enum, default_value_t = OutOfOrder::Accept)]
    pub out_of_order: OutOfOrder,
    /// pfcsim runs per case, each with its own ECMP seed (0, 1, ...): the same flows on
    /// other equal-cost paths. Its figures are then the medians, as htsim's are.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub ecmp_seeds: u32,
    /// Where the cases' connection matrices and scenarios are written (a new temporary
    /// directory when absent).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Draw each case's FCT distribution (pfcsim's, and every htsim run's) into this SVG.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

/// The flows of one case, in htsim's terms.
#[derive(Clone, Debug)]
struct CaseSpec {
    name: String,
    k: u32,
    /// (from, to, bytes), all starting at 0.
    flows: Vec<(usize, usize, u64)>,
    /// Simulated time long enough for every flow to finish, ms.
    run_ms: f64,
}

fn case(name: &str) -> Result<CaseSpec> {
    let permutation = |k: u32, bytes: u64| {
        let hosts = (k * k * k / 4) as usize;
        // A derangement from a fixed seed: every host sends to one other, and receives
        // from one.
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut to: Vec<usize> = (0..hosts).collect();
        loop {
            to.shuffle(&mut rng);
            if to.iter().enumerate().all(|(i, &t)| i != t) {
                break;
            }
        }
        to.iter().enumerate().map(|(i, &t)| (i, t, bytes)).collect::<Vec<_>>()
    };
    let (k, flows, run_ms) = match name {
        "k4-permutation" => (4, permutation(4, 1_000_000), 5.0),
        "k8-permutation" => (8, permutation(8, 10_000_000), 20.0),
        "k16-permutation" => (16, permutation(16, 2_000_000), 10.0),
        "k8-incast" => (8, (1..128).map(|i| (i, 0, 1_000_000)).collect(), 25.0),
        other => bail!("no case {other:?}: k4-permutation, k8-permutation, k16-permutation or k8-incast"),
    };
    Ok(CaseSpec { name: name.to_string(), k, flows, run_ms })
}

impl CaseSpec {
    fn hosts(&self) -> usize {
        (self.k * self.k * self.k / 4) as usize
    }

    /// The aggregation-to-core links (upward) that flows each placed on one of its pod's
    /// (k/2)² uplinks uniformly at random leave used, on average: per pod, U(1 - (1 - 1/U)^F)
    /// for the F flows that leave it. A hash at its best does this; with one flow a host,
    /// about a third of the links stay idle in any simulator that hashes per flow.
    fn core_links_uniform(&self) -> f64 {
        let per_pod = (self.k * self.k / 4) as usize;
        let uplinks = per_pod as f64;
        let mut leaving = vec![0u32; self.k as usize];
        for &(a, b, _) in &self.flows {
            if a / per_pod != b / per_pod {
                leaving[a / per_pod] += 1;
            }
        }
        leaving.iter().map(|&f| uplinks * (1.0 - (1.0 - 1.0 / uplinks).powi(f as i32))).sum()
    }

    /// htsim's connection matrix of the case's flows.
    fn matrix(&self) -> String {
        let mut m = format!("Nodes {}\nConnections {}\n", self.hosts(), self.flows.len());
        for (a, b, bytes) in &self.flows {
            m.push_str(&format!("{a}->{b} start 0 size {bytes}\n"));
        }
        m
    }

    /// The pfcsim scenario of the case: 100G, 200 m cables (1 µs a hop), the matrix's
    /// flows in 1518-byte frames on lossless priority 3.
    fn scenario(&self, matrix: &Path, routing: Routing, out_of_order: OutOfOrder, ecmp_seed: u32) -> Result<Scenario> {
        let text = format!(
            r#"
            name = "{name}"
            topology = "fattree:k={k}"
            speed = "100G"
            cable_m = 200
            duration_ms = {ms}
            drain_ms = 0
            ecmp_seed = {ecmp_seed}
            [switch_defaults.pfc]
            lossless = [3]
            [[flow_file]]
            path = "{path}"
            format = "htsim"
            "#,
            name = self.name,
            k = self.k,
            ms = self.run_ms,
            path = matrix.display(),
        );
        let host_defaults = HostSpec { out_of_order: Some(out_of_order), ..HostSpec::default() };
        Ok(Scenario { routing, host_defaults, ..Scenario::from_toml(&text)? })
    }
}

/// One simulator's run (or htsim's median run) of a case.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Side {
    pub wall_s: f64,
    pub peak_mib: f64,
    pub flows: usize,
    pub completed: usize,
    pub fct_p50_us: f64,
    pub fct_p90_us: f64,
    pub fct_p99_us: f64,
    pub fct_max_us: f64,
    /// Aggregation-to-core links (one direction) that carried frames, and all of them
    /// (pfcsim only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core_links_used: Option<(usize, usize)>,
    /// The FCTs, µs, in order (for the plot).
    #[serde(skip)]
    pub fcts: Vec<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    pub name: String,
    pub k: u32,
    pub flows: usize,
    pub pfcsim: Side,
    /// htsim's figures, each the median of its runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub htsim: Option<Side>,
    pub htsim_runs: u32,
    /// The aggregation-to-core links a choice made per flow uniformly at random would
    /// leave carrying frames, on average: what a hash can do with these flows.
    pub core_links_uniform: f64,
    /// Each htsim run's FCTs, µs, in order (for the plot).
    #[serde(skip)]
    pub htsim_fcts: Vec<Vec<f64>>,
    /// pfcsim's runs (one per ECMP seed); its figures are their medians.
    pub ecmp_seeds: u32,
    /// Each pfcsim run's FCTs, µs, in order (for the plot).
    #[serde(skip)]
    pub pfcsim_fcts: Vec<Vec<f64>>,
}

fn side(mut fcts: Vec<f64>, flows: usize, wall_s: f64, peak_mib: f64) -> Side {
    fcts.sort_by(f64::total_cmp);
    Side {
        wall_s,
        peak_mib,
        flows,
        completed: fcts.len(),
        fct_p50_us: quantile(&fcts, 0.5),
        fct_p90_us: quantile(&fcts, 0.9),
        fct_p99_us: quantile(&fcts, 0.99),
        fct_max_us: fcts.last().copied().unwrap_or(0.0),
        core_links_used: None,
        fcts,
    }
}

fn run_pfcsim(c: &CaseSpec, scenario: &Scenario) -> Result<Side> {
    reset_peak_rss();
    let started = Instant::now();
    let outcome = crate::simulate(scenario, 1, None)?;
    let wall = started.elapsed().as_secs_f64();
    let fcts: Vec<f64> = outcome.report.flows.iter().filter_map(|f| f.fct_us).collect();
    let mut s = side(fcts, c.flows.len(), wall, peak_rss_mib().unwrap_or(0.0));
    let up: Vec<_> =
        outcome.report.links.iter().filter(|l| l.from.starts_with("agg") && l.to.starts_with("core")).collect();
    s.core_links_used = Some((up.iter().filter(|l| l.frames > 0).count(), up.len()));
    Ok(s)
}

/// One run of htsim on `matrix`: the FCTs it printed (`Flow Roce_A_B ID finished at US`;
/// every flow starts at 0), its wall time and its peak resident memory.
fn run_htsim(exe: &Path, c: &CaseSpec, matrix: &Path, routing: Routing, seed: u32, dir: &Path) -> Result<Side> {
    let strategy: &[&str] = match routing {
        Routing::Flowlet => &["-strat", "ecmp_ar"],
        Routing::Adaptive => &["-strat", "ecmp_ar", "-ar_sticky_delta", "0"],
        Routing::Ecmp | Routing::Single | Routing::Dmodk => &["-strat", "ecmp_host"],
    };
    let started = Instant::now();
    let mut child = Command::new(exe)
        .current_dir(dir)
        .args(["-nodes", &c.hosts().to_string(), "-tm"])
        .arg(matrix)
        .args(strategy)
        .args(["-paths", "1", "-queue_type", "lossless_input", "-linkspeed", "100000"])
        .args(["-hop_latency", "1", "-mtu", "1500", "-seed", &seed.to_string()])
        .args(["-end", &((c.run_ms * 1e3) as u64).to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        stdout.read_to_string(&mut out).map(|_| out)
    });
    let (status, peak_kib) = wait_with_peak(&mut child)?;
    let out = reader.join().map_err(|_| anyhow::anyhow!("reading htsim's output panicked"))??;
    let wall = started.elapsed().as_secs_f64();
    if !status {
        bail!("{} failed on {}: {}", exe.display(), c.name, out.lines().rev().take(5).collect::<Vec<_>>().join(" | "));
    }
    let fcts: Vec<f64> = out
        .lines()
        .filter(|l| l.starts_with("Flow Roce_"))
        .filter_map(|l| l.split(" finished at ").nth(1)?.split_whitespace().next()?.parse().ok())
        .collect();
    Ok(side(fcts, c.flows.len(), wall, peak_kib as f64 / 1024.0))
}

/// Waits for `child`; whether it exited 0, and its peak resident memory, KiB: the
/// high-water mark of its own memory (`VmHWM`), read every few milliseconds while it
/// runs. Not the `ru_maxrss` that `wait4` reports: that counts the memory of the process
/// that started it, as it was when the child was forked from it (this process, which
/// had just run pfcsim: htsim's peak read 96 MiB where its own was 10).
fn wait_with_peak(child: &mut std::process::Child) -> Result<(bool, u64)> {
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        // Read before the check: a run that ends between them has its last reading.
        if let Some(kib) = std::fs::read_to_string(&status_file).ok().as_deref().and_then(vm_hwm_kib) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.try_wait()? {
            return Ok((status.success(), peak));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The median of each figure over `runs`.
fn median_side(runs: &[Side]) -> Side {
    let med = |f: fn(&Side) -> f64| median(&runs.iter().map(f).collect::<Vec<f64>>());
    Side {
        wall_s: med(|s| s.wall_s),
        peak_mib: med(|s| s.peak_mib),
        flows: runs[0].flows,
        completed: runs.iter().map(|s| s.completed).min().unwrap_or(0),
        fct_p50_us: med(|s| s.fct_p50_us),
        fct_p90_us: med(|s| s.fct_p90_us),
        fct_p99_us: med(|s| s.fct_p99_us),
        fct_max_us: med(|s| s.fct_max_us),
        core_links_used: None,
        fcts: Vec::new(),
    }
}

pub fn run(args: &AgreementArgs) -> Result<()> {
    let specs: Vec<CaseSpec> = args.cases.iter().map(|c| case(c)).collect::<Result<_>>()?;
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.clone()
        }
        None => std::env::temp_dir().join(format!("pfcsim-agreement-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir)?;
    let mut results = Vec::new();
    for c in &specs {
        let matrix = dir.join(format!("{}.cm", c.name));
        std::fs::write(&matrix, c.matrix())?;
        let mut own = Vec::new();
        for seed in 0..args.ecmp_seeds {
            eprintln!("  {}: pfcsim, ECMP seed {seed}", c.name);
            own.push(run_pfcsim(c, &c.scenario(&matrix, args.routing, args.out_of_order, seed)?)?);
        }
        let pfcsim = if own.len() == 1 {
            own[0].clone()
        } else {
            Side { core_links_used: own[0].core_links_used, ..median_side(&own) }
        };
        let mut runs = Vec::new();
        if let Some(exe) = &args.htsim {
            for seed in 1..=args.htsim_runs {
                eprintln!("  {}: htsim run {seed} of {}", c.name, args.htsim_runs);
                runs.push(run_htsim(exe, c, &matrix, args.routing, seed, &dir)?);
            }
        }
        results.push(CaseResult {
            name: c.name.clone(),
            k: c.k,
            flows: c.flows.len(),
            pfcsim,
            htsim: (!runs.is_empty()).then(|| median_side(&runs)),
            htsim_runs: args.htsim_runs,
            core_links_uniform: c.core_links_uniform(),
            htsim_fcts: runs.into_iter().map(|r| r.fcts).collect(),
            pfcsim_fcts: own.into_iter().map(|r| r.fcts).collect(),
            ecmp_seeds: args.ecmp_seeds,
        });
    }
    if let Some(path) = &args.plot {
        let panels: Vec<crate::plot::FctPanel> = results
            .iter()
            .map(|r| crate::plot::FctPanel {
                name: r.name.clone(),
                pfcsim: r.pfcsim_fcts.clone(),
                others: r.htsim_fcts.clone(),
            })
            .collect();
        crate::plot::fct_cdfs(path, "pfcsim beside htsim", &panels)?;
        eprintln!("plot: {}", path.display());
    }
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print!("{}", render(&results));
    }
    Ok(())
}

fn render(results: &[CaseResult]) -> String {
    let mut t = Table::new(&[
        "case",
        "simulator",
        "wall s",
        "peak MiB",
        "done",
        "FCT p50 µs",
        "p90",
        "p99",
        "max",
        "agg-core links used",
        "uniform choice",
    ]);
    for r in results {
        let mut row = |who: &str, s: &Side| {
            t.row(vec![
                r.name.clone(),
                who.to_string(),
                format!("{:.2}", s.wall_s),
                format!("{:.0}", s.peak_mib),
                format!("{}/{}", s.completed, s.flows),
                format!("{:.0}", s.fct_p50_us),
                format!("{:.0}", s.fct_p90_us),
                format!("{:.0}", s.fct_p99_us),
                format!("{:.0}", s.fct_max_us),
                s.core_links_used.map_or("-".into(), |(u, n)| format!("{u}/{n}")),
                if s.core_links_used.is_some() { format!("{:.0}", r.core_links_uniform) } else { "-".into() },
            ]);
        };
        let own = if r.ecmp_seeds > 1 { format!("pfcsim (median of {})", r.ecmp_seeds) } else { "pfcsim".into() };
        row(&own, &r.pfcsim);
        if let Some(h) = &r.htsim {
            row(&format!("htsim (median of {})", r.htsim_runs), h);
        }
    }
    let mut out = t.render();
    for r in results {
        if let Some(h) = &r.htsim {
            out.push_str(&format!(
                "{}: pfcsim/htsim FCT p50 {:.2}, p90 {:.2}; wall time htsim/pfcsim {:.1}x\n",
                r.name,
                r.pfcsim.fct_p50_us / h.fct_p50_us.max(1e-9),
                r.pfcsim.fct_p90_us / h.fct_p90_us.max(1e-9),
                h.wall_s / r.pfcsim.wall_s.max(1e-9)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uniform_choice_fills_a_pods_uplinks_as_balls_fill_bins_and_flows_inside_a_pod_use_none() {
        // k=4: 4 hosts and 4 uplinks a pod. Pod 0 sends 2 flows out, pod 1 one inside.
        let c = CaseSpec { name: "t".into(), k: 4, flows: vec![(0, 4, 1), (1, 8, 1), (4, 5, 1)], run_ms: 1.0 };
        let expected = 4.0 * (1.0 - 0.75f64.powi(2));
        assert!((c.core_links_uniform() - expected).abs() < 1e-9, "{}", c.core_links_uniform());
        // A permutation of k=8 (one flow a host): about two thirds of the 128 used.
        let used = case("k8-permutation").unwrap().core_links_uniform();
        assert!((70.0..90.0).contains(&used), "{used}");
    }

    #[test]
    fn a_permutation_case_is_a_derangement_its_matrix_reads_back_as_its_flows() {
        let c = case("k4-permutation").unwrap();
        assert_eq!((c.hosts(), c.flows.len()), (16, 16));
        let mut to: Vec<usize> = c.flows.iter().map(|f| f.1).collect();
        assert!(c.flows.iter().all(|f| f.0 != f.1));
        to.sort();
        assert_eq!(to, (0..16).collect::<Vec<_>>(), "every host receives one flow");
        let back = crate::workload::parse_htsim_matrix(&c.matrix()).unwrap();
        assert!(back.iter().zip(&c.flows).all(|(l, f)| (l.from, l.to, l.bytes, l.start_ns) == (f.0, f.1, f.2, 0)));
        assert!(case("k9-ring").is_err());
    }
}
