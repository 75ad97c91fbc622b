//! `pfcswitch`: run a switch, or talk to a running one.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};

use afxdp::frame_size::{largest_frame, max_frame_note};
use pfcswitch::cli::{BindModeArg, RunArgs, XdpModeArg};
use pfcswitch::config::{BindMode, RunConfig, XdpMode};
use pfcswitch::control::metrics::MetricsServer;
use pfcswitch::control::server::{ControlServer, Routes, SocketAccess};
use pfcswitch::control::{self, client, Request, Response};
use pfcswitch::core::config::{sonic, Config, TaggerConfig, DEFAULT_LOSSY_QUEUE_BYTES, LOSSY_QUEUE_MIN_FRAMES};
use pfcswitch::core::tagging::TagTable;
use pfcswitch::dataplane::kernel::KernelCounters;
use pfcswitch::dataplane::{Dataplane, Options};
use pfcswitch::sys::Waker;
use pfcswitch::views::{self, WatermarkKind};
use pfcswitch::{nic, report};

#[derive(Parser)]
#[command(name = "pfcswitch", version, about = "A userspace lossless-Ethernet switch on AF_XDP")]
struct Cli {
    /// Log filter (overrides RUST_LOG), e.g. info, debug, pfcswitch=trace.
    #[arg(long, global = true)]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a switch on the given interfaces (or those of a config file) until SIGINT/SIGTERM.
    Run(RunArgs),
    /// Query or command a running switch through its control socket.
    Ctl(CtlArgs),
    /// Check interfaces before running a switch on them: driver, queues, MTU, link speed,
    /// XDP and zero-copy support, and whether the NIC itself handles PAUSE or PFC frames.
    /// Exits non-zero when an interface is missing or cannot be used.
    Doctor {
        /// The interfaces (in this network namespace).
        #[arg(required = true)]
        ifaces: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Validate a config file (and its Tagger table) and print it with every default filled in;
    /// with --sonic-config, print what a SONiC document comes to, with what was derived and
    /// what is not honoured.
    CheckConfig {
        /// The TOML config file.
        #[arg(required_unless_present = "sonic_config")]
        file: Option<PathBuf>,
        /// A SONiC CONFIG_DB document (`config_db.json`) instead of a TOML file.
        #[arg(long, value_name = "FILE", conflicts_with = "file")]
        sonic_config: Option<PathBuf>,
        /// With --sonic-config: a SONiC port and the interface it becomes, SONIC=IFACE; repeat.
        #[arg(long = "port", value_name = "SONIC=IFACE", requires = "sonic_config")]
        ports: Vec<String>,
        /// Accept a Tagger table written for another switch.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Args)]
struct CtlArgs {
    /// Name of the switch to talk to.
    #[arg(long, default_value = "pfcswitch")]
    name: String,
    /// Control socket path (overrides --name).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Print the raw JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    what: CtlCommand,
}

#[derive(Subcommand)]
enum CtlCommand {
    /// Counters per port and priority.
    Stats,
    /// The forwarding database.
    Fdb,
    /// Reset the buffer watermarks.
    ClearWatermarks,
    /// Hand this port's frames to the slowpath: it stops sending and its upstream gets paused.
    Block {
        /// Port name (or interface).
        port: String,
    },
    /// Release what the slowpath holds for this port and switch it normally again.
    Unblock { port: String },
    /// The DCFIT traffic map: ingress ports with traffic waiting on each egress.
    TrafficMap,
    /// PFC deadlocks this switch detected (JSON).
    Deadlocks,
    /// PFC frames received and sent per port and priority, as SONiC's `pfcstat` prints them.
    Pfcstat {
        /// Per port and priority: how often and how long the link partner paused it
        /// (`pfcstat --history`).
        #[arg(long)]
        history: bool,
    },
    /// The PFC watchdog's queues, as SONiC's `pfcwd show stats` prints them.
    Pfcwd {
        /// Also the queues with nothing to show.
        #[arg(long)]
        empty: bool,
    },
    /// Queue and priority-group watermarks, as SONiC's `show queue watermark` and
    /// `show priority-group watermark` print them.
    Watermark {
        /// Only this table (all three if not given).
        #[arg(long, value_enum)]
        kind: Option<WatermarkKind>,
    },
    /// Rates per port and priority, refreshed in place like `top` (q or Ctrl-C quits);
    /// a table per interval when the output is not a terminal, a JSON line with --json.
    Watch {
        /// Seconds between refreshes.
        #[arg(long, default_value_t = 1.0, value_parser = parse_interval)]
        interval: f64,
        /// Stop after this many refreshes.
        #[arg(long)]
        count: Option<u64>,
    },
    /// Record frames as the switch receives and sends them (pause frames included), in
    /// pcapng: an interface per port, each frame's direction flagged. `-w -` writes to
    /// stdout (`| tshark -r -`). Ctrl-C ends it cleanly.
    Capture {
        /// Ports (names or interfaces).
        #[arg(required = true)]
        ports: Vec<String>,
        /// Frames the ports receive (with --tx: both; neither: both).
        #[arg(long)]
        rx: bool,
        /// Frames the ports send.
        #[arg(long)]
        tx: bool,
        /// Stop after this many frames.
        #[arg(long)]
        count: Option<u64>,
        /// Stop after this many seconds.
        #[arg(long)]
        duration: Option<f64>,
        /// Copy at most this many frames a second; the switch counts what it skips and
        /// the file says how many (each interface's drop count).
        #[arg(long, default_value_t = pfcswitch::capture::DEFAULT_RATE)]
        rate: u32,
        /// The pcapng file to write, or - for stdout.
        #[arg(short = 'w', long = "write")]
        write: PathBuf,
    },
    /// Start `pfcstat` and `pfcwd` from zero and reset the watermarks, as `sonic-clear`
    /// does; the counters (`ctl stats`, Prometheus) are not touched.
    Clear,
}

fn main() {
    pfcswitch::sys::quiet_on_closed_stdout();
    let cli = Cli::parse();
    if let Err(e) = pfcswitch::sys::init_logging(cli.log.as_deref(), "info") {
        eprintln!("pfcswitch: {e}");
        std::process::exit(2);
    }
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Ctl(args) => ctl(args),
        Command::CheckConfig { file: Some(file), force, .. } => check_config(&file, force),
        Command::CheckConfig { sonic_config: Some(doc), ports, .. } => check_sonic_config(&doc, &ports),
        Command::CheckConfig { .. } => Err(anyhow::anyhow!("give a TOML file or --sonic-config FILE")),
        Command::Doctor { ifaces, json } => doctor(&ifaces, json),
    };
    if let Err(e) = result {
        eprintln!("pfcswitch: {e:#}");
        std::process::exit(1);
    }
}

fn doctor(ifaces: &[String], json: bool) -> Result<()> {
    // What this kernel lets the classifier do, found as `run` finds it (trial loads).
    let release = pfcswitch::sys::kernel_release();
    let kernel = afxdp::paths::probe(Default::default()).map(|p| p.paths);
    let mut reports = Vec::new();
    let mut missing = Vec::new();
    for iface in ifaces {
        match nic::probe(iface) {
            Ok(facts) => reports.push(nic::diagnose(facts, kernel.as_ref().ok())),
            Err(e) => missing.push((iface.as_str(), e.to_string())),
        }
    }
    if json {
        let errors: Vec<&str> = missing.iter().map(|(_, e)| e.as_str()).collect();
        let kernel = match &kernel {
            Ok(paths) => serde_json::json!({ "release": release, "paths": paths }),
            Err(e) => serde_json::json!({ "release": release, "error": e.to_string() }),
        };
        let doc = serde_json::json!({ "kernel": kernel, "interfaces": reports, "errors": errors });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!("kernel {release}:");
        match &kernel {
            Ok(paths) => paths.lines().iter().for_each(|l| println!("  {l}")),
            Err(e) => println!("  the XDP classifier could not be probed: {e}"),
        }
        println!();
        print!("{}", report::doctor_text(&reports));
        for (_, e) in &missing {
            println!("{e}\n");
        }
    }
    let unusable: Vec<&str> = missing
        .iter()
        .map(|(iface, _)| *iface)
        .chain(reports.iter().filter(|d| d.worst() == nic::Level::Error).map(|d| d.facts.iface.as_str()))
        .collect();
    if !unusable.is_empty() {
        bail!("{} of {} interfaces cannot be used as they are: {}", unusable.len(), ifaces.len(), unusable.join(", "));
    }
    Ok(())
}

fn load_config(path: &Path) -> Result<RunConfig> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    RunConfig::from_toml(&text).with_context(|| format!("in {}", path.display()))
}

/// Reads and checks the Tagger table the configuration names, and makes its priorities
/// the lossless ones. A relative path is taken from the config file's directory.
fn load_tags(config: &mut Config, config_file: Option<&Path>, force: bool) -> Result<Option<TagTable>> {
    let Some(t) = &config.tagger else { return Ok(None) };
    let mut path = PathBuf::from(&t.table);
    if let Some(dir) = config_file.and_then(Path::parent).filter(|_| path.is_relative()) {
        path = dir.join(path);
    }
    let source = path.display().to_string();
    let tables = tagger::system::read_table(&path)?;
    let table = TagTable::apply(config, &tables, &source, force)
        .with_context(|| format!("Tagger table {source} (tagger.table)"))?;
    Ok(Some(table))
}

/// The configuration a SONiC document comes to for `ports` (`SONIC=IFACE` each), with
/// what it could not take as written.
fn load_sonic(path: &Path, ports: &[String]) -> Result<sonic::Translation> {
    let ports: Vec<sonic::PortMap> = ports.iter().map(|p| p.parse()).collect::<Result<_, _>>()?;
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let text = sonic::read_document(file).with_context(|| format!("in {}", path.display()))?;
    sonic::translate(&text, &ports).with_context(|| format!("in {}", path.display()))
}

fn run(args: RunArgs) -> Result<()> {
    let mut config = match (&args.config, &args.sonic_config) {
        (Some(path), _) => load_config(path)?,
        (None, Some(path)) => {
            let t = load_sonic(path, &args.sonic_ports)?;
            for n in &t.notes {
                tracing::info!(table = %n.table, key = %n.key, kind = ?n.kind, "SONiC: {}", n.text);
            }
            RunConfig { switch: t.config, dataplane: Default::default() }
        }
        (None, None) if args.ifaces.is_empty() => {
            bail!("give the ports with --iface IF (repeated), --config FILE or --sonic-config FILE --port SONIC=IF")
        }
        (None, None) => RunConfig::for_interfaces(&args.ifaces),
    };
    if (args.config.is_some() || args.sonic_config.is_some()) && !args.ifaces.is_empty() {
        bail!("--iface goes without --config and --sonic-config: the ports are in the file (and --port)");
    }
    if let Some(name) = args.name {
        config.name = name;
    }
    if let Some(speed) = args.speed {
        for p in &mut config.ports {
            p.speed = Some(speed);
        }
    }
    if let Some(q) = args.queues {
        config.dataplane.queues = Some(q);
    }
    if let Some(m) = args.xdp_mode {
        config.dataplane.xdp_mode = Some(match m {
            XdpModeArg::Native => XdpMode::Native,
            XdpModeArg::Generic => XdpMode::Generic,
        });
    }
    if let Some(m) = args.bind_mode {
        config.dataplane.bind_mode = Some(match m {
            BindModeArg::ZeroCopy => BindMode::ZeroCopy,
            BindModeArg::Copy => BindMode::Copy,
        });
    }
    if let Some(table) = &args.tagger_table {
        let switch = config.tagger.take().and_then(|t| t.switch);
        config.tagger = Some(TaggerConfig { table: table.display().to_string(), switch });
    }
    config.validate()?;
    let tags = load_tags(&mut config, args.config.as_deref().filter(|_| args.tagger_table.is_none()), args.force)?;
    if let Some(t) = &tags {
        tracing::info!(
            table = %t.source,
            rules = t.ingress_rules + t.rewrite_rules,
            lossless = ?t.lossless_priorities(),
            "applying the Tagger table"
        );
    }
    pfcswitch::sys::check_privileges()?;
    let socket = args.socket.unwrap_or_else(|| control::socket_path(&config.name));

    let stop = Arc::new(AtomicBool::new(false));
    let (signal_rx, signal_tx) = UnixStream::pair().context("creating the signal pipe")?;
    signal_rx.set_nonblocking(true)?;
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
        signal_hook::low_level::pipe::register(sig, signal_tx.try_clone()?)?;
    }

