//! Counters kept by the switch and the snapshot `pfcswitch ctl stats` shows.

use serde::{Deserialize, Serialize};

use super::config::{PauseMode, PortRole};
use super::histogram::Percentiles;
use super::mac::MacAddr;
use super::pfc::ControlReject;
use super::pfcwd::{WatchdogAction, WatchdogCounters};
use super::priorities::PRIORITIES;
use super::speed::Speed;

fn up() -> bool {
    true
}

/// One stretch of a port pausing its upstream for a priority.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XoffEpisode {
    /// The priority paused.
    pub prio: u8,
    /// Monotonic clock, ns.
    pub start_ns: u64,
    /// 0 while it lasts.
    pub end_ns: u64,
}

/// DCFIT checking messages on a port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckCounters {
    /// Received in pauses on this port.
    pub received: u64,
    /// Created in pauses sent on this port (a local cause).
    pub originated: u64,
    /// Passed on in pauses sent on this port (a downstream cause).
    pub forwarded: u64,
    /// This switch's own messages that came back on this port.
    pub own_returned: u64,
    /// Own messages that came back after the port they left through had stopped pausing
    /// its upstream: no standing cycle, not a deadlock.
    pub stale_returns: u64,
    /// Own messages that came back around a cycle of pauses whose traffic still moved
    /// (congestion that drains, not a deadlock); the origin tries again with a new one.
    pub draining_returns: u64,
    /// Sent by a host (a host-facing port): not trusted, ignored.
    #[serde(default)]
    pub from_host_ignored: u64,
}

/// Declares the drop reasons once: the [`DropReason`] enum, the [`DropCounters`] struct
/// with a field per reason (its JSON key and its Prometheus `reason` label), and a short
/// title for text tables. Everything that lists the reasons iterates
/// [`DropReason::ALL`] or [`DropCounters::iter`] instead of writing them out again.
macro_rules! drop_reasons {
    ($( $(#[doc = $doc:literal])* $variant:ident => $field:ident, $title:literal; )*) => {
        /// Why a frame was not forwarded.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum DropReason {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl DropReason {
            /// Every reason, in the order the counters are listed.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$variant),*];

            /// The counter's name: its JSON key and its Prometheus `reason` label.
            pub const fn name(self) -> &'static str {
                match self {
                    $(DropReason::$variant => stringify!($field),)*
                }
            }

            /// A short column title for text tables.
            pub const fn title(self) -> &'static str {
                match self {
                    $(DropReason::$variant => $title,)*
                }
            }
        }

        /// Frames not forwarded on a port, per reason.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct DropCounters {
            $( $(#[doc = $doc])* #[serde(default)] pub $field: u64, )*
        }

        impl DropCounters {
            /// Counts one frame dropped for `reason`.
            pub fn count(&mut self, reason: DropReason) {
                match reason {
                    $(DropReason::$variant => self.$field += 1,)*
                }
            }

            /// Frames dropped for `reason`.
            pub fn get(&self, reason: DropReason) -> u64 {
                match reason {
                    $(DropReason::$variant => self.$field,)*
                }
            }

            /// Frames dropped for any reason.
            pub fn total(&self) -> u64 {
                0 $(+ self.$field)*
            }

            /// Every reason with its count, in order.
            pub fn iter(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
                DropReason::ALL.iter().map(|&r| (r, self.get(r)))
            }
        }
    };
}

