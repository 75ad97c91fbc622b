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
use pfcswitch::dataplane::sys;
use serde::{Deserialize, Serialize};

use super::flow::{FlowSpec, FlowTemplate};
use super::pace::Pacer;
use super::pause::{PauseCounts, PauseResponder};
use super::xdp_port::{HostPort, BATCH};

#[derive(Clone, Debug)]
pub struct GenOptions {
    pub iface: String,
    /// Each flow with the priority it is sent on (what PFC pauses).
    pub flows: Vec<(FlowSpec, u8)>,
    /// Frames per flow.
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    /// Total frames per second over all flows; `None` is as fast as possible.
    pub rate: Option<f64>,
    /// Receive and obey PFC (else received pauses are only counted, if receiving at all).
    pub honour_pfc: bool,
    /// Keep sending this many quanta after a pause arrives.
    pub pause_delay_quanta: u32,
    /// Link speed that converts quanta to time.
    pub speed: Speed,
    /// Do not receive at all (no XDP program on the interface).
    pub tx_only: bool,
    pub umem_frames: u32,
    pub force: bool,
    /// Write the MAC control frames received to this pcap file.
    pub capture: Option<std::path::PathBuf>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowTx {
    pub flow: u16,
    pub priority: u8,
    pub sent: u64,
    pub bytes: u64,
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
    pub received_other: u64,
}

pub fn run(opts: &GenOptions, stop: &AtomicBool) -> Result<GenReport> {
    if opts.flows.is_empty() {
        bail!("no flows to send");
    }
    if opts.count.is_none() && opts.duration.is_none() && opts.rate.is_none() {
        bail!("give --count, --duration or both; an endless flood is not a test");
    }
    let templates: Vec<FlowTemplate> =
        opts.flows.iter().map(|(f, _)| FlowTemplate::build(f)).collect::<Result<_, _>>()?;
    let prios: Vec<u8> = opts.flows.iter().map(|(_, p)| *p).collect();
    let mut host = HostPort::open(&opts.iface, !opts.tx_only, opts.umem_frames, opts.force)?;
    sys::tighten_timer_slack();
    let mut responder = PauseResponder::new(opts.speed, opts.pause_delay_quanta, opts.honour_pfc);
    let mut capture = opts.capture.as_ref().map(crate::pcap::PcapWriter::create).transpose()?;
    let frames = host.pool.capacity() as usize;
    // Which template last wrote each frame: then only headers and stamp need rewriting.
    let mut written_by: Vec<u16> = vec![u16::MAX; frames];
    let mut next_seq = vec![0u64; templates.len()];
    let mut tx = FlowTxTable::new(&templates, &prios);
    let mut ids: Vec<FrameId> = Vec::with_capacity(BATCH);
    let own_mac = host.mac;
    let start = sys::now();
    let end = opts.duration.map(|d| start + d);
    // A paced sender is a NIC at that rate: after a stall (or a resume) it may catch up by
    // no more than a window's worth of frames, or it would burst above its own line rate.
    let burst =
        opts.rate.map_or(BATCH as u64, |r| ((r * PACING_WINDOW.as_secs_f64()).ceil() as u64).clamp(1, BATCH as u64));
    let mut pacer = Pacer::new(start, opts.rate, burst);
    let mut rr = 0usize;
    let mut received_other = 0u64;
    loop {
        let now = sys::now();
        if stop.load(Ordering::Relaxed) || end.is_some_and(|e| now >= e) {
            break;
        }
        host.port.reclaim(&mut host.pool);
        if host.receives() {
            let HostPort { port, pool, .. } = &mut host;
            port.receive(pool, BATCH, |pool, id| {
                let bytes = pool.bytes(id);
                if bytes.len() >= 14 && bytes[12..14] == pfc::MAC_CONTROL_ETHERTYPE.to_be_bytes() {
                    if let Some(w) = capture.as_mut() {
                        w.write(bytes);
                    }
                    if let Ok(cf) = pfc::decode(bytes, own_mac) {
                        responder.on_frame(now, &cf);
                    }
                } else {
                    received_other += 1;
                }
                pool.free(id);
            });
            port.refill(pool, BATCH * 2);
        }
        let paused = responder.paused_mask(now);
        let count = opts.count;
        let finished = |next_seq: &[u64], i: usize| count.is_some_and(|c| next_seq[i] >= c);
        if (0..templates.len()).all(|i| finished(&next_seq, i)) {
            break;
        }
        let room = host.port.tx_room(BATCH).min(host.pool.free_count().saturating_sub(BATCH));
        let due = pacer.due(now, room as u64) as usize;
        ids.clear();
        let stamp_ns = now.as_nanos() as u32;
        for _ in 0..due {
            // Round robin over flows that may send.
            let Some(i) = (0..templates.len())
                .map(|k| (rr + k) % templates.len())
                .find(|&i| !finished(&next_seq, i) && paused & (1 << prios[i]) == 0)
            else {
                break;
            };
            rr = (i + 1) % templates.len();
            let Some(id) = host.pool.alloc() else { break };
            let t = &templates[i];
            let buf = host.pool.write(id, t.len());
            if written_by[id.0 as usize] == t.id {
                t.rewrite(buf, next_seq[i] as u32, stamp_ns);
            } else {
                t.write(buf, next_seq[i] as u32, stamp_ns);
                written_by[id.0 as usize] = t.id;
            }
            next_seq[i] += 1;
            tx.count(i, t.len());
            ids.push(id);
        }
        if !ids.is_empty() {
            host.port.send(&mut host.pool, ids.iter().copied());
            pacer.sent(ids.len() as u64);
        }
        for _ in 0..4 {
            if host.port.tx_outstanding() == 0 {
                break;
            }
            let _ = host.port.kick();
            if host.port.reclaim(&mut host.pool) == 0 {
                break;
            }
        }
        if ids.is_empty() {
            idle_wait(now, &pacer, &responder, paused != 0);
        }
    }
    host.flush(Duration::from_secs(1));
    if let Some(w) = capture.as_mut() {
        w.flush()?;
    }
    let now = sys::now();
    let elapsed = now.saturating_since(start).as_secs_f64();
    let sent = tx.flows.iter().map(|f| f.sent).sum();
    let mut paused_us = [0; PRIORITIES];
    for (p, v) in paused_us.iter_mut().enumerate() {
        *v = responder.paused_time(now, p).as_micros() as u64;
    }
    Ok(GenReport {
        elapsed_s: elapsed,
        sent,
        pps: if elapsed > 0.0 { sent as f64 / elapsed } else { 0.0 },
        flows: tx.flows,
        pauses: responder.counts,
        paused_us,
        response_delay_ns: responder.delay().as_nanos() as u64,
        received_other,
    })
}

/// Catch-up allowance of a paced sender; it wakes about twice per window at high rates.
const PACING_WINDOW: Duration = Duration::from_micros(200);
/// How late a short sleep wakes on a typical VM (measured: 25-40 µs).
const SLEEP_OVERSHOOT: Duration = Duration::from_micros(35);

/// Nothing to send: sleep until the pacer or a pause allows the next burst, so a paced
/// sender leaves the CPU to the switch; the last few µs are spun, because sleeps wake
/// late. Sleeps are short enough (≤ 200 µs) that received pauses are read promptly, and
/// a sleeping sender sends nothing, so sleeping is always safe.
fn idle_wait(now: Time, pacer: &Pacer, responder: &PauseResponder, paused: bool) {
    let next =
        [pacer.next_burst_due(), if paused { responder.next_change(now) } else { None }].into_iter().flatten().min();
    let wait = next.map(|t| t.saturating_since(now)).unwrap_or(Duration::from_micros(20));
    if wait >= SLEEP_OVERSHOOT + Duration::from_micros(10) {
        std::thread::sleep((wait - SLEEP_OVERSHOOT).min(Duration::from_micros(200)));
    } else {
        std::hint::spin_loop();
    }
}

struct FlowTxTable {
    flows: Vec<FlowTx>,
}

impl FlowTxTable {
    fn new(templates: &[FlowTemplate], prios: &[u8]) -> FlowTxTable {
        FlowTxTable {
            flows: templates
                .iter()
                .zip(prios)
                .map(|(t, &p)| FlowTx { flow: t.id, priority: p, sent: 0, bytes: 0 })
                .collect(),
        }
    }

    fn count(&mut self, i: usize, len: usize) {
        self.flows[i].sent += 1;
        self.flows[i].bytes += len as u64;
    }
}
