//! `bench soak`: a switch under mixed traffic while faults come at random from a seed,
//! and at the end every frame accounted for.
//!
//! A star of four hosts. h1 and h2 each send a lossless flow (DSCP 3, priority 3) and a
//! lossy one (DSCP 0) to a sink on h3, obeying the switch's pauses, for the whole soak.
//! Meanwhile, one after another with quiet gaps between them: PFC storms from h3 on
//! priority 3 (the switch pauses its senders, and its watchdog cuts the storm off),
//! 802.3x storms from h3 (a PFC port ignores them), p3 blocked for a while (its frames
//! held by the slowpath, then released), h4's link down and up, h4's veth deleted with
//! its namespace and made again, and a sender on h1 that ignores pauses while h3 storms.
//! All the while, control requests and metrics scrapes churn.
//!
//! At the end: frames sent = frames received + every counted loss (the switch's drops by
//! reason, its sockets' and the sink's, the veths', each loss once where a socket's and
//! its veth's counters both saw it), so `unaccounted` must be 0; lossless
//! frames may be lost only for a reason a fault explains (the watchdog during storms, a
//! full headroom behind a sender that ignores pauses); the switch's free frames and
//! shared buffer are back to their idle values; its resident memory is reported.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use pfcswitch::cli::RunArgs;
use pfcswitch::config::XdpMode;
use pfcswitch::core::config::StaticFdbEntry;
use pfcswitch::core::stats::DropReason;
use pfcswitch::stats::Stats;

use crate::cli::{GenArgs, SinkArgs};
use crate::harness::{self, SinkProc, SwitchProc};
use crate::storm::StormArgs;
use crate::testbed::{self as testbed, TestbedTopology};
use crate::testbed::{unique_name, Testbed, Topology};
use crate::traffic::gen::GenReport;

#[derive(Args, Clone, Debug)]
pub struct SoakArgs {
    /// How long the traffic and the faults last.
    #[arg(long, default_value_t = 1.0, value_parser = crate::cli::parse_positive)]
    pub minutes: f64,
    /// Seeds the choice and timing of the faults.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Frames per second of each of the four flows.
    #[arg(long, default_value = "10k", value_parser = crate::cli::parse_rate)]
    pub rate: f64,
    /// Frame size on the wire (FCS included).
    #[arg(long, default_value_t = 512)]
    pub size: usize,
    /// The faults to draw from (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub faults: Vec<Fault>,
    /// Run the switch, the senders and the sink above the machine's other work (nice -15,
    /// each in a session of its own), so that a build or a package install beside the
    /// soak does not keep them off their CPUs for longer than a headroom lasts.
    #[arg(long)]
    pub raised: bool,
    #[arg(long)]
    pub json: bool,
}

/// A fault the soak injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// h3 sends PFC on priority 3 for a while.
    PfcStorm,
    /// h3 sends 802.3x PAUSE for a while (its port is in PFC mode: ignored).
    PauseStorm,
    /// p3 blocked (its frames held by the slowpath), then unblocked.
    Block,
    /// h4's link down, then up.
    LinkFlap,
    /// h4's namespace deleted, its veth with it, and both made again.
    Recreate,
    /// A sender on h1 that ignores pauses, lossless, while h3 storms.
    DeafSender,
}

const ALL_FAULTS: [Fault; 6] =
    [Fault::PfcStorm, Fault::PauseStorm, Fault::Block, Fault::LinkFlap, Fault::Recreate, Fault::DeafSender];

