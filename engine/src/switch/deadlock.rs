//! DCFIT orchestration: which checking message a pause frame carries (originate,
//! forward or none), what a received one means (forward upstream, a deadlock, stale),
//! and the resolution when a cycle is confirmed. The decisions themselves are
//! [`crate::dcfit`]'s; this is where the switch's state meets them.

use std::time::Duration;

use crate::checking::CheckingMessage;
use crate::config::DeadlockResolution;
use crate::dcfit::{self, Cause, CheckChoice};
use crate::ports::PortId;
use crate::priorities::Priorities;
use crate::priorities::PRIORITIES;
use crate::ring::Ring;
use crate::slowpath::ToSlowpath;
use crate::time::Time;

use super::Switch;

/// Own checking messages remembered per port: more than are in flight around a cycle.
const ORIGINATED: usize = 16;

/// A checking message this switch originated: when, and for which paused groups.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Originated {
    pub(super) seq: u32,
    pub(super) at: Time,
    pub(super) groups: Priorities,
}

/// What DCFIT remembers of a port.
#[derive(Debug, Default)]
pub(super) struct PortDcfit {
    /// The latest messages originated on this port since it last stopped pausing its
    /// upstream (emptied when the pausing stops): a returning message not among them no
    /// longer proves a standing cycle; one among them is judged by the groups it left for
    /// and what moved since. Its messages are out of line (the ring's own): written once
    /// per pause frame, while `departed` and `deadlock_drop` are read or written for
    /// every frame.
    pub(super) originated: Ring<Originated, ORIGINATED>,
    /// Per ingress group: when a frame charged to it last left the switch.
    pub(super) departed: [Option<Time>; PRIORITIES],
    /// Deadlock resolution: drop these priorities' frames for this egress until then.
    /// Kept after it ended (every reader compares the end with `now`); the next window
    /// replaces it.
    pub(super) deadlock_drop: Option<(Time, Priorities)>,
}

impl Switch {
    /// Records that a message with `seq` was originated on `port` (as pause frames do;
    /// for tests that stage a cycle without sending the pause that started it).
    #[cfg(test)]
    pub(crate) fn note_originated(&mut self, port: PortId, seq: u32, groups: Priorities) {
        self.check_seq = self.check_seq.max(seq);
        self.remember_originated(port, seq, groups);
    }

    fn remember_originated(&mut self, port: PortId, seq: u32, groups: Priorities) {
        let p = &mut self.ports[port];
        p.dcfit.originated.push(Originated { seq, at: self.clock, groups });
    }

    /// The egress queues at `egress` that frames of `ingress` charged to
    /// `groups` wait in: the same priorities, or under a Tagger table their new tags'.
    fn egress_queues(&self, ingress: PortId, groups: Priorities, egress: PortId) -> Priorities {
        self.tags.as_ref().map_or(groups, |t| t.egress_queues(ingress, groups, egress))
    }

    /// Of `groups` (priorities `ingress` pauses its upstream for), those whose traffic
    /// waits at `egress` in one of `queues`: DCFIT follows a pause only
    /// through the queue the paused traffic actually waits in.
    pub(super) fn groups_waiting_in(
        &self,
        ingress: PortId,
        groups: Priorities,
        egress: PortId,
        queues: Priorities,
    ) -> Priorities {
        if ingress == egress || !self.map.row(ingress).contains(egress) {
            return Priorities::NONE;
        }
        groups
            .iter()
            .filter(|&g| !(self.egress_queues(ingress, Priorities::only(g), egress) & queues).is_empty())
            .collect()
    }

