//! The sink: receives on an AF_XDP socket, accounts test frames per flow, counts (and
//! optionally captures) MAC control frames.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Result;
use pfcswitch::core::pfc::{self, MacControl, PRIORITIES};
use pfcswitch::core::switch::FramePool;
use pfcswitch::core::time::Time;
use pfcswitch::sys;
use serde::{Deserialize, Serialize};

use roce::{CnpPacer, DcqcnParams, ReplySpec};

use super::flow::read_stamp_in;
use super::rxstats::{FlowReport, RxStats};
use super::xdp_port::{HostPort, BATCH};
use crate::pcap::CaptureWriter;

#[derive(Clone, Debug)]
pub struct SinkOptions {
    pub iface: String,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop when no test frame arrived for this long (counted from the first one).
    pub idle_timeout: Option<Duration>,
    /// Stop once this many distinct test frames arrived.
    pub expect_total: Option<u64>,
    /// Frames each flow sent, to count trailing losses.
    pub expect_per_flow: Option<u64>,
    /// Write every MAC control frame received to this pcap file.
    pub capture: Option<PathBuf>,
    pub umem_frames: u32,
    pub force: bool,
    /// How the receive program stamps arrivals (absent: the best this kernel allows).
    pub arrival_stamp: Option<pfcswitch::config::ArrivalStamp>,
    /// Act as DCQCN's notification point: answer CE-marked test frames with CNPs.
    pub cnp: Option<CnpOptions>,
}