/// Every frame of the soak, where it went.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Accounting {
    pub sent: u64,
    pub received: u64,
    pub duplicates: u64,
    /// The switch's drops, by reason.
    pub switch_drops: BTreeMap<String, u64>,
    /// Frames the kernel could not put on the switch's rx rings (full, or no fill frame).
    pub switch_rx_lost: u64,
    pub sink_socket_dropped: u64,
    /// Drops the veths counted (either end, the deleted one's excepted).
    pub veth_dropped: u64,
    /// Of the sockets' drops above, those the veths counted too. A veth whose XDP
    /// program runs natively counts a frame it could not hand to an AF_XDP socket (ring
    /// full, no fill frame) among its own rx drops, since a failed redirect is an rx drop
    /// in drivers/net/veth.c; generic XDP frees the frame without counting it on the
    /// device, so there the socket's count is the only one.
    pub socket_drops_in_veths: u64,
    /// Sent and neither received nor counted anywhere: must be 0.
    pub unaccounted: i64,
}

impl Accounting {
    /// Every frame counted once: received, or dropped where some counter saw it.
    fn counted(&self) -> u64 {
        let sockets = self.switch_rx_lost + self.sink_socket_dropped;
        self.received + self.switch_drops.values().sum::<u64>() + self.veth_dropped + sockets
            - self.socket_drops_in_veths.min(sockets)
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct SoakReport {
    pub seed: u64,
    pub minutes: f64,
    pub faults: BTreeMap<String, u64>,
    pub accounting: Accounting,
    /// Lossless (priority 3) drops by reason.
    pub lossless_drops: BTreeMap<String, u64>,
    /// The switch's drops, by reason, that no injected fault explains: must be empty
    /// (the lossy flows' tail drops need none; the watchdog's need a storm, a lossless
    /// headroom's overflow a sender that ignores pauses, the frame cap a blocked port,
    /// a downed link's drops a link that went down).
    pub drops_unexplained: BTreeMap<String, u64>,
    pub free_frames_idle: u64,
    pub free_frames_end: u64,
    pub shared_buffer_used_end: u64,
    pub rss_idle_kib: u64,
    pub rss_end_kib: u64,
    pub rss_peak_kib: u64,
    pub control_requests: u64,
    pub scrapes: u64,
    /// Churn requests that failed (the switch did not answer, or answered an error).
    pub churn_failures: u64,
    /// The switch's longest stall over the soak (its loop kept from polling), ms.
    pub longest_stall_ms: f64,
    /// The most of one stall that the loop spent waiting for a CPU (the machine's
    /// share), ms.
    pub longest_cpu_wait_ms: f64,
    /// The most of one stall a sender's loop spent waiting for a CPU, ms, over the
    /// senders: a sender kept off its CPU answers a pause that much late.
    #[serde(default)]
    pub longest_sender_cpu_wait_ms: f64,
    /// How long a sender's lossless flow takes to fill a port's headroom, ms: a switch
    /// kept off its CPU for longer cannot pause it in time, nor a sender that long away
    /// answer its pause in time.
    pub headroom_lasts_ms: f64,
    /// Why the run says nothing about the switch, when the machine spoiled it: lossless
    /// headroom drops that no fault explains, after the switch's loop or a sender's waited
    /// for a CPU for longer than a headroom lasts. Such a run is not passed; it is to be
    /// run again.
    /// (A stall the loop spent working or blocked in a system call, such as binding a
    /// port, is the switch's own.)
    pub disturbed: Option<String>,
    /// Everything held: nothing unaccounted, every drop explained, the pool and the buffer
    /// back to idle, no churn request failed, the switch grown by at most 64 MiB.
    pub passed: bool,
}

/// How much the switch may grow over a soak: its tables are bounded, and its frames live
/// in the UMEM it maps at start.
const RSS_GROWTH_KIB: u64 = 64 << 10;

/// Where the metrics endpoint listens, inside the switch's namespace.
const METRICS: &str = "127.0.0.1:9469";

pub fn run(args: &SoakArgs) -> Result<()> {
    let report = soak(args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    if !report.passed {
        bail!("the soak failed: see the report");
    }
    Ok(())
}

pub fn soak(args: &SoakArgs) -> Result<SoakReport> {
    let mut tb = Testbed::up(&unique_name("soak"), Topology::star(4))?;
    if args.raised {
        tb = tb.with_processes(testbed::Placement::raised(None));
    }
    let mut config = harness::switch_config(&tb, "sw1");
    // Every host is known: nothing is flooded, so every frame has one destination.
    for h in ["h1", "h2", "h3", "h4"] {
        config.fdb_entries.push(StaticFdbEntry { mac: tb.host_iface(h)?.mac, port: port_to(&tb, h)? });
    }
    let addr: SocketAddr = METRICS.parse()?;
    let sw = SwitchProc::start(&tb, "sw1", &config, &RunArgs { metrics: Some(addr), ..RunArgs::default() })
        .context("starting pfcswitch")?;
    std::thread::sleep(Duration::from_millis(500));
    let idle = sw.stats()?;
    let rss_idle = rss_kib(sw.proc.pid()).unwrap_or(0);
    let mut veths = VethDrops::start(&tb)?;
    let soak_for = Duration::from_secs_f64(args.minutes * 60.0);

    let sink_args = SinkArgs {
        idle: Duration::from_secs(2),
        duration: Some(soak_for + Duration::from_secs(30)),
        ..harness::sink_defaults()
    };
    let sink = SinkProc::start(&tb, "h3", "sink", &sink_args)?;
    let h3_mac = tb.host_iface("h3")?.mac;
    let senders: Vec<harness::GenProc> = [("h1", 0u16), ("h2", 2)]
        .iter()
        .map(|&(h, base)| {
            let g = GenArgs {
                flows: 2,
                flow_base: base,
                dscp: vec![3, 0],
                rate: Some(args.rate * 2.0),
                size: args.size,
                duration: Some(soak_for),
                ..harness::gen_to(h3_mac)
            };
            harness::start_gen(&tb, h, &format!("gen-{h}"), &g)
        })
        .collect::<Result<_>>()?;

    // Control and metrics churn until the faults are over.
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(ChurnCounts::default());
    let churn = {
        let (stop, counts, socket) = (stop.clone(), counts.clone(), sw.socket.clone());
        tb.thread_in("sw1", move || churn(&socket, addr, &stop, &counts))?
    };

    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let drawn: &[Fault] = if args.faults.is_empty() { &ALL_FAULTS } else { &args.faults };
    let mut faults: BTreeMap<String, u64> = BTreeMap::new();
    let mut deaf: Vec<GenReport> = Vec::new();
    let start = Instant::now();
    let bar = pfctestkit::progress::Progress::new(soak_for.as_secs(), "s", args.json);
    // Faults stop 3 s before the senders do, so that the last one has ended and the
    // switch has settled while traffic still flows.
    while start.elapsed() + Duration::from_secs(6) < soak_for {
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1500)));
        let fault = drawn[rng.random_range(0..drawn.len())];
        bar.set(start.elapsed().as_secs());
        bar.message(format!("{fault:?}"));
        let hold = Duration::from_millis(rng.random_range(200..1500));
        inject(&tb, &sw, fault, hold, args, (&mut deaf, &mut veths))
            .with_context(|| format!("injecting {fault:?} at {:.1} s", start.elapsed().as_secs_f64()))?;
        *faults.entry(format!("{fault:?}")).or_default() += 1;
    }
    bar.message("the senders finish");
    stop.store(true, Ordering::Relaxed);
    let churn_failures = churn.join().map_err(|_| anyhow::anyhow!("the churn thread panicked"))?;

