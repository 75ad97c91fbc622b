//! Shared fixtures for the netns integration tests.
//!
//! Every test builds its own testbed (namespaces named after the test and this process),
//! which is removed when the test ends, passed or failed. Traffic tests run one at a
//! time: they measure loss and timing on a small shared machine.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

pub use pfcswitch::cli::RunArgs;
use pfctools::argv;
use pfctools::cli::{GenArgs, SinkArgs};
pub use pfctools::harness::{self, run_gen, start_gen, switch_config, SinkProc, SwitchProc};
pub use pfctools::testbed::{unique_name, Placement, Testbed, TestbedTopology, Topology};
use pfctools::traffic::gen::GenReport;
use pfctools::traffic::sink::SinkReport;

/// `pfctools gen`'s arguments from the flags a user would type after `--iface IF`,
/// parsed by the generator's own clap struct (the harness sets the interface).
pub fn gen_flags(flags: &[&str]) -> GenArgs {
    argv::parse(&[&["--iface", HARNESS_SETS_IT], flags].concat()).unwrap_or_else(|e| panic!("gen {flags:?}: {e}"))
}

/// `pfctools sink`'s arguments from the flags a user would type after `--iface IF`.
pub fn sink_flags(flags: &[&str]) -> SinkArgs {
    argv::parse(&[&["--iface", HARNESS_SETS_IT], flags].concat()).unwrap_or_else(|e| panic!("sink {flags:?}: {e}"))
}

/// `pfcswitch run`'s arguments from flags (the harness adds the config and the socket).
pub fn run_flags(flags: &[&str]) -> RunArgs {
    argv::parse(flags).unwrap_or_else(|e| panic!("run {flags:?}: {e}"))
}

/// The interface a host's traffic tool runs on is the harness's to fill in.
const HARNESS_SETS_IT: &str = "";

static SERIAL: Mutex<()> = Mutex::new(());

/// What a test holds while it runs: the lock that serializes the tests that send
/// traffic and, unless it measures the machine as a user has it, the request that keeps
/// idle CPUs polling, so that a sleeping sender or switch loop wakes on time on a
/// virtual machine (`pfcswitch::sys::WakeLatencyHold`).
pub struct Serial {
    _wake: Option<pfcswitch::sys::WakeLatencyHold>,
    _lock: MutexGuard<'static, ()>,
}

/// Serializes tests that send traffic, checks the preconditions every test shares, and
/// keeps idle CPUs polling for the test's length.
pub fn serial() -> Serial {
    let lock = serial_lock();
    Serial { _wake: pfcswitch::sys::WakeLatencyHold::hold(0), _lock: lock }
}

/// [`serial`] for the tests of benches that measure speed, run on the machine as a user has it: a vCPU
/// that polls when idle competes with the busy one beside it (at 64 bytes the switch's
/// zero-loss rate fell from 334-376 k to 279-297 k frames/s with the request held).
pub fn serial_as_the_machine_is() -> Serial {
    Serial { _wake: None, _lock: serial_lock() }
}

fn serial_lock() -> MutexGuard<'static, ()> {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "the netns tests create namespaces and XDP programs: run them as root");
    for bin in ["pfcswitch", "pfctools"] {
        harness::bin(bin).unwrap_or_else(|e| panic!("{e}"));
    }
    // A previous run that was killed may have left testbeds behind.
    pfctools::testbed::clean_stale();
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How many times a test runs when the machine, not the switch, spoiled its attempts.
/// Five: on a night when the host held a vCPU for 100 ms every few seconds, CI saw one
/// test's three 3-s attempts all disturbed (stalls of 77, 100 and 101 ms), and each
/// attempt it did not need costs nothing.
pub const ATTEMPTS: u32 = 5;

/// What one attempt of a test came to.
pub enum Attempt<T> {
    /// The attempt says something about the switch: judge it.
    Judge(T),
    /// The machine disturbed it (a process off its CPU for longer than a queue lasts, a
    /// receiver's ring overflowing): why, for the log. It is run again.
    Disturbed(String),
}

