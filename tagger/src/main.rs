use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

use tagger::algo::Algorithm;
use tagger::eval::{self, Outcome};
use tagger::plan::Plan;
use tagger::routes::RouteSpec;
use tagger::system::{self, Format, TagPriorities, TagSystem};
use tagger::topology::file::TopologyFile;
use tagger::verify::TaggedGraph;

/// Tagger: deadlock-free PFC tag tables for any topology and set of lossless routes.
#[derive(Parser)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Compute tag tables, verify them, and write one file per switch.
    Compute {
        /// A topology file (TOML/JSON, pfctools testbed files too) or a generator:
        /// fattree:k=K, leafspine:leaves=L,spines=S, jellyfish:switches=N,degree=D[,seed=X],
        /// bcube:n=N,k=K, ring:n=N, mesh:n=N (each with hosts=H where it applies).
        #[arg(long)]
        topology: String,
        /// updown, updown:bounces=K, shortest, kshortest:k=K, or file:PATH.
        #[arg(long)]
        routes: String,
        #[arg(long, default_value = "greedy")]
        algorithm: Algorithm,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, value_enum, default_value = "toml")]
        format: OutFormat,
        /// The priority (lossless queue) of tag 1, 2, ...: default tag t at priority t,
        /// skipping --lossy-priority (tag t at t + 1 from there on).
        #[arg(long, value_delimiter = ',')]
        priorities: Option<Vec<u8>>,
        #[arg(long, default_value_t = 0)]
        lossy_priority: u8,
        /// Also write the tagged graph as Graphviz (for small topologies).
        #[arg(long)]
        dot: Option<PathBuf>,
        /// Threads for shortest routes, which are tagged and verified a destination at a
        /// time (the result is the same for any number): all the machine's cores unless
        /// given.
        #[arg(long)]
        threads: Option<usize>,
        /// Fail this many switch-to-switch links, chosen at random (from --seed), and
        /// compute the tables for what is left; the tags needed before the failures are
        /// reported beside.
        #[arg(long, default_value_t = 0)]
        fail_links: usize,
        /// The seed of --fail-links' choice.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Check tables against a topology and route set: no rule missing, tags monotonic,
    /// every tag acyclic. Exits 1 and names the offending route or cycle otherwise.
    Verify {
        #[arg(long)]
        topology: String,
        #[arg(long)]
        routes: String,
        /// The directory `compute --out` wrote.
        #[arg(long)]
        tables: PathBuf,
        /// Also write the tagged graph as Graphviz (for small topologies).
        #[arg(long)]
        dot: Option<PathBuf>,
        /// Threads for shortest routes, which are checked a destination at a time (the
        /// outcome is the same for any number): all the machine's cores unless given.
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Tags, table sizes, time and peak memory over standard topologies.
    Eval {
        /// Leave out the two big cases (1000-switch Jellyfish, k=16 fat-tree).
        #[arg(long)]
        quick: bool,
        /// The fabrics an operator plans (Jellyfish to 10 000 switches, fat-trees to
        /// k=64, BCube(8,3)), greedy alone: tags, entries, time, peak memory, verified.
        #[arg(long, conflicts_with = "quick")]
        large: bool,
        /// Threads for shortest routes (tagged and verified a destination at a time; the
        /// result is the same for any number).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        #[arg(long)]
        json: bool,
        /// Run one case in this process (what each row runs as).
        #[arg(long)]
        case: Option<String>,
    },
    /// Print a topology (e.g. a generated one) as a topology file.
    Topology {
        topology: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum OutFormat {
    Toml,
    Json,
}

fn main() -> ExitCode {
    // `tagger compute ... | head` ends as `head` ends the reader, not with a panic.
    pfcswitch_table::quiet_on_closed_stdout();
    match run(Cli::parse().command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tagger: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cmd: Cmd) -> Result<ExitCode> {
    match cmd {
        Cmd::Compute {
            topology,
            routes,
            algorithm,
            out,
            format,
            priorities,
            lossy_priority,
            dot,
            threads,
            fail_links,
            seed,
        } => {
            let mut prio = TagPriorities::with_lossy(lossy_priority);
            if let Some(p) = priorities {
                prio.lossless = p;
            }
            let format = match format {
                OutFormat::Toml => Format::Toml,
                OutFormat::Json => Format::Json,
            };
            let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let fail = (fail_links > 0).then_some((fail_links, seed));
            compute(&topology, &routes, algorithm, (&out, format), &prio, threads, fail)?;
            if let Some(path) = dot {
                write_dot(&topology, &routes, &out, &path)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Verify { topology, routes, tables, dot, threads } => {
            let t = tagger::load_topology(&topology)?;
            let spec: RouteSpec = routes.parse()?;
            let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let mut plan = Plan::to_verify(&t, &spec, threads)?;
            let sys = TagSystem::from_tables(&t, &system::read_tables(&tables)?)?;
            if let Some(path) = dot {
                if let Ok(g) = TaggedGraph::build(&t, plan.model()?, &sys) {
                    std::fs::write(&path, g.to_dot(&t)).with_context(|| format!("{}", path.display()))?;
                }
            }
            match plan.verify(&sys) {
                Ok(r) => {
                    println!(
                        "OK: {} lossless tags; {} (route state, tag) pairs walked, {} tagged-graph nodes, {} edges; \
                         every hop mapped, tags monotonic, every tag acyclic",
                        sys.tags, r.states, r.nodes, r.edges
                    );
                    Ok(ExitCode::SUCCESS)
                }
                Err(v) => {
                    println!("FAILED: {v}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        Cmd::Eval { quick, large, threads, json, case } => {
            if let Some(name) = case {
                let c = eval::find(&name).with_context(|| format!("no eval case called {name:?}"))?;
                let o = eval::run_case(c, threads).map_err(anyhow::Error::msg)?;
                if json {
                    println!("{}", serde_json::to_string(&o)?);
                } else {
                    print!("{}", eval_table(&[o]));
                }
                return Ok(ExitCode::SUCCESS);
            }
            let exe = std::env::current_exe().context("finding the tagger binary")?;
            let mut outcomes = Vec::new();
            let mut failed = false;
            let cases = if large { eval::LARGE } else { eval::CASES };
            for c in cases.iter().filter(|c| !(quick && c.big)) {
                eprintln!("  {} ...", c.name);
                match eval::run_isolated(&exe, c, threads) {
                    Ok(o) => {
                        failed |= !o.verified;
                        outcomes.push(o);
                    }
                    Err(e) => {
                        eprintln!("  {}: {e}", c.name);
                        failed = true;
                    }
                }
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&outcomes)?);
            } else {
                print!("{}", if large { large_table(&outcomes) } else { eval_table(&outcomes) });
                println!(
                    "tags: lossless tags needed; entries: ingress + rewrite rules per switch (greedy); time and peak \
                     memory: greedy alone, each case in its own process"
                );
            }
            Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
        }
        Cmd::Topology { topology, json } => {
            let t = tagger::load_topology(&topology)?;
            print!("{}", TopologyFile::from_topology(&t).to_text(json));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The tagged graph of the tables just written in `out`, as Graphviz.
fn write_dot(topology: &str, routes: &str, out: &std::path::Path, path: &std::path::Path) -> Result<()> {
    let t = tagger::load_topology(topology)?;
    let m = routes.parse::<RouteSpec>()?.model(&t)?;
    let sys = TagSystem::from_tables(&t, &system::read_tables(out)?)?;
    let g = TaggedGraph::build(&t, m.as_ref(), &sys)?;
    std::fs::write(path, g.to_dot(&t)).with_context(|| format!("{}", path.display()))?;
    println!("tagged graph ({} nodes, {} edges) written to {}", g.nodes.len(), g.edges.len(), path.display());
    Ok(())
}

fn compute(
    topology: &str,
    routes: &str,
    algorithm: Algorithm,
    (out, format): (&std::path::Path, Format),
    prio: &TagPriorities,
    threads: usize,
    fail: Option<(usize, u64)>,
) -> Result<()> {
    let t = tagger::load_topology(topology)?;
    let spec: RouteSpec = routes.parse()?;
    let mut before = None;
    let t = match fail {
        None => t,
        Some((n, seed)) => {
            before = Some(Plan::new(&t, &spec, algorithm, threads)?.tag()?.tags);
            let (failed, lost) = t.fail_links(n, seed)?;
            let shown: Vec<String> = lost.iter().take(8).map(|(a, b)| format!("{a}–{b}")).collect();
            let more = if lost.len() > shown.len() {
                format!(" and {} more", lost.len() - shown.len())
            } else {
                String::new()
            };
            println!("failed {n} switch links (seed {seed}): {}{more}", shown.join(", "));
            failed
        }
    };
    println!(
        "topology: {topology}: {} switches, {} hosts, {} switch links",
        t.switches.len(),
        t.hosts.len(),
        t.switch_links()
    );
    let mut plan = Plan::new(&t, &spec, algorithm, threads)?;
    println!("routes: {spec}: {}", plan.describe());
    let start = Instant::now();
    let tagging = plan.tag()?;
    let secs = start.elapsed().as_secs_f64();
    // Brute force beside greedy, but not where its route model is what the fabric is too
    // big for.
    let compare = if algorithm == Algorithm::Greedy && !plan.streamed() {
        format!(" (brute force: {})", Algorithm::BruteForce.run(&t, plan.model()?)?.tags)
    } else {
        String::new()
    };
    println!("{algorithm}: {} lossless tags{compare}, {secs:.2} s", tagging.tags);
    if let Some(before) = before {
        println!("lossless tags needed: {before} before the failures, {} after", tagging.tags);
    }
    let sys = TagSystem::new(&t, &tagging, prio)?;
    let start = Instant::now();
    let report = match plan.verify(&sys) {
        Ok(r) => r,
        Err(v) => bail!("the computed system fails verification (a bug): {v}"),
    };
    println!("verified in {:.2} s", start.elapsed().as_secs_f64());
    println!(
        "verified: {} (route state, tag) pairs, {} tagged-graph nodes, {} edges; every hop mapped, tags monotonic, \
         every tag acyclic",
        report.states, report.nodes, report.edges
    );
    let tables = sys.tables(&t);
    system::write_tables(out, &tables, format)?;
    let summary = summary(&sys, &tables);
    std::fs::write(out.join("summary.txt"), &summary).with_context(|| format!("{}", out.display()))?;
    print!("{summary}");
    println!("wrote {} table files and summary.txt to {}", tables.len(), out.display());
    Ok(())
}

fn summary(sys: &TagSystem, tables: &[system::SwitchTables]) -> String {
    let mut s = String::new();
    let mapping: Vec<String> = (1..=sys.tags)
        .rev()
        .map(|tag| {
            let prio = sys.queue.iter().find(|(&(_, t), _)| t == tag).map_or(tag, |(_, &p)| p);
            format!("tag {tag} → priority {prio}")
        })
        .collect();
    s += &format!(
        "{} lossless tags: hosts stamp tag {}; {}; anything unmatched: tag 0, priority {}\n",
        sys.tags,
        sys.initial_tag,
        mapping.join(", "),
        sys.lossy_priority
    );
    let entries: Vec<usize> = tables.iter().map(|t| t.entries()).collect();
    let total: usize = entries.iter().sum();
    s += &format!(
        "entries per switch (ingress + rewrite): min {}, avg {:.1}, max {}; {} in all\n",
        entries.iter().min().unwrap_or(&0),
        total as f64 / tables.len().max(1) as f64,
        entries.iter().max().unwrap_or(&0),
        total
    );
    if tables.len() <= 40 {
        let w = tables.iter().map(|t| t.switch.len()).max().unwrap_or(6).max(6);
        s += &format!("{:<w$}  {:>7}  {:>7}  {:>7}\n", "switch", "ingress", "rewrite", "total");
        for tab in tables {
            s += &format!(
                "{:<w$}  {:>7}  {:>7}  {:>7}\n",
                tab.switch,
                tab.ingress.len(),
                tab.rewrite.len(),
                tab.entries()
            );
        }
    }
    s
}

/// `eval --large`'s table: greedy alone, with its verifier's time.
fn large_table(rows: &[Outcome]) -> String {
    let mut t = pfcswitch_table::Table::new(&[
        "case",
        "switches",
        "links",
        "route states",
        "algorithm",
        "tags",
        "entries/switch avg (max)",
        "time",
        "verify time",
        "threads",
        "peak memory",
        "verified",
    ]);
    for o in rows {
        t.row(vec![
            o.name.clone(),
            o.switches.to_string(),
            o.links.to_string(),
            format!("{:.2e}", o.route_states as f64),
            o.algorithm.clone(),
            o.greedy_tags.to_string(),
            format!("{:.1} ({})", o.entries_avg, o.entries_max),
            format!("{:.2} s", o.greedy_secs),
            format!("{:.2} s", o.verify_secs),
            o.threads.to_string(),
            format!("{:.0} MiB", o.greedy_peak_mib),
            if o.verified { "yes".into() } else { format!("NO: {}", o.problem.clone().unwrap_or_default()) },
        ]);
    }
    t.render()
}

fn eval_table(rows: &[Outcome]) -> String {
    let header = [
        "case",
        "switches",
        "links",
        "brute-force tags",
        "greedy tags",
        "entries/switch avg (max)",
        "greedy time",
        "greedy peak memory",
        "verified",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|o| {
            vec![
                o.name.clone(),
                o.switches.to_string(),
                o.links.to_string(),
                o.brute_tags.to_string(),
                o.greedy_tags.to_string(),
                format!("{:.1} ({})", o.entries_avg, o.entries_max),
                format!("{:.2} s", o.greedy_secs),
                format!("{:.0} MiB", o.greedy_peak_mib),
                if o.verified { "yes".into() } else { format!("NO: {}", o.problem.clone().unwrap_or_default()) },
            ]
        })
        .collect();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &cells {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |row: Vec<String>| -> String {
        let parts: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = width[i] - c.chars().count();
                if i == 0 {
                    format!("{c}{}", " ".repeat(pad))
                } else {
                    format!("{}{c}", " ".repeat(pad))
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string() + "\n"
    };
    let mut s = line(header.iter().map(|h| h.to_string()).collect());
    for row in cells {
        s += &line(row);
    }
    s
}
