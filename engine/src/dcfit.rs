//! DCFIT deadlock detection: checking messages ride in the pause frames; a switch that
//! gets its own message back has found a cycle of pauses — a PFC deadlock.
//!
//! # Priorities
//! A message follows pauses of some priorities (`prios`): a cycle of pauses is a cycle of
//! buffers only where, at every hop, the traffic of the paused ingress group waits in a
//! queue the next pause stops. Without a Tagger table that queue has the group's own
//! priority; under a table it has the priority of the tag the traffic leaves with. A
//! chain that hops from one priority's dependency to another's unrelated one closes no
//! cycle, and must not look as if it did. For the same reason the origin remembers which
//! of its groups each message left for: one that comes back through the pauses of
//! another group of the same port closed no cycle either.
//!
//! # One group per message
//! A pause frame may pause several groups of a port at once, and each group's traffic
//! may wait behind a different chain of pauses. Under a Tagger table a chain changes
//! priority where a tag is rewritten, so a message sent for groups 3 and 4 together can
//! leave along group 3's chain and come back along group 4's, and the origin would take
//! that for a cycle (seen on a busy machine: a ring made deadlock-free by its tables, and
//! a "deadlock" on it). So a message is originated for one group, and successive
//! messages on a port take its paused groups in turn.
//!
//! # Storing
//! A port that receives a pause carrying a checking message stores it: one per port, a
//! newer one replaces the older, a resume on that port (a frame resuming every class it
//! names) clears it. The switch then passes it upstream: every ingress port that pauses
//! its upstream for traffic waiting in one of the message's queues on that port forwards
//! it on its next pause frame, following the groups that wait there.
//!
//! # Forward or originate
//! Every pause frame the switch sends on ingress port `i` (an XOFF or a refresh) is built
//! with one of: a forwarded message, a new message, or none. The rule:
//!
//! 0. If `i`'s last own message came back around a cycle that still drained (see
//!    below), a new message is originated to look again.
//! 1. A message passed upstream to `i` is forwarded (hop count + 1).
//! 2. Otherwise, look at where `i`'s waiting traffic waits: the egress ports in `i`'s
//!    row of the traffic map. If at none of them a queue this traffic waits in is paused
//!    by the downstream, nothing downstream is holding it back: the cause is local
//!    (congestion at a port's line rate, a blocked port) and this switch **originates** a
//!    new message (its id, port `i`, the next sequence number, the paused priorities).
//! 3. If some are paused downstream, the pause is a consequence of theirs: forward the
//!    message stored on one of them that follows those queues. If they have none yet,
//!    send a plain pause — the downstream switch's message arrives with its next pause
//!    and is forwarded then.
//! 4. One exception: if the downstream pause is on a port where this switch's own message
//!    already came back (a cycle it detected), it originates again, so the cycle keeps
//!    being confirmed while it lasts.
//!
//! Why: a chain of pauses has exactly one local cause at its head — the initial trigger —
//! and every other pause in it is caused by the next one downstream. Originating only at
//! local causes and forwarding everywhere else means a message travels upstream from the
//! trigger along the chain. In a line it leaves the network at a host and is never seen
//! again; in a cycle it comes back to the switch that created it.
//!
//! # A cycle of pauses that drains
//! A message coming back proves that every hop paused the next at the moment it passed,
//! not that the cycle is stuck: three switches in a ring, each congested at its line
//! rate, pause each other in a circle while their buffers still drain into their hosts.
//! The origin tells the two apart by what it can see itself: in a deadlock no frame of
//! the paused traffic leaves the switch. If some left after the message was sent, it is
//! congestion, and the next pause on that port sends a fresh message; once a deadlock
//! has formed, that one comes back to a switch where nothing moved.

use crate::ports::PortId;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::checking::CheckingMessage;
use super::priorities::{Priorities, Priority};
use super::time::Time;

/// How long after a detection the same cycle counts as still the same deadlock.
pub const CYCLE_MEMORY: Duration = Duration::from_secs(1);

/// What goes in a pause frame being built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CheckChoice {
    Forward(CheckingMessage),
    /// A new message, for one of these groups (see [`PortChecks::take_turn`]).
    Originate(Priorities),
    Plain,
}

/// Checking-message state of one port.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PortChecks {
    /// The last message received in a pause on this port (it is an egress here).
    pub stored: Option<CheckingMessage>,
    /// A message to forward on this port's next pause (it is an ingress here).
    pub to_forward: Option<CheckingMessage>,
    /// This switch's own message came back on this port.
    pub in_cycle: bool,
    /// Groups whose own message came back around a cycle whose traffic still moved (or
    /// along a chain already broken): the next pause for each originates a fresh one to
    /// look again.
    pub retry: Priorities,
    /// The group the next message originated here is for, if it is among those asked.
    next_group: u8,
}

impl PortChecks {
    /// A pause arrived on this port; `resumes_all` when it resumes every class it names.
    pub fn on_pause(&mut self, msg: Option<CheckingMessage>, resumes_all: bool) {
        if resumes_all {
            self.stored = None;
            self.in_cycle = false;
        } else if let Some(m) = msg {
            self.stored = Some(m);
        }
    }