/// Runs `attempt(n)` until it returns something to judge, at most [`ATTEMPTS`] times,
/// and returns that and the attempt it came from. A disturbed attempt is repeated after
/// [`harness::retry_pause`], so that the repeats do not all fall in one of the host's busy
/// spells. A machine that disturbs every attempt fails the test, saying how.
pub fn judged_attempt<T>(mut attempt: impl FnMut(u32) -> Attempt<T>) -> (T, u32) {
    let mut why = Vec::new();
    for n in 1..=ATTEMPTS {
        if n > 1 {
            pause_before_repeat(n - 1);
        }
        match attempt(n) {
            Attempt::Judge(t) => return (t, n),
            Attempt::Disturbed(w) => {
                note_repeat(&format!("attempt {n} disturbed by the machine: {w}"));
                why.push(format!("attempt {n}: {w}"));
            }
        }
    }
    panic!("the machine disturbed all {ATTEMPTS} attempts: {}", why.join("; "));
}

/// The file every repeat for the machine's sake is noted in, one line each, when the
/// suite names one (`scripts/test.sh` does, and prints them at the end).
pub const REPEAT_LOG_VAR: &str = "PFCS_REPEAT_LOG";

/// Notes that the running test repeats something because the machine disturbed it:
/// on stderr, and in the suite's log of repeats ([`REPEAT_LOG_VAR`]).
pub fn note_repeat(why: &str) {
    let test = std::thread::current().name().unwrap_or("?").to_string();
    eprintln!("{test}: {why}");
    if let Some(path) = std::env::var_os(REPEAT_LOG_VAR) {
        use std::io::Write;
        let line = format!("{test}: {}\n", why.replace('\n', " "));
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path);
        if let Err(e) = file.and_then(|mut f| f.write_all(line.as_bytes())) {
            eprintln!("the log of repeats: {e}");
        }
    }
}

/// Waits before repeat `n` (1 for the first) of an attempt the machine disturbed, as
/// [`judged_attempt`] does; for tests that count their repeats themselves (and note
/// them with [`note_repeat`]).
pub fn pause_before_repeat(n: u32) {
    std::thread::sleep(harness::retry_pause(harness::RETRY_PAUSE, n));
}

/// What an attempt at a lossless transfer watches to tell the machine's losses from the
/// switch's: the testbed's kernel link drops when it began, and at its end the senders'
/// and the switch's stalls.
pub struct AttemptWatch<'a> {
    tb: &'a Testbed,
    link_drops: u64,
}

