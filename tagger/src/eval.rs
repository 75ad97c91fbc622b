//! `tagger eval`: tags needed (brute force against greedy), table entries per switch, time
//! and peak memory over standard topologies. Each case runs in its own process so that its
//! peak memory is its own.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::algo::Algorithm;
use crate::plan::Plan;
use crate::routes::RouteSpec;
use crate::system::TagSystem;
use crate::verify::verify;

pub struct Case {
    pub name: &'static str,
    pub topology: &'static str,
    pub routes: &'static str,
    /// Left out of `--quick`.
    pub big: bool,
    /// Brute force too, for its tag count (not in `--large`: its route states are what
    /// those fabrics have too many of).
    pub brute: bool,
    /// What tags (greedy, or bounces for the large Clos fabrics).
    pub algorithm: Algorithm,
}

const fn case(name: &'static str, topology: &'static str, routes: &'static str, big: bool) -> Case {
    Case { name, topology, routes, big, brute: true, algorithm: Algorithm::Greedy }
}

const fn large(name: &'static str, topology: &'static str, routes: &'static str, algorithm: Algorithm) -> Case {
    Case { name, topology, routes, big: true, brute: false, algorithm }
}

/// `tagger eval --large`: fabrics of the size an operator plans for, greedy alone.
pub const LARGE: &[Case] = &[
    large("Jellyfish 1000×8, shortest (large)", "jellyfish:switches=1000,degree=8", "shortest", Algorithm::Greedy),
    large("Jellyfish 5000×8, shortest", "jellyfish:switches=5000,degree=8", "shortest", Algorithm::Greedy),
    large("Jellyfish 10000×8, shortest", "jellyfish:switches=10000,degree=8", "shortest", Algorithm::Greedy),
    large("fat-tree k=32, 1 bounce", "fattree:k=32", "updown:bounces=1", Algorithm::Bounces),
    large("fat-tree k=64, 1 bounce", "fattree:k=64", "updown:bounces=1", Algorithm::Bounces),
    large("BCube(8,3), shortest", "bcube:n=8,k=3", "shortest", Algorithm::Greedy),
];

pub const CASES: &[Case] = &[
    case("fat-tree k=4, up-down", "fattree:k=4", "updown", false),
    case("fat-tree k=4, 1 bounce", "fattree:k=4", "updown:bounces=1", false),
    case("fat-tree k=4, 2 bounces", "fattree:k=4", "updown:bounces=2", false),
    case("fat-tree k=8, 3 bounces", "fattree:k=8", "updown:bounces=3", false),
    case("fat-tree k=16, 1 bounce", "fattree:k=16", "updown:bounces=1", true),
    case("leaf-spine 16×8, 1 bounce", "leafspine:leaves=16,spines=8", "updown:bounces=1", false),
    case("leaf-spine 4×8, 2 bounces", "leafspine:leaves=4,spines=8", "updown:bounces=2", false),
    case("ring 8, shortest", "ring:n=8", "shortest", false),
    case("mesh 8, 2-shortest", "mesh:n=8", "kshortest:k=2", false),
    case("BCube(4,1), shortest", "bcube:n=4,k=1", "shortest", false),
    case("BCube(4,2), shortest", "bcube:n=4,k=2", "shortest", false),
    case("Jellyfish 100×6, shortest", "jellyfish:switches=100,degree=6", "shortest", false),
    case("Jellyfish 100×6, 4-shortest", "jellyfish:switches=100,degree=6", "kshortest:k=4", false),
    case("Jellyfish 1000×8, shortest", "jellyfish:switches=1000,degree=8", "shortest", true),
];

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Outcome {
    pub name: String,
    pub topology: String,
    pub routes: String,
    pub switches: usize,
    pub links: usize,
    pub route_states: usize,
    pub brute_tags: u8,
    pub greedy_tags: u8,
    /// The algorithm of `greedy_*` (greedy unless a case says otherwise).
    #[serde(default)]
    pub algorithm: String,
    /// Greedy's table entries (ingress + rewrite) per switch.
    pub entries_avg: f64,
    pub entries_max: usize,
    pub brute_entries_avg: f64,
    pub greedy_secs: f64,
    /// Threads greedy and the verifier ran on (shortest routes go a destination at a
    /// time, over the threads; other route sets run on one).
    #[serde(default)]
    pub threads: usize,
    pub brute_secs: f64,
    pub verify_secs: f64,
    /// Peak resident memory when greedy finished (topology, route model and greedy).
    pub greedy_peak_mib: f64,
    /// Both systems verified; otherwise the violation.
    pub verified: bool,
    pub problem: Option<String>,
}