    // The forwarding thread gets `dataplane.cpu` to itself: every thread started from
    // here on (the control socket's and the metrics endpoint's, their clients', the
    // slowpath) inherits a set of CPUs without it, so that a burst of requests is not
    // served on the CPU the frames wait for.
    if let Some(cpu) = config.dataplane.cpu {
        if pfcswitch::sys::avoid_cpu(cpu)? {
            tracing::info!(cpu, "the switch's other threads stay off the dataplane's CPU");
        }
    }
    let waker = Waker::new()?;
    let (to_dataplane, commands) = crossbeam_channel::bounded(16);
    let (to_slowpath, slowpath_commands) = crossbeam_channel::bounded(16);
    let kernel = Arc::new(KernelCounters::default());
    let routes = Routes {
        dataplane: to_dataplane,
        dataplane_waker: waker.try_clone()?,
        slowpath: to_slowpath,
        kernel: Some(kernel.clone()),
        cleared: Default::default(),
    };
    let access = match &args.socket_group {
        Some(group) => SocketAccess::group(group)?,
        None => SocketAccess::owner_only(),
    };
    let metrics = match args.metrics {
        Some(addr) => Some(MetricsServer::start(addr, routes.try_clone()?)?),
        None => None,
    };
    if let Some(m) = &metrics {
        tracing::info!(addr = %m.addr(), "serving Prometheus metrics at /metrics");
    }
    let server = ControlServer::start(&socket, routes, access)?;
    let mut dataplane = Dataplane::open(config, Options { force: args.force, tags, kernel }, waker, slowpath_commands)?;
    tracing::info!(socket = %socket.display(), "switching; stop with Ctrl-C");
    let result = dataplane.run(&stop, &commands, &[signal_rx.as_raw_fd()]);
    drop(dataplane);
    drop(server);
    drop(metrics);
    tracing::info!("stopped: XDP programs detached, sockets closed");
    Ok(result?)
}

