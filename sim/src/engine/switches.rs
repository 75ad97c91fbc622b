//! Switches: frames into the engine, frames out of it, and the slowpath's round trip.
//!
//! The engine's turn ([`pfcswitch_core::Switch::poll`]) in steps, each at its port's
//! instant: a frame is handled when it arrives ([`Sim::switch_rx`]), a port's timers run
//! just before it sends ([`Sim::switch_tx`]), and the events for the slowpath leave after
//! either ([`Sim::after_switch`]). Why not `poll`: a turn over all of a switch's ports at
//! every event would decide for a port at another port's instant (its module says more).

use super::*;

impl Sim<'_> {
    pub(super) fn switch_rx(&mut self, sw: SwitchIx, local: PortId, buf: u32) {
        let s = &mut self.switches[sw];
        let Some(id) = s.slots.take(buf) else {
            s.rx_no_frame[local.index()] += 1;
            self.arena.give(buf);
            return;
        };
        let mut pool = Pool { slots: &mut s.slots, arena: &mut self.arena };
        s.switch.handle_frame(self.now, &mut pool, local, FrameId(id));
        self.after_switch(sw);
    }

    pub(super) fn switch_tx(&mut self, sw: SwitchIx, local: PortId, port: FabricPort) {
        let now = self.now;
        let s = &mut self.switches[sw];
        let mut pool = Pool { slots: &mut s.slots, arena: &mut self.arena };
        // The port's steps 3 and 4: its timers, then one frame (the wire takes it whole
        // before the port looks again).
        self.batch.reset(1);
        s.switch.handle_port_timeout(now, &mut pool, local);
        s.switch.poll_transmit(now, &mut pool, local, &mut self.batch);
        if let Some(f) = self.batch.frames().first().copied() {
            let buf = s.slots.give(f.id.0);
            if let Some(trigger) = f.xoff_trigger {
                s.switch.record_pause_sent(trigger, now);
            }
            self.send(port, buf, f.len as usize, f.pause);
        } else if let Some(w) = s.switch.poll_port_timeout(now, local) {
            self.wake(port, w);
        }
        // What it sent may have given other ports something to send: a frame that left
        // released its ingress group, which may owe its upstream a resume now. The
        // switch's loop would send that on its next turn, so the other ports look now,
        // as after an arrival.
        let ready = self.switches[sw].switch.poll_ready_ports();
        self.try_idle(sw, ready.iter().filter(|&l| l != local));
    }

    /// Switch `sw`'s ports `locals` (its own numbering) that are idle send what they may.
    pub(super) fn try_idle(&mut self, sw: SwitchIx, locals: impl Iterator<Item = PortId>) {
        let ports = &self.fabric.switches[sw].ports;
        for local in locals {
            let port = ports[local.index()];
            if !self.ports[port].busy {
                self.try_tx(port);
            }
        }
    }

    /// After the switch took input: events to its slowpath, and every idle port that may
    /// have something new to send sends, as the switch's loop would find it on its next
    /// turn. Those are the ports the engine marked ready, and those whose timer is due at
    /// this very time but comes later in the queue; any other idle port would find
    /// nothing (it was looked at when it last went idle), so it is not asked again:
    /// asking every port made each arrival cost as much as the switch has ports.
    pub(super) fn after_switch(&mut self, sw: SwitchIx) {
        self.switches[sw].switch.handle_switch_timeout(self.now);
        self.pass_to_slowpath(sw);
        let ready = self.switches[sw].switch.poll_ready_ports();
        let fabric = self.fabric;
        let ports = &fabric.switches[sw].ports;
        if self.switches[sw].earliest_wake > self.now {
            // No timer of this switch is due: only the ready ports (usually one or two,
            // in a switch of dozens) need a look.
            self.try_idle(sw, ready.iter());
            return;
        }
        for (local, &port) in ports.iter().enumerate() {
            let p = &self.ports[port];
            if !p.busy && (ready.contains(PortId::new(local)) || p.wake_at <= self.now) {
                self.try_tx(port);
            }
        }
        let earliest = ports.iter().map(|&p| self.ports[p].wake_at).min().unwrap_or(Time::MAX);
        self.switches[sw].earliest_wake = earliest;
    }

    pub(super) fn pass_to_slowpath(&mut self, sw: SwitchIx) {
        let at = self.now + self.slowpath_delay;
        let s = &mut self.switches[sw];
        let was_empty = s.slow_in.is_empty();
        let mut any = false;
        let mut pool = Pool { slots: &mut s.slots, arena: &mut self.arena };
        s.switch.poll_slowpath(&mut pool, |ev| {
            s.slow_in.push_back((at, ev));
            any = true;
            Ok(())
        });
        if any && was_empty {
            self.at(at, Ev::SlowIn { sw });
        }
    }

    pub(super) fn slow_in(&mut self, sw: SwitchIx) {
        let now = self.now;
        let s = &mut self.switches[sw];
        while s.slow_in.front().is_some_and(|(at, _)| *at <= now) {
            let (_, ev) = s.slow_in.pop_front().expect("checked");
            s.slowpath.handle_event(ev);
        }
        if let Some(&(at, _)) = s.slow_in.front() {
            self.at(at, Ev::SlowIn { sw });
        }
        self.slow_look(sw);
    }

    /// The slowpath's look after its events or its timeout: what it releases goes back
    /// to the switch a CPU delay later, and a look it now wants is scheduled.
    pub(super) fn slow_look(&mut self, sw: SwitchIx) {
        let now = self.now;
        let at = self.now + self.slowpath_delay;
        let s = &mut self.switches[sw];
        let was_empty = s.slow_out.is_empty();
        let switch = &s.switch;
        let released = s.slowpath.poll_released(now, |e| switch.stopped(now, e));
        let any = !released.is_empty();
        for r in released {
            s.slow_out.push_back((at, *r));
        }
        if any && was_empty {
            self.at(at, Ev::SlowOut { sw });
        }
        let s = &mut self.switches[sw];
        let look = s.slowpath.poll_timeout();
        if look != s.slow_look {
            s.slow_look = look;
            if let Some(at) = look {
                self.at(at, Ev::SlowTick { sw });
            }
        }
    }

    pub(super) fn slow_out(&mut self, sw: SwitchIx) {
        let now = self.now;
        let s = &mut self.switches[sw];
        let mut pool = Pool { slots: &mut s.slots, arena: &mut self.arena };
        let due = std::iter::from_fn(|| match s.slow_out.front() {
            Some(&(at, _)) if at <= now => s.slow_out.pop_front().map(|(_, f)| f),
            _ => None,
        });
        s.switch.handle_released(now, &mut pool, due);
        if let Some(&(at, _)) = s.slow_out.front() {
            self.at(at, Ev::SlowOut { sw });
        }
        self.after_switch(sw);
    }
}
