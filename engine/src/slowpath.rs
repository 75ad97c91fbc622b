//! The slowpath: the frames it holds for blocked ports and which of those may go, and
//! the records DCFIT keeps of deadlocks and forwards. An I/O-free object: the
//! dataplane's slowpath thread runs it on the switch's CPU, the simulator runs it with
//! a CPU delay.
//!
//! Frames stay in the frame pool (the UMEM); the slowpath holds their ids, in arrival
//! order per ingress port. They stay charged to their ingress (port, priority) group
//! while held, so holding them builds buffer and triggers XOFF upstream exactly as
//! congestion would. Whether a port is blocked, and how many frames are held for each
//! egress queue, the engine alone keeps ([`crate::switch::Switch::stopped`], and its
//! traffic map).
//!
//! # Call order
//!
//! The switch's shape: inputs are `handle_*`, outputs `poll_*`. Whenever a driver looks
//! at the slowpath (the dataplane's thread when it wakes, the simulator at its delayed
//! events, a test's turn), it calls, in this order:
//!
//! 1. [`Slowpath::handle_event`] for each event the switch sent
//!    ([`crate::switch::Switch::poll_slowpath`]);
//! 2. [`Slowpath::handle_timeout`] with the time;
//! 3. [`Slowpath::poll_released`] with the switch's latest [`crate::switch::Switch::stopped`]:
//!    the frames to hand back ([`crate::switch::Switch::handle_released`]), often none;
//! 4. [`Slowpath::poll_timeout`]: when to look again with no event.

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::checking::CheckingMessage;
use super::dcfit::DeadlockEvent;
use super::ports::PortId;
use super::priorities::{Priorities, Priority};
use super::queue::FrameId;
use super::time::Time;

/// A frame the dataplane handed to the slowpath because its egress was blocked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldFrame {
    /// The frame in the pool.
    pub id: FrameId,
    /// Its length, bytes (charged to its ingress group while held).
    pub len: u32,
    /// The port it arrived on.
    pub ingress: PortId,
    /// The blocked port it waits for.
    pub egress: PortId,
    /// The egress queue it joins.
    pub prio: Priority,
}

/// Frames held for blocked egresses, per ingress port in arrival order.
#[derive(Debug)]
pub(crate) struct HeldFrames {
    held: Vec<VecDeque<HeldFrame>>,
}

impl HeldFrames {
    /// Room for `frames` held frames per ingress port is reserved up front.
    pub fn new(ports: usize, frames: usize) -> HeldFrames {
        HeldFrames { held: (0..ports).map(|_| VecDeque::with_capacity(frames)).collect() }
    }

    pub fn hold(&mut self, frame: HeldFrame) {
        self.held[frame.ingress].push_back(frame);
    }

    pub fn len(&self) -> usize {
        self.held.iter().map(VecDeque::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.held.iter().all(VecDeque::is_empty)
    }

    /// Frames held for `egress`.
    #[cfg(test)]
    pub fn held_for(&self, egress: PortId) -> usize {
        self.held.iter().flatten().filter(|f| f.egress == egress).count()
    }

    /// Gives back every frame that may go — its priority not stopped at its egress
    /// (`stopped(egress)`: all priorities while the port is blocked) —
    /// walking each ingress port's frames in arrival order, so order within each
    /// (ingress, egress, priority) holds.
    pub fn release(&mut self, stopped: impl Fn(PortId) -> Priorities, out: &mut Vec<HeldFrame>) {
        for queue in &mut self.held {
            queue.retain(|f| {
                let may_go = !stopped(f.egress).contains(f.prio);
                if may_go {
                    out.push(*f);
                }
                !may_go
            });
        }
    }

    /// Gives back every held frame, whatever its egress's state (at shutdown).
    pub fn drain(&mut self) -> Vec<HeldFrame> {
        self.held.iter_mut().flat_map(|q| q.drain(..)).collect()
    }
}

/// A deadlock as `pfcswitch ctl deadlocks` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeadlockRecord {
    /// What DCFIT found.
    #[serde(flatten)]
    pub event: DeadlockEvent,
    /// The switch that detected it.
    pub switch: String,
    /// The name of [`DeadlockEvent::origin_port`].
    pub origin_port_name: String,
    /// The name of [`DeadlockEvent::return_port`].
    pub return_port_name: String,
}

/// A checking message passed on, for the record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForwardRecord {
    /// The message.
    pub message: CheckingMessage,
    /// The egress whose pause brought it.
    pub from_port: String,
    /// The ingress that passes it upstream.
    pub to_port: String,
}