    /// Of `groups` (not empty), the one a new message is for: the first at or after the
    /// last one's successor, so that every paused group is looked at in turn.
    pub fn take_turn(&mut self, groups: Priorities) -> Priorities {
        let from = u32::from(self.next_group % 8);
        let k = (groups.bits().rotate_right(from).trailing_zeros() + from) % 8;
        self.next_group = (k as u8 + 1) % 8;
        groups & Priorities::only(Priority::new(k as u8))
    }
}

/// An egress port that holds back traffic of the pausing ingress: of the ingress groups
/// being paused, those whose traffic waits there in a queue the downstream has paused
/// (`groups`), and those paused queues (`queues`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cause {
    pub port: PortId,
    pub groups: Priorities,
    pub queues: Priorities,
}

/// The rule above for a pause of the groups `paused` sent on ingress `i`. `causes`: the
/// egress ports holding its traffic back; `ports`: every port's state (`ports[i]` is the
/// ingress).
pub(crate) fn choose(i: PortId, paused: Priorities, causes: &[Cause], ports: &mut [PortChecks]) -> CheckChoice {
    let retry = ports[i].retry & paused;
    if let Some(lowest) = retry.iter().next() {
        let group = Priorities::only(lowest);
        ports[i].retry &= !group;
        return CheckChoice::Originate(group);
    }
    if let Some(m) = ports[i].to_forward.take() {
        return CheckChoice::Forward(m);
    }
    if causes.is_empty() {
        return CheckChoice::Originate(paused);
    }
    let mut stored = None;
    for c in causes {
        let p = &ports[c.port];
        if p.in_cycle {
            return CheckChoice::Originate(c.groups);
        }
        stored = stored.or(p.stored.filter(|m| !(m.prios & c.queues).is_empty()).map(|m| m.forwarded(c.groups)));
    }
    match stored {
        Some(m) => CheckChoice::Forward(m),
        None => CheckChoice::Plain,
    }
}

impl CheckingMessage {
    /// The message as the next hop upstream sees it: one hop more, following the pauses
    /// of `groups` there.
    pub fn forwarded(self, groups: Priorities) -> CheckingMessage {
        CheckingMessage { hops: self.hops.saturating_add(1), prios: groups, ..self }
    }
}

/// A detected cycle of pauses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlockEvent {
    /// Numbers the deadlocks this switch detected, from 1.
    pub id: u64,
    /// When the own message came back (monotonic clock, ns).
    pub detected_ns: u64,
    /// The port this switch paused when it created the message.
    pub origin_port: usize,
    /// The port the message came back on: the egress paused by the cycle.
    pub return_port: usize,
    /// The own message that came back.
    pub message: CheckingMessage,
    /// Pause hops around the cycle (switches on it).
    pub path_length: u16,
    /// Later returns of own messages over the same ports while the cycle lasted.
    pub confirmations: u64,
    /// When an own message last came back over the cycle (monotonic clock, ns).
    pub last_seen_ns: u64,
    /// The lossless queue on the return port was dropped to break the cycle.
    pub resolved: bool,
}

/// Turns returns of own messages into deadlock events, one per cycle.
#[derive(Debug, Default)]
pub(crate) struct DeadlockTracker {
    next_id: u64,
    active: Vec<(usize, usize, u64, Time)>,
}