impl<'a> AttemptWatch<'a> {
    /// Begins watching `tb`, before the attempt's switch starts.
    pub fn begin(tb: &'a Testbed) -> AttemptWatch<'a> {
        AttemptWatch { tb, link_drops: link_drops(tb) }
    }

    /// Frames the kernel dropped on the testbed's links since [`AttemptWatch::begin`].
    pub fn link_drops_since(&self) -> u64 {
        link_drops(self.tb) - self.link_drops
    }

    /// Why an attempt whose `senders` sent frames that `rx` did not all receive says
    /// nothing about the switch, or `None` (nothing lost, or the machine does not explain
    /// it). The machine lost them if:
    /// - the sink's socket dropped frames (its host was off its CPU for longer than its
    ///   ring holds);
    /// - the switch's loop stalled for longer than its headroom lasts at a sender's rate
    ///   (frames then wait unseen on its rx ring past the point of pausing);
    /// - a sender's loop did (it answered a pause that much late, so more than the
    ///   headroom arrived after it), or its socket dropped frames (a pause among them);
    /// - the kernel dropped frames on a testbed link since [`AttemptWatch::begin`] (a
    ///   veth's ring toward an XDP program overflows when its softirq waits for a CPU,
    ///   and those frames never reached the switch).
    pub fn lost(
        &self,
        senders: &[&GenReport],
        rx: &SinkReport,
        stalls: &pfcswitch::stats::StallStats,
        headroom_lasts_us: f64,
    ) -> Option<String> {
        let sent: u64 = senders.iter().map(|g| g.sent).sum();
        let links = self.link_drops_since();
        let sender_stall = senders.iter().map(|g| g.longest_stall_us).max().unwrap_or(0);
        let sender_socket: u64 = senders.iter().map(|g| g.socket_dropped).sum();
        let machine = rx.socket_dropped > 0
            || stalls.longest_us as f64 > headroom_lasts_us
            || sender_stall as f64 > headroom_lasts_us
            || sender_socket > 0
            || links > 0;
        (rx.received < sent && machine).then(|| {
            format!(
                "{} of {sent} frames lost with sink socket drops {}, kernel link drops {links}, a longest switch stall \
                 of {} µs, a longest sender stall of {sender_stall} µs and sender socket drops {sender_socket} \
                 (the headroom lasts {headroom_lasts_us:.0} µs)",
                sent - rx.received,
                rx.socket_dropped,
                stalls.longest_us
            )
        })
    }

    /// The switch back, still running, to be judged with the attempt; or, when the machine
    /// lost frames of it ([`AttemptWatch::lost`]), why, with the switch stopped.
    pub fn keep_switch(
        &self,
        sw: SwitchProc,
        senders: &[&GenReport],
        rx: &SinkReport,
        headroom_lasts_us: f64,
    ) -> Result<SwitchProc, String> {
        let stalls = sw.stats().unwrap().stalls;
        match self.lost(senders, rx, &stalls, headroom_lasts_us) {
            Some(why) => {
                assert!(sw.stop().success());
                Err(why)
            }
            None => Ok(sw),
        }
    }
}

/// Why a port that a test's senders should have kept busy delivered `delivered` frames/s,
/// no more than `share` of its `line_rate`, for the machine's reasons; `None` when it
/// delivered more, or when the machine does not explain the shortfall. The switch's loop
/// paces the port: while it waits for a CPU the port sends nothing, so over a transfer
/// of `span_s` in which it waited `cpu_wait_us` the port can carry only the rest. The
/// machine explains the shortfall when what arrived is at least `share` of that rest.
pub fn port_idled_by_machine(
    delivered: f64,
    line_rate: f64,
    share: f64,
    span_s: f64,
    cpu_wait_us: Option<u64>,
) -> Option<String> {
    let waited_s = cpu_wait_us? as f64 / 1e6;
    let had_cpu_s = (span_s - waited_s).max(0.0);
    (delivered <= share * line_rate && delivered * span_s >= share * line_rate * had_cpu_s).then(|| {
        format!(
            "the port delivered {delivered:.0} of {line_rate:.0} frames/s, and the switch's loop waited \
             {waited_s:.3} s of the {span_s:.3} s transfer for a CPU"
        )
    })
}

impl<T> From<Result<T, String>> for Attempt<T> {
    /// `Ok` to judge; `Err` why the machine disturbed it.
    fn from(r: Result<T, String>) -> Attempt<T> {
        match r {
            Ok(t) => Attempt::Judge(t),
            Err(why) => Attempt::Disturbed(why),
        }
    }
}

/// The testbed of `topology`, named after the test, whose switches, senders, sinks and
/// storms run raised ([`Placement::raised`]): a test's verdict is about the switch, and
/// beside a build or a package install in another terminal the switch and the senders,
/// at nice 0 in the suite's session, waited 50-176 ms for a CPU, where a queue's headroom
/// lasts a few (docs/bench/2026-11-28-suite-beside-load.md).
pub fn up(tag: &str, topology: Topology) -> Testbed {
    let tb = Testbed::up(&unique_name(tag), topology).unwrap_or_else(|e| panic!("testbed: {e}"));
    tb.with_processes(Placement::raised(None))
}

/// A testbed from a topology file text, named after the test.
pub fn testbed(tag: &str, topology: &str) -> Testbed {
    up(tag, Topology::from_toml(topology).unwrap_or_else(|e| panic!("topology: {e}")))
}

/// Hosts h1..hN (addresses 10.0.0.i/24) each on its own port p_i of switch sw1.
pub fn star(tag: &str, hosts: usize) -> Testbed {
    up(tag, Topology::star(hosts))
}

/// [`star`] with `queues` rx and tx queues at each end of every link (a multi-queue veth
/// spreads the kernel's flows over them, as a NIC's RSS does).
pub fn star_with_queues(tag: &str, hosts: usize, queues: u32) -> Testbed {
    let mut topology = Topology::star(hosts);
    for link in &mut topology.links {
        link.queues = Some(queues);
    }
    up(tag, topology)
}

pub fn mac_of(tb: &Testbed, host: &str) -> String {
    tb.host_iface(host).expect("host has an interface").mac.to_string()
}

/// Waits until `done()` holds, asking every `every`; fails the test, naming `what`, if it
/// does not hold within `timeout`.
pub fn wait_until(what: &str, timeout: Duration, every: Duration, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + timeout;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}: not within {timeout:?}");
        std::thread::sleep(every);
    }
}