    // Each sender's lossless flow, at `rate`, against the smallest priority-3 headroom the
    // switch reports.
    let headroom = idle.ports.iter().map(|p| p.priorities[3].headroom_size).min().unwrap_or(0);
    let headroom_lasts_ms = headroom as f64 / (args.rate * args.size as f64) * 1e3;
    let sent_by: Vec<GenReport> =
        senders.into_iter().map(|g| g.finish(soak_for + Duration::from_secs(30))).collect::<Result<_>>()?;
    let rx = sink.finish(Duration::from_secs(60))?;
    drop(bar);
    // Queues drained, the slowpath empty, the pool refilled.
    std::thread::sleep(Duration::from_secs(1));
    let end = sw.stats()?;
    let rss_end = rss_kib(sw.proc.pid()).unwrap_or(0);
    let rss_peak = peak_rss_kib(sw.proc.pid()).unwrap_or(0);
    let veth_dropped = veths.total(&tb)?;
    let finished = sw.stop();
    if !finished.success() {
        bail!("the switch did not stop cleanly: {}", finished.stderr.trim());
    }

    let mut a = Accounting {
        sent: sent_by.iter().chain(&deaf).map(|g| g.sent).sum(),
        received: rx.flows.iter().map(|f| f.received).sum(),
        duplicates: rx.flows.iter().map(|f| f.duplicates).sum(),
        sink_socket_dropped: rx.socket_dropped,
        veth_dropped,
        ..Default::default()
    };
    if rx.xdp_mode == Some(XdpMode::Native) {
        a.socket_drops_in_veths += rx.socket_dropped;
    }
    for (before, after) in idle.ports.iter().zip(&end.ports) {
        for (reason, n) in after.counters.drops.iter() {
            let d = n - before.counters.drops.get(reason);
            if d > 0 {
                *a.switch_drops.entry(reason.name().to_string()).or_default() += d;
            }
        }
        let lost = after.socket.rx_lost().saturating_sub(before.socket.rx_lost());
        a.switch_rx_lost += lost;
        if after.xdp_mode == Some(XdpMode::Native) {
            a.socket_drops_in_veths += lost;
        }
    }
    a.unaccounted = a.sent as i64 - a.counted() as i64;