/// `ctl capture`: the switch's pcapng stream into `file` (or stdout).
fn capture(
    socket: &Path,
    ports: &[String],
    (rx, tx): (bool, bool),
    count: Option<u64>,
    duration: Option<f64>,
    rate: u32,
    file: &Path,
) -> Result<()> {
    let duration_ms = match duration {
        Some(s) if s.is_finite() && s > 0.0 => Some((s * 1000.0).ceil() as u64),
        Some(s) => bail!("--duration {s}: a number of seconds above 0"),
        None => None,
    };
    let both = !rx && !tx;
    let req =
        control::CaptureRequest { ports: ports.to_vec(), rx: rx || both, tx: tx || both, rate, count, duration_ms };
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    let mut out: Box<dyn std::io::Write> = if file == Path::new("-") {
        Box::new(std::io::stdout().lock())
    } else {
        let f = std::fs::File::create(file).with_context(|| format!("creating {}", file.display()))?;
        Box::new(std::io::BufWriter::new(f))
    };
    let ports = client::capture(socket, &req, &mut out, &stop)?;
    if file != Path::new("-") {
        eprintln!("captured {} on {} into {}", which(rx, tx), ports.join(", "), file.display());
    }
    Ok(())
}

fn which(rx: bool, tx: bool) -> &'static str {
    match (rx, tx) {
        (true, false) => "what they received",
        (false, true) => "what they sent",
        _ => "what they received and sent",
    }
}