/// Generous limits: the suite shares 2 cores with CI's other work.
pub const GEN_TIMEOUT: Duration = Duration::from_secs(60);
pub const SINK_TIMEOUT: Duration = Duration::from_secs(60);

/// Reads a counter of `ip -s link` for an interface in a node (e.g. "TX", "dropped").
pub fn link_counter(tb: &Testbed, node: &str, iface: &str, direction: &str, field: &str) -> u64 {
    let out = tb.exec(node, &["ip", "-s", "-s", "link", "show", "dev", iface]).expect("ip -s link");
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with(&format!("{direction}:")) {
            let names: Vec<&str> = l.split_whitespace().skip(1).collect();
            let values: Vec<&str> = lines[i + 1].split_whitespace().collect();
            if let Some(pos) = names.iter().position(|n| *n == field) {
                return values[pos].parse().unwrap_or(0);
            }
        }
    }
    panic!("no {direction} {field} counter for {iface} in: {out}")
}

/// Frames the kernel dropped at every end of every link of the testbed, received and
/// sent (`ip -s link`): a receiver that fell behind its ring, a full veth queue.
pub fn link_drops(tb: &Testbed) -> u64 {
    let t = tb.topology();
    let mut total = 0;
    for node in t.node_names() {
        for i in tb.interfaces_of(node) {
            total += link_counter(tb, node, &i.name, "RX", "dropped");
            total += link_counter(tb, node, &i.name, "TX", "dropped");
        }
    }
    total
}

/// Whether any XDP program is attached to `iface` in `node`.
pub fn has_xdp(tb: &Testbed, node: &str, iface: &str) -> bool {
    tb.exec(node, &["ip", "link", "show", "dev", iface]).expect("ip link").contains("xdp")
}

/// `GET path` from `127.0.0.1:port` inside `node`'s namespace: the status line and the
/// body (no client program needed in the namespace: see [`in_netns`]).
pub fn http_get(tb: &Testbed, node: &str, port: u16, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let request = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n");
    let reply = in_netns(tb, node, move || {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics port");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        reply
    });
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
    (head.lines().next().unwrap_or("").to_string(), body.to_string())
}

/// Runs `f` on a thread that has joined `node`'s network namespace (setns moves only the
/// calling thread, so the test's own threads stay where they are).
pub fn in_netns<T: Send + 'static>(tb: &Testbed, node: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    spawn_in_netns(tb, node, f).join().expect("the thread in the namespace")
}

/// [`in_netns`] without waiting for the thread.
pub fn spawn_in_netns<T: Send + 'static>(
    tb: &Testbed,
    node: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    tb.thread_in(node, f).expect("node has a namespace")
}