/// What `ctl deadlocks` answers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeadlockReport {
    /// The switch reporting.
    pub switch: String,
    /// The latest deadlocks, oldest first (at most [`DEADLOCK_LOG`]).
    pub deadlocks: Vec<DeadlockRecord>,
    /// Older deadlocks no longer in the list.
    #[serde(default)]
    pub deadlocks_forgotten: u64,
    /// The latest forwards, oldest first (at most [`FORWARD_LOG`]).
    pub recent_forwards: Vec<ForwardRecord>,
}

/// How long frames held for a port wait, with no event, before the slowpath looks at
/// them again: a pause on their egress may have run out, which no event reports.
pub const RECHECK: Duration = Duration::from_millis(1);

/// The most deadlocks remembered: a flood of them cannot grow memory.
pub const DEADLOCK_LOG: usize = 256;
/// The most forwards remembered.
pub const FORWARD_LOG: usize = 64;

/// The slowpath's state and decisions.
#[derive(Debug)]
pub struct Slowpath {
    switch: String,
    port_names: Vec<String>,
    held: HeldFrames,
    deadlocks: VecDeque<DeadlockRecord>,
    deadlocks_forgotten: u64,
    forwards: VecDeque<ForwardRecord>,
    released: Vec<HeldFrame>,
    /// Something may have become free to go since the last release.
    recheck: bool,
    /// When the held frames are looked at again with no event ([`RECHECK`] after a look
    /// that found some held), if that look is due.
    next_look: Option<Time>,
    /// That look fell due ([`Slowpath::handle_timeout`]) and the release is owed.
    look_due: bool,
}

impl Slowpath {
    /// The slowpath of switch `switch` with these ports, with room for `frames` held
    /// frames per ingress port reserved.
    pub fn new(switch: &str, port_names: Vec<String>, frames: usize) -> Slowpath {
        let n = port_names.len();
        Slowpath {
            switch: switch.to_string(),
            held: HeldFrames::new(n, frames),
            port_names,
            deadlocks: VecDeque::new(),
            deadlocks_forgotten: 0,
            forwards: VecDeque::with_capacity(FORWARD_LOG),
            released: Vec::with_capacity(frames.min(4096)),
            recheck: false,
            next_look: None,
            look_due: false,
        }
    }

    fn name(&self, port: usize) -> String {
        self.port_names.get(port).cloned().unwrap_or_else(|| port.to_string())
    }

    /// Takes one event from the engine. Returns the deadlock it recorded, if it is a new one.
    pub fn handle_event(&mut self, ev: ToSlowpath) -> Option<&DeadlockRecord> {
        match ev {
            ToSlowpath::Held(frame) => self.held.hold(frame),
            ToSlowpath::Unblocked { .. } => self.recheck = true,
            ToSlowpath::CheckForwarded { from, to, msg } => {
                if self.forwards.len() == FORWARD_LOG {
                    self.forwards.pop_front();
                }
                let record =
                    ForwardRecord { message: msg, from_port: self.name(from.index()), to_port: self.name(to.index()) };
                self.forwards.push_back(record);
            }
            ToSlowpath::Deadlock(event) => {
                if self.deadlocks.len() == DEADLOCK_LOG {
                    self.deadlocks.pop_front();
                    self.deadlocks_forgotten += 1;
                }
                let record = DeadlockRecord {
                    switch: self.switch.clone(),
                    origin_port_name: self.name(event.origin_port),
                    return_port_name: self.name(event.return_port),
                    event,
                };
                self.deadlocks.push_back(record);
                return self.deadlocks.back();
            }
            ToSlowpath::Confirmed { id, at_ns } => {
                if let Some(d) = self.deadlocks.iter_mut().find(|d| d.event.id == id) {
                    d.event.confirmations += 1;
                    d.event.last_seen_ns = at_ns;
                }
            }
        }
        None
    }

    /// Time passed: a look at the held frames that was due by `now` is, and the next
    /// [`Slowpath::poll_released`] releases what may go.
    pub fn handle_timeout(&mut self, now: Time) {
        if self.next_look.is_some_and(|t| t <= now) {
            self.next_look = None;
            self.look_due = true;
        }
    }

