//! Counters kept by the switch and the snapshot `pfcswitch ctl stats` shows.

use serde::{Deserialize, Serialize};

pub use crate::pause::PauseHistory;

use super::config::{PauseMode, PortRole};
use super::counters::counters;
use super::histogram::Percentiles;
use super::mac::MacAddr;
use super::pfc::{ControlReject, RejectCounters};
use super::pfcwd::{PrioFrames, WatchdogAction, WatchdogCounters};
use super::priorities::Priority;
use super::speed::Speed;

fn up() -> bool {
    true
}

/// One stretch of a port pausing its upstream for a priority.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XoffEpisode {
    /// The priority paused.
    pub prio: Priority,
    /// Monotonic clock, ns.
    pub start_ns: u64,
    /// When it ended (monotonic clock, ns); `None` while it lasts (0 in JSON).
    #[serde(with = "crate::time::ns_or_zero")]
    pub end_ns: Option<u64>,
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
    /// Not ECN-capable, dropped by a lossy egress queue's WRED profile.
    Wred => wred, "wred";
}

counters! {
/// MAC control (0x8808) frames. Not counted as data rx/tx or as drops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MacControlCounters {
    /// MAC control frames received.
    pub received: u64,
    /// PFC frames received.
    pub pfc_received: u64 => count,
    /// 802.3x PAUSE frames received.
    pub pause_received: u64 => count,
    /// 802.3x PAUSE received on a port not in global-pause mode.
    pub pause_ignored: u64 => ignored,
    /// PFC received on a port not in PFC mode.
    pub pfc_ignored: u64 => ignored,
    /// PFC classes naming a lossy priority (ignored).
    pub lossy_class_ignored: u64 => ignored,
    /// Honoured frames that came with an all-zero source address.
    pub zero_source: u64 => ignored,
    /// Frames shorter than Ethernet's minimum, read as their NIC would have padded them
    /// (a raw socket on a veth sends them so) and then acted on like any other.
    #[serde(default)]
    pub short: u64,
    /// Rejected by the decoder, per reason (their keys sit among these, as before).
    #[serde(flatten)]
    pub rejected: RejectCounters,
    /// PFC frames sent.
    pub pfc_sent: u64 => count,
    /// 802.3x PAUSE frames sent.
    pub pause_sent: u64 => count,
    /// Pauses that could not be built for want of a free buffer (retried).
    pub send_deferred: u64,
}
}

impl MacControlCounters {
    /// Counts a frame the decoder rejected.
    pub fn reject(&mut self, r: ControlReject) {
        self.rejected.count(r);
    }

    /// Frames the decoder rejected for `reason`.
    pub fn rejects(&self, reason: ControlReject) -> u64 {
        self.rejected.get(reason)
    }

    /// MAC-control frames received and not acted on, by why (the counter's name): the
    /// fields marked `=> ignored` (frames the port's mode or lossless priorities ignore,
    /// honoured frames with an all-zero source), then the ones the decoder rejects
    /// ([`ControlReject::name`]).
    pub fn not_acted_on(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        let ignored = self.ignored().map(|(c, v)| (c.name, v));
        ignored.chain(ControlReject::ALL.iter().map(|&r| (r.name(), self.rejects(r))))
    }

    /// Frames the decoder rejected.
    pub fn rejected(&self) -> u64 {
        ControlReject::ALL.iter().map(|&r| self.rejects(r)).sum()
    }
}