    let (unexplained, lossless_drops) = drops_explained(&idle, &end, &faults);
    let mut report = SoakReport {
        seed: args.seed,
        minutes: args.minutes,
        faults,
        accounting: a,
        lossless_drops,
        drops_unexplained: unexplained,
        free_frames_idle: idle.free_frames,
        free_frames_end: end.free_frames,
        shared_buffer_used_end: end.shared_buffer_used,
        rss_idle_kib: rss_idle,
        rss_end_kib: rss_end,
        rss_peak_kib: rss_peak,
        control_requests: counts.control.load(Ordering::Relaxed),
        scrapes: counts.scrapes.load(Ordering::Relaxed),
        churn_failures,
        longest_stall_ms: end.stalls.longest_us as f64 / 1e3,
        longest_cpu_wait_ms: end.stalls.longest_cpu_wait_us as f64 / 1e3,
        longest_sender_cpu_wait_ms: sent_by.iter().map(|g| g.longest_cpu_wait_us).max().unwrap_or(0) as f64 / 1e3,
        headroom_lasts_ms,
        disturbed: None,
        passed: false,
    };
    report.passed = report.accounting.unaccounted == 0
        && report.accounting.duplicates == 0
        && report.drops_unexplained.is_empty()
        && report.free_frames_end == report.free_frames_idle
        && report.shared_buffer_used_end == 0
        && report.churn_failures == 0
        && report.rss_end_kib <= report.rss_idle_kib + RSS_GROWTH_KIB;
    report.disturbed = machine_disturbed(&report);
    Ok(report)
}

/// Why a soak says nothing about the switch, if the machine spoiled it: lossless frames
/// overflowed a headroom that no fault explains, and either end of the pause's way was
/// kept from its CPU for longer than a headroom lasts, the switch (it cannot send the
/// pause in time) or a sender (it cannot obey it in time).
fn machine_disturbed(r: &SoakReport) -> Option<String> {
    let dropped = r.drops_unexplained.get(DropReason::Lossless.name())?;
    let (who, waited) = if r.longest_cpu_wait_ms >= r.longest_sender_cpu_wait_ms {
        ("the switch", r.longest_cpu_wait_ms)
    } else {
        ("a sender", r.longest_sender_cpu_wait_ms)
    };
    (waited > r.headroom_lasts_ms).then(|| {
        format!(
            "{dropped} lossless frames overflowed a headroom after {who} waited {waited:.1} ms for a CPU, longer \
             than a sender fills its headroom in ({:.1} ms)",
            r.headroom_lasts_ms
        )
    })
}

