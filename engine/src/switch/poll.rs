//! The turn as code: [`Switch::poll`] runs the six steps of the call order (see
//! [`crate::switch`]) over a driver's [`Ports`], as smoltcp's `Interface::poll` runs over
//! a `phy::Device`. The AF_XDP dataplane, the fuzz target, the examples and the core's
//! tests call it; what a driver adds (its rings, a capture, measuring its own stalls)
//! lives in its `Ports`.
//!
//! The simulator does not: its ports are not polled together. Each port's events (a
//! frame arriving, its wire free again, a timer) come at their own nanosecond, and the
//! engine's decisions for one port must be made at that port's instant, not at the
//! next turn over the whole switch. So it calls a turn's steps per port
//! ([`Switch::handle_frame`] at an arrival; [`Switch::handle_port_timeout`] then
//! [`Switch::poll_transmit`] when a port may send; [`Switch::poll_slowpath`] after
//! either), in the same order for that port (`sim/src/engine/switches.rs`).

use super::{Switch, TxBatch, TxFrame};
use crate::pfcwd::WatchdogEvent;
use crate::pool::FramePool;
use crate::ports::PortId;
use crate::priorities::Priorities;
use crate::queue::FrameId;
use crate::slowpath::{HeldFrame, ToSlowpath};
use crate::time::Time;

/// A driver's side of [`Switch::poll`]: its ports' rings and the way to its slowpath,
/// called in the turn's order. Generic, so that nothing is dispatched dynamically per
/// frame, and with nothing to allocate.
pub trait Ports<P: FramePool> {
    /// Step 1: the frames the slowpath released by `now` since the last turn, in the
    /// order it released them.
    fn released(&mut self, now: Time) -> impl Iterator<Item = HeldFrame>;

    /// Step 2: hands each frame received on `port` (whose link is up) to `frame`, as many
    /// as the driver takes in one turn; returns how many.
    fn receive(&mut self, pool: &mut P, port: PortId, frame: impl FnMut(&mut P, FrameId)) -> usize;

    /// Step 4: how many frames `port` (whose link is up) may take now; `None` leaves it
    /// out of this turn's transmit (a test that looks at one port at a time). `Some(0)`
    /// still lets the switch prepare what it owes the port (its pause frames, which then
    /// lead its next batch).
    fn tx_room(&mut self, port: PortId) -> Option<usize>;

    /// Step 4: puts `frames` (perhaps none) on `port`'s ring, in order; they are the
    /// driver's from now on. Returns when the first of them went on the wire, if the
    /// driver knows: a pause frame's reaction time is measured to it.
    fn transmit(&mut self, pool: &mut P, port: PortId, frames: &[TxFrame]) -> Option<Time>;

    /// Step 5: the priorities whose held frames may not be released on `port`, as of this
    /// turn: what the slowpath's next release reads ([`Switch::stopped`]).
    fn stopped(&mut self, port: PortId, stopped: Priorities);

    /// Step 5: one event for the slowpath; `Err(ev)` gives it back (a full channel), and
    /// the switch then drops and counts what it was.
    fn to_slowpath(&mut self, ev: ToSlowpath) -> Result<(), ToSlowpath>;

    /// Step 6: what the PFC watchdog found this turn.
    fn watchdog(&mut self, ev: WatchdogEvent) {
        let _ = ev;
    }
}

/// What one turn did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Turn {
    /// Frames the slowpath gave back.
    pub released: usize,
    /// Frames received.
    pub received: usize,
    /// Frames handed to the ports' rings.
    pub sent: usize,
}

impl Turn {
    /// Frames that moved: a turn with none may sleep.
    pub fn work(&self) -> usize {
        self.released + self.received + self.sent
    }
}

impl Switch {
    /// One turn at `now`: the slowpath's releases, every port's received frames, the
    /// timers due, every port's transmit (into `batch`, then the driver's ring), the
    /// events for the slowpath and the watchdog's. Then [`Switch::poll_timeout`] says
    /// when the next turn is due without new input.
    ///
    /// Every port is served in each step before the next step starts: released frames
    /// keep their place ahead of new arrivals, and a drop window that ended or a refresh
    /// that fell due acts in the same turn's transmit.
    pub fn poll<P: FramePool>(
        &mut self,
        now: Time,
        pool: &mut P,
        ports: &mut impl Ports<P>,
        batch: &mut TxBatch,
    ) -> Turn {
        let mut turn = Turn { released: self.handle_released(now, pool, ports.released(now)), ..Turn::default() };
        let all = PortId::all(self.ports.len());
        for port in all.clone() {
            if self.link_up(port) {
                turn.received += ports.receive(pool, port, |pool, id| self.handle_frame(now, pool, port, id));
            }
        }
        self.handle_timeout(now, pool);
        for port in all.clone() {
            if !self.link_up(port) {
                continue;
            }
            let Some(room) = ports.tx_room(port) else { continue };
            batch.reset(room);
            self.poll_transmit(now, pool, port, batch);
            turn.sent += batch.frames().len();
            let on_wire = ports.transmit(pool, port, batch.frames());
            let trigger = batch.frames().iter().find_map(|f| f.xoff_trigger);
            if let (Some(trigger), Some(at)) = (trigger, on_wire) {
                self.record_pause_sent(trigger, at);
            }
        }
        for port in all {
            ports.stopped(port, self.stopped(now, port));
        }
        self.poll_slowpath(pool, |ev| ports.to_slowpath(ev));
        while let Some(ev) = self.poll_watchdog_event() {
            ports.watchdog(ev);
        }
        turn
    }
}