/// Kernel UDP traffic of `flows` flows (one source port each), `per_flow` datagrams
/// each, from `from` to `to_addr:9` in `to`; returns how many arrived. The kernel hashes
/// each flow to a tx queue of `from`'s interface, which on a veth is the rx queue it
/// arrives on at the other end.
pub fn udp_flows(tb: &Testbed, from: &str, to: &str, to_addr: &str, flows: usize, per_flow: usize) -> usize {
    let total = flows * per_flow;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver = spawn_in_netns(tb, to, move || {
        let sock = std::net::UdpSocket::bind("0.0.0.0:9").expect("bind UDP 9");
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        ready_tx.send(()).unwrap();
        let mut buf = [0u8; 2048];
        let mut n = 0;
        while n < total && sock.recv(&mut buf).is_ok() {
            n += 1;
        }
        n
    });
    ready_rx.recv().expect("the receiver started");
    let dst = format!("{to_addr}:9");
    in_netns(tb, from, move || {
        let sockets: Vec<std::net::UdpSocket> =
            (0..flows).map(|_| std::net::UdpSocket::bind("0.0.0.0:0").expect("bind a source port")).collect();
        for round in 0..per_flow {
            for s in &sockets {
                s.send_to(format!("flow datagram {round}").as_bytes(), &dst).expect("send");
            }
            // Well below any rate a veth or the switch could drop for.
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    receiver.join().expect("the receiver")
}

/// Every port at `speed`, buffers sized for a veth testbed on a busy 2-core machine, and
/// h3 (where there is one) known on the third port.
pub fn config_at(tb: &Testbed, speed: pfcswitch::core::speed::Speed) -> pfcswitch::config::RunConfig {
    let mut c = switch_config(tb, "sw1");
    for p in &mut c.ports {
        p.speed = Some(speed);
    }
    c.buffer.xoff_bytes = Some(64 << 10);
    c.buffer.xon_offset_bytes = Some(16 << 10);
    // Scheduling delays act like a long cable: generous headroom keeps "lossless" about
    // PFC, not about the test machine's load.
    c.buffer.headroom_bytes = 256 << 10;
    // The sink on h3 never sends, so the switch would never learn its address and would
    // flood the senders' frames to the other host too, where their copies queue (and on
    // a lossy priority drop) beside the frames under test.
    if let (Ok(h3), Some(port)) = (tb.host_iface("h3"), c.ports.get(2).map(|p| p.iface.clone())) {
        c.fdb_entries.push(pfcswitch::core::config::StaticFdbEntry { mac: h3.mac, port });
    }
    c
}

/// A kernel TCP transfer of `bytes` from `from` to `to_addr:5201` in `to`, with cubic
/// congestion control on the sender (the kernel's default here, BBR, keeps queues short by
/// itself): how many bytes the receiver read before the sender closed, or why it failed.
/// Every wait is bounded: 10 s without progress ends the transfer.
pub fn tcp_transfer(tb: &Testbed, from: &str, to: &str, to_addr: &str, bytes: usize) -> Result<usize, String> {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let stall = Duration::from_secs(10);
    let listener_addr = format!("{to_addr}:5201");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver = spawn_in_netns(tb, to, move || -> Result<usize, String> {
        let listener = std::net::TcpListener::bind(&listener_addr).map_err(|e| format!("bind: {e}"))?;
        ready_tx.send(()).map_err(|e| e.to_string())?;
        let (mut conn, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
        conn.set_read_timeout(Some(stall)).map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = 0;
        loop {
            match conn.read(&mut buf) {
                Ok(0) => return Ok(got),
                Ok(n) => got += n,
                Err(e) => return Err(format!("read after {got} bytes: {e}")),
            }
        }
    });
    ready_rx.recv_timeout(stall).map_err(|_| "the receiver did not listen".to_string())?;
    let dst = format!("{to_addr}:5201");
    in_netns(tb, from, move || -> Result<(), String> {
        let mut conn =
            std::net::TcpStream::connect_timeout(&dst.parse().unwrap(), stall).map_err(|e| format!("connect: {e}"))?;
        let cubic = b"cubic";
        // SAFETY: setsockopt on a socket we own, with a buffer of the length given.
        let rc = unsafe {
            libc::setsockopt(
                conn.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                cubic.as_ptr().cast(),
                cubic.len() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(format!("TCP_CONGESTION cubic: {}", std::io::Error::last_os_error()));
        }
        conn.set_write_timeout(Some(stall)).map_err(|e| e.to_string())?;
        let chunk = vec![0x5au8; 64 * 1024];
        let mut sent = 0;
        while sent < bytes {
            let n = chunk.len().min(bytes - sent);
            conn.write_all(&chunk[..n]).map_err(|e| format!("write after {sent} bytes: {e}"))?;
            sent += n;
        }
        conn.shutdown(std::net::Shutdown::Write).map_err(|e| e.to_string())
    })?;
    receiver.join().map_err(|_| "the receiver panicked".to_string())?
}

/// Two senders at 80 % of a 100 Mb/s port each, into a third 100 Mb/s port.
pub fn congest(
    tb: &Testbed,
    dscp: &str,
    capture: Option<&str>,
) -> (pfctools::traffic::gen::GenReport, pfctools::traffic::gen::GenReport, pfctools::traffic::sink::SinkReport) {
    let sink = SinkProc::start(tb, "h3", "sink", &sink_flags(&["--idle", "1.5"])).unwrap();
    let dst = mac_of(tb, "h3");
    let common = [
        "--dst-mac",
        dst.as_str(),
        "--size",
        "1000",
        "--dscp",
        dscp,
        "--speed",
        "100M",
        "--load",
        "80",
        "--duration",
        "2",
    ];
    let mut a1: Vec<&str> = common.to_vec();
    a1.extend_from_slice(&["--flow-base", "1"]);
    if let Some(path) = capture {
        a1.extend_from_slice(&["--capture", path]);
    }
    let mut a2 = common.to_vec();
    a2.extend_from_slice(&["--flow-base", "2"]);
    let g1 = start_gen(tb, "h1", "gen1", &gen_flags(&a1)).unwrap();
    let g2 = start_gen(tb, "h2", "gen2", &gen_flags(&a2)).unwrap();
    let (r1, r2) = (g1.finish(GEN_TIMEOUT).unwrap(), g2.finish(GEN_TIMEOUT).unwrap());
    (r1, r2, sink.finish(SINK_TIMEOUT).unwrap())
}

/// Which AF_XDP paths a test's switch takes: what this kernel and driver allow (the
/// defaults), or every optional part forced to its fallback, so that the fallbacks are
/// tested on a kernel that offers the fast paths too (`DataplaneConfig::every_optional_part_off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paths {
    AsTheKernelAllows,
    EveryOptionalPartOff,
}

impl Paths {
    /// `config` set to take these paths.
    pub fn apply(self, mut config: pfcswitch::config::RunConfig) -> pfcswitch::config::RunConfig {
        if self == Paths::EveryOptionalPartOff {
            config.dataplane = config.dataplane.every_optional_part_off();
        }
        config
    }

    /// Checks that the switch whose stats these are took these paths, and said so.
    pub fn check(self, stats: &pfcswitch::stats::Stats) {
        use pfcswitch::config::{ArrivalStamp, BindMode, XdpMode};
        let k = stats.kernel_paths.as_ref().expect("the switch says which paths it took");
        assert!(!k.arrival_stamp.why.is_empty() && !k.xdp_frags.why.is_empty(), "{k:?}");
        match self {
            Paths::AsTheKernelAllows => {
                // Every kernel with XDP has bpf_xdp_adjust_head: arrival is stamped where
                // the frame arrived, in its metadata area or in front of it.
                assert!(k.arrival_stamp.path.at_arrival(), "{k:?}");
                assert_eq!(stats.latency.rx_ring.count > 0, stats.latency.engine.count > 0, "{:?}", stats.latency);
            }
            Paths::EveryOptionalPartOff => {
                assert_eq!((k.arrival_stamp.path, k.xdp_frags.path), (ArrivalStamp::RxClock, false), "{k:?}");
                for p in &stats.ports {
                    assert_eq!((p.xdp_mode, p.bind_mode), (Some(XdpMode::Generic), Some(BindMode::Copy)), "{p:?}");
                }
                // Without an arrival stamp the rx ring's wait is not seen, and is not
                // reported as none.
                assert_eq!(stats.latency.rx_ring.count, 0, "{:?}", stats.latency);
            }
        }
    }
}