fn parse_interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.05..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("{s}: an interval is 0.05 to 3600 seconds")),
    }
}

fn ctl(args: CtlArgs) -> Result<()> {
    let path = args.socket.unwrap_or_else(|| control::socket_path(&args.name));
    if let CtlCommand::Capture { ports, rx, tx, count, duration, rate, write } = &args.what {
        return capture(&path, ports, (*rx, *tx), *count, *duration, *rate, write);
    }
    if let CtlCommand::Watch { interval, count } = args.what {
        let output = pfcswitch::watch::output_for(args.json);
        return Ok(pfcswitch::watch::run(&path, Duration::from_secs_f64(interval), count, output)?);
    }
    let request = match &args.what {
        CtlCommand::Stats => Request::Stats,
        CtlCommand::Fdb => Request::Fdb,
        CtlCommand::ClearWatermarks => Request::ClearWatermarks,
        CtlCommand::Block { port } => Request::Block { port: port.clone() },
        CtlCommand::Unblock { port } => Request::Unblock { port: port.clone() },
        CtlCommand::TrafficMap => Request::TrafficMap,
        CtlCommand::Deadlocks => Request::Deadlocks,
        CtlCommand::Clear => Request::Clear,
        CtlCommand::Pfcstat { .. } | CtlCommand::Pfcwd { .. } | CtlCommand::Watermark { .. } => Request::Views,
        CtlCommand::Watch { .. } | CtlCommand::Capture { .. } => unreachable!("handled above"),
    };
    let response = client::request(&path, &request)?;
    if let Response::Views(v) = &response {
        print!("{}", view(&args.what, v, args.json)?);
        return Ok(());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&response.to_json())?);
        return Ok(());
    }
    match &response {
        Response::Stats(stats) => print!("{}", report::stats_table(stats)),
        Response::Fdb(rows) => print!("{}", report::fdb_table(rows)),
        Response::TrafficMap(map) => print!("{}", report::traffic_map_table(map)),
        Response::Deadlocks(_) => println!("{}", serde_json::to_string_pretty(&response.to_json())?),
        Response::Done(what) => println!("{what}"),
        Response::Views(_) => unreachable!("printed above"),
        Response::CaptureStarted(_) | Response::CaptureCounts(_) => println!("{}", response.to_json()),
    }
    Ok(())
}

