//! DCFIT deadlock detection: checking messages ride in the pause frames; a switch that
//! gets its own message back has found a cycle of pauses — a PFC deadlock.
//!
//! # Storing
//! A port that receives a pause carrying a checking message stores it: one per port, a
//! newer one replaces the older, a resume on that port (a frame resuming every class it
//! names) clears it. The slowpath then looks up the traffic map for the ingress ports with
//! traffic waiting on that port, and asks each one whose upstream this switch is pausing
//! to forward the message on its next pause frame.
//!
//! # Forward or originate
//! Every pause frame the switch sends on ingress port `i` (an XOFF or a refresh) is built
//! with one of: a forwarded message, a new message, or none. The rule:
//!
//! 1. A message the slowpath queued for `i` is forwarded (hop count + 1).
//! 2. Otherwise, look at where `i`'s waiting traffic waits: the egress ports in `i`'s
//!    row of the traffic map. If none of them is itself paused by its downstream, nothing
//!    downstream is holding this traffic back: the cause is local (congestion at a port's
//!    line rate, a blocked port) and this switch **originates** a new message (its id,
//!    port `i`, the next sequence number).
//! 3. If some are paused downstream, the pause is a consequence of theirs: forward the
//!    message stored on one of them. If they have none yet, send a plain pause — the
//!    downstream switch's message arrives with its next pause and is forwarded then.
//! 4. One exception: if the downstream pause is on a port where this switch's own message
//!    already came back (a cycle it detected), it originates again, so the cycle keeps
//!    being confirmed while it lasts.
//!
//! Why: a chain of pauses has exactly one local cause at its head — the initial trigger —
//! and every other pause in it is caused by the next one downstream. Originating only at
//! local causes and forwarding everywhere else means a message travels upstream from the
//! trigger along the chain. In a line it leaves the network at a host and is never seen
//! again; in a cycle it comes back to the switch that created it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::checking::CheckingMessage;
use super::time::Time;

/// How long after a detection the same cycle counts as still the same deadlock.
pub const CYCLE_MEMORY: Duration = Duration::from_secs(1);

/// What goes in a pause frame being built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckChoice {
    Forward(CheckingMessage),
    Originate,
    Plain,
}

/// Checking-message state of one port.
#[derive(Clone, Copy, Debug, Default)]
pub struct PortChecks {
    /// The last message received in a pause on this port (it is an egress here).
    pub stored: Option<CheckingMessage>,
    /// A message to forward on this port's next pause (it is an ingress here).
    pub to_forward: Option<CheckingMessage>,
    /// This switch's own message came back on this port.
    pub in_cycle: bool,
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
}

/// The rule above. `waiting_on`: egress ports where ingress `i`'s traffic waits;
/// `downstream_paused`: egress ports paused by their downstream for the priorities at
/// stake; `ports`: every port's state (`ports[i]` is the ingress).
pub fn choose(i: usize, waiting_on: u64, downstream_paused: u64, ports: &mut [PortChecks]) -> CheckChoice {
    if let Some(m) = ports[i].to_forward.take() {
        return CheckChoice::Forward(m);
    }
    let causes = waiting_on & downstream_paused;
    if causes == 0 {
        return CheckChoice::Originate;
    }
    let mut stored = None;
    for (e, p) in ports.iter().enumerate() {
        if causes & (1 << e) == 0 {
            continue;
        }
        if p.in_cycle {
            return CheckChoice::Originate;
        }
        stored = stored.or(p.stored);
    }
    match stored {
        Some(m) => CheckChoice::Forward(m.forwarded()),
        None => CheckChoice::Plain,
    }
}

impl CheckingMessage {
    /// The message as the next hop upstream sees it.
    pub fn forwarded(self) -> CheckingMessage {
        CheckingMessage { hops: self.hops.saturating_add(1), ..self }
    }
}

/// A detected cycle of pauses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlockEvent {
    pub id: u64,
    /// When the own message came back (monotonic clock, ns).
    pub detected_ns: u64,
    /// The port this switch paused when it created the message.
    pub origin_port: usize,
    /// The port the message came back on: the egress paused by the cycle.
    pub return_port: usize,
    pub message: CheckingMessage,
    /// Pause hops around the cycle (switches on it).
    pub path_length: u16,
    /// Later returns of own messages over the same ports while the cycle lasted.
    pub confirmations: u64,
    pub last_seen_ns: u64,
    /// The lossless queue on the return port was dropped to break the cycle.
    pub resolved: bool,
}

/// Turns returns of own messages into deadlock events, one per cycle.
#[derive(Debug, Default)]
pub struct DeadlockTracker {
    next_id: u64,
    active: Vec<(usize, usize, u64, Time)>,
}

impl DeadlockTracker {
    /// An own message came back on `port` at `now`. A new cycle yields an event; a cycle
    /// seen within [`CYCLE_MEMORY`] only counts as a confirmation (returned as `Err(id)`).
    pub fn observe(&mut self, now: Time, port: usize, msg: CheckingMessage) -> Result<DeadlockEvent, u64> {
        let origin = usize::from(msg.origin_port);
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

    fn msg(origin: u32, port: u16, seq: u32) -> CheckingMessage {
        CheckingMessage { origin_switch: origin, origin_port: port, seq, hops: 0 }
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
        // Ingress 0's traffic waits on egress 2, which is not paused: congestion or a
        // blocked port here. Originate.
        assert_eq!(choose(0, 0b100, 0, &mut ports), CheckChoice::Originate);
        // Egress 2 is paused downstream but no message came with it yet: plain pause.
        assert_eq!(choose(0, 0b100, 0b100, &mut ports), CheckChoice::Plain);
        // With a stored message there: forward it, one hop further.
        ports[2].stored = Some(msg(7, 1, 9));
        let expected = CheckingMessage { hops: 1, ..msg(7, 1, 9) };
        assert_eq!(choose(0, 0b100, 0b100, &mut ports), CheckChoice::Forward(expected));
        // Traffic waiting on a paused and on an unpaused egress: the paused one holds it.
        assert_eq!(choose(0, 0b110, 0b100, &mut ports), CheckChoice::Forward(expected));
        // What the slowpath queued wins, once.
        ports[0].to_forward = Some(msg(3, 3, 3));
        assert_eq!(choose(0, 0b100, 0b100, &mut ports), CheckChoice::Forward(msg(3, 3, 3)));
        assert_eq!(choose(0, 0b100, 0b100, &mut ports), CheckChoice::Forward(expected));
        // A detected cycle keeps originating.
        ports[2].in_cycle = true;
        assert_eq!(choose(0, 0b100, 0b100, &mut ports), CheckChoice::Originate);
    }

    #[test]
    fn own_messages_make_one_event_per_cycle() {
        let mut t = DeadlockTracker::default();
        let t0 = Time::from_millis(10);
        let back = CheckingMessage { hops: 2, ..msg(5, 1, 1) };
        let ev = t.observe(t0, 2, back).unwrap();
        assert_eq!((ev.id, ev.origin_port, ev.return_port, ev.path_length), (1, 1, 2, 3));
        assert_eq!(t.observe(t0 + Duration::from_millis(5), 2, back), Err(1), "same cycle: a confirmation");
        // Another cycle through other ports is another event.
        assert_eq!(t.observe(t0 + Duration::from_millis(6), 0, back).unwrap().id, 2);
        // The same ports long after the cycle was last seen: a new deadlock.
        let later = t0 + CYCLE_MEMORY + Duration::from_millis(100);
        assert_eq!(t.observe(later, 2, back).unwrap().id, 3);
    }
}
