//! Workloads as congestion-control research runs them: flows whose sizes follow a
//! published distribution, arriving at each sender as a Poisson process at a target load,
//! each to a receiver drawn at random; and what comes out of them, the flow completion
//! time (FCT) and its slowdown over the ideal on an empty fabric, by size.
//!
//! The distributions are the two that DCQCN, HPCC and their successors evaluate with:
//! web search (Alizadeh et al., "Data Center TCP", SIGCOMM 2010) and Facebook's Hadoop
//! cluster (Roy et al., "Inside the Social Network's (Datacenter) Network", SIGCOMM 2015),
//! at the points the HPCC simulator's traffic generator tabulates them. A file of your own
//! takes the same form: a line per point, the flow size in bytes and the percentage of
//! flows no larger, rising to 100.

use std::path::Path;

use pfctestkit::quantile;
use rand::Rng;
use serde::Serialize;

use crate::scenario::{invalid, ScenarioError};

/// Web search: half the flows under 80 kB, most bytes in flows of megabytes.
const WEB_SEARCH: &str = "
0 0
10000 15
20000 20
30000 30
50000 40
80000 53
200000 60
1000000 70
2000000 80
5000000 90
10000000 97
30000000 100
";

/// Facebook Hadoop: most flows under a kilobyte, a long tail to 10 MB.
const HADOOP: &str = "
0 0
100 1
200 2
300 5
350 15
400 20
500 30
600 40
700 50
1000 60
2000 67
7000 70
30000 72
50000 82
80000 87
120000 90
300000 95
1000000 97.5
2000000 99
10000000 100
";

/// A flow-size distribution: its cumulative points, sizes in bytes rising, the fraction
/// of flows no larger rising from 0 to 1; sizes between two points are linear in it.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeCdf {
    points: Vec<(f64, f64)>,
}

impl SizeCdf {
    /// `web-search`, `hadoop`, or a file in their form.
    pub fn named(name: &str, field: &str) -> Result<SizeCdf, ScenarioError> {
        match name {
            "web-search" => SizeCdf::parse(WEB_SEARCH),
            "hadoop" => SizeCdf::parse(HADOOP),
            path => {
                let text = std::fs::read_to_string(Path::new(path)).map_err(|e| {
                    invalid(field, format!("{path:?} is neither web-search, hadoop nor a readable CDF file: {e}"))
                })?;
                SizeCdf::parse(&text)
            }
        }
        .map_err(|e| invalid(field, format!("{name}: {e}")))
    }

    /// Lines of `bytes percent`; blank lines and `#` comments are skipped.
    pub fn parse(text: &str) -> Result<SizeCdf, String> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut words = line.split_whitespace();
            let (Some(x), Some(p), None) = (words.next(), words.next(), words.next()) else {
                return Err(format!("line {}: want `bytes percent`", n + 1));
            };
            let (Ok(x), Ok(p)) = (x.parse::<f64>(), p.parse::<f64>()) else {
                return Err(format!("line {}: {line:?} is not two numbers", n + 1));
            };
            if !(x.is_finite() && x >= 0.0 && (0.0..=100.0).contains(&p)) {
                return Err(format!("line {}: sizes are at least 0, percentages 0 to 100", n + 1));
            }
            if let Some(&(px, pp)) = points.last() {
                if x < px || p * 0.01 < pp {
                    return Err(format!("line {}: sizes and percentages must not fall", n + 1));
                }
            }
            points.push((x, p / 100.0));
        }
        match (points.first(), points.last()) {
            (Some(_), Some(&(x, p))) if p == 1.0 && x >= 1.0 => Ok(SizeCdf { points }),
            _ => Err("the last point must be at 100 percent, with a size of at least 1 byte".into()),
        }
    }

    /// The size at cumulative fraction `u` (0..1), at least 1 byte.
    pub fn quantile(&self, u: f64) -> u64 {
        let mut prev = (0.0, 0.0);
        for &(x, p) in &self.points {
            if u <= p {
                let size = if p > prev.1 { prev.0 + (x - prev.0) * (u - prev.1) / (p - prev.1) } else { x };
                return (size.round() as u64).max(1);
            }
            prev = (x, p);
        }
        (prev.0.round() as u64).max(1)
    }

    /// A size drawn from the distribution.
    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        self.quantile(rng.random::<f64>())
    }

    /// The mean size in bytes.
    pub fn mean(&self) -> f64 {
        let mut prev = (0.0, 0.0);
        let mut mean = 0.0;
        for &(x, p) in &self.points {
            mean += (p - prev.1) * (x + prev.0) / 2.0;
            prev = (x, p);
        }
        mean
    }
}

