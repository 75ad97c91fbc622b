//! A port's timers: each thing a port does at a time of its own, without new input,
//! named once with the one rule that says when it is due.
//!
//! [`Switch::poll_port_timeout`] is the earliest entry of a port's table and
//! [`Switch::handle_port_timeout`] runs the entries it owns that have expired, so the two
//! read the same rules and cannot disagree (as quinn-proto's `TimerTable` serves both its
//! `poll_timeout` and its `handle_timeout`).
//!
//! The table is read from the state that owns each deadline, where it is written when
//! that state changes: a refresh's time when the pause it renews is sent, a received
//! pause's end when it arrives, the shaper's when a frame is booked, a storm's start when
//! it is detected. It is not copied into a table of its own: whether an entry counts
//! depends on state that changes with every frame (which queues hold frames, which
//! priorities a pause still holds at `now`), and a copy would be rewritten per frame for
//! the few times a driver asks.
//!
//! Two things are not timers, and say so here because a reader looks for them:
//! - the watchdog notes, at every look, since when frames wait on each priority it
//!   watches: an observation, taken by [`Switch::handle_port_timeout`] before its
//!   entries are read (the deadline of a detection counts from it);
//! - the end of a drop window: nothing waits for it. While a window is open, frames for
//!   its priorities are refused when they arrive and never queued; every reader compares
//!   the window's end with `now`. What a window owes is the frames already queued when it
//!   opened: [`PortTimer::DropWindow`], due at once.

use crate::config::PauseMode;
use crate::pfcwd::Observed;
use crate::ports::PortId;
use crate::time::Time;

use super::Switch;

/// One of a port's timers, in the order [`Switch::handle_port_timeout`] runs those it
/// owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortTimer {
    /// The PFC watchdog's next judgement: a priority paused with frames waiting reaches
    /// the detection time, or a stormed one its restoration time.
    Watchdog,
    /// Frames queued on a priority whose frames are being dropped (a DCFIT drop window or
    /// the watchdog's `drop`, opened while they waited): emptied at once.
    DropWindow,
    /// A paused ingress group's next refresh: before the last pause it sent runs out at
    /// the upstream.
    XoffRefresh,
    /// A pause, resume or other control frame owed to the partner: sent at once.
    ControlOwed,
    /// Frames queued that no received pause holds: when the shaper lets the next one on
    /// the wire.
    Shaper,
    /// Frames queued, every one held by a received pause: when the first pause runs out
    /// (and not before the shaper allows).
    PauseExpiry,
}

impl PortTimer {
    /// Every timer, in the order [`Switch::handle_port_timeout`] runs those it owns.
    pub const ALL: [PortTimer; 6] = [
        PortTimer::Watchdog,
        PortTimer::DropWindow,
        PortTimer::XoffRefresh,
        PortTimer::ControlOwed,
        PortTimer::Shaper,
        PortTimer::PauseExpiry,
    ];

    /// Whether [`Switch::handle_port_timeout`] runs it. The others say when
    /// [`Switch::poll_transmit`] will find a frame to send; nothing need run for them.
    pub fn handled(self) -> bool {
        matches!(self, PortTimer::Watchdog | PortTimer::DropWindow | PortTimer::XoffRefresh)
    }
}

/// What each of a port's timers says at one instant ([`Switch::port_timers`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortTimers {
    at: [Option<Time>; PortTimer::ALL.len()],
}

impl PortTimers {
    /// When `timer` is due, if it is set.
    pub fn get(&self, timer: PortTimer) -> Option<Time> {
        self.at[timer as usize]
    }

    /// The earliest entry: when the port next has something to do.
    pub fn next(&self) -> Option<Time> {
        self.at.iter().flatten().copied().min()
    }

    /// The timers due by `now`, in [`PortTimer::ALL`]'s order.
    pub fn due(&self, now: Time) -> impl Iterator<Item = PortTimer> + '_ {
        PortTimer::ALL.into_iter().filter(move |&t| self.get(t).is_some_and(|at| at <= now))
    }
}

impl Switch {
    /// What each of `port`'s timers says at `now`; every entry empty on a port whose link
    /// is down (nothing goes out of it; what it owes its partner waits).
    pub fn port_timers(&self, now: Time, port: PortId) -> PortTimers {
        let mut table = PortTimers::default();
        if self.ports[port].link_up {
            for timer in PortTimer::ALL {
                table.at[timer as usize] = self.port_timer(now, port, timer);
            }
        }
        table
    }

    /// When `timer` of `port` is due, as of `now` (`now` or earlier: right away).
    pub(super) fn port_timer(&self, now: Time, port: PortId, timer: PortTimer) -> Option<Time> {
        let p = &self.ports[port];
        match timer {
            PortTimer::Watchdog => self.watchdog_judgement(now, port).and_then(|(_, at)| at),
            PortTimer::DropWindow => {
                let owed = p.tx.queues.nonempty() & self.dropping(now, port);
                (!owed.is_empty()).then_some(now)
            }
            PortTimer::XoffRefresh => {
                if p.mode == PauseMode::Off {
                    return None;
                }
                let refresh = &p.upstream.pending.refresh_at;
                self.lossless.iter().filter(|&prio| self.buffer.group(port, prio).xoff).map(|prio| refresh[prio]).min()
            }
            PortTimer::ControlOwed => {
                let owed = !(p.upstream.pending.pause | p.upstream.pending.resume).is_empty();
                (owed || !p.tx.control.is_empty()).then_some(now)
            }
            PortTimer::Shaper | PortTimer::PauseExpiry => {
                let queued = p.tx.queues.nonempty();
                if queued.is_empty() {
                    return None;
                }
                let held = (queued & !self.effective_paused(now, port)).is_empty();
                match (timer, held) {
                    (PortTimer::Shaper, false) => Some(p.tx.shaper.ready_at()),
                    (PortTimer::PauseExpiry, true) => {
                        Some(p.tx.pause.resume_at(now, queued).unwrap_or(now).max(p.tx.shaper.ready_at()))
                    }
                    _ => None,
                }
            }
        }
    }

    /// The watchdog's view of `port` and when it next judges, unless it has nothing to
    /// judge (off, or none of the priorities it watches paused or stormed: the common
    /// case, so the view is not built for it).
    pub(super) fn watchdog_judgement(&self, now: Time, port: PortId) -> Option<(Observed, Option<Time>)> {
        let watched = self.watched(port);
        if self.pfcwd_quiet(now, port, watched) {
            return None;
        }
        let seen = self.pfcwd_view(now, port)?;
        let at = self.ports[port].pfcwd.deadline(now, watched, &seen);
        Some((seen, at))
    }
}