drop_reasons! {
    /// Shorter than an Ethernet header.
    Runt => runt, "runt";
    /// Longer than the port's `max_frame`.
    Oversize => oversize, "oversize";
    /// Sent to 01:80:C2:00:00:0x (link-local: LLDP, STP, ...), which a bridge does not forward.
    LinkLocal => link_local, "link-local";
    /// Multicast source address.
    BadSource => bad_source, "bad src";
    /// The destination is on the port the frame came from, or there is nowhere to flood.
    Filtered => filtered, "filtered";
    /// No free frame buffer for a copy.
    NoBuffer => no_buffer, "no buffer";
    /// A lossless priority's headroom was exhausted.
    Lossless => lossless, "lossless";
    /// A lossy queue was full or the shared buffer was exhausted.
    Lossy => lossy, "lossy";
    /// A frame cap was reached: the egress port's lossy queues, or the slowpath, held as
    /// many frames as they may (many small frames must not empty the frame pool).
    FrameCap => frame_cap, "frame cap";
    /// Held for a blocked port, but the slowpath could not take it (its channel was full).
    SlowpathRefused => slowpath_refused, "slowpath";
    /// For a port whose link is down (or whose interface is gone), or queued on it when
    /// it went down.
    LinkDown => link_down, "link down";
    /// Dropped while breaking a deadlock or cutting a PFC storm off on this (egress) port.
    Watchdog => watchdog, "watchdog";
}

/// MAC control (0x8808) frames. Not counted as data rx/tx or as drops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MacControlCounters {
    /// MAC control frames received.
    pub received: u64,
    /// PFC frames received.
    pub pfc_received: u64,
    /// 802.3x PAUSE frames received.
    pub pause_received: u64,
    /// 802.3x PAUSE received on a port not in global-pause mode.
    pub pause_ignored: u64,
    /// PFC received on a port not in PFC mode.
    pub pfc_ignored: u64,
    /// PFC classes naming a lossy priority (ignored).
    pub lossy_class_ignored: u64,
    /// Honoured frames that came with an all-zero source address.
    pub zero_source: u64,
    /// Rejected: shorter than their fields.
    pub truncated: u64,
    /// Rejected: an opcode other than PAUSE and PFC.
    pub unknown_opcode: u64,
    /// Rejected: for another destination.
    pub wrong_destination: u64,
    /// Rejected: reserved bits set.
    pub reserved_bits: u64,
    /// Rejected: a PFC frame enabling no priority.
    pub no_class_enabled: u64,
    /// PFC frames sent.
    pub pfc_sent: u64,
    /// 802.3x PAUSE frames sent.
    pub pause_sent: u64,
    /// Pauses that could not be built for want of a free buffer (retried).
    pub send_deferred: u64,
}

impl MacControlCounters {
    /// Counts a frame the decoder rejected.
    pub fn reject(&mut self, r: ControlReject) {
        *match r {
            ControlReject::Truncated => &mut self.truncated,
            ControlReject::UnknownOpcode => &mut self.unknown_opcode,
            ControlReject::WrongDestination => &mut self.wrong_destination,
            ControlReject::ReservedBits => &mut self.reserved_bits,
            ControlReject::NoClassEnabled => &mut self.no_class_enabled,
        } += 1;
    }

    /// MAC-control frames received and not acted on, by why (the counter's name): the
    /// ones the port's mode or lossless priorities ignore, the ones the decoder rejects,
    /// and honoured frames with an all-zero source.
    pub fn not_acted_on(&self) -> [(&'static str, u64); 9] {
        [
            ("pause_ignored", self.pause_ignored),
            ("pfc_ignored", self.pfc_ignored),
            ("lossy_class_ignored", self.lossy_class_ignored),
            ("truncated", self.truncated),
            ("unknown_opcode", self.unknown_opcode),
            ("wrong_destination", self.wrong_destination),
            ("reserved_bits", self.reserved_bits),
            ("no_class_enabled", self.no_class_enabled),
            ("zero_source", self.zero_source),
        ]
    }

    /// Frames the decoder rejected.
    pub fn rejected(&self) -> u64 {
        self.truncated + self.unknown_opcode + self.wrong_destination + self.reserved_bits + self.no_class_enabled
    }
}

/// Counters per (port, priority).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrioCounters {
    /// Data frames received, charged to this priority.
    pub rx_frames: u64,
    /// Data frames sent from this priority's egress queue.
    pub tx_frames: u64,
    /// Pause frames sent for this priority (XOFF and refreshes).
    pub xoff_sent: u64,
    /// Zero-quanta resumes sent.
    pub xon_sent: u64,
    /// Pauses received for this priority.
    pub xoff_received: u64,
    /// Zero-quanta resumes received for this priority.
    pub xon_received: u64,
    /// Lossless frames dropped (headroom exhausted, or a deadlock or storm cut off).
    pub lossless_drops: u64,
    /// Lossy frames dropped.
    pub lossy_drops: u64,
}