counters! {
/// Counters per (port, priority).
///
/// Two cache lines each, from a line's start: every frame adds to its priority's first
/// four, which then share a line. At 120 bytes unaligned, a priority's four straddled two
/// lines (priority 3's, 360 bytes in), and a fat-tree in the simulator, all on priority
/// 3, missed the second cache level 9 % more often in all (cachegrind, k=8, 2 ms; its
/// wall time moved less than a VM can show).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[repr(C, align(64))]
pub struct PrioCounters {
    /// Data frames received, charged to this priority.
    pub rx_frames: u64 => count,
    /// Data frames sent from this priority's egress queue.
    pub tx_frames: u64 => count,
    /// Data bytes received, charged to this priority (the frames in `rx_frames`).
    #[serde(default)]
    pub rx_bytes: u64 => count,
    /// Data bytes sent from this priority's egress queue (the frames in `tx_frames`).
    #[serde(default)]
    pub tx_bytes: u64 => count,
    /// Pause frames sent for this priority (XOFF and refreshes).
    pub xoff_sent: u64 => count,
    /// Zero-quanta resumes sent.
    pub xon_sent: u64 => count,
    /// Pauses received for this priority.
    pub xoff_received: u64 => count,
    /// Zero-quanta resumes received for this priority.
    pub xon_received: u64 => count,
    /// Frames of this priority sent after a pause that held it had arrived: the loop read
    /// a refresh off its rx ring only after the pause before it ran out by its clock, and
    /// let these out in between. The switch's own account of a storm it failed to hold,
    /// from the refresh's arrival stamp (0 in the simulator, which reads every frame as it
    /// arrives).
    #[serde(default)]
    pub sent_past_pause: u64 => count,
    /// Lossless frames dropped (headroom exhausted, or a deadlock or storm cut off).
    pub lossless_drops: u64 => count,
    /// Pauses the ingress group's frame limit caused before its bytes would have (many
    /// small frames, see `buffer.lossless_frames`).
    #[serde(default)]
    pub xoff_by_frames: u64 => count,
    /// Lossy frames dropped.
    pub lossy_drops: u64 => count,
    /// Frames this egress queue marked ECN Congestion Experienced (its WRED profile).
    #[serde(default)]
    pub ecn_marked: u64 => count,
    /// Frames not ECN-capable that this lossy egress queue's WRED profile dropped.
    #[serde(default)]
    pub wred_dropped: u64 => count,
    /// Frames not ECN-capable that this lossless egress queue let pass above its WRED
    /// profile's minimum (PFC, not WRED, keeps it from overflowing).
    #[serde(default)]
    pub ecn_not_capable_passed: u64 => count,
}
}

impl PrioCounters {
    /// The frames the watchdog reads of this priority (its counters live here, the
    /// watchdog's view of them in `pfcwd`, which does not import the stats).
    pub(crate) fn frames(&self) -> PrioFrames {
        PrioFrames { tx: self.tx_frames, rx: self.rx_frames }
    }
}

impl PrioCounters {
    /// PFC frames received that named this priority, pauses and resumes (SONiC's
    /// `PFC<n>_RX_PKTS`).
    pub fn pfc_received(&self) -> u64 {
        self.xoff_received + self.xon_received
    }

    /// PFC frames sent that named this priority (`PFC<n>_TX_PKTS`).
    pub fn pfc_sent(&self) -> u64 {
        self.xoff_sent + self.xon_sent
    }
}

/// Live state of a (port, priority) in a snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrioStats {
    /// The priority.
    pub priority: Priority,
    /// Whether it is lossless.
    pub lossless: bool,
    /// Its counters.
    #[serde(flatten)]
    pub counters: PrioCounters,
    /// Bytes this port's ingress holds for the priority.
    pub ingress_bytes: u64,
    /// The most `ingress_bytes` has been.
    pub ingress_watermark: u64,
    /// The most of the shared pool the group has held (its headroom not counted).
    #[serde(default)]
    pub ingress_shared_watermark: u64,
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
    /// The most bytes this egress queue has held since the watermarks were cleared.
    #[serde(default)]
    pub egress_queue_watermark: u64,
    /// The link partner has paused this priority right now.
    pub egress_paused: bool,
    /// Total time egress has been paused, in µs (PFC and 802.3x).
    pub paused_us: u64,
    /// The link partner's PFC pauses of this priority (`pfcstat --history`).
    #[serde(default)]
    pub pfc_history: PauseHistory,
    /// Since when this port has been pausing its upstream (monotonic ns); `None` if it is
    /// not (0 in JSON).
    #[serde(with = "crate::time::ns_or_zero")]
    pub xoff_since_ns: Option<u64>,
    /// The longest frames of this priority kept arriving after an XOFF, µs: the link
    /// partner's pause response seen from here (the wire, its reaction and what it had in
    /// flight). It is what the headroom must absorb, in time.
    pub upstream_response_max_us: f64,
}

