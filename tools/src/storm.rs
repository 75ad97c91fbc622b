//! PFC storms: pause frames at a timer-driven interval shorter than the pause they carry,
//! so a priority stays blocked for as long as the storm lasts.
//!
//! A superset of SONiC sonic-mgmt's `pfc_gen.py` (same frame layout; `-i` interface list,
//! `-p` class-enable bitmap, `-t` quanta, `-n` count, `-s` seconds, `-g` global pause),
//! plus a precise interval, gap accounting, and malformed frames for negative tests.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use pfcswitch::core::mac::MacAddr;
use pfcswitch::core::pfc::{self, MacControl, Pfc};
use pfcswitch::core::priorities::Priorities;
use pfcswitch::core::speed::Speed;
use pfcswitch::core::time::Time;
use pfcswitch::core::Priority;
use pfcswitch::sys;
use serde::{Deserialize, Serialize};

use crate::cli::{parse_rate, parse_secs};
use crate::traffic::rawsock::RawSender;

/// What kind of frame the storm sends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum StormMode {
    /// Valid 802.1Qbb PFC (or 802.3x PAUSE with --global).
    #[default]
    Pfc,
    /// PFC whose class-enable vector is zero.
    ZeroVector,
    /// PFC cut inside class 0's timer (21 bytes), which no padding explains.
    Truncated,
    /// The frame as sonic-mgmt's `pfc_gen.py` writes it to its raw socket: unpadded,
    /// 802.3x PAUSE in 18 bytes, PFC in 32 (its vector and the timers of classes 0 to 6,
    /// class 7's left out). A NIC pads such a frame; a veth delivers it as it is.
    Unpadded,
    /// A MAC control frame with an unknown opcode (0x0102).
    WrongOpcode,
    /// Valid PFC from source 00:00:00:00:00:00.
    ZeroSource,
    /// PFC with the reserved upper byte of the class-enable vector set.
    ReservedBits,
    /// PFC sent to a unicast address instead of 01:80:C2:00:00:01.
    WrongDestination,
}

#[derive(Args, Clone, Debug, Serialize)]
pub struct StormArgs {
    /// Interfaces to storm, comma separated (`pfc_gen.py -i`).
    #[arg(long, short, value_delimiter = ',', required = true)]
    pub iface: Vec<String>,
    /// Class-enable bitmap, e.g. 8 or 0x18 for priorities 3 and 4 (`pfc_gen.py -p`).
    #[arg(long = "priority-bitmap", short = 'p', value_parser = parse_bitmap)]
    pub bitmap: Option<u8>,
    /// A priority to pause; repeat for several (alternative to -p).
    #[arg(long = "prio")]
    pub prios: Vec<Priority>,
    /// Quanta per enabled class (`pfc_gen.py -t`); 0 sends resumes.
    #[arg(long, short = 't', default_value_t = 65535)]
    pub quanta: u16,
    /// 802.3x PAUSE instead of PFC (`pfc_gen.py -g`).
    #[arg(long, short = 'g')]
    pub global: bool,
    /// Frames to send per interface (`pfc_gen.py -n`).
    #[arg(long, short = 'n')]
    pub count: Option<u64>,
    /// Seconds to storm (`pfc_gen.py -s`).
    #[arg(long = "sendtime", short = 's', alias = "duration", value_parser = parse_secs)]
    #[serde(serialize_with = "crate::argv::opt_secs")]
    pub duration: Option<Duration>,
    /// Interval between frames in µs; default: half the pause a frame carries at --speed.
    #[arg(long, value_parser = crate::cli::parse_positive)]
    pub interval_us: Option<f64>,
    /// Frames per second instead of an interval.
    #[arg(long, value_parser = parse_rate, conflicts_with = "interval_us")]
    pub rate: Option<f64>,
    /// The link speed: converts quanta to the pause time.
    #[arg(long, default_value = "10G")]
    pub speed: Speed,
    /// Source MAC (default: the interface's).
    #[arg(long)]
    pub src_mac: Option<MacAddr>,
    /// Frame kind, for negative tests.
    #[arg(long, value_enum, default_value_t = StormMode::Pfc)]
    pub mode: StormMode,
    /// Do not ask for real-time scheduling (by default the storm runs SCHED_FIFO: it sleeps
    /// nearly all the time, and a preempted storm would let the priority resume).
    #[arg(long)]
    pub no_rt: bool,
    #[arg(long)]
    pub json: bool,
}