/// Live state of a (port, priority) in a snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrioStats {
    /// The priority.
    pub priority: u8,
    /// Whether it is lossless.
    pub lossless: bool,
    /// Its counters.
    #[serde(flatten)]
    pub counters: PrioCounters,
    /// Bytes this port's ingress holds for the priority.
    pub ingress_bytes: u64,
    /// The most `ingress_bytes` has been.
    pub ingress_watermark: u64,
    /// Bytes of headroom in use now.
    pub headroom_bytes: u64,
    /// The most headroom has held.
    pub headroom_watermark: u64,
    /// The group's buffer profile now, lossless priorities only (zero for lossy ones):
    /// its XOFF and XON thresholds (a dynamic XOFF follows the free pool) and the
    /// headroom it may fill after XOFF.
    #[serde(default)]
    pub xoff_threshold: u64,
    /// The XON threshold now, bytes.
    #[serde(default)]
    pub xon_threshold: u64,
    /// The headroom the group may fill after XOFF, bytes.
    #[serde(default)]
    pub headroom_size: u64,
    /// XOFF asserted toward the upstream.
    pub xoff: bool,
    /// Frames waiting in this port's egress queue.
    pub egress_queue_frames: u32,
    /// Bytes waiting in this port's egress queue.
    pub egress_queue_bytes: u64,
    /// The link partner has paused this priority right now.
    pub egress_paused: bool,
    /// Total time egress has been paused, in µs.
    pub paused_us: u64,
    /// Since when this port has been pausing its upstream (monotonic ns; 0 if not).
    pub xoff_since_ns: u64,
    /// The longest frames of this priority kept arriving after an XOFF, µs: the link
    /// partner's pause response seen from here (the wire, its reaction and what it had in
    /// flight). It is what the headroom must absorb, in time.
    pub upstream_response_max_us: f64,
}

/// A port's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortCounters {
    /// Data frames received.
    pub rx_frames: u64,
    /// Data bytes received.
    pub rx_bytes: u64,
    /// Data frames sent.
    pub tx_frames: u64,
    /// Data bytes sent.
    pub tx_bytes: u64,
    /// Frames not forwarded, by reason.
    pub drops: DropCounters,
    /// PAUSE and PFC frames.
    pub mac_control: MacControlCounters,
    /// Stations that moved here from another port.
    pub fdb_moves: u64,
    /// Source addresses not learned because the FDB was full (the frames still went on).
    #[serde(default)]
    pub fdb_full: u64,
    /// Unicast frames flooded because their destination was not in the FDB.
    #[serde(default)]
    pub unknown_unicast_flooded: u64,
    /// Times the link went down (or the interface went away).
    #[serde(default)]
    pub link_downs: u64,
}

/// Frames the XDP program saw, per class (filled in by the dataplane).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdpClassCounters {
    /// 802.3x PAUSE frames.
    pub pause: u64,
    /// PFC frames.
    pub pfc: u64,
    /// Other MAC control frames.
    pub mac_control_other: u64,
    /// VLAN-tagged frames.
    pub vlan: u64,
    /// IPv4 frames.
    pub ipv4: u64,
    /// IPv6 frames.
    pub ipv6: u64,
    /// Anything else.
    pub other: u64,
    /// Frames shorter than an Ethernet header.
    pub runt: u64,
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