counters! {
/// A port's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[repr(C)] // the four counters every frame writes first, in one cache line with the port's settings
pub struct PortCounters {
    /// Data frames received.
    pub rx_frames: u64 => count,
    /// Data bytes received.
    pub rx_bytes: u64 => count,
    /// Data frames sent.
    pub tx_frames: u64 => count,
    /// Data bytes sent.
    pub tx_bytes: u64 => count,
    /// Frames not forwarded, by reason.
    pub drops: DropCounters,
    /// PAUSE and PFC frames.
    pub mac_control: MacControlCounters,
    /// Stations that moved here from another port.
    pub fdb_moves: u64 => count,
    /// Source addresses not learned because the FDB was full (the frames still went on).
    #[serde(default)]
    pub fdb_full: u64 => count,
    /// Source addresses not learned (or not moved here) because the port had learned its
    /// `fdb.max_per_port` already (the frames still went on).
    #[serde(default)]
    pub fdb_port_full: u64 => count,
    /// Unicast frames flooded because their destination was not in the FDB.
    #[serde(default)]
    pub unknown_unicast_flooded: u64 => count,
    /// Times the link went down (or the interface went away).
    #[serde(default)]
    pub link_downs: u64 => count,
}
}

/// The PFC watchdog on one lossless priority of a port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchdogStats {
    /// The priority.
    pub priority: Priority,
    /// What a storm on it leads to.
    pub action: WatchdogAction,
    /// The priority is stormed now (the action applies).
    pub active: bool,
    /// What the watchdog did on it.
    #[serde(flatten)]
    pub counters: WatchdogCounters,
}

/// One port as the engine sees it: what `ctl stats` shows of a port but its sockets'
/// part, which the AF_XDP shell adds (`pfcswitch::stats`).
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
    /// Which pauses it sends and obeys.
    pub pause_mode: PauseMode,
    /// What the port faces: a host or another switch.
    #[serde(default)]
    pub role: PortRole,
    /// The link is up (the dataplane says so; frames for a port that is down are dropped).
    #[serde(default = "up")]
    pub link_up: bool,
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
    /// Per priority, 0 to 7.
    pub priorities: Vec<PrioStats>,
}

/// The engine's snapshot of a switch, with a `P` per port: [`PortStats`] as the engine
/// makes it ([`crate::Switch::stats`]); a driver that knows more of a port composes it
/// with its own part (the AF_XDP shell with its sockets', the simulator with its
/// pool's) through [`SwitchStats::map_ports`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwitchStats<P = PortStats> {
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
    /// Per port, in configuration order.
    pub ports: Vec<P>,
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
    pub lossless: Vec<Priority>,
    /// The tag a host's frames start with.
    pub initial_tag: u8,
    /// The tag of frames that match no rule (lossy).
    pub default_tag: u8,
    /// The priority of the default tag.
    pub default_priority: Priority,
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

impl<P> SwitchStats<P> {
    /// The same snapshot with each port's stats made into a `Q` by `f(index, port)`.
    pub fn map_ports<Q>(self, mut f: impl FnMut(usize, P) -> Q) -> SwitchStats<Q> {
        SwitchStats {
            name: self.name,
            switch_id: self.switch_id,
            uptime_s: self.uptime_s,
            fdb_entries: self.fdb_entries,
            shared_buffer_bytes: self.shared_buffer_bytes,
            shared_buffer_used: self.shared_buffer_used,
            xoff_threshold: self.xoff_threshold,
            xon_threshold: self.xon_threshold,
            pfc_reaction: self.pfc_reaction,
            resume_lateness: self.resume_lateness,
            pause_response: self.pause_response,
            deadlocks_detected: self.deadlocks_detected,
            slowpath_overflow: self.slowpath_overflow,
            pfcwd_events_forgotten: self.pfcwd_events_forgotten,
            ports: self.ports.into_iter().enumerate().map(|(i, p)| f(i, p)).collect(),
            tagger: self.tagger,
        }
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
        Priority::all().map(|p| PrioStats { priority: p, ..PrioStats::default() }).collect()
    }
}