/// The size buckets FCT slowdown is summarised in, bytes: the upper bound of each (the
/// last is open).
pub const BUCKETS: [(u64, &str); 5] = [
    (10_000, "< 10 KB"),
    (100_000, "10-100 KB"),
    (1_000_000, "100 KB-1 MB"),
    (10_000_000, "1-10 MB"),
    (u64::MAX, ">= 10 MB"),
];

/// One size bucket's flows: how many, how many completed, and their FCT slowdown.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FctBucket {
    pub sizes: String,
    pub flows: u64,
    pub completed: u64,
    pub mean_fct_us: f64,
    pub slowdown_p50: f64,
    pub slowdown_p95: f64,
    pub slowdown_p99: f64,
}

/// Every sized flow's FCT slowdown, by size bucket, and over all.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FctSummary {
    pub flows: u64,
    pub completed: u64,
    pub buckets: Vec<FctBucket>,
    pub all: FctBucket,
}

/// One flow's size in bytes, its FCT if it completed, and its ideal FCT (`None` if even
/// that is past the run's end), ns.
#[derive(Clone, Copy, Debug)]
pub struct FlowFct {
    pub bytes: u64,
    pub fct_ns: Option<u64>,
    pub ideal_ns: Option<u64>,
}

impl FlowFct {
    /// FCT over ideal FCT, for a flow that completed.
    pub fn slowdown(&self) -> Option<f64> {
        self.fct_ns.zip(self.ideal_ns).map(|(fct, ideal)| fct as f64 / ideal.max(1) as f64)
    }
}

fn bucket(name: &str, flows: &[&FlowFct]) -> FctBucket {
    // A flow that completed had an ideal FCT: it cannot beat it.
    let done: Vec<(u64, f64)> = flows.iter().filter_map(|f| Some((f.fct_ns?, f.slowdown()?))).collect();
    let mut slowdown: Vec<f64> = done.iter().map(|&(_, s)| s).collect();
    slowdown.sort_by(f64::total_cmp);
    let mean_fct_us =
        if done.is_empty() { 0.0 } else { done.iter().map(|&(f, _)| f as f64).sum::<f64>() / done.len() as f64 / 1e3 };
    FctBucket {
        sizes: name.to_string(),
        flows: flows.len() as u64,
        completed: done.len() as u64,
        mean_fct_us,
        slowdown_p50: quantile(&slowdown, 0.50),
        slowdown_p95: quantile(&slowdown, 0.95),
        slowdown_p99: quantile(&slowdown, 0.99),
    }
}

/// The summary of `flows`; `None` when there are none.
pub fn summarise(flows: &[FlowFct]) -> Option<FctSummary> {
    if flows.is_empty() {
        return None;
    }
    let mut lower = 0;
    let buckets = BUCKETS
        .iter()
        .map(|&(upper, name)| {
            let inside: Vec<&FlowFct> = flows.iter().filter(|f| f.bytes >= lower && f.bytes < upper).collect();
            lower = upper;
            bucket(name, &inside)
        })
        .filter(|b| b.flows > 0)
        .collect();
    let all = bucket("all", &flows.iter().collect::<Vec<_>>());
    Some(FctSummary { flows: all.flows, completed: all.completed, buckets, all })
}