impl DeadlockTracker {
    /// An own message came back on `port` at `now`. A new cycle yields an event; a cycle
    /// seen within [`CYCLE_MEMORY`] only counts as a confirmation (returned as `Err(id)`).
    pub fn observe(&mut self, now: Time, port: PortId, msg: CheckingMessage) -> Result<DeadlockEvent, u64> {
        let (origin, port) = (usize::from(msg.origin_port), port.index());
        self.active.retain(|a| now.saturating_since(a.3) < CYCLE_MEMORY);
        if let Some(a) = self.active.iter_mut().find(|a| a.0 == origin && a.1 == port) {
            a.3 = now;
            return Err(a.2);
        }
        self.next_id += 1;
        self.active.push((origin, port, self.next_id, now));
        Ok(DeadlockEvent {
            id: self.next_id,
            detected_ns: now.as_nanos(),
            origin_port: origin,
            return_port: port,
            message: msg,
            path_length: msg.hops.saturating_add(1),
            confirmations: 0,
            last_seen_ns: now.as_nanos(),
            resolved: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priorities::names::*;

    const P3: Priorities = Priorities::only(Priority::new(3));
    const P4: Priorities = Priorities::only(Priority::new(4));
    const P34: Priorities = Priorities::from_bits(0b1_1000);

    fn msg(origin: u32, port: u16, seq: u32) -> CheckingMessage {
        CheckingMessage { origin_switch: origin, origin_port: port, seq, hops: 0, prios: P3 }
    }

    #[test]
    fn store_replace_clear() {
        let mut p = PortChecks::default();
        p.on_pause(Some(msg(1, 0, 1)), false);
        p.on_pause(Some(msg(1, 0, 2)), false);
        assert_eq!(p.stored.unwrap().seq, 2, "newer replaces older");
        p.on_pause(None, false);
        assert_eq!(p.stored.unwrap().seq, 2, "a plain pause keeps it");
        p.on_pause(None, true);
        assert_eq!(p.stored, None, "a resume clears it");
    }

    #[test]
    fn local_causes_originate_downstream_causes_forward() {
        let mut ports = [PortChecks::default(); 3];
        let at2 = [Cause { port: PortId::new(2), groups: P3, queues: P3 }];
        // Nothing holds ingress 0's traffic back downstream (its egress is not paused, or
        // not in the queues it waits in): congestion or a blocked port here. Originate.
        assert_eq!(choose(PortId::new(0), P3, &[], &mut ports), CheckChoice::Originate(P3));
        // Egress 2 is paused downstream but no message came with it yet: plain pause.
        assert_eq!(choose(PortId::new(0), P3, &at2, &mut ports), CheckChoice::Plain);
        // With a stored message there: forward it, one hop further.
        ports[2].stored = Some(msg(7, 1, 9));
        let expected = CheckingMessage { hops: 1, ..msg(7, 1, 9) };
        assert_eq!(choose(PortId::new(0), P3, &at2, &mut ports), CheckChoice::Forward(expected));
        // What the switch queued for this port wins, once.
        ports[0].to_forward = Some(msg(3, 3, 3));
        assert_eq!(choose(PortId::new(0), P3, &at2, &mut ports), CheckChoice::Forward(msg(3, 3, 3)));
        assert_eq!(choose(PortId::new(0), P3, &at2, &mut ports), CheckChoice::Forward(expected));
        // A detected cycle keeps originating.
        ports[2].in_cycle = true;
        assert_eq!(choose(PortId::new(0), P3, &at2, &mut ports), CheckChoice::Originate(P3));
    }

    #[test]
    fn a_retry_originates_for_each_group_that_asked_for_one_once() {
        let mut ports = [PortChecks::default(); 3];
        let at2 = [Cause { port: PortId::new(2), groups: P34, queues: P3 }];
        ports[0].retry = P34;
        // A frame pausing only group 4 looks again for group 4; group 3 waits its turn.
        assert_eq!(choose(PortId::new(0), P4, &at2, &mut ports), CheckChoice::Originate(P4));
        assert_eq!(choose(PortId::new(0), P34, &at2, &mut ports), CheckChoice::Originate(P3));
        assert_eq!(choose(PortId::new(0), P34, &at2, &mut ports), CheckChoice::Plain);
    }

    #[test]
    fn originated_messages_take_the_paused_groups_in_turn() {
        let mut p = PortChecks::default();
        let both = P34;
        assert_eq!([p.take_turn(both), p.take_turn(both), p.take_turn(both)], [P3, P4, P3]);
        // A group asked alone is taken, and the turn moves on from it.
        assert_eq!(p.take_turn(Priorities::only(P7)), Priorities::only(P7));
        assert_eq!(p.take_turn(both | Priorities::only(P0)), Priorities::only(P0));
        assert_eq!(p.take_turn(both | Priorities::only(P0)), P3);
    }

    #[test]
    fn a_message_is_forwarded_only_along_the_queues_it_follows() {
        let mut ports = [PortChecks::default(); 3];
        // The stored message follows priority 3's pauses; the traffic waits in queue 4.
        ports[2].stored = Some(msg(7, 1, 9));
        let in4 = [Cause { port: PortId::new(2), groups: P4, queues: P4 }];
        assert_eq!(choose(PortId::new(0), P4, &in4, &mut ports), CheckChoice::Plain);
        // Group 4 waits in queue 3 (a Tagger rewrite): the message goes on, following group 4.
        let in3 = [Cause { port: PortId::new(2), groups: P4, queues: P3 }];
        let expected = CheckingMessage { hops: 1, prios: P4, ..msg(7, 1, 9) };
        assert_eq!(choose(PortId::new(0), P4, &in3, &mut ports), CheckChoice::Forward(expected));
    }

    #[test]
    fn own_messages_make_one_event_per_cycle() {
        let mut t = DeadlockTracker::default();
        let t0 = Time::from_millis(10);
        let back = CheckingMessage { hops: 2, ..msg(5, 1, 1) };
        let ev = t.observe(t0, PortId::new(2), back).unwrap();
        assert_eq!((ev.id, ev.origin_port, ev.return_port, ev.path_length), (1, 1, 2, 3));
        assert_eq!(
            t.observe(t0 + Duration::from_millis(5), PortId::new(2), back),
            Err(1),
            "same cycle: a confirmation"
        );
        // Another cycle through other ports is another event.
        assert_eq!(t.observe(t0 + Duration::from_millis(6), PortId::new(0), back).unwrap().id, 2);
        // The same ports long after the cycle was last seen: a new deadlock.
        let later = t0 + CYCLE_MEMORY + Duration::from_millis(100);
        assert_eq!(t.observe(later, PortId::new(2), back).unwrap().id, 3);
    }
}