/// Injects `fault` for about `hold`, and waits until it is over.
fn inject(
    tb: &Testbed,
    sw: &SwitchProc,
    fault: Fault,
    hold: Duration,
    args: &SoakArgs,
    (deaf, veths): (&mut Vec<GenReport>, &mut VethDrops),
) -> Result<()> {
    let p3 = port_to(tb, "h3")?;
    let h3_iface = tb.host_iface("h3")?.name.clone();
    let storm = |global: bool| -> Result<testbed::Proc> {
        let a = StormArgs {
            bitmap: (!global).then_some(1 << 3),
            global,
            duration: Some(hold),
            json: true,
            ..harness::storm_defaults(&h3_iface)
        };
        Ok(tb.spawn("h3", "storm", &harness::command_line("pfctools", "storm", &a)?)?)
    };
    let storm_ends = |p: testbed::Proc| -> Result<()> {
        let f = p.wait(hold + Duration::from_secs(10));
        if !f.success() {
            bail!("the storm failed: {}", f.stderr.trim());
        }
        Ok(())
    };
    match fault {
        Fault::PfcStorm => storm_ends(storm(false)?)?,
        Fault::PauseStorm => storm_ends(storm(true)?)?,
        Fault::Block => {
            sw.command(&pfcswitch::control::Request::Block { port: p3.clone() })?;
            std::thread::sleep(hold);
            sw.command(&pfcswitch::control::Request::Unblock { port: p3 })?;
        }
        Fault::LinkFlap => {
            tb.exec("h4", &["ip", "link", "set", "eth0", "down"])?;
            std::thread::sleep(hold + Duration::from_millis(1300));
            tb.exec("h4", &["ip", "link", "set", "eth0", "up"])?;
        }
        Fault::Recreate => {
            // The deleted veth's counters go with it: what they counted is kept.
            veths.carry(tb, "h4")?;
            recreate_h4(tb)?;
        }
        Fault::DeafSender => {
            let s = storm(false)?;
            let g = GenArgs {
                flows: 1,
                // A flow of its own each time: its sequence numbers start again at 0.
                flow_base: 10 + u16::try_from(deaf.len())?,
                dscp: vec![3],
                rate: Some(args.rate),
                size: args.size,
                count: Some((args.rate * hold.as_secs_f64()).max(1.0) as u64),
                tx_only: true,
                ..harness::gen_to(tb.host_iface("h3")?.mac)
            };
            // On h4, which sends nothing else: h1's and h2's senders hold their queues.
            deaf.push(harness::run_gen(tb, "h4", "deaf", &g, hold + Duration::from_secs(30))?);
            storm_ends(s)?;
        }
    }
    Ok(())
}