/// Peak resident set size of this process so far, MiB (Linux).
pub fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Runs one case in this process, shortest routes over `threads` threads.
pub fn run_case(c: &Case, threads: usize) -> Result<Outcome, String> {
    let t = crate::load_topology(c.topology).map_err(|e| e.to_string())?;
    let spec: RouteSpec = c.routes.parse().map_err(|e: crate::routes::RouteError| e.to_string())?;
    // Greedy over shortest routes goes a destination at a time; their route model is
    // made only for brute force, after greedy's peak is read.
    let mut plan = Plan::new(&t, &spec, c.algorithm, threads).map_err(|e| e.to_string())?;
    let route_states = plan.route_states();
    let start = Instant::now();
    let greedy = plan.tag().map_err(|e| e.to_string())?;
    let greedy_secs = start.elapsed().as_secs_f64();
    let greedy_peak_mib = peak_rss_mib();
    let gs = TagSystem::queue_per_tag(&t, &greedy);
    let start = Instant::now();
    let mut checked = plan.verify(&gs).map(|_| ());
    let mut verify_secs = start.elapsed().as_secs_f64();
    let (mut brute_tags, mut brute_secs, mut brute_entries_avg) = (0, 0.0, 0.0);
    let n = t.switches.len() as f64;
    if c.brute {
        let m = plan.model().map_err(|e| e.to_string())?;
        let start = Instant::now();
        let brute = Algorithm::BruteForce.run(&t, m).map_err(|e| e.to_string())?;
        brute_secs = start.elapsed().as_secs_f64();
        let bs = TagSystem::queue_per_tag(&t, &brute);
        let start = Instant::now();
        checked = checked.and_then(|()| verify(&t, m, &bs).map(|_| ()));
        verify_secs += start.elapsed().as_secs_f64();
        brute_tags = brute.tags;
        brute_entries_avg = bs.tables(&t).iter().map(|s| s.entries()).sum::<usize>() as f64 / n;
    }
    let entries: Vec<usize> = gs.tables(&t).iter().map(|s| s.entries()).collect();
    Ok(Outcome {
        name: c.name.to_string(),
        topology: c.topology.to_string(),
        routes: c.routes.to_string(),
        switches: t.switches.len(),
        links: t.switch_links(),
        route_states,
        brute_tags,
        greedy_tags: greedy.tags,
        algorithm: c.algorithm.to_string(),
        entries_avg: entries.iter().sum::<usize>() as f64 / n,
        entries_max: entries.iter().copied().max().unwrap_or(0),
        brute_entries_avg,
        greedy_secs,
        threads: plan.threads(),
        brute_secs,
        verify_secs,
        greedy_peak_mib,
        verified: checked.is_ok(),
        problem: checked.err().map(|v| v.to_string()),
    })
}

/// Runs one case as `exe eval --case NAME --json`, for a peak memory of its own.
pub fn run_isolated(exe: &Path, c: &Case, threads: usize) -> Result<Outcome, String> {
    let out = Command::new(exe)
        .args(["eval", "--case", c.name, "--json", "--threads", &threads.to_string()])
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("case {}: unreadable result: {e}", c.name))
}

pub fn find(name: &str) -> Option<&'static Case> {
    CASES.iter().chain(LARGE).find(|c| c.name == name)
}
