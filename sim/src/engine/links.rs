//! Links: serializing frames onto the wire and their arrival at the far end.

use super::*;

impl Sim<'_> {
    /// Puts frame `buf` of `len` bytes (a pause frame or not) on `port`'s link. The frame
    /// itself is not read here unless a capture records it: a frame that waited in a queue
    /// is seldom still in the cache, and its arrival at the link's far end, a few hundred
    /// events later, is the first to need it. So the cache is asked for it now, and that
    /// wait overlaps the events in between.
    pub(super) fn send(&mut self, port: FabricPort, buf: u32, len: usize, pause: bool) {
        self.arena.prefetch(buf);
        let spec = &self.fabric.ports[port];
        let wire = spec.speed.wire_time(len);
        self.ports[port].busy = true;
        let p = &mut self.link_counts[port];
        p.tx_frames += 1;
        p.tx_bytes += len as u64;
        if pause {
            p.pause_frames += 1;
        }
        let epoch = self.ports[spec.peer].epoch;
        self.counts.frame_hops += 1;
        let done = self.at(self.now + wire, Ev::TxDone { port });
        if self.trace.captures(port) {
            let order = (self.current, done);
            self.trace.capture(port, since_epoch(self.now), order, self.arena.head(buf), len);
        }
        self.at(self.now + wire + spec.propagation, Ev::Arrive { port: spec.peer, buf, epoch });
    }

    pub(super) fn arrive(&mut self, port: FabricPort, buf: u32, epoch: u32) {
        if self.ports[port].epoch != epoch || !self.ports[port].up {
            self.link_counts[self.fabric.ports[port].peer].lost_link_down += 1;
            self.arena.give(buf);
            return;
        }
        if is_mac_control(self.arena.head(buf)) {
            self.note_pause(port, buf);
        }
        match self.fabric.ports[port].owner {
            Owner::Switch(sw, local) => self.switch_rx(sw, local, buf),
            Owner::Host(h) => self.host_rx(h, buf),
        }
    }

    /// Records in `port`'s timeline the pause a frame arriving there asks for.
    pub(super) fn note_pause(&mut self, port: FabricPort, buf: u32) {
        let spec = &self.fabric.ports[port];
        let Ok(frame) = pfc::decode(self.arena.head(buf), spec.mac) else { return };
        let at = since_epoch(self.now);
        let tl: &mut PauseTimeline = self.trace.timeline(port);
        match frame.body {
            MacControl::Pfc(p) => {
                for (prio, quanta) in p.classes() {
                    tl.pause(prio, at, ns(spec.speed.quanta_duration(quanta)));
                }
            }
            MacControl::Pause { quanta } => {
                for prio in Priority::all() {
                    tl.pause(prio, at, ns(spec.speed.quanta_duration(quanta)));
                }
            }
        }
    }

    pub(super) fn try_tx(&mut self, port: FabricPort) {
        if self.ports[port].busy || !self.ports[port].up {
            return;
        }
        match self.fabric.ports[port].owner {
            Owner::Switch(sw, local) => self.switch_tx(sw, local, port),
            Owner::Host(h) => self.host_tx(h, port),
        }
    }

    pub(super) fn wake(&mut self, port: FabricPort, at: Time) {
        let at = at.max(self.now + Duration::from_nanos(1));
        if at < self.ports[port].wake_at {
            self.ports[port].wake_at = at;
            self.at(at, Ev::Wake { port });
            if let Owner::Switch(sw, _) = self.fabric.ports[port].owner {
                let s = &mut self.switches[sw];
                s.earliest_wake = s.earliest_wake.min(at);
            }
        }
    }
}
