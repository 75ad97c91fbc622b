//! What `pfcswitch ctl stats` shows: the engine's snapshot of the switch and its ports
//! ([`SwitchStats`], [`PortStats`]) composed with what only the AF_XDP shell knows — its
//! sockets, its XDP program, its UMEM and its loop's stalls. Two types, one per layer, so
//! that nothing is patched into the engine's snapshot afterwards. Both read as the
//! engine's for everything but the shell's part (`Deref`): `stats.ports[0].counters`.

use std::ops::Deref;

use serde::{Deserialize, Serialize};

pub use afxdp::paths::{Choice, KernelPaths};
pub use afxdp::stages::StageLatency;
pub use afxdp::xdp::XdpClassCounters;

use crate::config::{BindMode, XdpMode};
use crate::core::stats::{PortStats, SwitchStats};

/// What `pfcswitch ctl stats` shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// The engine's snapshot, each port with the shell's part beside it.
    #[serde(flatten)]
    pub switch: SwitchStats<PortReport>,
    /// UMEM frames free for reception.
    pub free_frames: u64,
    /// The dataplane loop's stalls and backlog spells.
    #[serde(default)]
    pub stalls: StallStats,
    /// Where forwarded frames waited inside the switch, stage by stage.
    #[serde(default)]
    pub latency: StageLatency,
    /// The paths taken for the kernel's optional parts (arrival stamps, frags), and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_paths: Option<KernelPaths>,
    /// Frames that came without the arrival stamp the classifier was built to put (a
    /// driver with no metadata area): their arrival is the loop's clock.
    #[serde(default)]
    pub unstamped_frames: u64,
}

impl Deref for Stats {
    type Target = SwitchStats<PortReport>;

    fn deref(&self) -> &SwitchStats<PortReport> {
        &self.switch
    }
}

/// One port in `ctl stats`: the engine's view and the shell's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortReport {
    /// What the engine knows of the port.
    #[serde(flatten)]
    pub engine: PortStats,
    /// Where its speed came from.
    #[serde(default)]
    pub speed_from: SpeedSource,
    /// Rx queues of the interface with a socket of the switch.
    #[serde(default)]
    pub rx_queues: u32,
    /// Where the classifier runs, as the kernel reports it (absent when unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp_mode: Option<XdpMode>,
    /// How its sockets bound: zero-copy or copy (absent when unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind_mode: Option<BindMode>,
    /// What the XDP program saw on it.
    pub xdp: XdpClassCounters,
    /// Its sockets' kernel statistics.
    pub socket: SocketCounters,
}

impl Deref for PortReport {
    type Target = PortStats;

    fn deref(&self) -> &PortStats {
        &self.engine
    }
}

/// Where a port's line rate came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpeedSource {
    /// The port's `speed` (or `--speed`).
    #[default]
    Config,
    /// The NIC's link speed.
    Nic,
    /// Neither said: the default.
    Default,
}

impl SpeedSource {
    /// Where the speed came from, as `ctl stats` says it.
    pub fn as_str(self) -> &'static str {
        match self {
            SpeedSource::Config => "config",
            SpeedSource::Nic => "nic",
            SpeedSource::Default => "default",
        }
    }
}

/// Gaps in the dataplane loop's polling it did not choose :
/// a switch that loses its CPU for 10 ms receives 10 ms of traffic at once, too late to
/// pause it. Tests read these to tell the machine's stalls from the switch's faults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallStats {
    /// Gaps between polls of at least 1 ms that the loop did not choose.
    pub stalls: u64,
    /// The longest such gap, µs.
    pub longest_us: u64,
    /// The most of one gap that the loop's thread spent waiting for a CPU, µs: the
    /// machine's share (the rest of a gap is the loop's own work, or a system call it
    /// blocked in, such as binding a port).
    #[serde(default)]
    pub longest_cpu_wait_us: u64,
    /// The latest stalls, oldest first.
    pub recent: Vec<Stall>,
    /// How long the polling thread has waited for a CPU in all, runnable but not running
    /// (the kernel's schedstat), µs. A switch that shares its CPU falls behind its traffic
    /// without any single long stall; absent where the kernel does not keep the figure.
    #[serde(default)]
    pub cpu_wait_us: Option<u64>,
    /// The latest spells in which the loop left frames on an rx ring turn after turn and
    /// the rings lost frames, oldest first.
    #[serde(default)]
    pub backlogs: Vec<Backlog>,
}

/// A gap of 1 ms or more in the dataplane's polling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stall {
    /// When the loop polled again (monotonic clock, ns).
    pub ended_ns: u64,
    /// How long it lasted, µs.
    pub us: u64,
    /// How much of it the loop's thread spent runnable but waiting for a CPU, µs.
    #[serde(default)]
    pub cpu_wait_us: u64,
}

