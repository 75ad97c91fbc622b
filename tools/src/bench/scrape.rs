//! `bench scrape`: what Prometheus scrapes cost the forwarding. One flow through the
//! switch at a fixed rate (300 k frames/s of 64 bytes by default), in alternating runs
//! without and with scrapers that fetch `/metrics` one after another as fast as the
//! switch answers; per run the frames lost (and where), the switch's longest loop stall
//! and its wait for a CPU, and the scrapes made. A scrape's kernel reads (sockets, XDP
//! maps, /proc) happen on the metrics endpoint's thread, not on the forwarding thread;
//! the bench shows what remains.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use pfcswitch::cli::RunArgs;
use pfcswitch_table::Table;

use super::median;
use crate::harness::{self, SwitchLosses, SwitchProc};
use crate::testbed::TestbedTopology;
use crate::testbed::{unique_name, Testbed, Topology};

#[derive(Args, Clone, Debug)]
pub struct ScrapeArgs {
    /// Frames per second through the switch.
    #[arg(long, default_value = "300k", value_parser = crate::cli::parse_rate)]
    pub rate: f64,
    /// Frame size on the wire (FCS included).
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// Scrapers in the scraped runs, each fetching /metrics in a tight loop.
    #[arg(long, default_value_t = 4)]
    pub scrapers: usize,
    /// Seconds of traffic per run.
    #[arg(long, default_value_t = 3.0, value_parser = crate::cli::parse_positive)]
    pub seconds: f64,
    /// Rounds; each makes one run without scrapers and one with, alternating which first.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    #[arg(long)]
    pub json: bool,
}

/// One run's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ScrapeRun {
    pub round: usize,
    pub scrapers: usize,
    pub sent: u64,
    pub received: u64,
    /// Frames sent and not received.
    pub lost: u64,
    /// Where the switch lost them: a full rx ring, no free frame on a fill ring, its own
    /// drops.
    pub switch_rx_ring_full: u64,
    pub switch_rx_no_frame: u64,
    pub switch_drops: u64,
    /// The switch's longest loop stall during the run, µs.
    pub longest_stall_us: u64,
    /// How long the switch's loop waited for a CPU during the run, µs.
    pub cpu_wait_us: Option<u64>,
    /// Scrapes answered, and per second.
    pub scrapes: u64,
    pub scrapes_per_s: f64,
    /// Scrape response times, ms.
    pub scrape_p50_ms: f64,
    pub scrape_max_ms: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ScrapeReport {
    pub rate: f64,
    pub size: usize,
    pub seconds: f64,
    pub runs: Vec<ScrapeRun>,
    /// Medians over the rounds, without and with scrapers.
    pub quiet_lost_median: f64,
    pub scraped_lost_median: f64,
    pub quiet_stall_median_us: f64,
    pub scraped_stall_median_us: f64,
}

/// Where the endpoint listens, inside the switch's namespace.
const METRICS: &str = "127.0.0.1:9469";

pub fn run(args: &ScrapeArgs) -> Result<()> {
    let tb = Testbed::up(&unique_name("bench-scrape"), Topology::star(2))?;
    // The configuration a user gets, with the endpoint on and the forwarding thread on a
    // CPU of its own (`dataplane.cpu`, which keeps the switch's other threads off it):
    // otherwise the scrapers, the sender and the sink take the switch's CPU from it by
    // their own load, whatever a scrape asks of the forwarding thread.
    let cpus = harness::CpuPlan::split();
    let mut config = harness::switch_config(&tb, "sw1");
    config.dataplane.cpu = cpus.switch;
    let addr: SocketAddr = METRICS.parse()?;
    let run_args = RunArgs { metrics: Some(addr), ..RunArgs::default() };
    let switch =
        SwitchProc::start_on(&tb, "sw1", &config, &run_args, &cpus.switch_process).context("starting pfcswitch")?;
    let mut report = ScrapeReport { rate: args.rate, size: args.size, seconds: args.seconds, ..Default::default() };
    for round in 0..args.rounds {
        let order = if round % 2 == 0 { [0, args.scrapers] } else { [args.scrapers, 0] };
        for scrapers in order {
            let r = one_run(&tb, &switch, &cpus, args, (round, scrapers), addr)?;
            eprintln!(
                "  round {round}, {scrapers} scrapers: {} sent, {} lost, longest stall {:.2} ms, {:.0} scrapes/s",
                r.sent,
                r.lost,
                r.longest_stall_us as f64 / 1e3,
                r.scrapes_per_s
            );
            report.runs.push(r);
        }
    }
    let finished = switch.stop();
    if !finished.success() {
        eprintln!("pfcswitch exited with {}: {}", finished.status, finished.stderr.trim());
    }
    let med = |scraped: bool, f: &dyn Fn(&ScrapeRun) -> f64| {
        median(&report.runs.iter().filter(|r| (r.scrapers > 0) == scraped).map(f).collect::<Vec<_>>())
    };
    report.quiet_lost_median = med(false, &|r| r.lost as f64);
    report.scraped_lost_median = med(true, &|r| r.lost as f64);
    report.quiet_stall_median_us = med(false, &|r| r.longest_stall_us as f64);
    report.scraped_stall_median_us = med(true, &|r| r.longest_stall_us as f64);
    print_report(args, &report)
}