/// Gaps in the dataplane loop's polling it did not choose (filled in by the dataplane):
/// a switch that loses its CPU for 10 ms receives 10 ms of traffic at once, too late to
/// pause it. Tests read these to tell the machine's stalls from the switch's faults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallStats {
    /// Gaps between polls of at least 1 ms that the loop did not choose.
    pub stalls: u64,
    /// The longest such gap, µs.
    pub longest_us: u64,
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

/// Kernel-side AF_XDP socket statistics (filled in by the dataplane).
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
}

/// The PFC watchdog on one lossless priority of a port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchdogStats {
    /// The priority.
    pub priority: u8,
    /// What a storm on it leads to.
    pub action: WatchdogAction,
    /// The priority is stormed now (the action applies).
    pub active: bool,
    /// What the watchdog did on it.
    #[serde(flatten)]
    pub counters: WatchdogCounters,
}

/// One port in `ctl stats`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortStats {
    /// The port's name.
    pub name: String,
    /// Its interface.
    pub iface: String,
    /// The source address of its pause frames.
    pub mac: MacAddr,
    /// Its speed, as the shaper paces it.
    pub speed: Speed,
    /// Where `speed` came from.
    #[serde(default)]
    pub speed_from: SpeedSource,
    /// Which pauses it sends and obeys.
    pub pause_mode: PauseMode,
    /// What the port faces: a host or another switch.
    #[serde(default)]
    pub role: PortRole,
    /// The link is up (the dataplane says so; frames for a port that is down are dropped).
    #[serde(default = "up")]
    pub link_up: bool,
    /// Rx queues of the interface with a socket of the switch (filled in by the dataplane).
    #[serde(default)]
    pub rx_queues: u32,
    /// Where the classifier runs and how the sockets bound, as the kernel reports them
    /// (filled in by the dataplane; absent when unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp_mode: Option<crate::config::XdpMode>,
    /// How its sockets bound: zero-copy or copy (filled in by the dataplane; absent when unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind_mode: Option<crate::config::BindMode>,
    /// Its frames go to the slowpath (`ctl block`).
    pub blocked: bool,
    /// Frames for this egress held by the slowpath.
    pub held_by_slowpath: u64,
    /// A deadlock is being broken on this port (its lossless queue is dropped).
    pub watchdog_active: bool,
    /// The PFC watchdog, per lossless priority.
    #[serde(default)]
    pub pfcwd: Vec<WatchdogStats>,
    /// DCFIT's checking messages on it.
    pub checks: CheckCounters,
    /// The latest times this port paused its upstream (oldest first).
    pub xoff_episodes: Vec<XoffEpisode>,
    /// When the latest PFC frames that paused something arrived on this port (monotonic
    /// clock, ns, oldest first; at most 64).
    #[serde(default)]
    pub pause_arrivals_ns: Vec<u64>,
    /// Its counters.
    #[serde(flatten)]
    pub counters: PortCounters,
    /// What the XDP program saw on it.
    pub xdp: XdpClassCounters,
    /// Its sockets' kernel statistics.
    pub socket: SocketCounters,
    /// Per priority, 0 to 7.
    pub priorities: Vec<PrioStats>,
}