/// Poisson arrival times, ns after `start`, until `stop`, at `per_s` a second.
pub fn arrivals(rng: &mut impl Rng, per_s: f64, start: u64, stop: u64) -> Vec<u64> {
    let mut out = Vec::new();
    if !(per_s.is_finite() && per_s > 0.0) {
        return out;
    }
    let mut t = start as f64;
    loop {
        // Exponential gaps: -ln(U)/λ, with U in (0, 1].
        let u: f64 = 1.0 - rng.random::<f64>();
        t += -u.ln() / per_s * 1e9;
        if t >= stop as f64 {
            return out;
        }
        out.push(t.round() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn the_built_in_distributions_have_their_published_means() {
        // At these points: 1.71 MB for web search, 120 kB for Hadoop.
        let web = SizeCdf::named("web-search", "sizes").unwrap();
        let hadoop = SizeCdf::named("hadoop", "sizes").unwrap();
        assert!((1.5e6..1.8e6).contains(&web.mean()), "{}", web.mean());
        assert!((5e4..1.5e5).contains(&hadoop.mean()), "{}", hadoop.mean());
        assert_eq!(web.quantile(0.53), 80_000);
        assert_eq!(web.quantile(1.0), 30_000_000);
        assert_eq!(hadoop.quantile(0.5), 700);
    }

    #[test]
    fn sampled_sizes_follow_the_distribution() {
        let web = SizeCdf::named("web-search", "sizes").unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let n = 200_000;
        let sizes: Vec<u64> = (0..n).map(|_| web.sample(&mut rng)).collect();
        let below = |x: u64| sizes.iter().filter(|&&s| s <= x).count() as f64 / n as f64;
        // Binomial: σ ≤ 0.0012 at n = 200 000; 5σ of room.
        for (x, p) in [(10_000, 0.15), (80_000, 0.53), (1_000_000, 0.70), (10_000_000, 0.97)] {
            assert!((below(x) - p).abs() < 0.006, "P(size <= {x}) = {} against {p}", below(x));
        }
        let mean = sizes.iter().sum::<u64>() as f64 / n as f64;
        assert!((mean / web.mean() - 1.0).abs() < 0.02, "{mean} against {}", web.mean());
    }

    #[test]
    fn a_cdf_file_that_falls_or_stops_short_of_100_percent_is_refused_with_its_line() {
        assert!(SizeCdf::parse("0 0\n100 50\n").unwrap_err().contains("100 percent"));
        assert!(SizeCdf::parse("0 0\n100 50\n50 100\n").unwrap_err().contains("line 3"));
        assert!(SizeCdf::parse("0 0\nten 100\n").unwrap_err().contains("line 2"));
        assert!(SizeCdf::parse("# mine\n0 0\n1500 100 # one frame\n").is_ok());
    }

    #[test]
    fn poisson_arrivals_come_at_the_asked_rate_with_exponential_gaps() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let times = arrivals(&mut rng, 1e6, 0, 100_000_000);
        // 100 000 expected, σ = 316.
        assert!((times.len() as i64 - 100_000).abs() < 1600, "{}", times.len());
        // Exponential: the fraction of gaps above the mean is e^-1.
        let gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        let above = gaps.iter().filter(|&&g| g > 1000).count() as f64 / gaps.len() as f64;
        assert!((above - (-1f64).exp()).abs() < 0.01, "{above}");
    }

    #[test]
    fn slowdown_is_summarised_by_size_with_unfinished_flows_counted_apart() {
        let flows = [
            FlowFct { bytes: 1000, fct_ns: Some(2000), ideal_ns: Some(1000) },
            FlowFct { bytes: 5000, fct_ns: Some(4000), ideal_ns: Some(1000) },
            FlowFct { bytes: 50_000, fct_ns: None, ideal_ns: Some(5000) },
            FlowFct { bytes: 2_000_000, fct_ns: Some(300_000), ideal_ns: Some(200_000) },
        ];
        let s = summarise(&flows).unwrap();
        assert_eq!((s.flows, s.completed), (4, 3));
        let names: Vec<&str> = s.buckets.iter().map(|b| b.sizes.as_str()).collect();
        assert_eq!(names, ["< 10 KB", "10-100 KB", "1-10 MB"]);
        assert_eq!((s.buckets[0].slowdown_p50, s.buckets[0].slowdown_p99), (2.0, 4.0));
        assert_eq!((s.buckets[1].flows, s.buckets[1].completed), (1, 0));
        assert_eq!(s.buckets[2].slowdown_p50, 1.5);
        assert!(summarise(&[]).is_none());
    }
}

/// A flow a file lists: its hosts by number (the topology's hosts in order), its size in
/// bytes, when it starts, and (HPCC's files) its priority group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListedFlow {
    pub from: usize,
    pub to: usize,
    pub bytes: u64,
    pub start_ns: u64,
    pub priority: Option<u8>,
}

/// Reads htsim's connection matrix (`datacenter/connection_matrix.cpp`): `Nodes N`,
/// `Connections M`, then a line per flow, `a->b` followed by key-value pairs of which
/// `start` (µs) and `size` (bytes) are read and `id` is passed over. A line's error names
/// its number. Anything else htsim's matrix can say (triggers, failures) is refused.
pub fn parse_htsim_matrix(text: &str) -> Result<Vec<ListedFlow>, String> {
    let mut nodes = None;
    let mut connections = None;
    let mut flows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}", i + 1);
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [] => continue,
            ["Nodes", n] => nodes = Some(n.parse::<usize>().map_err(|e| at(format!("Nodes {n:?}: {e}")))?),
            ["Connections", n] => {
                connections = Some(n.parse::<usize>().map_err(|e| at(format!("Connections {n:?}: {e}")))?)
            }
            [pair, rest @ ..] if pair.contains("->") => {
                let (a, b) = pair.split_once("->").expect("checked");
                let host = |s: &str| s.parse::<usize>().map_err(|e| at(format!("host {s:?}: {e}")));
                let (from, to) = (host(a)?, host(b)?);
                let (mut start_us, mut size) = (None, None);
                for kv in rest.chunks(2) {
                    let [key, value] = kv else { return Err(at(format!("{:?} has no value", kv[0]))) };
                    match *key {
                        "start" => {
                            start_us = Some(value.parse::<f64>().map_err(|e| at(format!("start {value:?}: {e}")))?)
                        }
                        "size" => size = Some(value.parse::<u64>().map_err(|e| at(format!("size {value:?}: {e}")))?),
                        "id" => {}
                        other => return Err(at(format!("{other:?} is not read here (only id, start and size)"))),
                    }
                }
                let start_us = start_us.unwrap_or(0.0);
                if !(start_us.is_finite() && start_us >= 0.0) {
                    return Err(at(format!("start {start_us} must be a time of at least 0")));
                }
                let bytes = size.ok_or_else(|| at("a flow needs a size".into()))?;
                flows.push(ListedFlow { from, to, bytes, start_ns: (start_us * 1e3).round() as u64, priority: None });
            }
            [word, ..] => return Err(at(format!("{word:?}: not a line of a connection matrix"))),
        }
    }
    let nodes = nodes.ok_or("no Nodes line")?;
    if let Some(f) = flows.iter().find(|f| f.from >= nodes || f.to >= nodes) {
        return Err(format!("a flow {}->{} names a host beyond Nodes {nodes}", f.from, f.to));
    }
    match connections {
        Some(n) if n != flows.len() => Err(format!("Connections says {n}, the file lists {}", flows.len())),
        _ => Ok(flows),
    }
}