/// The SONiC-style view `what` asks for, as text or JSON.
fn view(what: &CtlCommand, v: &control::Views, json: bool) -> Result<String> {
    let (value, text) = match what {
        CtlCommand::Pfcstat { history: false } => {
            let s = views::PfcStat::new(v);
            (serde_json::to_value(&s)?, s.render())
        }
        CtlCommand::Pfcstat { history: true } => {
            let s = views::PfcHistory::new(v, &views::Clocks::now());
            (serde_json::to_value(&s)?, s.render())
        }
        CtlCommand::Pfcwd { empty } => {
            let s = views::PfcwdStats::new(v, *empty);
            (serde_json::to_value(&s)?, s.render())
        }
        CtlCommand::Watermark { kind } => {
            let s = views::Watermarks::new(&v.stats);
            let all = [WatermarkKind::Queue, WatermarkKind::PgShared, WatermarkKind::PgHeadroom];
            (serde_json::to_value(&s)?, s.render(kind.as_ref().map_or(&all[..], std::slice::from_ref)))
        }
        _ => bail!("the switch answered with views to a request for something else"),
    };
    Ok(if json { serde_json::to_string_pretty(&value)? + "\n" } else { text })
}

/// What `check-config --sonic-config` prints: the translation as pfcswitch's TOML (every
/// default filled in, so that a user can keep it), then each derived figure and each key
/// not honoured, as comments.
fn check_sonic_config(doc: &Path, ports: &[String]) -> Result<()> {
    let t = load_sonic(doc, ports)?;
    let mut config = t.config;
    config.wred = config.wred_filled();
    println!(
        "# pfcswitch's configuration for {} ({} ports), translated from SONiC's CONFIG_DB",
        doc.display(),
        ports.len()
    );
    print!("{}", config.to_toml());
    print!("{}", report::profiles_comment(&config));
    for kind in [sonic::NoteKind::Derived, sonic::NoteKind::NotHonoured] {
        let notes: Vec<_> = t.notes.iter().filter(|n| n.kind == kind).collect();
        if notes.is_empty() {
            continue;
        }
        println!("\n# {}:", if kind == sonic::NoteKind::Derived { "Derived, not read" } else { "Not honoured" });
        for n in notes {
            let key = if n.key.is_empty() { n.table.clone() } else { format!("{}|{}", n.table, n.key) };
            println!("#   {key}: {}", n.text);
        }
    }
    Ok(())
}

fn check_config(file: &Path, force: bool) -> Result<()> {
    let mut config = load_config(file)?;
    let tags = load_tags(&mut config, Some(file), force)?;
    if config.pfc.lossless.is_none() {
        config.pfc.lossless = Some(config.lossless_priorities().to_vec());
    }
    // Every priority's WRED/ECN profile, the defaults filled in.
    config.wred = config.wred_filled();
    print!("{}", config.to_toml());
    print!("{}", report::profiles_comment(&config));
    if config.buffer.lossy_queue_bytes.is_none() {
        println!(
            "# buffer.lossy_queue_bytes is not set: each lossy queue holds {DEFAULT_LOSSY_QUEUE_BYTES} bytes, or \
             {LOSSY_QUEUE_MIN_FRAMES} of its port's largest frames if that is more"
        );
    }
    // What each port's frame limit and lossy queues come to on the interfaces this
    // namespace has.
    for (i, port) in config.ports.iter().enumerate() {
        let Ok(info) = pfcswitch::sys::interface(&port.iface) else { continue };
        let name = config.port_name(i);
        let frame = port.max_frame.unwrap_or(largest_frame(info.mtu) as usize);
        match port.max_frame {
            None => println!(
                "# port {name}: max_frame follows {}'s MTU {}: frames up to {frame} bytes, lossy queues of {} bytes",
                port.iface,
                info.mtu,
                config.buffer.lossy_queue_limit(frame)
            ),
            Some(m) => {
                if let Some(note) = max_frame_note(name, m, info.mtu) {
                    println!("# {note}");
                }
            }
        }
    }
    if let Some(t) = tags {
        println!(
            "# Tagger table {} for {}: {} ingress and {} rewrite rules; lossless priorities {:?}; hosts stamp tag {}; \
             anything else leaves with tag {} at priority {}",
            t.source,
            t.switch,
            t.ingress_rules,
            t.rewrite_rules,
            t.lossless_priorities(),
            t.initial_tag,
            t.default_tag,
            t.default_priority
        );
    }
    Ok(())
}