fn parse_bitmap(s: &str) -> Result<u8, String> {
    let t = s.trim();
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u8::from_str_radix(hex, 16),
        None => t.parse::<u8>(),
    };
    v.map_err(|_| format!("invalid class-enable bitmap {s:?}: 0..255 or 0x00..0xff"))
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StormReport {
    pub frames_sent: u64,
    pub per_interface: Vec<(String, u64)>,
    pub elapsed_s: f64,
    /// How long one frame pauses the receiver (quanta at --speed).
    pub pause_us: f64,
    pub interval_target_us: f64,
    pub interval_mean_us: f64,
    /// The longest time between two consecutive frames.
    pub largest_gap_us: f64,
    /// The largest gap stayed below the pause time: the priority never resumed.
    pub continuous: bool,
    /// Frames the device refused for a moment (retried).
    pub retries: u64,
    /// When the first frame went out (CLOCK_MONOTONIC, ns: comparable across namespaces).
    #[serde(default)]
    pub first_frame_ns: u64,
}

/// Builds the storm's frame.
pub fn storm_frame(mode: StormMode, src: MacAddr, prios: Priorities, quanta: u16, global: bool) -> Vec<u8> {
    let mut frame = vec![0u8; pfc::MIN_FRAME_LEN];
    let src = if mode == StormMode::ZeroSource { MacAddr::ZERO } else { src };
    let body = if global {
        MacControl::Pause { quanta }
    } else if mode == StormMode::ZeroVector {
        MacControl::Pfc(Pfc { enabled: Priorities::NONE, quanta: [quanta; 8], checking: None })
    } else {
        MacControl::Pfc(Pfc::pause(prios, quanta))
    };
    pfc::encode(&mut frame, src, &body);
    match mode {
        StormMode::Truncated => frame.truncate(21),
        StormMode::Unpadded => frame.truncate(if global { pfc::PAUSE_FIELDS_END } else { pfc::PFC_FIELDS_END - 2 }),
        StormMode::WrongOpcode => frame[14..16].copy_from_slice(&[0x01, 0x02]),
        StormMode::ReservedBits => frame[16] = 0x80,
        StormMode::WrongDestination => frame[..6].copy_from_slice(&MacAddr::local(0xdead).0),
        StormMode::Pfc | StormMode::ZeroVector | StormMode::ZeroSource => {}
    }
    frame
}

/// Gaps between consecutive sends.
#[derive(Clone, Debug, Default)]
pub struct GapStats {
    last: Option<Time>,
    first: Option<Time>,
    count: u64,
    largest: Duration,
}

impl GapStats {
    pub fn record(&mut self, t: Time) {
        if let Some(last) = self.last {
            self.largest = self.largest.max(t.saturating_since(last));
        }
        self.first.get_or_insert(t);
        self.last = Some(t);
        self.count += 1;
    }

    pub fn largest(&self) -> Duration {
        self.largest
    }

    pub fn mean(&self) -> Duration {
        match (self.first, self.last) {
            (Some(a), Some(b)) if self.count > 1 => b.saturating_since(a) / (self.count - 1) as u32,
            _ => Duration::ZERO,
        }
    }
}

impl StormArgs {
    /// The priorities to pause: the bitmap's and `--prio`'s.
    pub fn priorities(&self) -> Result<Priorities> {
        let mut prios = Priorities::from_bits(self.bitmap.unwrap_or(0));
        for &p in &self.prios {
            prios.insert(p);
        }
        if self.bitmap.is_none() && self.prios.is_empty() && !self.global {
            bail!("give the priorities to pause: -p BITMAP or --prio N (or --global for 802.3x)");
        }
        Ok(prios)
    }

