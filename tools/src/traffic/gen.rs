//! The traffic generator: flows of stamped frames on an AF_XDP socket, paced, honouring
//! received PFC per priority after a configurable response delay.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Result};
use pfcswitch::core::pfc::{self, PRIORITIES};
use pfcswitch::core::queue::FrameId;
use pfcswitch::core::speed::Speed;
use pfcswitch::core::switch::FramePool;
use pfcswitch::core::time::Time;
use pfcswitch::core::Priority;
use pfcswitch::dataplane::stall::StallMeter;
use pfcswitch::sys;
use serde::{Deserialize, Serialize};

use super::flow::{FlowSpec, FlowTemplate};
use super::pace::Pacer;
use super::pause::{PauseCounts, PauseResponder};
use super::xdp_port::{HostPort, BATCH};

/// One flow to send: its frames, the priority it is sent on (what PFC pauses), its rate.
#[derive(Clone, Debug)]
pub struct GenFlow {
    pub spec: FlowSpec,
    pub prio: Priority,
    /// Frames per second; `None` is as fast as possible.
    pub rate: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct GenOptions {
    pub iface: String,
    pub flows: Vec<GenFlow>,
    /// Frames per flow.
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    /// Receive (and obey pauses) this long before the first frame is sent: other hosts
    /// of a test started at about the same time have then opened their sockets.
    pub start_delay: Duration,
    /// After the last frame is sent, keep receiving (and obeying pauses) this long, so
    /// that frames still on their way from other hosts are counted.
    pub linger: Duration,
    /// Receive and obey PFC (else received pauses are only counted, if receiving at all).
    pub honour_pfc: bool,
    /// Keep sending this many quanta after a pause arrives.
    pub pause_delay_quanta: u32,
    /// Link speed that converts quanta to time.
    pub speed: Speed,
    /// Do not receive at all (no XDP program on the interface).
    pub tx_only: bool,
    /// Poll instead of sleeping between frames: pauses are then obeyed within
    /// microseconds of their delay, at the cost of a CPU.
    pub spin: bool,
    pub umem_frames: u32,
    pub force: bool,
    /// How the receive program stamps arrivals (absent: the best this kernel allows).
    pub arrival_stamp: Option<pfcswitch::config::ArrivalStamp>,
    /// Write the MAC control frames received to this pcap file.
    pub capture: Option<std::path::PathBuf>,
    /// React to CNPs as DCQCN's reaction point, per flow.
    pub dcqcn: Option<roce::DcqcnParams>,
}

/// A flow's rate under DCQCN over the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowRate {
    pub flow: u16,
    /// CNPs that arrived for it, and the cuts they made.
    pub cnps: u64,
    pub cuts: u64,
    /// Its rate at the end, and its line rate, Mb/s (frames on the wire with their
    /// preamble and gap).
    pub rate_mbps: f64,
    pub line_mbps: f64,
    /// (ms since the first frame was due, Mb/s), one sample per ms while it sent.
    pub samples: Vec<(f64, f64)>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowTx {
    pub flow: u16,
    pub priority: Priority,
    pub sent: u64,
    pub bytes: u64,
    /// The longest this flow's sender fell behind its schedule while it was allowed to
    /// send, µs: a paced sender keeps within a loop turn of it unless the machine takes
    /// its CPU. Resuming after a pause does not count.
    #[serde(default)]
    pub max_lag_us: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GenReport {
    pub elapsed_s: f64,
    pub sent: u64,
    pub pps: f64,
    pub flows: Vec<FlowTx>,
    pub pauses: PauseCounts,
    /// Time each priority spent paused, µs.
    pub paused_us: [u64; PRIORITIES],
    /// The configured pause response delay, ns.
    pub response_delay_ns: u64,
    /// Test frames this host received while sending (from other generators), per flow.
    pub received: Vec<super::rxstats::FlowReport>,
    pub received_other: u64,
    /// Frames the kernel could not deliver to this host's socket (rx ring full).
    #[serde(default)]
    pub socket_dropped: u64,
    /// Each flow's rate over time, under `--dcqcn`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dcqcn: Vec<FlowRate>,
    /// CNPs received for no flow of this generator.
    #[serde(default)]
    pub cnps_unknown: u64,
    /// The send loop's longest stall (kept from its next turn, its own sleeps not
    /// counted), and the most of one stall it spent waiting for a CPU, µs: a sender kept
    /// off its CPU answers a pause that much late, whatever its response delay.
    #[serde(default)]
    pub longest_stall_us: u64,
    #[serde(default)]
    pub longest_cpu_wait_us: u64,
}

/// A flow while it is being sent.
struct FlowState {
    template: FlowTemplate,
    prio: Priority,
    pacer: Pacer,
    next_seq: u64,
    /// Frames the pacer allows in this loop turn.
    due: u64,
    tx: FlowTx,
    /// It was allowed to send in the previous loop turn: only then is its lag the
    /// machine's doing rather than a pause's.
    sendable: bool,
    /// Its reaction point under `--dcqcn`, and its rate over time.
    dcqcn: Option<Dcqcn>,
}

/// A flow's DCQCN state: the reaction point (its line rate the flow's paced rate) and
/// the rate it allowed over time.
struct Dcqcn {
    rp: roce::ReactionPoint,
    /// Bits a frame takes on the wire (preamble and gap included): the pacer's frames per
    /// second from the reaction point's bits per second.
    frame_bits: f64,
    samples: Vec<(f64, f64)>,
    next_sample: Time,
}

/// One rate sample per this much time, at most [`MAX_RATE_SAMPLES`] per flow.
const RATE_SAMPLE: Duration = Duration::from_millis(1);
const MAX_RATE_SAMPLES: usize = 120_000;

pub fn run(opts: &GenOptions, stop: &AtomicBool) -> Result<GenReport> {
    if opts.flows.is_empty() {
        bail!("no flows to send");
    }
    if opts.count.is_none() && opts.duration.is_none() {
        bail!("give --count, --duration or both; an endless flood is not a test");
    }
    let mut host = HostPort::open(&opts.iface, !opts.tx_only, opts.umem_frames, opts.force, opts.arrival_stamp)?;
    sys::tighten_timer_slack();
    let mut responder = PauseResponder::new(opts.speed, opts.pause_delay_quanta, opts.honour_pfc);
    let mut capture =
        opts.capture.as_ref().map(|p| crate::pcap::CaptureWriter::create_one(p, &opts.iface)).transpose()?;
    let start = sys::now() + opts.start_delay;
    let mut flows = Vec::with_capacity(opts.flows.len());
    for f in &opts.flows {
        // A paced sender is a NIC at that rate: after a stall (or a resume) it may catch up
        // by no more than a window's worth of frames, or it would burst above its rate.
        let burst =
            f.rate.map_or(BATCH as u64, |r| ((r * PACING_WINDOW.as_secs_f64()).ceil() as u64).clamp(1, BATCH as u64));
        let template = FlowTemplate::build(&f.spec)?;
        let dcqcn = opts.dcqcn.as_ref().map(|p| {
            let frame_bits = template.wire_bits();
            let line_fps = f.rate.unwrap_or(opts.speed.bps() as f64 / frame_bits);
            Dcqcn {
                rp: roce::ReactionPoint::new(p, line_fps * frame_bits),
                frame_bits,
                samples: Vec::new(),
                next_sample: start,
            }
        });
        // Under DCQCN a flow is always paced: its reaction point sets the rate.
        let rate = dcqcn.as_ref().map(|d| d.rp.rate_bps() / d.frame_bits).or(f.rate);
        flows.push(FlowState {
            template,
            prio: f.prio,
            pacer: Pacer::new(start, rate, burst),
            next_seq: 0,
            due: 0,
            tx: FlowTx { flow: f.spec.id, priority: f.prio, ..FlowTx::default() },
            sendable: false,
            dcqcn,
        });
    }
    // Which flow last wrote each frame: then only headers and stamp need rewriting.
    let mut written_by: Vec<u16> = vec![u16::MAX; host.pool.capacity() as usize];
    let mut jumbo: Vec<u8> = Vec::new();
    let mut ids: Vec<FrameId> = Vec::with_capacity(BATCH);
    let own_mac = host.mac;
    let end = opts.duration.map(|d| start + d);
    let count = opts.count;
    let finished = |f: &FlowState| count.is_some_and(|c| f.next_seq >= c);
    let mut rr = 0usize;
    let mut received_other = 0u64;
    let mut rx_stats = super::rxstats::RxStats::default();
    let (mut stalls, cpu) = (StallMeter::default(), sys::CpuWait::this_thread());
    let mut sending_ended: Option<Time> = None;
    let mut cnps_unknown = 0u64;
    loop {
        let now = sys::now();
        stalls.poll(now, || cpu.as_ref().map_or(Duration::ZERO, sys::CpuWait::read));
        let sending = now >= start && !(end.is_some_and(|e| now >= e) || flows.iter().all(finished));
        let ended = now >= start && !sending;
        if stop.load(Ordering::Relaxed) || (ended && *sending_ended.get_or_insert(now) + opts.linger <= now) {
            break;
        }
        host.port.reclaim(&mut host.pool, now);
        // Drain the rx ring (within reason): frames from other hosts arrive in bursts.
        for _ in 0..RX_BATCHES_PER_TURN {
            if !host.receives() {
                break;
            }
            let HostPort { port, pool, .. } = &mut host;
            let (n, _) = port.receive(pool, BATCH, |pool, id| {
                let bytes = pool.bytes(id);
                if bytes.len() >= 14 && bytes[12..14] == pfc::MAC_CONTROL_ETHERTYPE.to_be_bytes() {
                    if let Some(w) = capture.as_mut() {
                        w.received_now(bytes);
                    }
                    if let Ok(cf) = pfc::decode(bytes, own_mac) {
                        // The response delay counts from the pause's arrival.
                        responder.on_frame(pool.arrival(id).unwrap_or(now).min(now), &cf);
                    }
                } else if let Some(stamp) = super::flow::read_stamp_in(bytes, pool.len(id)) {
                    rx_stats.record(pool.arrival(id).unwrap_or(now), &stamp, pool.len(id));
                } else if let Some(qp) = roce::cnp_dest_qp(bytes) {
                    let at = pool.arrival(id).unwrap_or(now).min(now);
                    let flow = roce::qp_flow(qp);
                    match flows.iter_mut().find(|f| Some(f.template.id) == flow).and_then(|f| f.dcqcn.as_mut()) {
                        Some(d) => d.rp.handle_cnp(at),
                        None => cnps_unknown += 1,
                    }
                } else {
                    received_other += 1;
                }
                pool.free(id);
            });
            port.refill(pool, BATCH * 2);
            if n < BATCH {
                break;
            }
        }
        for f in flows.iter_mut() {
            let Some(d) = f.dcqcn.as_mut() else { continue };
            if d.rp.poll_timeout().is_some_and(|t| t <= now) {
                d.rp.handle_timeout(now);
            }
            f.pacer.set_rate(now, d.rp.rate_bps() / d.frame_bits);
            if sending && now >= d.next_sample && d.samples.len() < MAX_RATE_SAMPLES {
                let ms = now.saturating_since(start).as_secs_f64() * 1e3;
                d.samples.push((ms, d.rp.rate_bps() / 1e6));
                d.next_sample = now + RATE_SAMPLE;
            }
        }
        let paused = responder.paused(now);
        let mut room = host.port.tx_room(BATCH).min(host.pool.free_count().saturating_sub(BATCH));
        for f in flows.iter_mut() {
            let may_send = sending && !finished(f) && !paused.contains(f.prio);
            if may_send && f.sendable {
                f.tx.max_lag_us = f.tx.max_lag_us.max(f.pacer.lag(now).as_micros() as u64);
            }
            f.sendable = may_send;
            f.due = if may_send { f.pacer.due(now, room as u64) } else { 0 };
        }
        ids.clear();
        let stamp_ns = now.as_nanos() as u32;
        // One frame per due flow per pass, so flows interleave on the wire.
        while room > 0 {
            let mut progressed = false;
            for k in 0..flows.len() {
                let i = (rr + k) % flows.len();
                let f = &mut flows[i];
                if f.due == 0 || room == 0 || count.is_some_and(|c| f.next_seq >= c) {
                    continue;
                }
                let t = &f.template;
                let id = if t.len() <= host.pool.bytes_capacity() {
                    let Some(id) = host.pool.alloc() else {
                        room = 0;
                        break;
                    };
                    let buf = host.pool.write(id, t.len());
                    if written_by[id.0 as usize] == t.id {
                        t.rewrite(buf, f.next_seq as u32, stamp_ns);
                    } else {
                        t.write(buf, f.next_seq as u32, stamp_ns);
                        written_by[id.0 as usize] = t.id;
                    }
                    id
                } else {
                    // A jumbo frame spans several UMEM frames (multi-buffer): written whole
                    // here, then spread over them.
                    jumbo.resize(t.len(), 0);
                    t.write(&mut jumbo, f.next_seq as u32, stamp_ns);
                    let Some(id) = host.pool.put(&jumbo) else {
                        room = 0;
                        break;
                    };
                    // Its buffers now hold other bytes than a template's.
                    for b in host.pool.chain(id) {
                        written_by[b.0 as usize] = u16::MAX;
                    }
                    id
                };
                f.next_seq += 1;
                f.due -= 1;
                f.pacer.sent(1);
                f.tx.sent += 1;
                f.tx.bytes += t.len() as u64;
                if let Some(d) = f.dcqcn.as_mut() {
                    d.rp.handle_sent(now, t.len() as u64);
                }
                // A tx ring descriptor per buffer.
                room = room.saturating_sub(host.pool.buffers(id) as usize);
                ids.push(id);
                progressed = true;
            }
            rr = (rr + 1) % flows.len();
            if !progressed {
                break;
            }
        }
        if !ids.is_empty() {
            host.port.send(&mut host.pool, now, ids.iter().copied());
        }
        for _ in 0..4 {
            if host.port.tx_outstanding() == 0 {
                break;
            }
            let _ = host.port.kick();
            if host.port.reclaim(&mut host.pool, now) == 0 {
                break;
            }
        }
        if !sending {
            stalls.sleeping(now + Duration::from_micros(200));
            std::thread::sleep(Duration::from_micros(200));
        } else if ids.is_empty() {
            if opts.spin {
                std::hint::spin_loop();
            } else {
                let next_due = flows
                    .iter()
                    .filter(|f| !finished(f) && !paused.contains(f.prio))
                    .filter_map(|f| f.pacer.next_burst_due())
                    .min();
                if let Some(until) = idle_wait(now, next_due, &responder, !paused.is_empty()) {
                    stalls.sleeping(until);
                }
            }
        }
    }
    host.flush(Duration::from_secs(1));
    let socket_dropped = host.port.statistics().map(|s| s.rx_dropped() + s.rx_ring_full()).unwrap_or(0);
    if let Some(w) = capture.as_mut() {
        w.flush()?;
    }
    let now = sys::now();
    let elapsed = now.saturating_since(start).as_secs_f64();
    let stalled = stalls.stats();
    let sent = flows.iter().map(|f| f.tx.sent).sum();
    let mut paused_us = [0; PRIORITIES];
    for (p, v) in Priority::all().zip(paused_us.iter_mut()) {
        *v = responder.paused_time(now, p).as_micros() as u64;
    }
    Ok(GenReport {
        elapsed_s: elapsed,
        sent,
        pps: if elapsed > 0.0 { sent as f64 / elapsed } else { 0.0 },
        dcqcn: flows
            .iter()
            .filter_map(|f| {
                let d = f.dcqcn.as_ref()?;
                Some(FlowRate {
                    flow: f.template.id,
                    cnps: d.rp.cnps(),
                    cuts: d.rp.cuts(),
                    rate_mbps: d.rp.rate_bps() / 1e6,
                    line_mbps: d.rp.line_bps() / 1e6,
                    samples: d.samples.clone(),
                })
            })
            .collect(),
        cnps_unknown,
        flows: flows.into_iter().map(|f| f.tx).collect(),
        pauses: responder.counts,
        paused_us,
        response_delay_ns: responder.delay().as_nanos() as u64,
        received: rx_stats.report(None),
        received_other,
        socket_dropped,
        longest_stall_us: stalled.longest_us,
        longest_cpu_wait_us: stalled.longest_cpu_wait_us,
    })
}

/// Receive batches a loop turn may take before it sends again.
const RX_BATCHES_PER_TURN: usize = 8;

/// Catch-up allowance of a paced sender; it wakes about twice per window at high rates.
const PACING_WINDOW: Duration = Duration::from_micros(200);
/// How late a short sleep wakes on a typical VM (measured: 25-40 µs).
const SLEEP_OVERSHOOT: Duration = Duration::from_micros(35);

/// Nothing to send: sleep until the pacer or a pause allows the next burst, so a paced
/// sender leaves the CPU to the switch; the last few µs are spun, because sleeps wake
/// late. Sleeps are short enough (≤ 200 µs) that received pauses are read promptly, and
/// a sleeping sender sends nothing, so sleeping is always safe.
/// Returns when the sleep was to end, if it slept (a late wake is the machine's, not a
/// stall of the sender's).
fn idle_wait(now: Time, next_due: Option<Time>, responder: &PauseResponder, paused: bool) -> Option<Time> {
    let next = [next_due, if paused { responder.next_change(now) } else { None }].into_iter().flatten().min();
    let wait = next.map(|t| t.saturating_since(now)).unwrap_or(Duration::from_micros(20));
    if wait >= SLEEP_OVERSHOOT + Duration::from_micros(10) {
        let nap = (wait - SLEEP_OVERSHOOT).min(Duration::from_micros(200));
        std::thread::sleep(nap);
        Some(now + nap)
    } else {
        std::hint::spin_loop();
        None
    }
}
