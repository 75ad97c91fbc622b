//! Measures how long a switch really pauses: receive a steady test flow, send one PFC
//! frame toward the switch, and time the gap it leaves in the flow.
//!
//! The gap runs from the last frame the switch sent before pausing to the first it sent
//! after resuming: the pause itself plus up to one inter-arrival interval, so half an
//! interval is taken off as the estimate. Arrival times are the XDP program's stamps,
//! so the probe's own scheduling does not blur them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Result};
use pfcswitch::core::pfc::{self, MacControl, Pfc};
use pfcswitch::core::speed::Speed;
use pfcswitch::core::switch::FramePool;
use pfcswitch::core::time::Time;
use pfcswitch::dataplane::sys;
use serde::{Deserialize, Serialize};

use super::flow::read_stamp;
use super::rawsock::RawSender;
use super::xdp_port::{HostPort, BATCH};

#[derive(Clone, Debug)]
pub struct ProbeOptions {
    pub iface: String,
    pub prio: u8,
    /// The switch port's speed: converts quanta to the expected pause.
    pub speed: Speed,
    pub quanta: Vec<u16>,
    pub repeats: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeTrial {
    pub quanta: u16,
    pub expected_us: f64,
    /// Largest arrival gap after the pause was sent.
    pub gap_us: f64,
    /// The pause as measured: the gap less half the flow's inter-arrival interval.
    pub measured_us: f64,
    pub interval_us: f64,
    /// How long after the pause was sent the flow stopped: the switch stopped between the
    /// last frame before the gap (or the pause, if later) and the next frame due one
    /// interval after it; this is the middle of that span (veth transit included). None
    /// when the flow already had a gap when the pause was sent (nothing to place).
    pub response_us: Option<f64>,
    /// The largest gap is longer than the pause by over a millisecond (something else
    /// stopped the flow as well: the generator or the switch off its CPU), sending the
    /// pause took the probe too long (it lost its CPU), or the flow's frames took over a
    /// millisecond from the generator (held up in the testbed): this trial's gap and
    /// response say nothing about the pause.
    #[serde(default)]
    pub disturbed: bool,
    /// When the probe sent the pause (CLOCK_MONOTONIC, ns: comparable with the switch's
    /// record of when it arrived).
    #[serde(default)]
    pub sent_ns: u64,
}

/// How much longer than the pause a gap may be before the trial counts as disturbed.
const DISTURBED_BEYOND: Duration = Duration::from_millis(1);
/// How long the pause may take to leave the probe, or to reach the switch, before the
/// trial counts as disturbed.
pub const PAUSE_WITHIN: Duration = Duration::from_micros(200);
/// The longest transit from the generator to the probe of an undisturbed trial's frames.
const TRANSIT_WITHIN: Duration = Duration::from_millis(1);

/// A test frame received: when, and how long it took from the generator (its stamp).
#[derive(Clone, Copy, Debug)]
struct Arrival {
    at: Time,
    transit_ns: u32,
}

struct Receiver {
    host: HostPort,
    arrivals: Vec<Arrival>,
    pollfd: [libc::pollfd; 1],
}

impl Receiver {
    /// Reads whatever arrived; test frames are timestamped with their arrival.
    fn poll(&mut self) -> usize {
        let now = sys::now();
        let Receiver { host, arrivals, .. } = self;
        let HostPort { port, pool, .. } = host;
        let mut n = 0;
        port.receive(pool, BATCH, |pool, id| {
            if let Some(stamp) = read_stamp(pool.bytes(id)) {
                // The XDP program's arrival stamp, when the driver has a metadata area.
                let at = pool.arrival(id).unwrap_or(now);
                arrivals.push(Arrival { at, transit_ns: (at.as_nanos() as u32).wrapping_sub(stamp.tx_ns) });
                n += 1;
            }
            pool.free(id);
        });
        port.refill(pool, 0);
        n
    }