fn one_run(
    tb: &Testbed,
    switch: &SwitchProc,
    cpus: &harness::CpuPlan,
    args: &ScrapeArgs,
    (round, scrapers): (usize, usize),
    addr: SocketAddr,
) -> Result<ScrapeRun> {
    let start_ns = pfcswitch::sys::now().as_nanos();
    let before = SwitchLosses::read(switch)?;
    let waited_before = switch.stats()?.stalls.cpu_wait_us;
    let stop = Arc::new(AtomicBool::new(false));
    let threads = (0..scrapers)
        .map(|_| {
            let (stop, avoid) = (stop.clone(), cpus.switch);
            tb.thread_in("sw1", move || {
                // With the host-side tools, off the switch's CPU.
                if let Some(cpu) = avoid {
                    let _ = pfcswitch::sys::avoid_cpu(cpu);
                }
                scrape_until(addr, &stop)
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let started = Instant::now();
    let flow = harness::one_flow_h1_to_h2_on(tb, args.size, args.seconds, Some(args.rate), None, cpus.hosts());
    stop.store(true, Ordering::Relaxed);
    let scraping = started.elapsed();
    let mut times: Vec<Duration> = Vec::new();
    for t in threads {
        times.extend(t.join().map_err(|_| anyhow::anyhow!("a scraper panicked"))?);
    }
    let flow = flow?;
    let lost_at = SwitchLosses::read(switch)?.minus(before);
    let stalls = switch.stats()?.stalls;
    let f = flow.sink.flows.first().cloned().unwrap_or_default();
    times.sort_unstable();
    let ms = |d: Option<&Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1e3);
    Ok(ScrapeRun {
        round,
        scrapers,
        sent: flow.gen.sent,
        received: f.received,
        lost: flow.gen.sent.saturating_sub(f.received),
        switch_rx_ring_full: lost_at.rx_ring_full,
        switch_rx_no_frame: lost_at.rx_no_frame,
        switch_drops: lost_at.dropped(),
        longest_stall_us: stalls.longest_since(start_ns).map_or(0, |s| s.us),
        cpu_wait_us: waited_before.zip(stalls.cpu_wait_us).map(|(a, b)| b.saturating_sub(a)),
        scrapes: times.len() as u64,
        scrapes_per_s: times.len() as f64 / scraping.as_secs_f64(),
        scrape_p50_ms: ms(times.get(times.len() / 2)),
        scrape_max_ms: ms(times.last()),
    })
}

/// Fetches /metrics from `addr` one scrape after another until `stop`; each answered
/// scrape's response time. A scrape that fails or takes over 5 s ends the loop.
fn scrape_until(addr: SocketAddr, stop: &AtomicBool) -> Vec<Duration> {
    let mut times = Vec::new();
    let mut body = Vec::with_capacity(1 << 16);
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        match scrape(addr, &mut body) {
            Ok(true) => times.push(t.elapsed()),
            _ => break,
        }
    }
    times
}

/// One scrape of `/metrics` at `addr` (5 s to connect, 5 s to answer), the answer left in
/// `body`: whether it was a 200.
pub fn scrape(addr: SocketAddr, body: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
    body.clear();
    s.read_to_end(body)?;
    Ok(body.starts_with(b"HTTP/1.1 200"))
}

fn print_report(args: &ScrapeArgs, r: &ScrapeReport) -> Result<()> {
    if args.json {
        println!("{}", serde_json::to_string_pretty(r)?);
        return Ok(());
    }
    println!(
        "bench scrape: h1 → switch → h2 at {:.0} frames/s of {} B, {} s per run, {} rounds; scraped runs have {} \
         scrapers fetching /metrics back to back",
        args.rate, args.size, args.seconds, args.rounds, args.scrapers
    );
    let mut t = Table::new(&[
        "round",
        "scrapers",
        "sent",
        "lost",
        "rx ring full",
        "no fill frame",
        "switch drops",
        "longest stall ms",
        "CPU wait ms",
        "scrapes/s",
        "scrape p50/max ms",
    ]);
    for x in &r.runs {
        t.row(vec![
            x.round.to_string(),
            x.scrapers.to_string(),
            x.sent.to_string(),
            x.lost.to_string(),
            x.switch_rx_ring_full.to_string(),
            x.switch_rx_no_frame.to_string(),
            x.switch_drops.to_string(),
            format!("{:.2}", x.longest_stall_us as f64 / 1e3),
            x.cpu_wait_us.map_or("-".into(), |us| format!("{:.1}", us as f64 / 1e3)),
            format!("{:.0}", x.scrapes_per_s),
            if x.scrapers > 0 { format!("{:.1}/{:.1}", x.scrape_p50_ms, x.scrape_max_ms) } else { "-".into() },
        ]);
    }
    print!("{}", t.render());
    println!(
        "medians: lost {:.0} without scrapers, {:.0} with; longest stall {:.2} ms without, {:.2} ms with",
        r.quiet_lost_median,
        r.scraped_lost_median,
        r.quiet_stall_median_us / 1e3,
        r.scraped_stall_median_us / 1e3
    );
    Ok(())
}