    /// The held frames that may go now (their priority not in `stopped(egress)`: none
    /// while the port is blocked), in arrival order per ingress port, if an event since
    /// the last release asked for one (an unblock) or a look fell due
    /// ([`Slowpath::handle_timeout`]); else none. The caller hands them back to the engine
    /// ([`crate::switch::Switch::handle_released`]). With frames still held, the next look
    /// is then due [`RECHECK`] from `now` ([`Slowpath::poll_timeout`]).
    ///
    /// Not at every call: a frame is held because its egress was blocked, and what ends
    /// that (an unblock) is an event; a pause that runs out meanwhile is caught by the
    /// look. Every driver calls this after the events and the timeout it took, in that
    /// order, so all of them release at the same moments.
    pub fn poll_released(&mut self, now: Time, stopped: impl Fn(PortId) -> Priorities) -> &[HeldFrame] {
        self.released.clear();
        if self.wants_release() || std::mem::take(&mut self.look_due) {
            self.recheck = false;
            self.held.release(stopped, &mut self.released);
        }
        self.looked(now);
        &self.released
    }

    /// Whether an event since the last release asks for one now (rather than at the
    /// next periodic look).
    fn wants_release(&self) -> bool {
        self.recheck && !self.held.is_empty()
    }

    /// The driver looked at the slowpath at `now`: with frames held and no look due, the
    /// next is [`RECHECK`] from now. A look already due stays, even once nothing is held.
    fn looked(&mut self, now: Time) {
        if !self.held.is_empty() && self.next_look.is_none() {
            self.next_look = Some(now + RECHECK);
        }
    }

    /// When the slowpath next wants [`Slowpath::handle_timeout`] without an event, if at all.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.next_look
    }

    /// Frames held now.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Every held frame, whatever its egress's state (at shutdown).
    pub fn drain(&mut self) -> Vec<HeldFrame> {
        self.held.drain()
    }

    /// What `ctl deadlocks` answers.
    pub fn deadlocks(&self) -> DeadlockReport {
        DeadlockReport {
            switch: self.switch.clone(),
            deadlocks: self.deadlocks.iter().cloned().collect(),
            deadlocks_forgotten: self.deadlocks_forgotten,
            recent_forwards: self.forwards.iter().cloned().collect(),
        }
    }
}