    /// Receives for `d`. Arrival times come from the XDP program, so sleeping between
    /// frames costs no precision and leaves the CPU to the switch.
    fn run_for(&mut self, d: Duration, stop: &AtomicBool) {
        let end = sys::now() + d;
        loop {
            let now = sys::now();
            if now >= end || stop.load(Ordering::Relaxed) {
                return;
            }
            if self.poll() == 0 {
                let _ = sys::wait_readable(&mut self.pollfd, end.saturating_since(now).min(Duration::from_millis(1)));
            }
        }
    }
}

/// The longest generator-to-probe transit of the frames that arrived up to `until`: a
/// flow that was held up in the testbed (its softirq work waiting for a CPU) arrives
/// late, and its stop with it.
fn slowest_transit(arrivals: &[Arrival], until: Time) -> Duration {
    let ns = arrivals.iter().filter(|a| a.at <= until).map(|a| a.transit_ns).max().unwrap_or(0);
    Duration::from_nanos(u64::from(ns))
}

/// The mean time between arrivals of a steady flow.
fn steady_interval(arrivals: &[Arrival]) -> Result<Duration> {
    if arrivals.len() < 10 {
        bail!("the test flow stalled ({} frames in 30 ms)", arrivals.len());
    }
    let span = arrivals[arrivals.len() - 1].at.saturating_since(arrivals[0].at);
    Ok(span / (arrivals.len() as u32 - 1))
}

pub fn run(opts: &ProbeOptions, stop: &AtomicBool) -> Result<Vec<ProbeTrial>> {
    let host = HostPort::open(&opts.iface, true, 16384, false)?;
    let raw = RawSender::open(&opts.iface)?;
    let src = host.mac;
    let pollfd = [sys::pollfd(host.fd)];
    let mut rx = Receiver { host, arrivals: Vec::with_capacity(1 << 20), pollfd };
    eprintln!("{}", super::sink::READY_LINE);
    // Wait for a steady flow and measure its interval.
    let deadline = sys::now() + Duration::from_secs(10);
    while rx.arrivals.len() < 2000 {
        if sys::now() > deadline || stop.load(Ordering::Relaxed) {
            bail!("no steady test flow arrived on {} ({} frames in 10 s)", opts.iface, rx.arrivals.len());
        }
        rx.run_for(Duration::from_millis(10), stop);
    }
    let mut trials = Vec::new();
    let mut frame = vec![0u8; pfc::MIN_FRAME_LEN];
    for &quanta in &opts.quanta {
        pfc::encode(&mut frame, src, &MacControl::Pfc(Pfc::pause(1 << opts.prio, quanta)));
        let expected = opts.speed.quanta_duration(quanta);
        for _ in 0..opts.repeats {
            // Let the switch drain what the last pause queued, then time the steady flow.
            rx.run_for(expected, stop);
            rx.arrivals.clear();
            rx.run_for(Duration::from_millis(30), stop);
            let interval = steady_interval(&rx.arrivals)?;
            // Keep the last arrival: it may be the last frame before the pause.
            let last = rx.arrivals.last().copied();
            rx.arrivals.clear();
            rx.arrivals.extend(last);
            let t0 = sys::now();
            while !raw.send(&frame)? {}
            // Off the CPU between taking the time and sending: the pause left late.
            let send_took = sys::now().saturating_since(t0);
            rx.run_for(expected * 2 + Duration::from_millis(20), stop);
            if stop.load(Ordering::Relaxed) {
                bail!("stopped");
            }
            let (gap, last_before) = rx
                .arrivals
                .windows(2)
                .map(|w| (w[1].at.saturating_since(w[0].at), w[0].at))
                .max_by_key(|(g, _)| *g)
                .unwrap_or((Duration::ZERO, t0));
            trials.push(ProbeTrial {
                quanta,
                expected_us: expected.as_secs_f64() * 1e6,
                gap_us: gap.as_secs_f64() * 1e6,
                measured_us: gap.saturating_sub(interval / 2).as_secs_f64() * 1e6,
                interval_us: interval.as_secs_f64() * 1e6,
                response_us: {
                    let (earliest, latest) = (last_before.max(t0), last_before + interval);
                    (latest > t0).then(|| {
                        (earliest.saturating_since(t0) + latest.saturating_since(t0)).as_secs_f64() / 2.0 * 1e6
                    })
                },
                disturbed: gap > expected + interval + DISTURBED_BEYOND
                    || send_took > PAUSE_WITHIN
                    || slowest_transit(&rx.arrivals, last_before) > TRANSIT_WITHIN,
                sent_ns: t0.as_nanos(),
            });
        }
    }
    Ok(trials)
}
