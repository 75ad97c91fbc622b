//! Benchmarks and the demo: each builds identical netns testbeds, runs the real
//! binaries, and prints its figures (ratios measured side by side in one run); `sim`
//! times the simulator.

pub mod dcfit;
pub mod demo;
pub mod forward;
pub mod lab;
pub mod pfc;
pub mod pfcwd;
pub mod ping;
pub mod report;
pub mod response;
pub mod rfc2544;
pub mod scrape;
pub mod soak;
pub mod wake;
pub use pfcsim::bench as sim;

use anyhow::Result;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Delivered frames/s host→switch→host through pfcswitch and through a Linux bridge.
    Forward(forward::ForwardArgs),
    /// PFC reaction time under congestion, and pause durations obeyed at 1G–100G.
    Pfc(pfc::PfcArgs),
    /// How much of a paused priority still leaves after an XOFF reaches the switch, per
    /// port speed beside 802.3's allowance, and whether a storm then holds it at zero.
    PauseResponse(response::ResponseArgs),
    /// DCFIT deadlock detection time on a three-switch ring.
    Dcfit(dcfit::DcfitArgs),
    /// The PFC watchdog's accuracy: storm start to detection against detection_ms.
    Pfcwd(pfcwd::PfcwdArgs),
    /// The kernel's ping through each idle device (pfcswitch with each way its loop can
    /// wait, OVS, a bridge, the direct path) and the CPU each spends meanwhile; beneath
    /// them, what this machine takes to wake a thread asleep on another CPU.
    Ping(ping::PingArgs),
    /// The simulator's speed on one core, from a ring to a k=16 fat-tree.
    Sim(sim::SimBenchArgs),
    /// The same fat-tree and flows in pfcsim and (with --htsim) in htsim: wall time, peak
    /// memory and flow completion times side by side.
    Agreement(pfcsim::agreement::AgreementArgs),
    /// RFC 2544 throughput, latency and frame loss per frame size, through pfcswitch with
    /// its defaults, a Linux bridge and the direct veth path, in one run.
    Rfc2544(rfc2544::Rfc2544Args),
    /// Loss and loop stalls at a fixed rate without and with Prometheus scrapers in a
    /// tight loop, alternating.
    Scrape(scrape::ScrapeArgs),
    /// A switch under mixed traffic while faults come at random from a seed; at the end
    /// every frame is accounted for.
    Soak(soak::SoakArgs),
}

pub fn run(cmd: BenchCommand) -> Result<()> {
    // Before a long run: what this kernel offers the switch and the tools' XDP programs
    // (every bench but the simulator's runs them).
    if !matches!(cmd, BenchCommand::Sim(_) | BenchCommand::Agreement(_)) {
        say_kernel_paths();
        clean_up_on_signals()?;
    }
    match cmd {
        BenchCommand::Forward(args) => forward::run(&args),
        BenchCommand::Pfc(args) => pfc::run(&args),
        BenchCommand::PauseResponse(args) => response::run(&args),
        BenchCommand::Dcfit(args) => dcfit::run(&args),
        BenchCommand::Pfcwd(args) => pfcwd::run(&args),
        BenchCommand::Ping(args) => ping::run(&args),
        BenchCommand::Sim(args) => sim::run(&args),
        BenchCommand::Agreement(args) => pfcsim::agreement::run(&args),
        BenchCommand::Rfc2544(args) => rfc2544::run(&args),
        BenchCommand::Scrape(args) => scrape::run(&args),
        BenchCommand::Soak(args) => soak::run(&args),
    }
}

/// A command stopped by Ctrl-C, SIGTERM or SIGHUP removes the testbeds it made, then
/// exits (128 + the signal): a signal ends the process without running their `Drop`, and
/// their namespaces stayed until `pfctools testbed clean`. The processes it started in
/// them end with it (they are started with a parent-death signal) or are killed with
/// the namespaces.
pub fn clean_up_on_signals() -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new().name("bench-signals".into()).spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let removed = crate::testbed::clean_own();
            match removed.is_empty() {
                true => eprintln!("pfctools: stopped by signal {sig}"),
                false => eprintln!("pfctools: stopped by signal {sig}; removed the testbeds {}", removed.join(" ")),
            }
            std::process::exit(128 + sig);
        }
    })?;
    Ok(())
}

/// Says on stderr which path each optional part of the XDP programs takes on this
/// kernel (as `pfcswitch doctor` does), or why it could not be probed.
pub fn say_kernel_paths() {
    eprintln!("kernel {}:", pfcswitch::sys::kernel_release());
    match afxdp::paths::probe(Default::default()) {
        Ok(p) => p.paths.lines().iter().for_each(|l| eprintln!("  {l}")),
        Err(e) => eprintln!("  the XDP programs could not be probed: {e}"),
    }
}

/// The median of a bench's runs: the testkit's, which the simulator's benches use too.
pub use pfctestkit::median;