/// What `pfcswitch ctl stats` shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwitchStats {
    /// The switch's name.
    pub name: String,
    /// The id it carries in DCFIT messages.
    pub switch_id: u32,
    /// Seconds since it started.
    pub uptime_s: f64,
    /// Entries in the FDB.
    pub fdb_entries: usize,
    /// The shared buffer, bytes.
    pub shared_buffer_bytes: u64,
    /// Bytes of it in use.
    pub shared_buffer_used: u64,
    /// The buffer-wide XOFF threshold now (a dynamic one follows the free pool), bytes.
    pub xoff_threshold: u64,
    /// The buffer-wide XON threshold now, bytes.
    pub xon_threshold: u64,
    /// UMEM frames free for reception (filled in by the dataplane).
    pub free_frames: u64,
    /// Time from reading the frame that crossed XOFF off the rx ring to handing its PFC
    /// frame to the kernel.
    pub pfc_reaction: Percentiles,
    /// From a received pause's expiry to the first frame of that priority sent after it
    /// (pauses that ended with frames waiting).
    pub resume_lateness: Percentiles,
    /// From a received pause's arrival to the last frame of the paused priority handed
    /// out after it (0 when none was): how long the switch took to stop.
    pub pause_response: Percentiles,
    /// Deadlocks DCFIT detected.
    pub deadlocks_detected: u64,
    /// Events the slowpath channel refused (should stay 0).
    pub slowpath_overflow: u64,
    /// PFC watchdog events the shell did not take in time, so never logged.
    #[serde(default)]
    pub pfcwd_events_forgotten: u64,
    /// The dataplane loop's stalls and backlog spells (filled in by the dataplane).
    #[serde(default)]
    pub stalls: StallStats,
    /// Per port, in configuration order.
    pub ports: Vec<PortStats>,
    /// The Tagger table this switch applies, and what it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tagger: Option<TaggerStats>,
}

/// What a Tagger table did to the frames of one (ingress port, arriving tag).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagCounters {
    /// Matched an ingress rule: queued as lossless under its priority.
    pub classified: u64,
    /// Left with another tag than they came with, by a rewrite rule.
    pub rewritten: u64,
    /// Matched no ingress rule (or carried no tag): the default tag, lossy.
    pub default_ingress: u64,
    /// Lossless, but the hop out had no rewrite rule: the default tag, lossy.
    pub default_egress: u64,
}

impl TagCounters {
    /// Frames that fell to the default tag, at ingress or egress.
    pub fn to_default(&self) -> u64 {
        self.default_ingress + self.default_egress
    }

    /// Whether nothing was counted.
    pub fn is_zero(&self) -> bool {
        *self == TagCounters::default()
    }
}

/// Counters of one (ingress port, tag); `tag` is absent for frames without an IP header.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagRow {
    /// The ingress port.
    pub port: String,
    /// The tag the frames arrived with; none for frames without an IP header.
    pub tag: Option<u8>,
    /// What the table did to them.
    #[serde(flatten)]
    pub counters: TagCounters,
}

/// The Tagger table a switch applies, and what it did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaggerStats {
    /// The switch the table was written for.
    pub table_switch: String,
    /// The table's file.
    pub source: String,
    /// Rules in the table.
    pub rules: usize,
    /// Ingress rules (port, tag → priority).
    pub ingress_rules: usize,
    /// Rewrite rules (ingress, tag, egress → tag).
    pub rewrite_rules: usize,
    /// The lossless priorities its rules use.
    pub lossless: Vec<u8>,
    /// The tag a host's frames start with.
    pub initial_tag: u8,
    /// The tag of frames that match no rule (lossy).
    pub default_tag: u8,
    /// The priority of the default tag.
    pub default_priority: u8,
    /// Every (port, tag) with a non-zero counter.
    pub tags: Vec<TagRow>,
}

impl TaggerStats {
    /// The sum over every (port, tag).
    pub fn totals(&self) -> TagCounters {
        self.tags.iter().fold(TagCounters::default(), |a, r| TagCounters {
            classified: a.classified + r.counters.classified,
            rewritten: a.rewritten + r.counters.rewritten,
            default_ingress: a.default_ingress + r.counters.default_ingress,
            default_egress: a.default_egress + r.counters.default_egress,
        })
    }
}

impl PortStats {
    /// Frames in this port's egress queues.
    pub fn queues_total(&self) -> u64 {
        self.priorities.iter().map(|p| u64::from(p.egress_queue_frames)).sum()
    }
}

impl PrioStats {
    /// A snapshot row for each of the eight priorities, all zero.
    pub fn for_priorities() -> Vec<PrioStats> {
        (0..PRIORITIES as u8).map(|p| PrioStats { priority: p, ..PrioStats::default() }).collect()
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