/// Deletes h4's namespace (its veth with it: the switch's p4 is gone) and makes both
/// again under the same names, as a host that reboots would.
fn recreate_h4(tb: &Testbed) -> Result<()> {
    let ns = tb.ns("h4")?;
    let sw_ns = tb.ns("sw1")?;
    let p4 = port_to(tb, "h4")?;
    let eth0 = tb.interface("h4", "eth0")?;
    let mac = eth0.mac.to_string();
    let ip = |a: &[&str]| testbed::run("ip", a).map(|_| ());
    ip(&["netns", "del", &ns])?;
    std::thread::sleep(Duration::from_millis(500));
    ip(&["netns", "add", &ns])?;
    ip(&["-n", &ns, "link", "set", "lo", "up"])?;
    ip(&["-n", &sw_ns, "link", "add", "name", &p4, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
    ip(&["-n", &ns, "link", "set", "dev", "eth0", "address", &mac])?;
    // As the testbed made them: no IPv6, whose neighbour discovery would send frames of
    // the host's own that the counters could not tell from the test's.
    for (n, iface) in [(&ns, "eth0"), (&sw_ns, p4.as_str())] {
        let key = format!("net.ipv6.conf.{iface}.disable_ipv6=1");
        ip(&["netns", "exec", n, "sysctl", "-q", "-w", &key])?;
    }
    ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
    ip(&["-n", &sw_ns, "link", "set", &p4, "up"])?;
    // The switch binds it again at its next link check.
    std::thread::sleep(Duration::from_millis(500));
    Ok(())
}

#[derive(Debug, Default)]
struct ChurnCounts {
    control: AtomicU64,
    scrapes: AtomicU64,
}

/// Control requests and scrapes, one every 20 to 50 ms, until `stop`; the failures.
fn churn(socket: &std::path::Path, metrics: SocketAddr, stop: &AtomicBool, counts: &ChurnCounts) -> u64 {
    use pfcswitch::control::{client, Request};
    let mut failures = 0;
    let mut i = 0u64;
    let mut body = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let ok = match i % 4 {
            0 => client::stats(socket).is_ok(),
            1 => client::request(socket, &Request::Fdb).is_ok(),
            2 => client::request(socket, &Request::TrafficMap).is_ok(),
            _ => super::scrape::scrape(metrics, &mut body).unwrap_or(false),
        };
        if i % 4 == 3 {
            counts.scrapes.fetch_add(1, Ordering::Relaxed);
        } else {
            counts.control.fetch_add(1, Ordering::Relaxed);
        }
        failures += u64::from(!ok);
        i += 1;
        std::thread::sleep(Duration::from_millis(20 + i % 31));
    }
    failures
}

/// The faults that explain the switch's drops for `reason`, or `None` when any soak
/// may show them (the lossy flows' tail drops); an empty list for reasons nothing in a
/// soak explains.
fn explained_by(reason: DropReason) -> Option<&'static [Fault]> {
    match reason {
        DropReason::Lossy => None,
        // The watchdog cuts a storm off by dropping what waits for the storming port.
        DropReason::Watchdog => Some(&[Fault::PfcStorm, Fault::DeafSender]),
        // A lossless headroom overflows only behind a sender that ignores pauses.
        DropReason::Lossless => Some(&[Fault::DeafSender]),
        // A blocked port's frames fill the slowpath's share of the pool.
        DropReason::FrameCap => Some(&[Fault::Block]),
        DropReason::LinkDown => Some(&[Fault::LinkFlap, Fault::Recreate]),
        _ => Some(&[]),
    }
}

/// The switch's drops over the soak that no injected fault explains, by reason; and
/// priority 3's lossless losses by reason (its headroom overflows, and the watchdog's
/// drops, which on this soak are all priority 3's: the storms pause only it).
fn drops_explained(
    idle: &Stats,
    end: &Stats,
    faults: &BTreeMap<String, u64>,
) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let had = |f: &Fault| faults.contains_key(&format!("{f:?}"));
    let mut unexplained = BTreeMap::new();
    let mut lossless = BTreeMap::new();
    for (before, after) in idle.ports.iter().zip(&end.ports) {
        for (reason, n) in after.counters.drops.iter() {
            let d = n - before.counters.drops.get(reason);
            if d == 0 {
                continue;
            }
            if explained_by(reason).is_some_and(|by| !by.iter().any(had)) {
                *unexplained.entry(reason.name().to_string()).or_default() += d;
            }
            if reason == DropReason::Watchdog {
                *lossless.entry(reason.name().to_string()).or_default() += d;
            }
        }
        let (b, a) = (&before.priorities[3].counters, &after.priorities[3].counters);
        if a.lossless_drops > b.lossless_drops {
            *lossless.entry(DropReason::Lossless.name().to_string()).or_default() +=
                a.lossless_drops - b.lossless_drops;
        }
    }
    (unexplained, lossless)
}

