//! PFC and 802.3x frames: pauses received (they stop egress queues for their quanta) and
//! pauses owed to the link partner (XOFF, refreshes, XON), built into frames at the next
//! transmit.

use std::time::Duration;

use crate::config::{PauseMode, PortRole};
use crate::pfc::{self, MacControl, Pfc};
use crate::pool::FramePool;
use crate::ports::PortId;
use crate::priorities::PRIORITIES;
use crate::priorities::{Priorities, Priority};
use crate::ring::Ring;
use crate::stats::XoffEpisode;
use crate::time::Time;

use super::Switch;

/// XOFF episodes remembered per port.
const EPISODES: usize = 64;

/// Arrival times of pausing PFC frames remembered per port.
const PAUSE_ARRIVALS: usize = 64;

/// A priority counts as flowing when a pause arrives if it sent within this long before.
const RESPONSE_WINDOW: Duration = Duration::from_millis(1);

/// Pauses this port owes its link partner, built into a frame at the next transmit.
#[derive(Debug, Default)]
pub(super) struct PendingPause {
    pub(super) pause: Priorities,
    pub(super) resume: Priorities,
    /// Receive time of the frame that crossed XOFF, for the reaction-time histogram.
    pub(super) trigger: Option<Time>,
    pub(super) refresh_at: [Time; PRIORITIES],
}

/// The pauses a port sends its upstream (the link partner whose frames it receives),
/// and what it measured of them.
#[derive(Debug)]
pub(super) struct Upstream {
    pub(super) pending: PendingPause,
    /// How often a pause is sent again while its group stays above XON.
    pub(super) refresh: Duration,
    /// Out of line: written once per pause episode (and per frame only while the port
    /// pauses), where `pending` is read for every frame the port sends. Inline, its two and
    /// a half kilobytes spread a port over more cache lines and pages than it needs (in a
    /// simulated fabric of hundreds of switches, that showed as slower events). Made at
    /// the port's first pause, sent or received (one allocation in the port's life, not
    /// one a frame): in a k=16 fat-tree 3 ports in 5 never pause, and the logs made up
    /// front were 14 of its 137 MiB.
    log: Option<Box<XoffLog>>,
}

/// What a port measured of the pauses it sent its upstream.
#[derive(Debug, Default)]
pub(super) struct XoffLog {
    /// Per priority: since when this port has been pausing its upstream (XOFF).
    pub(super) xoff_since: [Time; PRIORITIES],
    /// Per priority: the longest a frame arrived after its XOFF episode began.
    pub(super) upstream_response: [Duration; PRIORITIES],
    /// The latest XOFF episodes.
    pub(super) episodes: Ring<XoffEpisode, EPISODES>,
    /// Per priority: the number in `episodes` of its open episode. A group's pause and
    /// resume alternate (XOFF is crossed upwards, then XON downwards), so a priority has
    /// at most one open, and its resume closes it without searching the ring: the search
    /// read a kilobyte and a half of history at every resume, which in a simulated
    /// fabric was a few per cent of all the cache misses.
    open_episode: [Option<usize>; PRIORITIES],
    /// When the latest pausing PFC frames arrived (ns): a test tool matches them with
    /// when it sent its pauses, to tell the testbed's delay from the switch's.
    pub(super) pause_arrivals: Ring<u64, PAUSE_ARRIVALS>,
}

impl Upstream {
    pub(super) fn new(refresh: Duration) -> Upstream {
        Upstream { pending: PendingPause::default(), refresh, log: None }
    }

    pub(super) fn log_mut(&mut self) -> &mut XoffLog {
        self.log.get_or_insert_with(Box::default)
    }

    /// Since when this port has been pausing its upstream on `prio` (meaningful while its
    /// group is XOFF).
    pub(super) fn xoff_since(&self, prio: Priority) -> Time {
        self.log.as_ref().map_or(Time::ZERO, |l| l.xoff_since[prio])
    }

    /// The longest a frame of `prio` arrived after its XOFF episode began.
    pub(super) fn upstream_response(&self, prio: Priority) -> Duration {
        self.log.as_ref().map_or(Duration::ZERO, |l| l.upstream_response[prio])
    }

