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
use pfcswitch::core::priorities::Priorities;
use pfcswitch::core::speed::Speed;
use pfcswitch::core::switch::FramePool;
use pfcswitch::core::time::Time;
use pfcswitch::core::MacAddr;
use pfcswitch::core::Priority;
use pfcswitch::sys;
use serde::{Deserialize, Serialize};

use super::flow::read_stamp_in;
use super::rawsock::RawSender;
use super::xdp_port::{HostPort, BATCH};

/// `pfctools pause-probe`'s arguments.
#[derive(clap::Args, Clone, Debug, Serialize)]
pub struct ProbeArgs {
    /// Interface the test flow arrives on (the probe sends its pauses from it).
    #[arg(long, short)]
    pub iface: String,
    #[arg(long, default_value_t = Priority::new(3))]
    pub prio: Priority,
    /// The switch port's speed (converts quanta to the expected pause).
    #[arg(long)]
    pub speed: Speed,
    /// Quanta values to try, comma separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub quanta: Vec<u16>,
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Instead of single pauses: a storm of this many ms per trial, each pause refreshed
    /// after half its length, counting the frames of the priority that still arrive
    /// while it lasts.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storm_ms: Option<u64>,
    /// How the receive program stamps arrivals: metadata, in-frame or rx-clock (the
    /// best this kernel allows when absent, as the switch chooses).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival_stamp: Option<pfcswitch::config::ArrivalStamp>,
}

/// One storm: pauses of the probed quanta sent back to back (each after half the last
/// one's length) for the storm's length.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StormTrial {
    pub quanta: u16,
    pub pauses: u32,
    /// Frames of the paused priority that arrived while the storm held: in each span of
    /// refreshes sent on time (each within three quarters of a pause of the one before,
    /// so the pause never ran out), from [`STORM_SETTLE`] after the span's first pause
    /// (its response is over by then) to half a pause after its last. A refresh sent
    /// later (the probe lost its CPU) starts a new span: the hole was the probe's, not
    /// the switch's. None when no span lasted past its settling time.
    pub leaked: Option<u32>,
    /// Frames of the priority that arrived after the first pause was sent and before its
    /// span's window opened: the response to the storm's first pause.
    pub before_window: u32,
    /// Refreshes sent late, each starting a span of its own.
    #[serde(default)]
    pub late_refreshes: u32,
    /// The longest time between two of the storm's pauses leaving, µs.
    #[serde(default)]
    pub longest_refresh_us: f64,
}

/// How long after a storm's first pause its leak window opens: longer than any response
/// to a pause (tens of µs here), shorter than the storm.
pub const STORM_SETTLE: Duration = Duration::from_millis(1);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeTrial {
    pub quanta: u16,
    pub expected_us: f64,
    /// Largest arrival gap after the pause was sent.
    pub gap_us: f64,
    /// The pause as measured: the gap less half the flow's inter-arrival interval.
    pub measured_us: f64,
    pub interval_us: f64,
    /// How long after the pause was sent the flow stopped (veth transit included), placed
    /// by the pause's own gap: the first gap after the pause was sent that is at least
    /// half the pause long. The switch stopped between the last frame before that gap (or
    /// the pause, if later) and the next frame due one interval after it; this is the
    /// middle of that span. None when the stop cannot be placed: the pause left late, the
    /// flow already had a gap when it was sent, or the pause's gap is not the pause's
    /// length (an upstream hole in the flow merged with it, or the path to this receiver
    /// held some frames and not others).
    pub response_us: Option<f64>,
    /// The largest gap is longer than the pause by over a millisecond (something else
    /// stopped the flow as well: the generator or the switch off its CPU), or sending the
    /// pause took the probe too long (it lost its CPU): this trial's largest gap says
    /// nothing about the pause's length.
    #[serde(default)]
    pub disturbed: bool,
    /// When the probe sent the pause (CLOCK_MONOTONIC, ns: comparable with the switch's
    /// record of when it arrived).
    #[serde(default)]
    pub sent_ns: u64,
    /// Frames of the paused priority that still arrived after the pause was sent, up to
    /// the stop (None where the stop is not placed, as for `response_us`): what the
    /// switch let out after the pause, which the probe's side must have room for.
    #[serde(default)]
    pub after_pause: Option<u32>,
}

/// How much longer than the pause a gap may be before the trial counts as disturbed.
const DISTURBED_BEYOND: Duration = Duration::from_millis(1);
/// How long the pause may take to leave the probe, or to reach the switch, before the
/// trial counts as disturbed.
pub const PAUSE_WITHIN: Duration = Duration::from_micros(200);
/// How far the pause's gap may differ from the pause (beyond one interval) for the stop
/// to be placed by it. Within a stall-free testbed the gap is the pause plus at most one
/// interval; a gap off by more was shaped by something other than the switch.
const GAP_MATCHES_PAUSE_WITHIN: Duration = Duration::from_micros(200);