/// The switch's interface toward host `h`.
fn port_to(tb: &Testbed, h: &str) -> Result<String> {
    tb.interfaces_of("sw1")
        .into_iter()
        .find(|i| i.peer_node == h)
        .map(|i| i.name.clone())
        .with_context(|| format!("sw1 has no port toward {h}"))
}

/// What the veths dropped on the test frames' way: out of each sender's interface and
/// into the switch's port toward it, out of the switch's port toward the sink and into
/// the sink's interface. (The other directions carry pauses and storms, which a host's
/// kernel drops and counts.)
struct VethDrops {
    /// Per (node, interface, direction): the counter when the soak began, or 0 for a
    /// link made since.
    baseline: BTreeMap<(String, String, &'static str), u64>,
    /// What links deleted since had counted.
    carried: u64,
}

impl VethDrops {
    fn watched(tb: &Testbed) -> Result<Vec<(String, String, &'static str)>> {
        let mut w = Vec::new();
        for h in ["h1", "h2", "h4"] {
            w.push((h.to_string(), "eth0".to_string(), "tx"));
            w.push(("sw1".to_string(), port_to(tb, h)?, "rx"));
        }
        w.push(("sw1".to_string(), port_to(tb, "h3")?, "tx"));
        w.push(("h3".to_string(), "eth0".to_string(), "rx"));
        Ok(w)
    }

    fn start(tb: &Testbed) -> Result<VethDrops> {
        let mut baseline = BTreeMap::new();
        for key in Self::watched(tb)? {
            let n = dropped(tb, &key.0, &key.1, key.2)?;
            baseline.insert(key, n);
        }
        Ok(VethDrops { baseline, carried: 0 })
    }

    /// Host `h`'s link is about to be deleted: its counts so far are kept.
    fn carry(&mut self, tb: &Testbed, h: &str) -> Result<()> {
        let port = port_to(tb, h)?;
        for (key, base) in self.baseline.iter_mut() {
            if key.0 == h || (key.0 == "sw1" && key.1 == port) {
                self.carried += dropped(tb, &key.0, &key.1, key.2)?.saturating_sub(*base);
                *base = 0;
            }
        }
        Ok(())
    }