    /// The interval between frames: given, from --rate, or half the pause time.
    pub fn interval(&self) -> Result<Duration> {
        let pause = self.speed.quanta_duration(self.quanta);
        let interval = match (self.interval_us, self.rate) {
            (Some(us), _) => Duration::from_secs_f64(us / 1e6),
            (None, Some(r)) => Duration::from_secs_f64(1.0 / r),
            // A single frame needs no interval (e.g. one resume).
            (None, None) if self.count == Some(1) => Duration::from_secs(1),
            (None, None) if pause.is_zero() => {
                bail!("zero quanta pause nothing to repeat within: give --interval-us or --rate")
            }
            (None, None) => pause / 2,
        };
        if interval.is_zero() {
            bail!("the interval must be above zero");
        }
        Ok(interval)
    }
}

/// Runs the storm until its count, its duration, or `stop`.
pub fn run(args: &StormArgs, stop: &AtomicBool) -> Result<StormReport> {
    if args.count.is_none() && args.duration.is_none() {
        bail!("give -n COUNT or -s SECONDS: a storm must end");
    }
    let prios = args.priorities()?;
    let interval = args.interval()?;
    let pause = args.speed.quanta_duration(args.quanta);
    let mut senders = Vec::new();
    let mut frames = Vec::new();
    for iface in &args.iface {
        let s = RawSender::open(iface)?;
        let src = args.src_mac.unwrap_or_else(|| sys::interface(iface).map(|i| i.mac).unwrap_or(MacAddr::local(1)));
        frames.push(storm_frame(args.mode, src, prios, args.quanta, args.global));
        senders.push(s);
    }
    sys::tighten_timer_slack();
    if !args.no_rt {
        if let Err(e) = sys::realtime_priority(50) {
            tracing::warn!("running without real-time priority ({e}): expect larger gaps");
        }
    }
    let mut counts = vec![0u64; senders.len()];
    let mut gaps = GapStats::default();
    let mut retries = 0;
    let mut first_frame_ns = 0;
    let start = sys::now();
    let end = args.duration.map(|d| start + d);
    let mut next = start;
    loop {
        if stop.load(Ordering::Relaxed) || args.count.is_some_and(|c| counts.iter().all(|&n| n >= c)) {
            break;
        }
        let now = sys::now();
        if end.is_some_and(|e| now >= e) {
            break;
        }
        if now < next {
            let wait = next.saturating_since(now);
            // Sleeps wake ~35 µs late: sleep short of the deadline, spin the rest.
            if wait > Duration::from_micros(60) {
                std::thread::sleep(wait - Duration::from_micros(40));
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        for (i, s) in senders.iter().enumerate() {
            if args.count.is_some_and(|c| counts[i] >= c) {
                continue;
            }
            while !s.send(&frames[i])? {
                retries += 1;
            }
            if first_frame_ns == 0 {
                first_frame_ns = sys::now().as_nanos();
            }
            counts[i] += 1;
        }
        gaps.record(sys::now());
        // The schedule is absolute: a late frame does not push back the ones after it.
        next = next + interval;
        if next < now {
            next = now;
        }
    }
    let elapsed = sys::now().saturating_since(start);
    let largest = gaps.largest();
    Ok(StormReport {
        frames_sent: counts.iter().sum(),
        per_interface: args.iface.iter().cloned().zip(counts).collect(),
        elapsed_s: elapsed.as_secs_f64(),
        pause_us: pause.as_secs_f64() * 1e6,
        interval_target_us: interval.as_secs_f64() * 1e6,
        interval_mean_us: gaps.mean().as_secs_f64() * 1e6,
        largest_gap_us: largest.as_secs_f64() * 1e6,
        continuous: largest < pause,
        first_frame_ns,
        retries,
    })
}

pub fn report_text(r: &StormReport) -> String {
    let mut out = format!(
        "sent {} pause frames in {:.3} s; interval {:.1} µs (target {:.1} µs); largest gap {:.1} µs; each frame pauses {:.1} µs\n",
        r.frames_sent, r.elapsed_s, r.interval_mean_us, r.interval_target_us, r.largest_gap_us, r.pause_us
    );
    if !r.continuous && r.frames_sent > 1 {
        out +=
            "WARNING: a gap exceeded the pause time: the storm was not continuous, the priority resumed in between\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfcswitch::core::pfc::ControlReject;

    const SRC: MacAddr = MacAddr([2, 0, 0, 0, 0, 9]);
    const ME: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);

    #[test]
    fn every_mode_is_what_it_says() {
        let ok = storm_frame(StormMode::Pfc, SRC, Priorities::from_bits(0x18), 65535, false);
        assert_eq!(ok.len(), 60);
        assert_eq!(pfc::decode(&ok, ME).unwrap().body, MacControl::Pfc(Pfc::pause(Priorities::from_bits(0x18), 65535)));
        let g = storm_frame(StormMode::Pfc, SRC, Priorities::NONE, 100, true);
        assert_eq!(pfc::decode(&g, ME).unwrap().body, MacControl::Pause { quanta: 100 });
        let cases = [
            (StormMode::ZeroVector, ControlReject::NoClassEnabled),
            (StormMode::Truncated, ControlReject::Truncated),
            (StormMode::WrongOpcode, ControlReject::UnknownOpcode),
            (StormMode::ReservedBits, ControlReject::ReservedBits),
            (StormMode::WrongDestination, ControlReject::WrongDestination),
        ];
        for (mode, reject) in cases {
            assert_eq!(
                pfc::decode(&storm_frame(mode, SRC, Priorities::only(Priority::new(3)), 1, false), ME),
                Err(reject),
                "{mode:?}"
            );
        }
        let z = storm_frame(StormMode::ZeroSource, SRC, Priorities::only(Priority::new(3)), 1, false);
        assert_eq!(pfc::decode(&z, ME).unwrap().src, MacAddr::ZERO);
    }

    #[test]
    fn unpadded_frames_are_byte_for_byte_what_sonics_storm_script_sends() {
        // pfc_gen.py -p 24 -t 65535: 01:80:c2:00:00:01, the source, 0x8808, 0x0101, the
        // vector 0x0018, then classes 0..6's timers (65535 where enabled).
        let pfc = storm_frame(StormMode::Unpadded, SRC, Priorities::from_bits(24), 65535, false);
        let mut want = vec![0x01, 0x80, 0xc2, 0, 0, 1, 2, 0, 0, 0, 0, 9, 0x88, 0x08, 0x01, 0x01, 0x00, 0x18];
        want.extend([0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert_eq!(pfc, want);
        // pfc_gen.py -g -t 300: opcode 0x0001 and the time.
        let pause = storm_frame(StormMode::Unpadded, SRC, Priorities::NONE, 300, true);
        assert_eq!(pause[12..], [0x88, 0x08, 0x00, 0x01, 0x01, 0x2c]);
        let d = pfc::decode(&pfc, ME).unwrap();
        assert!(d.short);
        assert_eq!(d.body, MacControl::Pfc(Pfc::pause(Priorities::from_bits(24), 65535)));
    }

    #[test]
    fn default_interval_is_half_the_pause() {
        let args = StormArgs {
            iface: vec!["x".into()],
            bitmap: Some(8),
            prios: vec![],
            quanta: 65535,
            global: false,
            count: Some(10),
            duration: None,
            interval_us: None,
            rate: None,
            speed: Speed::gbps(10),
            src_mac: None,
            mode: StormMode::Pfc,
            no_rt: true,
            json: false,
        };
        assert_eq!(args.interval().unwrap(), Duration::from_nanos(1_677_696));
        assert_eq!(parse_bitmap("0x18").unwrap(), 0x18);
        assert_eq!(parse_bitmap("24").unwrap(), 24);
        assert!(parse_bitmap("256").is_err());
        let mut none = args.clone();
        none.bitmap = None;
        assert!(none.priorities().is_err());
        none.prios = vec![Priority::new(3), Priority::new(4)];
        assert_eq!(none.priorities().unwrap(), Priorities::from_bits(0x18));
    }

    #[test]
    fn gaps() {
        let mut g = GapStats::default();
        for us in [0u64, 100, 200, 450, 500] {
            g.record(Time::from_micros(us));
        }
        assert_eq!(g.largest(), Duration::from_micros(250));
        assert_eq!(g.mean(), Duration::from_micros(125));
    }
}