    /// The latest XOFF episodes, oldest first.
    pub(super) fn episodes(&self) -> impl Iterator<Item = &XoffEpisode> {
        self.log.iter().flat_map(|l| l.episodes.iter())
    }

    /// When the latest pausing PFC frames arrived (ns), oldest first.
    pub(super) fn pause_arrivals(&self) -> impl Iterator<Item = &u64> {
        self.log.iter().flat_map(|l| l.pause_arrivals.iter())
    }
}

impl Switch {
    /// Priorities for which `port` is pausing its upstream.
    pub fn xoff(&self, port: PortId) -> Priorities {
        self.lossless.iter().filter(|&p| self.buffer.group(port, p).xoff).collect()
    }

    /// Priorities the link partner has paused on `port`.
    pub fn paused(&self, now: Time, port: PortId) -> Priorities {
        self.ports[port].tx.pause.paused(now)
    }

    /// A lossless group of `port` crossed XOFF: the port must pause its link partner.
    pub(super) fn request_pause(&mut self, now: Time, port: PortId, prio: Priority) {
        let p = &mut self.ports[port];
        let log = p.upstream.log_mut();
        log.xoff_since[prio] = now;
        let k = log.episodes.push(XoffEpisode { prio, start_ns: now.as_nanos(), end_ns: None });
        log.open_episode[prio] = Some(k);
        let pending = &mut self.ports[port].upstream.pending;
        pending.pause.insert(prio);
        pending.resume.remove(prio);
        pending.trigger.get_or_insert(now);
        self.ready.insert(port);
    }

    pub(super) fn request_resume(&mut self, port: PortId, prio: Priority) {
        let now = self.clock;
        let p = &mut self.ports[port];
        let open = p.upstream.log.as_deref_mut().and_then(|log| {
            let k = log.open_episode[prio].take()?;
            log.episodes.get_mut(k)
        });
        if let Some(e) = open.filter(|e| e.prio == prio && e.end_ns.is_none()) {
            e.end_ns = Some(now.as_nanos().max(e.start_ns));
        }
        if !self.lossless.iter().any(|q| self.buffer.group(port, q).xoff) {
            p.dcfit.originated.clear();
            self.port_checks[port].retry = Priorities::NONE;
        }
        let pending = &mut self.ports[port].upstream.pending;
        pending.resume.insert(prio);
        pending.pause.remove(prio);
        self.ready.insert(port);
    }

    pub(super) fn on_mac_control(
        &mut self,
        now: Time,
        port: PortId,
        decoded: Result<pfc::ControlFrame, pfc::ControlReject>,
    ) {
        // A pause changes what `port` may send, and a checking message it carries may
        // reach any other port: rare enough to look at them all.
        self.all_ready();
        let lossless = self.lossless;
        let p = &mut self.ports[port];
        let c = &mut p.counters.mac_control;
        c.received += 1;
        let frame = match decoded {
            Ok(f) => f,
            Err(reason) => {
                c.reject(reason);
                return;
            }
        };
        if frame.src.is_zero() {
            c.zero_source += 1;
        }
        if frame.short {
            c.short += 1;
        }
        match frame.body {
            MacControl::Pause { quanta } => {
                c.pause_received += 1;
                if p.mode == PauseMode::GlobalPause {
                    p.tx.pause.pause_port(now, p.speed.quanta_duration(quanta));
                } else {
                    c.pause_ignored += 1;
                }
            }
            MacControl::Pfc(pfc) => {
                c.pfc_received += 1;
                if p.mode != PauseMode::Pfc {
                    c.pfc_ignored += 1;
                    return;
                }
                if pfc.classes().any(|(_, q)| q > 0) {
                    p.upstream.log_mut().pause_arrivals.push(now.as_nanos());
                }
                for (prio, quanta) in pfc.classes() {
                    if !lossless.contains(prio) {
                        p.counters.mac_control.lossy_class_ignored += 1;
                        continue;
                    }
                    let d = p.speed.quanta_duration(quanta);
                    // Whether the pause before this one still held the priority when this
                    // one arrived.
                    let held = p.tx.pause.any_paused(now, Priorities::only(prio));
                    // How long after the pause arrived did this priority keep going out?
                    // Only meaningful while it was flowing (a frame in the last millisecond).
                    if quanta > 0 && p.tx.sent[prio].last_tx + RESPONSE_WINDOW >= now && !held {
                        self.pause_response.record(p.tx.sent[prio].last_tx.saturating_since(now));
                    }
                    // A pause that arrived while the one before it still held (by the
                    // arrival stamps): whatever went out since that one was applied left
                    // only because the loop read this one after the other ran out. Not
                    // while the watchdog has the port ignore its pauses.
                    if quanta > 0 && held && !p.pfcwd.forwarding().contains(prio) {
                        p.prio[prio].sent_past_pause += u64::from(p.tx.sent[prio].since_pause);
                    }
                    p.tx.sent[prio].since_pause = 0;
                    p.tx.pause.pause_priority(now, prio, d);
                    p.tx.sent[prio].resume_due = Some(now + d);
                    if quanta == 0 {
                        p.prio[prio].xon_received += 1;
                    } else {
                        p.prio[prio].xoff_received += 1;
                    }
                }
                if self.dcfit.enabled {
                    let mut msg = pfc.checking;
                    if msg.is_some() && p.role == PortRole::Host {
                        p.checks.from_host_ignored += 1;
                        msg = None;
                    }
                    let paused: Priorities = pfc.classes().filter(|&(_, q)| q > 0).map(|(p, _)| p).collect();
                    self.on_checking(now, port, msg, paused & lossless);
                }
            }
        }
    }