struct Receiver {
    host: HostPort,
    arrivals: Vec<Time>,
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
            if read_stamp_in(pool.bytes(id), pool.len(id)).is_some() {
                // The XDP program's arrival stamp, when the driver has a metadata area.
                arrivals.push(pool.arrival(id).unwrap_or(now));
                n += 1;
            }
            pool.free(id);
        });
        port.refill(pool, 0);
        n
    }

    /// Lets the switch drain what the last pause (of `pause`) queued, then times the
    /// steady flow for 30 ms: its interval, the arrivals of those 30 ms kept.
    fn settle(&mut self, pause: Duration, stop: &AtomicBool) -> Result<Duration> {
        self.run_for(pause, stop);
        self.arrivals.clear();
        self.run_for(Duration::from_millis(30), stop);
        steady_interval(&self.arrivals)
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

/// The mean time between arrivals of a steady flow.
fn steady_interval(arrivals: &[Time]) -> Result<Duration> {
    if arrivals.len() < 10 {
        bail!("the test flow stalled ({} frames in 30 ms)", arrivals.len());
    }
    let span = arrivals[arrivals.len() - 1].saturating_since(arrivals[0]);
    Ok(span / (arrivals.len() as u32 - 1))
}

/// Opens the probe's port and waits for the steady test flow.
fn open(opts: &ProbeArgs, stop: &AtomicBool) -> Result<(Receiver, RawSender, MacAddr)> {
    let host = HostPort::open(&opts.iface, true, 16384, false, opts.arrival_stamp)?;
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
    Ok((rx, raw, src))
}

/// Single pauses of each quanta value, `opts.repeats` times.
pub fn run(opts: &ProbeArgs, stop: &AtomicBool) -> Result<Vec<ProbeTrial>> {
    let (mut rx, raw, src) = open(opts, stop)?;
    let mut trials = Vec::new();
    let mut frame = vec![0u8; pfc::MIN_FRAME_LEN];
    for &quanta in &opts.quanta {
        pfc::encode(&mut frame, src, &MacControl::Pfc(Pfc::pause(Priorities::only(opts.prio), quanta)));
        let expected = opts.speed.quanta_duration(quanta);
        for _ in 0..opts.repeats {
            let interval = rx.settle(expected, stop)?;
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
            trials.push(judge(quanta, expected, interval, &rx.arrivals, t0, send_took));
        }
    }
    Ok(trials)
}

/// Storms of `length` of each quanta value, `opts.repeats` times.
pub fn run_storms(opts: &ProbeArgs, length: Duration, stop: &AtomicBool) -> Result<Vec<StormTrial>> {
    let (mut rx, raw, src) = open(opts, stop)?;
    let mut out = Vec::new();
    let mut frame = vec![0u8; pfc::MIN_FRAME_LEN];
    for &quanta in &opts.quanta {
        pfc::encode(&mut frame, src, &MacControl::Pfc(Pfc::pause(Priorities::only(opts.prio), quanta)));
        let pause = opts.speed.quanta_duration(quanta);
        let every = pause / 2;
        for _ in 0..opts.repeats {
            rx.settle(pause, stop)?;
            rx.arrivals.clear();
            let first = sys::now();
            let mut sent = Vec::new();
            loop {
                while !raw.send(&frame)? {}
                // When it left: a refresh held up before leaving is a late one.
                let now = sys::now();
                sent.push(now);
                if now.saturating_since(first) >= length || stop.load(Ordering::Relaxed) {
                    break;
                }
                // Receive until the next refresh is due, spinning: a sleep here wakes
                // hundreds of µs late, after a short pause ran out (335 µs at 100G).
                while sys::now().saturating_since(now) < every {
                    rx.poll();
                }
            }
            rx.run_for(pause + Duration::from_millis(20), stop);
            if stop.load(Ordering::Relaxed) {
                bail!("stopped");
            }
            out.push(judge_storm(quanta, pause, &sent, &rx.arrivals));
        }
    }
    Ok(out)
}

/// One storm from when its pauses were sent and when frames arrived.
fn judge_storm(quanta: u16, pause: Duration, sent: &[Time], arrivals: &[Time]) -> StormTrial {
    let Some(&first) = sent.first() else {
        return StormTrial { quanta, ..StormTrial::default() };
    };
    let count = |from: Time, to: Time| arrivals.iter().filter(|&&a| a > from && a <= to).count() as u32;
    // Refreshes are due every half pause; one that left over three quarters of a pause
    // after the last may have reached the switch after that pause ran out.
    let late = |w: &[Time]| w[1].saturating_since(w[0]) > pause * 3 / 4;
    let mut leaked = None;
    let mut span_start = 0;
    for end in 1..=sent.len() {
        if end < sent.len() && !late(&sent[end - 1..=end]) {
            continue;
        }
        let (open, close) = (sent[span_start] + STORM_SETTLE, sent[end - 1] + pause / 2);
        if close > open {
            *leaked.get_or_insert(0) += count(open, close);
        }
        span_start = end;
    }
    let longest = sent.windows(2).map(|w| w[1].saturating_since(w[0])).max().unwrap_or_default();
    StormTrial {
        quanta,
        pauses: sent.len() as u32,
        leaked,
        before_window: count(first, first + STORM_SETTLE),
        late_refreshes: sent.windows(2).filter(|w| late(w)).count() as u32,
        longest_refresh_us: longest.as_secs_f64() * 1e6,
    }
}

/// One trial from what the receiver saw: `arrivals` runs from the last frame before the
/// pause was sent at `t0` (which took `send_took`); `interval` is the flow's own.
fn judge(
    quanta: u16,
    expected: Duration,
    interval: Duration,
    arrivals: &[Time],
    t0: Time,
    send_took: Duration,
) -> ProbeTrial {
    let gaps = || arrivals.windows(2).map(|w| (w[0], w[1].saturating_since(w[0])));
    let gap = gaps().map(|(_, g)| g).max().unwrap_or(Duration::ZERO);
    let pause_gap = gaps().find(|&(start, g)| start + g > t0 && g >= expected / 2);
    // The stop is placed by the pause's own gap, when that gap is the pause's length.
    let placed = pause_gap.filter(|&(last_before, g)| {
        let latest = last_before + interval;
        let matches_pause =
            g + GAP_MATCHES_PAUSE_WITHIN >= expected && g <= expected + interval + GAP_MATCHES_PAUSE_WITHIN;
        latest > t0 && matches_pause && send_took <= PAUSE_WITHIN
    });
    let response = placed.map(|(last_before, _)| {
        let (earliest, latest) = (last_before.max(t0), last_before + interval);
        (earliest.saturating_since(t0) + latest.saturating_since(t0)).as_secs_f64() / 2.0 * 1e6
    });
    let after_pause =
        placed.map(|(last_before, _)| arrivals.iter().filter(|&&a| a > t0 && a <= last_before).count() as u32);
    ProbeTrial {
        quanta,
        expected_us: expected.as_secs_f64() * 1e6,
        gap_us: gap.as_secs_f64() * 1e6,
        measured_us: gap.saturating_sub(interval / 2).as_secs_f64() * 1e6,
        interval_us: interval.as_secs_f64() * 1e6,
        response_us: response,
        disturbed: gap > expected + interval + DISTURBED_BEYOND || send_took > PAUSE_WITHIN,
        sent_ns: t0.as_nanos(),
        after_pause,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAUSE: Duration = Duration::from_micros(3355);
    const EVERY: Duration = Duration::from_micros(5);

    /// A steady flow from `from` to `to`, one frame every 5 µs.
    fn flow(from: Duration, to: Duration) -> Vec<Time> {
        let mut at = Vec::new();
        let mut t = from;
        while t < to {
            at.push(Time::ZERO + t);
            t += EVERY;
        }
        at
    }

    fn trial(arrivals: &[Time], t0: Duration) -> ProbeTrial {
        judge(65535, PAUSE, EVERY, arrivals, Time::ZERO + t0, Duration::from_micros(10))
    }

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn a_clean_pause_places_the_stop_and_measures_the_pause() {
        // Pause sent at 1000 µs; the flow stops at 1030 µs and resumes a pause later.
        let mut a = flow(us(998), us(1031));
        a.extend(flow(us(1030) + PAUSE, us(6000)));
        let t = trial(&a, us(1000));
        assert!(!t.disturbed);
        let r = t.response_us.unwrap();
        assert!((27.0..=35.0).contains(&r), "{t:?}");
        assert!((t.measured_us - 3355.0).abs() < 5.0, "{t:?}");
        // Frames at 1003, 1008, ..., 1028 µs came after the pause was sent: six.
        assert_eq!(t.after_pause, Some(6));
    }

    #[test]
    fn a_hole_upstream_after_the_pause_does_not_stand_in_for_the_stop() {
        // The flow stops 20 µs after the pause; resumes; then a 5 ms hole upstream (the
        // generator's softirq work off the CPU) leaves the largest gap 15 ms later.
        let mut a = flow(us(995), us(1021));
        a.extend(flow(us(1020) + PAUSE, us(16000)));
        a.extend(flow(us(21000), us(25000)));
        let t = trial(&a, us(1000));
        let r = t.response_us.unwrap();
        assert!(r < 30.0, "the pause's own gap places the stop, not the later hole: {t:?}");
        assert!(t.disturbed, "the largest gap says nothing about the pause's length");
    }

    #[test]
    fn a_hole_merged_with_the_pause_places_nothing() {
        // A hole upstream began 500 µs before the switch stopped: the pause's gap is
        // 500 µs too long, and its start is not the stop.
        let mut a = flow(us(995), us(1001));
        a.extend(flow(us(1500) + PAUSE, us(6000)));
        assert_eq!(trial(&a, us(1000)).response_us, None);
        assert_eq!(trial(&a, us(1000)).after_pause, None, "nothing counted where the stop is not placed");
        // Delivery to the receiver held the frames before the stop and not those after:
        // the gap is short, and where it starts is not the stop either.
        let mut b = flow(us(995), us(2000));
        b.extend(flow(us(1020) + PAUSE, us(6000)));
        assert_eq!(trial(&b, us(1000)).response_us, None);
    }

    #[test]
    fn a_flow_already_stopped_when_the_pause_was_sent_places_nothing() {
        let mut a = flow(us(900), us(950));
        a.extend(flow(us(950) + PAUSE, us(6000)));
        assert_eq!(trial(&a, us(1000)).response_us, None);
    }

    #[test]
    fn a_storm_that_holds_leaks_nothing_and_its_first_response_is_counted_apart() {
        // Pauses every half pause from 1000 µs for 20 ms; the flow stops 20 µs after the
        // first and resumes a pause after the last.
        let sent: Vec<Time> = (0..13).map(|i| Time::ZERO + us(1000) + PAUSE / 2 * i).collect();
        let last = *sent.last().unwrap();
        let mut a = flow(us(995), us(1021));
        a.extend(flow(last.saturating_since(Time::ZERO) + PAUSE, us(40000)));
        let s = judge_storm(65535, PAUSE, &sent, &a);
        // Frames at 1005, 1010, 1015 and 1020 µs answered the first pause.
        assert_eq!((s.pauses, s.leaked, s.before_window), (13, Some(0), 4));
    }

    #[test]
    fn a_frame_through_a_storm_is_a_leak_and_a_late_refresh_starts_a_span_of_its_own() {
        let sent: Vec<Time> = (0..13).map(|i| Time::ZERO + us(1000) + PAUSE / 2 * i).collect();
        let mut a = flow(us(995), us(1021));
        a.push(Time::ZERO + us(9000));
        a.push(Time::ZERO + us(9005));
        let s = judge_storm(65535, PAUSE, &sent, &a);
        assert_eq!((s.leaked, s.late_refreshes), (Some(2), 0));
        // The seventh refresh leaves a whole pause after the sixth: the flow may go between
        // the sixth's pause running out and the seventh's response, and those frames are
        // not leaks; what comes after the new span settles is.
        let mut late: Vec<Time> = sent[..6].to_vec();
        late.extend((0..7).map(|i| sent[5] + PAUSE + PAUSE / 2 * i));
        let mut b = flow(us(995), us(1021));
        let resumed = late[5] + PAUSE;
        b.extend(flow(resumed.saturating_since(Time::ZERO), resumed.saturating_since(Time::ZERO) + us(200)));
        b.push(late[9]);
        let s = judge_storm(65535, PAUSE, &late, &b);
        assert_eq!((s.leaked, s.late_refreshes), (Some(1), 1), "{s:?}");
        // A storm of short pauses (335 µs, 65535 quanta at 100G) whose every refresh
        // was late never held past its settling time: it judges nothing.
        let short = us(335);
        let sparse: Vec<Time> = (0..5).map(|i| Time::ZERO + us(1000) + short * 2 * i).collect();
        let s = judge_storm(65535, short, &sparse, &a);
        assert_eq!((s.leaked, s.late_refreshes), (None, 4));
    }

    #[test]
    fn a_pause_sent_late_disturbs_the_trial() {
        let mut a = flow(us(995), us(1021));
        a.extend(flow(us(1020) + PAUSE, us(6000)));
        let t = judge(65535, PAUSE, EVERY, &a, Time::ZERO + us(1000), PAUSE_WITHIN * 2);
        assert!(t.disturbed);
        assert_eq!(t.response_us, None);
    }
}