/// How the sink answers marked frames.
#[derive(Clone, Debug)]
pub struct CnpOptions {
    /// DCQCN's parameters: at most one CNP per flow per `min_time_between_cnps`.
    pub params: DcqcnParams,
    /// The DSCP of the CNPs.
    pub dscp: u8,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MacControlSeen {
    pub pfc: u64,
    pub pause: u64,
    pub invalid: u64,
    /// PFC frames naming the priority with non-zero quanta.
    pub xoff: [u64; PRIORITIES],
    pub xon: [u64; PRIORITIES],
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SinkReport {
    pub elapsed_s: f64,
    pub received: u64,
    pub other_frames: u64,
    /// Test frames the sink did not follow (too many flows, or sequence numbers too far
    /// apart to keep a bitmap of).
    #[serde(default)]
    pub untracked_frames: u64,
    pub mac_control: MacControlSeen,
    pub flows: Vec<FlowReport>,
    /// Frames the kernel could not deliver to the socket (ring full or no buffers).
    pub socket_dropped: u64,
    /// Where the receive program ran. In native mode a veth counts the frames its
    /// program could not hand to the socket among its own rx drops as well.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp_mode: Option<pfcswitch::config::XdpMode>,
    /// How the receive program stamped arrivals (what `first_ns`/`last_ns` count from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_stamp: Option<pfcswitch::config::ArrivalStamp>,
    /// CNPs sent (as DCQCN's notification point), all flows.
    #[serde(default)]
    pub cnps_sent: u64,
    /// CNPs that could not be sent (no free frame, or the tx ring full).
    #[serde(default)]
    pub cnps_unsent: u64,
}

/// Signals the caller (e.g. a test) that the sink is ready to receive.
pub const READY_LINE: &str = "sink ready";

pub fn run(opts: &SinkOptions, stop: &AtomicBool) -> Result<SinkReport> {
    let mut host = HostPort::open(&opts.iface, true, opts.umem_frames, opts.force, opts.arrival_stamp)?;
    let mut capture = opts.capture.as_ref().map(|p| CaptureWriter::create_one(p, &opts.iface)).transpose()?;
    let mut stats = RxStats::default();
    if let Some(n) = opts.expect_per_flow {
        stats.reserve(0, n);
    }
    let mut seen = MacControlSeen::default();
    let own_mac = host.mac;
    let start = sys::now();
    let end = opts.duration.map(|d| start + d);
    let mut last_frame: Option<Time> = None;
    let mut pollfd = [sys::pollfd(host.fd)];
    // The notification point: a pacer per flow, and the CNPs a batch made.
    let mut pacers: std::collections::HashMap<u16, CnpPacer> = std::collections::HashMap::new();
    let mut cnps: Vec<Vec<u8>> = Vec::new();
    let (mut cnps_sent, mut cnps_unsent) = (0u64, 0u64);
    eprintln!("{READY_LINE}");
    loop {
        let now = sys::now();
        if stop.load(Ordering::Relaxed) || end.is_some_and(|e| now >= e) {
            break;
        }
        if let (Some(idle), Some(last)) = (opts.idle_timeout, last_frame) {
            if now.saturating_since(last) >= idle {
                break;
            }
        }
        // `received` counts each frame once: a copy cannot end the wait for another.
        if opts.expect_total.is_some_and(|n| stats.received() >= n) {
            break;
        }
        let HostPort { port, pool, .. } = &mut host;
        let mut test_frames = 0;
        let (n, _) = port.receive(pool, BATCH, |pool, id| {
            let bytes = pool.bytes(id);
            if let Some(stamp) = read_stamp_in(bytes, pool.len(id)) {
                let at = pool.arrival(id).unwrap_or(now);
                stats.record(at, &stamp, pool.len(id));
                test_frames += 1;
                if let (Some(o), 3) = (&opts.cnp, stamp.ecn) {
                    // Bounded like the flows the stats follow: a flood of flow ids cannot
                    // grow the table past them.
                    let known = pacers.len() < super::rxstats::MAX_FLOWS || pacers.contains_key(&stamp.flow);
                    if known && pacers.entry(stamp.flow).or_default().handle_marked(at, &o.params) {
                        if let Some(cnp) = cnp_for(bytes, stamp.flow, o.dscp) {
                            cnps.push(cnp);
                        }
                    }
                }
            } else if bytes.len() >= 14 && bytes[12..14] == pfc::MAC_CONTROL_ETHERTYPE.to_be_bytes() {
                if let Some(w) = capture.as_mut() {
                    w.received_now(bytes);
                }
                match pfc::decode(bytes, own_mac) {
                    Ok(cf) => match cf.body {
                        MacControl::Pfc(p) => {
                            seen.pfc += 1;
                            for (prio, q) in p.classes() {
                                if q == 0 {
                                    seen.xon[prio] += 1;
                                } else {
                                    seen.xoff[prio] += 1;
                                }
                            }
                        }
                        MacControl::Pause { .. } => seen.pause += 1,
                    },
                    Err(_) => seen.invalid += 1,
                }
            } else {
                stats.other_frames += 1;
            }
            pool.free(id);
        });
        port.refill(pool, 0);
        if !cnps.is_empty() {
            let room = port.tx_room(cnps.len());
            let mut ids = Vec::with_capacity(room);
            for cnp in cnps.drain(..) {
                match (ids.len() < room).then(|| pool.put(&cnp)).flatten() {
                    Some(id) => ids.push(id),
                    None => cnps_unsent += 1,
                }
            }
            let n = ids.len() as u64;
            if port.send(pool, sys::now(), ids.into_iter()) {
                cnps_sent += n;
            } else {
                cnps_unsent += n;
            }
            let _ = port.kick();
        }
        port.reclaim(pool, sys::now());
        if test_frames > 0 {
            last_frame = Some(now);
        }
        if n == 0 {
            let _ = sys::wait_readable(&mut pollfd, Duration::from_millis(5));
        }
    }
    let elapsed = sys::now().saturating_since(start).as_secs_f64();
    let socket_dropped = host.port.statistics().map(|s| s.rx_dropped() + s.rx_ring_full()).unwrap_or(0);
    if let Some(w) = capture.as_mut() {
        w.flush()?;
    }
    Ok(SinkReport {
        elapsed_s: elapsed,
        received: stats.received(),
        other_frames: stats.other_frames,
        untracked_frames: stats.untracked_frames,
        mac_control: seen,
        flows: stats.report(opts.expect_per_flow),
        socket_dropped,
        xdp_mode: host.xdp_mode(),
        arrival_stamp: Some(host.arrival_stamp()),
        cnps_sent,
        cnps_unsent,
    })
}

/// The CNP that answers `frame` (a test frame of `flow`, IPv4, maybe VLAN-tagged): from its
/// receiver back to its sender, for the flow's queue pair, untagged.
fn cnp_for(frame: &[u8], flow: u16, dscp: u8) -> Option<Vec<u8>> {
    let p = etherparse::LaxSlicedPacket::from_ethernet(frame).ok()?;
    let Some(etherparse::LaxNetSlice::Ipv4(ip)) = &p.net else { return None };
    let h = ip.header();
    let (to, from) = (frame[0..6].try_into().ok()?, frame[6..12].try_into().ok()?);
    Some(roce::cnp_frame(&ReplySpec::for_flow(flow, (to, h.destination_addr()), (from, h.source_addr()), dscp)))
}