    fn total(&self, tb: &Testbed) -> Result<u64> {
        let mut total = self.carried;
        for (key, base) in &self.baseline {
            total += dropped(tb, &key.0, &key.1, key.2)?.saturating_sub(*base);
        }
        Ok(total)
    }
}

/// Interface `iface`'s drop counter in direction `dir` ("rx" or "tx") in `node`.
fn dropped(tb: &Testbed, node: &str, iface: &str, dir: &str) -> Result<u64> {
    let out = tb.exec(node, &["ip", "-s", "-j", "link", "show", "dev", iface])?;
    let links: serde_json::Value = serde_json::from_str(&out).context("ip -s -j link")?;
    Ok(links[0]["stats64"][dir]["dropped"].as_u64().unwrap_or(0))
}

fn rss_kib(pid: u32) -> Option<u64> {
    status_field(pid, "VmRSS:")
}

fn peak_rss_kib(pid: u32) -> Option<u64> {
    status_field(pid, "VmHWM:")
}

fn status_field(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines().find_map(|l| l.strip_prefix(field)).and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn print_report(r: &SoakReport) {
    let a = &r.accounting;
    println!("bench soak: {:.1} min, seed {}", r.minutes, r.seed);
    let faults: Vec<String> = r.faults.iter().map(|(f, n)| format!("{f} {n}")).collect();
    println!("faults: {}", faults.join(", "));
    let drops: Vec<String> = a.switch_drops.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "frames: {} sent = {} received + {} switch drops ({}) + {} lost on its rx rings + {} at the sink's socket + {} \
         in veths - {} counted by both a socket and its veth; unaccounted {}; duplicates {}",
        a.sent,
        a.received,
        a.switch_drops.values().sum::<u64>(),
        if drops.is_empty() { "none".into() } else { drops.join(", ") },
        a.switch_rx_lost,
        a.sink_socket_dropped,
        a.veth_dropped,
        a.socket_drops_in_veths,
        a.unaccounted,
        a.duplicates
    );
    let list = |m: &BTreeMap<String, u64>| {
        if m.is_empty() {
            "none".to_string()
        } else {
            m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
        }
    };
    println!(
        "lossless (priority 3) drops: {}; drops no fault explains: {}",
        list(&r.lossless_drops),
        list(&r.drops_unexplained)
    );
    println!(
        "free frames {} idle, {} at the end; shared buffer in use at the end {} B; resident {} KiB idle, {} KiB at the \
         end, peak {} KiB",
        r.free_frames_idle,
        r.free_frames_end,
        r.shared_buffer_used_end,
        r.rss_idle_kib,
        r.rss_end_kib,
        r.rss_peak_kib
    );
    println!(
        "the switch's longest stall {:.1} ms; the longest it waited for a CPU in one {:.1} ms, a sender {:.1} ms; \
         a sender fills a headroom in {:.1} ms",
        r.longest_stall_ms, r.longest_cpu_wait_ms, r.longest_sender_cpu_wait_ms, r.headroom_lasts_ms
    );
    if let Some(why) = &r.disturbed {
        println!("disturbed by the machine: {why}");
    }
    println!(
        "churn: {} control requests, {} scrapes, {} failed; {}",
        r.control_requests,
        r.scrapes,
        r.churn_failures,
        if r.passed { "PASS" } else { "FAIL" }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lossless_drops_are_the_machines_only_after_the_switch_or_a_sender_waited_longer_than_a_headroom_lasts() {
        let lossless = DropReason::Lossless.name().to_string();
        let report = |switch_ms: f64, sender_ms: f64, drops: u64| SoakReport {
            drops_unexplained: if drops > 0 { BTreeMap::from([(lossless.clone(), drops)]) } else { BTreeMap::new() },
            longest_cpu_wait_ms: switch_ms,
            longest_sender_cpu_wait_ms: sender_ms,
            headroom_lasts_ms: 12.8,
            ..SoakReport::default()
        };
        assert_eq!(machine_disturbed(&report(7.6, 3.0, 527)), None, "both in time: the drops are the switch's");
        assert!(machine_disturbed(&report(7.6, 20.0, 527)).unwrap().contains("a sender waited 20.0 ms"));
        assert!(machine_disturbed(&report(30.0, 20.0, 527)).unwrap().contains("the switch waited 30.0 ms"));
        assert_eq!(machine_disturbed(&report(30.0, 30.0, 0)), None, "no drop, nothing to excuse");
    }

    #[test]
    fn a_frame_a_full_socket_ring_lost_is_counted_once_though_its_native_veth_counted_it_too() {
        // CI's soak of 2026-11-29: the sink's ring full 293 times, h3's veth 293 rx drops.
        let switch_drops =
            BTreeMap::from([("frame_cap".into(), 64171), ("lossy".into(), 174), ("watchdog".into(), 38842)]);
        let mut a = Accounting {
            sent: 1_077_679,
            received: 974_199,
            switch_drops,
            sink_socket_dropped: 293,
            veth_dropped: 293,
            ..Accounting::default()
        };
        assert_eq!(a.counted() - a.sent, 293, "counted twice without the overlap");
        a.socket_drops_in_veths = 293;
        assert_eq!(a.counted(), a.sent);
        // Generic XDP: the veth did not count the socket's drops, both add.
        a.veth_dropped = 0;
        a.socket_drops_in_veths = 0;
        assert_eq!(a.counted(), a.sent);
    }
}
