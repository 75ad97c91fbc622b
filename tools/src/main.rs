//! `pfctools`: testbeds, traffic, storms, headroom tests and benchmarks for pfcswitch.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use pfctools::bench;
use pfctools::cli::{GenArgs, SinkArgs};
use pfctools::testbed::{self, Testbed, TestbedTopology, Topology};
use pfctools::traffic::{gen, inject, sink};

/// The simulator's allocator (`pfctools sim`, `bench sim`): see [`pfcsim::alloc`].
#[global_allocator]
static ALLOC: pfcsim::alloc::SimAlloc = pfcsim::alloc::SimAlloc;

#[derive(Parser)]
#[command(name = "pfctools", version, about = "Test tools for pfcswitch: testbeds, traffic, storms, benchmarks")]
struct Cli {
    /// Log filter (overrides RUST_LOG).
    #[arg(long, global = true)]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build or remove a netns/veth testbed from a topology file.
    Testbed {
        #[command(subcommand)]
        what: TestbedCommand,
    },
    /// Send stamped test frames (PFC-aware) from an interface.
    Gen(GenArgs),
    /// Receive test frames and report loss, reordering, duplicates and latency per flow.
    Sink(SinkArgs),
    /// Measure pfcswitch against a Linux bridge on identical netns testbeds.
    Bench {
        #[command(subcommand)]
        what: bench::BenchCommand,
    },
    /// Headroom: the calculator (--calc), the sweep of the pause-response test plan on a
    /// netns testbed (default), or the DUT's response time (--response-time).
    Headroom(pfctools::headroom::HeadroomArgs),
    /// PFC (or PAUSE) storm: pause frames at an interval shorter than the pause they carry.
    Storm(pfctools::storm::StormArgs),
    /// Run pfcswitch's engine on a simulated fabric (deterministic, no root needed).
    Sim(pfcsim::SimArgs),
    /// Measure how long a switch obeys a pause: time the gap one PFC frame leaves in a
    /// steady test flow arriving on this interface.
    PauseProbe(pfctools::traffic::probe::ProbeArgs),
    /// Send raw frames given in hex (runts, unknown EtherTypes, oversize, hand-made).
    Inject {
        #[arg(long, short)]
        iface: String,
        /// The frame, in hex (':' '-' and spaces ignored).
        #[arg(long)]
        hex: String,
        /// Pad with zeros (or cut) to this length.
        #[arg(long)]
        len: Option<usize>,
        #[arg(long, default_value_t = 1)]
        count: u64,
        /// Microseconds between frames.
        #[arg(long, default_value_t = 0)]
        gap_us: u64,
    },
    /// Leave an XDP program attached to an interface, as a crashed tool would (for
    /// testing start-up with a stale program).
    #[command(hide = true)]
    LeaveStaleXdp {
        #[arg(long, short)]
        iface: String,
    },
    /// Build a small testbed, run a switch, send traffic, print counters, tear down.
    Demo(bench::demo::DemoArgs),
    /// Drive a three-switch ring into a PFC deadlock with a brief block and show DCFIT's report.
    DeadlockLab(bench::lab::LabArgs),
}

#[derive(Subcommand)]
enum TestbedCommand {
    /// Create the namespaces and links of a topology file.
    Up {
        file: PathBuf,
        /// Names the testbed; namespaces are called pfcs-NAME-NODE.
        #[arg(long)]
        name: String,
    },
    /// Remove a testbed (also after a crash).
    Down { name: String },
    /// Remove testbeds whose creating process is gone.
    Clean,
    /// List testbeds on this machine.
    List,
}

fn main() {
    pfcswitch::sys::quiet_on_closed_stdout();
    let cli = Cli::parse();
    if let Err(e) = pfcswitch::sys::init_logging(cli.log.as_deref(), "warn") {
        eprintln!("pfctools: {e}");
        std::process::exit(2);
    }
    if let Err(e) = dispatch(cli.command) {
        eprintln!("pfctools: {e:#}");
        std::process::exit(1);
    }
}

fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(stop)
}

fn dispatch(command: Command) -> Result<()> {
    match command {
        Command::Testbed { what } => testbed_cmd(what),
        Command::Gen(args) => {
            let stop = stop_on_signals()?;
            let mac = pfcswitch::sys::interface(&args.iface).ok().map(|i| i.mac);
            let report = gen::run(&args.options(mac)?, &stop)?;
            if args.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", bench::report::gen_text(&report));
            }
            Ok(())
        }
        Command::Sink(args) => {
            let stop = stop_on_signals()?;
            let report = sink::run(&args.options(), &stop)?;
            if args.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", bench::report::sink_text(&report));
            }
            Ok(())
        }
        Command::Bench { what } => bench::run(what),
        Command::PauseProbe(args) => {
            let stop = stop_on_signals()?;
            let report = match args.storm_ms {
                Some(ms) => {
                    let storms = pfctools::traffic::probe::run_storms(&args, Duration::from_millis(ms), &stop)?;
                    serde_json::to_string(&storms)?
                }
                None => serde_json::to_string(&pfctools::traffic::probe::run(&args, &stop)?)?,
            };
            println!("{report}");
            Ok(())
        }
        Command::Headroom(args) => {
            bench::clean_up_on_signals()?;
            pfctools::headroom::run(&args)
        }
        Command::Sim(args) => pfcsim::run(&args),
        Command::Storm(args) => {
            let stop = stop_on_signals()?;
            let report = pfctools::storm::run(&args, &stop)?;
            if args.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", pfctools::storm::report_text(&report));
            }
            Ok(())
        }
        Command::Inject { iface, hex, len, count, gap_us } => {
            let mut frame = inject::parse_hex(&hex)?;
            if let Some(len) = len {
                frame.resize(len, 0);
            }
            let sent = inject::send(&iface, &frame, count, std::time::Duration::from_micros(gap_us))?;
            println!("sent {sent} frames of {} bytes", frame.len());
            Ok(())
        }
        Command::Demo(args) => {
            bench::clean_up_on_signals()?;
            bench::demo::run(&args)
        }
        Command::DeadlockLab(args) => {
            bench::clean_up_on_signals()?;
            bench::lab::run(&args)
        }
        Command::LeaveStaleXdp { iface } => {
            let info = pfcswitch::sys::interface(&iface)?;
            let probed = afxdp::paths::probe(Default::default())?;
            let c = afxdp::xdp::Classifier::load(&iface, info.ifindex, false, &probed.build)?;
            c.attach_without_link()?;
            println!("left the classifier attached to {iface} without a link");
            Ok(())
        }
    }
}

fn testbed_cmd(what: TestbedCommand) -> Result<()> {
    match what {
        TestbedCommand::Up { file, name } => {
            let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            let topology = Topology::from_toml(&text).with_context(|| format!("in {}", file.display()))?;
            let tb = Testbed::up(&name, topology)?;
            for node in tb.topology().node_names() {
                let ifaces: Vec<String> =
                    tb.interfaces_of(node).iter().map(|i| format!("{} {}", i.name, i.mac)).collect();
                println!("{}  {}", tb.ns(node)?, ifaces.join(", "));
            }
            println!("remove with: pfctools testbed down {name}");
            bench::say_kernel_paths();
            tb.keep()?;
            Ok(())
        }
        TestbedCommand::Down { name } => {
            let state = testbed::down_by_name(&name)?;
            println!("removed {}", state.namespaces.join(" "));
            Ok(())
        }
        TestbedCommand::Clean => {
            for name in testbed::clean_stale() {
                println!("removed stale testbed {name}");
            }
            Ok(())
        }
        TestbedCommand::List => {
            for s in testbed::list() {
                println!("{}  (pid {})  {}", s.name, s.owner_pid, s.namespaces.join(" "));
            }
            Ok(())
        }
    }
}