    /// A PFC frame on `port` (an egress, seen from the traffic it carries) brought `msg`.
    /// `paused`: the lossless priorities the frame pauses (none: it resumes them all).
    pub(super) fn on_checking(&mut self, now: Time, port: PortId, msg: Option<CheckingMessage>, paused: Priorities) {
        let resumes_all = paused.is_empty();
        let Some(mut msg) = msg.filter(|_| !resumes_all) else {
            self.port_checks[port].on_pause(None, resumes_all);
            return;
        };
        if msg.prios.is_empty() {
            // From a sender that does not name priorities: all those its pause stops.
            msg.prios = paused;
        }
        self.ports[port].checks.received += 1;
        if msg.origin_switch != self.switch_id {
            self.port_checks[port].on_pause(Some(msg), false);
            // Passed on upstream by every ingress whose paused traffic waits here in one of
            // the queues this message follows, on its next pause.
            for i in PortId::all(self.ports.len()) {
                let groups = self.groups_waiting_in(i, self.xoff(i), port, msg.prios);
                if !groups.is_empty() {
                    let forwarded = msg.forwarded(groups);
                    self.port_checks[i].to_forward = Some(forwarded);
                    self.outbox.push(ToSlowpath::CheckForwarded { from: port, to: i, msg: forwarded });
                }
            }
            return;
        }
        // Our own message came back. It proves a standing cycle of pauses only if the port
        // it left through has kept pausing its upstream ever since (temporal consistency):
        // otherwise the chain it travelled was broken behind it. And only if the groups
        // it left for wait in a queue paused here: a message that came back through
        // another group's or another priority's pauses closed no cycle of buffers.
        self.ports[port].checks.own_returned += 1;
        // The port it names is read off the wire: it may be none of ours.
        let origin = PortId::checked(usize::from(msg.origin_port)).filter(|o| o.index() < self.ports.len());
        let sent = origin.and_then(|o| self.ports[o].dcfit.originated.iter().find(|m| m.seq == msg.seq).copied());
        let waiting = match (origin, sent) {
            (Some(o), Some(m)) => self.groups_waiting_in(o, m.groups & self.xoff(o), port, msg.prios),
            _ => Priorities::NONE,
        };
        let (Some(origin), Some(sent)) = (origin, sent.filter(|_| !waiting.is_empty())) else {
            self.ports[port].checks.stale_returns += 1;
            // The chain it travelled broke behind it, yet pauses still lead round to this
            // port. If the port pauses its upstream again, a cycle may have formed since
            // (with no local cause left anywhere to originate a message, only the old one
            // would go round for ever): its next pause carries a fresh message.
            if let Some(origin) = origin {
                let xoff = self.xoff(origin);
                self.port_checks[origin].retry |= xoff;
            }
            return;
        };
        // A cycle of pauses is a deadlock only if nothing in it moves. Around a ring at
        // line rate every hop pauses the next now and then while all of them still drain
        // (into their hosts), and a message can come all the way round such a cycle.
        // So: if traffic of the waiting groups left this switch since the message did,
        // the cycle drains; the port sends a fresh message with its next pause, and in a
        // deadlock that one finds everything still.
        let o = &self.ports[origin];
        if !waiting.iter().any(|g| o.dcfit.departed[g].is_none_or(|left| left < sent.at)) {
            self.ports[port].checks.draining_returns += 1;
            self.port_checks[origin].retry |= waiting;
            return;
        }
        self.port_checks[port].in_cycle = true;
        let resolved = self.resolve(now, port);
        match self.tracker.observe(now, port, msg) {
            Ok(mut event) => {
                self.deadlocks += 1;
                event.resolved = resolved;
                self.outbox.push(ToSlowpath::Deadlock(event));
            }
            Err(id) => self.outbox.push(ToSlowpath::Confirmed { id, at_ns: now.as_nanos() }),
        }
    }

    /// With `resolution = "drop"`, empties the lossless queues the cycle stopped on `port`
    /// for `drop_ms` (frames queued, held by the slowpath, or arriving), as a PFC
    /// watchdog would. Re-armed each time the cycle is seen again after a window ended.
    fn resolve(&mut self, now: Time, port: PortId) -> bool {
        if self.dcfit.resolution != DeadlockResolution::Drop {
            return false;
        }
        let p = &mut self.ports[port];
        if p.dcfit.deadlock_drop.is_none_or(|(until, _)| now >= until) {
            let prios = p.tx.pause.paused(now) & self.lossless;
            p.dcfit.deadlock_drop = Some((now + Duration::from_millis(self.dcfit.drop_ms), prios));
        }
        true
    }

    /// The checking message a pause for `prios` sent on `port` carries (see
    /// [`crate::dcfit`] for the rule).
    pub(super) fn checking_for(&mut self, now: Time, port: PortId, prios: Priorities) -> Option<CheckingMessage> {
        let mut causes = [Cause::default(); 64];
        let mut n = 0;
        for e in PortId::all(self.ports.len()) {
            let paused = self.ports[e].tx.pause.paused(now);
            let groups = self.groups_waiting_in(port, prios, e, paused);
            if !groups.is_empty() {
                causes[n] = Cause { port: e, groups, queues: paused & self.egress_queues(port, groups, e) };
                n += 1;
            }
        }
        let choice = dcfit::choose(port, prios, &causes[..n], &mut self.port_checks);
        let counters = &mut self.ports[port].checks;
        match choice {
            CheckChoice::Forward(m) => {
                counters.forwarded += 1;
                Some(m)
            }
            CheckChoice::Originate(groups) => {
                counters.originated += 1;
                let group = self.port_checks[port].take_turn(groups);
                self.check_seq = self.check_seq.wrapping_add(1);
                self.remember_originated(port, self.check_seq, group);
                Some(CheckingMessage {
                    origin_switch: self.switch_id,
                    origin_port: port.index() as u16,
                    seq: self.check_seq,
                    hops: 0,
                    prios: group,
                })
            }
            CheckChoice::Plain => None,
        }
    }
}