/// A spell from the last turn that emptied every rx ring to the next one that did. What
/// arrives while the loop is off its CPU waits on the ring, and many short waits add up
/// as one long one would when the loop cannot catch up between them: `off_cpu_us` says
/// how much of the spell the machine took, and `rx_lost` what the rings lost in it.
/// A ring that overflows although the loop had its CPU nearly all the spell is the
/// switch's fault; one that overflows after the machine took the ring's time is not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backlog {
    /// When the loop emptied the rings again (monotonic clock, ns).
    pub ended_ns: u64,
    /// How long the spell lasted, µs.
    pub us: u64,
    /// Wall time in the spell that the loop's thread was not on a CPU, µs.
    pub off_cpu_us: u64,
    /// Frames the kernel could not hand to the loop during the spell (a full rx ring, or
    /// no frame to put one in).
    pub rx_lost: u64,
    /// Frames the loop took off the rx rings during the spell.
    #[serde(default)]
    pub rx_taken: u64,
}

impl Backlog {
    /// Frames that arrived in the spell: it starts and ends with every ring empty, so each
    /// was either taken or lost.
    pub fn arrived(&self) -> u64 {
        self.rx_taken + self.rx_lost
    }

    /// How fast the loop took frames while it had its CPU, frames/s: a loop that falls
    /// behind while it runs is slower than its traffic; one that is faster lost frames
    /// only because it was away.
    pub fn on_cpu_rate_fps(&self) -> Option<f64> {
        let on_cpu_us = self.us.saturating_sub(self.off_cpu_us);
        (on_cpu_us > 0).then(|| self.rx_taken as f64 * 1e6 / on_cpu_us as f64)
    }
}

impl StallStats {
    /// The longest of the recent stalls that ended after `since_ns`.
    pub fn longest_since(&self, since_ns: u64) -> Option<Stall> {
        self.recent.iter().filter(|s| s.ended_ns > since_ns).max_by_key(|s| s.us).copied()
    }

    /// The recent backlog spells that ended after `since_ns`.
    pub fn backlogs_since(&self, since_ns: u64) -> impl Iterator<Item = &Backlog> {
        self.backlogs.iter().filter(move |b| b.ended_ns > since_ns)
    }

    /// Frames lost on the rx rings since `since_ns` in spells in which the loop was off
    /// its CPU for at least `ring_lasts` (how long the rings hold the traffic): those the
    /// machine explains. Spells that fell out of the record count as the switch's.
    pub fn rx_lost_off_cpu(&self, since_ns: u64, ring_lasts: std::time::Duration) -> u64 {
        let at_least = ring_lasts.as_micros() as u64;
        self.backlogs_since(since_ns).filter(|b| b.off_cpu_us >= at_least).map(|b| b.rx_lost).sum()
    }
}

/// Kernel-side AF_XDP socket statistics .
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketCounters {
    /// Frames dropped for the socket (no room or no fill buffer).
    pub rx_dropped: u64,
    /// Invalid rx descriptors.
    pub rx_invalid_descs: u64,
    /// Frames dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub rx_fill_ring_empty: u64,
    /// Invalid tx descriptors.
    pub tx_invalid_descs: u64,
    /// Times the kernel found the tx ring empty.
    pub tx_ring_empty: u64,
    /// Loop turns in which the kernel took none of the frames waiting on the tx ring.
    pub tx_kernel_busy: u64,
    /// The most frames the port had on its tx ring at once, not yet completed (since
    /// start or `ctl clear`): at most two batches, the rest wait in the engine's queues.
    #[serde(default)]
    pub tx_in_flight_max: u32,
}

impl SocketCounters {
    /// Frames the kernel could not put on the rx ring: the ring full, or no fill frame.
    pub fn rx_lost(&self) -> u64 {
        self.rx_ring_full + self.rx_dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn frames_lost_count_as_the_machines_only_in_spells_that_took_the_rings_time_off_the_cpu() {
        let spell =
            |ended_ns, off_cpu_us, rx_lost| Backlog { ended_ns, us: 40_000, off_cpu_us, rx_lost, rx_taken: 9_000 };
        let s = StallStats {
            backlogs: vec![spell(100, 30_000, 7), spell(200, 30_000, 5), spell(300, 2_000, 11)],
            ..StallStats::default()
        };
        // The rings last 20 ms: 30 ms off the CPU fills them, 2 ms does not.
        assert_eq!(s.rx_lost_off_cpu(0, Duration::from_millis(20)), 12);
        assert_eq!(s.rx_lost_off_cpu(150, Duration::from_millis(20)), 5, "only spells that ended after");
        assert_eq!(s.rx_lost_off_cpu(0, Duration::from_millis(31)), 0);
    }
}
