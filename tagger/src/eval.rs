//! `tagger eval`: tags needed (brute force against greedy), table entries per switch, time
//! and peak memory over standard topologies. Each case runs in its own process so that its
//! peak memory is its own.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::algo::Algorithm;
use crate::routes::RouteSpec;
use crate::system::TagSystem;
use crate::verify::verify;

pub struct Case {
    pub name: &'static str,
    pub topology: &'static str,
    pub routes: &'static str,
    /// Left out of `--quick`.
    pub big: bool,
}

const fn case(name: &'static str, topology: &'static str, routes: &'static str, big: bool) -> Case {
    Case { name, topology, routes, big }
}

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
    /// Greedy's table entries (ingress + rewrite) per switch.
    pub entries_avg: f64,
    pub entries_max: usize,
    pub brute_entries_avg: f64,
    pub greedy_secs: f64,
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

/// Runs one case in this process.
pub fn run_case(c: &Case) -> Result<Outcome, String> {
    let t = crate::load_topology(c.topology).map_err(|e| e.to_string())?;
    let spec: RouteSpec = c.routes.parse().map_err(|e: crate::routes::RouteError| e.to_string())?;
    let m = spec.model(&t).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let greedy = Algorithm::Greedy.run(&t, m.as_ref()).map_err(|e| e.to_string())?;
    let greedy_secs = start.elapsed().as_secs_f64();
    let greedy_peak_mib = peak_rss_mib();
    let start = Instant::now();
    let brute = Algorithm::BruteForce.run(&t, m.as_ref()).map_err(|e| e.to_string())?;
    let brute_secs = start.elapsed().as_secs_f64();
    let (gs, bs) = (TagSystem::queue_per_tag(&t, &greedy), TagSystem::queue_per_tag(&t, &brute));
    let start = Instant::now();
    let checked = verify(&t, m.as_ref(), &gs).and_then(|_| verify(&t, m.as_ref(), &bs));
    let verify_secs = start.elapsed().as_secs_f64();
    let entries: Vec<usize> = gs.tables(&t).iter().map(|s| s.entries()).collect();
    let brute_entries: usize = bs.tables(&t).iter().map(|s| s.entries()).sum();
    let n = t.switches.len() as f64;
    Ok(Outcome {
        name: c.name.to_string(),
        topology: c.topology.to_string(),
        routes: c.routes.to_string(),
        switches: t.switches.len(),
        links: t.switch_links(),
        route_states: m.num_states(),
        brute_tags: brute.tags,
        greedy_tags: greedy.tags,
        entries_avg: entries.iter().sum::<usize>() as f64 / n,
        entries_max: entries.iter().copied().max().unwrap_or(0),
        brute_entries_avg: brute_entries as f64 / n,
        greedy_secs,
        brute_secs,
        verify_secs,
        greedy_peak_mib,
        verified: checked.is_ok(),
        problem: checked.err().map(|v| v.to_string()),
    })
}

/// Runs one case as `exe eval --case NAME --json`, for a peak memory of its own.
pub fn run_isolated(exe: &Path, c: &Case) -> Result<Outcome, String> {
    let out = Command::new(exe)
        .args(["eval", "--case", c.name, "--json"])
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("case {}: unreadable result: {e}", c.name))
}

pub fn find(name: &str) -> Option<&'static Case> {
    CASES.iter().find(|c| c.name == name)
}