    /// The caller handed a pause frame to the kernel at `sent`; records the reaction time.
    pub fn record_pause_sent(&mut self, trigger: Time, sent: Time) {
        self.reaction.record(sent.saturating_since(trigger));
    }

    /// Marks the pauses `port` must refresh by `now`: a group still above XON pauses its
    /// upstream again before the last pause runs out there.
    pub(super) fn due_refreshes(&mut self, now: Time, port: PortId) {
        let p = &mut self.ports[port];
        if p.mode == PauseMode::Off {
            return;
        }
        for prio in self.lossless.iter() {
            if self.buffer.group(port, prio).xoff && now >= p.upstream.pending.refresh_at[prio] {
                p.upstream.pending.pause.insert(prio);
            }
        }
    }

    /// Builds one frame carrying every pause, refresh and resume `port` owes.
    pub(super) fn build_pause_frame<P: FramePool>(&mut self, now: Time, pool: &mut P, port: PortId) {
        let p = &mut self.ports[port];
        if p.mode == PauseMode::Off {
            p.upstream.pending = PendingPause { refresh_at: p.upstream.pending.refresh_at, ..PendingPause::default() };
            return;
        }
        let (pause, resume) = (p.upstream.pending.pause, p.upstream.pending.resume);
        if (pause | resume).is_empty() {
            return;
        }
        let global = p.mode == PauseMode::GlobalPause;
        let Some(id) = pool.alloc() else {
            p.counters.mac_control.send_deferred += 1;
            return;
        };
        let body = if global {
            let any_xoff = self.lossless.iter().any(|prio| self.buffer.group(port, prio).xoff);
            MacControl::Pause { quanta: if any_xoff { self.quanta } else { 0 } }
        } else {
            let mut pfc = Pfc::pause(pause, self.quanta);
            pfc.enabled |= resume;
            if self.dcfit.enabled && !pause.is_empty() && p.role == PortRole::Switch {
                pfc.checking = self.checking_for(now, port, pause);
            }
            MacControl::Pfc(pfc)
        };
        let p = &mut self.ports[port];
        let len = pfc::encode(pool.write(id, pfc::MIN_FRAME_LEN), p.mac, &body);
        self.frames.set(id, len as u32, 1, None, Priority::new(0), now);
        p.tx.control.push(&mut self.frames, id);
        for prio in pause.iter() {
            p.upstream.pending.refresh_at[prio] = now + p.upstream.refresh;
        }
        match body {
            MacControl::Pause { .. } => p.counters.mac_control.pause_sent += 1,
            MacControl::Pfc(_) => {
                p.counters.mac_control.pfc_sent += 1;
                for prio in pause.iter() {
                    p.prio[prio].xoff_sent += 1;
                }
                for prio in resume.iter() {
                    p.prio[prio].xon_sent += 1;
                }
            }
        }
        p.upstream.pending.pause = Priorities::NONE;
        p.upstream.pending.resume = Priorities::NONE;
    }
}