/// What the dataplane tells the slowpath.
#[derive(Clone, Debug, PartialEq)]
pub enum ToSlowpath {
    /// A frame for a blocked egress, to hold.
    Held(HeldFrame),
    /// `port` was unblocked: what is held for it may go (as its pauses allow).
    Unblocked {
        /// The port.
        port: PortId,
    },
    /// A pause on egress `from` brought another switch's checking message `msg`, which
    /// ingress `to` passes upstream on its next pause (for the slowpath's record of forwards).
    CheckForwarded {
        /// The egress whose pause brought the message.
        from: PortId,
        /// The ingress that passes it upstream.
        to: PortId,
        /// The message.
        msg: CheckingMessage,
    },
    /// This switch's own checking message came back: a new deadlock.
    Deadlock(DeadlockEvent),
    /// An own message came back again over a known cycle.
    /// Own message `id` came back again at `at_ns` over a known cycle.
    Confirmed {
        /// The deadlock ([`DeadlockEvent::id`]).
        id: u64,
        /// When the message came back (monotonic clock, ns).
        at_ns: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priorities::names::*;

    fn frame(id: u32, ingress: usize, egress: usize, prio: Priority) -> HeldFrame {
        HeldFrame { id: FrameId(id), len: 100, ingress: PortId::new(ingress), egress: PortId::new(egress), prio }
    }

    #[test]
    fn held_frames_are_looked_at_again_a_recheck_after_the_first_look_that_found_them() {
        let mut s = Slowpath::new("sw1", vec!["p0".into(), "p1".into()], 16);
        let t0 = Time::from_millis(5);
        let (paused, free) = (|_| Priorities::ALL, |_| Priorities::NONE);
        assert!(s.poll_released(t0, free).is_empty());
        assert_eq!(s.poll_timeout(), None, "nothing held: no look due");
        s.handle_event(ToSlowpath::Held(frame(1, 0, 1, P3)));
        assert!(s.poll_released(t0, free).is_empty(), "no unblock and no look due: nothing goes yet");
        assert_eq!(s.poll_timeout(), Some(t0 + RECHECK));
        // Later calls leave the look due alone.
        assert!(s.poll_released(t0 + RECHECK / 2, free).is_empty());
        assert_eq!(s.poll_timeout(), Some(t0 + RECHECK));
        s.handle_timeout(t0 + RECHECK - Duration::from_nanos(1));
        assert_eq!(s.poll_timeout(), Some(t0 + RECHECK), "not a ns early");
        s.handle_timeout(t0 + RECHECK);
        assert_eq!(s.poll_timeout(), None, "taken: the release is owed");
        assert!(s.poll_released(t0 + RECHECK, paused).is_empty(), "looked, but its egress is paused");
        assert_eq!(s.poll_timeout(), Some(t0 + RECHECK * 2), "still held: another look");
        s.handle_timeout(t0 + RECHECK * 2);
        assert_eq!(s.poll_released(t0 + RECHECK * 2, free).len(), 1);
        assert_eq!(s.poll_timeout(), None, "nothing held: none after it");
    }

    #[test]
    fn hold_then_unblock_releases_in_order() {
        let mut s = HeldFrames::new(3, 16);
        for id in 0..4 {
            s.hold(frame(id, 0, 2, P3));
        }
        s.hold(frame(9, 1, 2, P3));
        let mut out = Vec::new();
        let blocked = |e: PortId| if e.index() == 2 { Priorities::ALL } else { Priorities::NONE };
        s.release(blocked, &mut out);
        assert!(out.is_empty(), "nothing goes while the egress is blocked");
        s.release(|_| Priorities::NONE, &mut out);
        let ids: Vec<u32> = out.iter().map(|f| f.id.0).collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 9]);
        assert!(s.is_empty());
    }

    #[test]
    fn paused_priorities_stay_held() {
        let mut s = HeldFrames::new(2, 16);
        s.hold(frame(1, 0, 1, P3));
        s.hold(frame(2, 0, 1, P4));
        s.hold(frame(3, 0, 1, P3));
        let mut out = Vec::new();
        // Priority 4 is paused at egress 1.
        s.release(|e| if e == PortId::new(1) { Priorities::only(P4) } else { Priorities::NONE }, &mut out);
        let ids: Vec<u32> = out.iter().map(|f| f.id.0).collect();
        assert_eq!(ids, vec![1, 3], "frame 2 is still held");
        assert_eq!(s.held_for(PortId::new(1)), 1);
        out.clear();
        s.release(|_| Priorities::NONE, &mut out);
        assert_eq!(out[0].id.0, 2);
    }

    #[test]
    fn drain_returns_everything() {
        let mut s = Slowpath::new("sw", vec!["a".into(), "b".into()], 4);
        s.handle_event(ToSlowpath::Held(frame(1, 0, 1, P3)));
        s.handle_event(ToSlowpath::Unblocked { port: PortId::new(1) });
        assert_eq!(s.poll_released(Time::ZERO, |_| Priorities::ALL).len(), 0);
        assert_eq!(s.drain().len(), 1);
        assert_eq!(s.held(), 0);
    }

    fn deadlock(id: u64) -> DeadlockEvent {
        DeadlockEvent {
            id,
            detected_ns: id * 10,
            origin_port: 0,
            return_port: 1,
            message: CheckingMessage {
                origin_switch: 7,
                origin_port: 0,
                seq: id as u32,
                hops: 3,
                prios: Priorities::only(P3),
            },
            path_length: 3,
            confirmations: 0,
            last_seen_ns: 0,
            resolved: false,
        }
    }

    #[test]
    fn a_flood_of_deadlocks_keeps_the_latest_and_counts_the_rest() {
        let mut s = Slowpath::new("sw", vec!["a".into(), "b".into()], 4);
        for id in 1..=DEADLOCK_LOG as u64 + 10 {
            let new = s.handle_event(ToSlowpath::Deadlock(deadlock(id))).expect("a new deadlock is returned");
            assert_eq!((new.origin_port_name.as_str(), new.return_port_name.as_str()), ("a", "b"));
        }
        s.handle_event(ToSlowpath::Confirmed { id: DEADLOCK_LOG as u64 + 10, at_ns: 99 });
        let report = s.deadlocks();
        assert_eq!(report.deadlocks.len(), DEADLOCK_LOG);
        assert_eq!(report.deadlocks_forgotten, 10);
        assert_eq!(report.deadlocks[0].event.id, 11, "the oldest went first");
        assert_eq!(report.deadlocks.last().unwrap().event.confirmations, 1);
    }

    #[test]
    fn an_unblock_releases_at_once_what_is_held_even_if_it_came_before_the_frames() {
        let mut s = Slowpath::new("sw", vec!["a".into(), "b".into()], 4);
        let free = |_| Priorities::NONE;
        s.handle_event(ToSlowpath::Unblocked { port: PortId::new(1) });
        assert!(s.poll_released(Time::ZERO, free).is_empty(), "nothing held");
        s.handle_event(ToSlowpath::Held(frame(1, 0, 1, P3)));
        assert_eq!(s.poll_released(Time::ZERO, free).len(), 1, "the unblock still stands");
        s.handle_event(ToSlowpath::Held(frame(2, 0, 1, P3)));
        assert!(s.poll_released(Time::ZERO, free).is_empty(), "taken by the release before");
    }
}