/// Reads the HPCC simulator's flow file (`mix/flow.txt`): the number of flows, then a line
/// per flow, `src dst pg dport size start_s`: hosts by number, the priority group, the
/// destination port (passed over), the size in bytes and the start in seconds.
pub fn parse_hpcc_flows(text: &str) -> Result<Vec<ListedFlow>, String> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines.next().ok_or("an empty flow file")?;
    let n: usize = first.trim().parse().map_err(|e| format!("line 1: the number of flows {first:?}: {e}"))?;
    let mut flows = Vec::with_capacity(n.min(1 << 20));
    for (i, line) in lines {
        let at = |e: String| format!("line {}: {e}", i + 1);
        let w: Vec<&str> = line.split_whitespace().collect();
        let [src, dst, pg, _dport, size, start] = w[..] else {
            return Err(at(format!("{} fields, not the six of `src dst pg dport size start_s`", w.len())));
        };
        let num = |what: &str, s: &str| s.parse::<u64>().map_err(|e| at(format!("{what} {s:?}: {e}")));
        let start_s: f64 = start.parse().map_err(|e| at(format!("start {start:?}: {e}")))?;
        if !(start_s.is_finite() && start_s >= 0.0) {
            return Err(at(format!("start {start_s} must be a time of at least 0")));
        }
        let pg = num("pg", pg)?;
        flows.push(ListedFlow {
            from: num("src", src)? as usize,
            to: num("dst", dst)? as usize,
            bytes: num("size", size)?,
            start_ns: (start_s * 1e9).round() as u64,
            priority: u8::try_from(pg).ok().filter(|&p| p < 8),
        });
    }
    if flows.len() != n {
        return Err(format!("the first line says {n} flows, the file lists {}", flows.len()));
    }
    Ok(flows)
}

#[cfg(test)]
mod listed {
    use super::*;

    #[test]
    fn an_htsim_connection_matrix_reads_as_its_flows_with_starts_in_microseconds() {
        let text = "Nodes 16\nConnections 2\n0->5 id 1 start 0 size 2000000\n3->12 id 2 start 12.5 size 100\n";
        let f = parse_htsim_matrix(text).unwrap();
        assert_eq!(f[0], ListedFlow { from: 0, to: 5, bytes: 2_000_000, start_ns: 0, priority: None });
        assert_eq!((f[1].from, f[1].to, f[1].bytes, f[1].start_ns), (3, 12, 100, 12_500));
        let bad = parse_htsim_matrix("Nodes 4\nConnections 1\n0->9 start 0 size 1\n").unwrap_err();
        assert!(bad.contains("beyond Nodes 4"), "{bad}");
        let trigger = parse_htsim_matrix("Nodes 4\n0->1 size 1 trigger 2\n").unwrap_err();
        assert!(trigger.contains("line 2") && trigger.contains("\"trigger\""), "{trigger}");
        assert!(parse_htsim_matrix("Nodes 4\nConnections 2\n0->1 size 1\n")
            .unwrap_err()
            .contains("Connections says 2"));
    }

    #[test]
    fn an_hpcc_flow_file_reads_as_its_flows_with_starts_in_seconds_and_its_priority_groups() {
        let f = parse_hpcc_flows("2\n2 1 3 100 200000 2.000001\n0 7 3 100 1000 2\n").unwrap();
        assert_eq!(f[0], ListedFlow { from: 2, to: 1, bytes: 200_000, start_ns: 2_000_001_000, priority: Some(3) });
        assert_eq!(f[1].start_ns, 2_000_000_000);
        assert!(parse_hpcc_flows("3\n2 1 3 100 200000 2\n").unwrap_err().contains("says 3 flows"));
        assert!(parse_hpcc_flows("1\n2 1 3 100\n").unwrap_err().contains("line 2: 4 fields"));
    }
}
