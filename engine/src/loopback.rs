//! A driver with no IO for [`Switch::poll`]: rings that are queues in memory and a
//! slowpath in the same thread. For the core's tests and the fuzz target, behind the
//! `testing` feature (it allocates as it goes; a real driver's rings do not).
//!
//! Frames put on a port's rx ring ([`Loopback::receive_on`]) are received at the next
//! turn; what the ports send is kept in order ([`Loopback::take_sent`]), the caller's to
//! look at and free. The switch's events go to the [`Slowpath`] if there is one, and are
//! kept for the caller otherwise ([`Loopback::take_events`]).
//!
//! [`Switch::poll`]: crate::switch::Switch::poll

use std::collections::VecDeque;

use crate::pfcwd::WatchdogEvent;
use crate::pool::FramePool;
use crate::ports::PortId;
use crate::priorities::Priorities;
use crate::queue::FrameId;
use crate::slowpath::{HeldFrame, Slowpath, ToSlowpath};
use crate::switch::{Ports, TxFrame};
use crate::time::Time;

/// Rings in memory and a slowpath beside them.
#[derive(Debug)]
pub struct Loopback {
    rx: Vec<VecDeque<FrameId>>,
    room: Vec<Option<usize>>,
    sent: Vec<(PortId, TxFrame)>,
    stopped: Vec<Priorities>,
    slowpath: Option<Slowpath>,
    events: Vec<ToSlowpath>,
    watchdog: VecDeque<WatchdogEvent>,
    refuse_held: bool,
}

impl Loopback {
    /// `ports` rings, each taking up to `room` frames a turn, and `slowpath` (or none:
    /// the events are kept).
    pub fn new(ports: usize, room: Option<usize>, slowpath: Option<Slowpath>) -> Loopback {
        Loopback {
            rx: vec![VecDeque::new(); ports],
            room: vec![room; ports],
            sent: Vec::new(),
            stopped: vec![Priorities::ALL; ports],
            slowpath,
            events: Vec::new(),
            watchdog: VecDeque::new(),
            refuse_held: false,
        }
    }

    /// Frame `id` waits on `port`'s rx ring for the next turn.
    pub fn receive_on(&mut self, port: PortId, id: FrameId) {
        self.rx[port.index()].push_back(id);
    }

    /// How many frames `port` takes a turn from now on (`None`: it is left out).
    pub fn set_room(&mut self, port: PortId, room: Option<usize>) {
        self.room[port.index()] = room;
    }

    /// Every port takes `room` frames a turn from now on.
    pub fn set_room_everywhere(&mut self, room: Option<usize>) {
        self.room.fill(room);
    }

    /// Whether held frames are refused, as a full channel to the slowpath refuses them.
    pub fn refuse_held(&mut self, refuse: bool) {
        self.refuse_held = refuse;
    }

    /// What the ports sent since the last call, in order: the caller frees the frames.
    pub fn take_sent(&mut self) -> Vec<(PortId, TxFrame)> {
        std::mem::take(&mut self.sent)
    }

    /// The events the switch sent since the last call (with no slowpath to take them).
    pub fn take_events(&mut self) -> Vec<ToSlowpath> {
        std::mem::take(&mut self.events)
    }

    /// The watchdog's earliest event not yet taken.
    pub fn next_watchdog(&mut self) -> Option<WatchdogEvent> {
        self.watchdog.pop_front()
    }

    /// The slowpath the events go to, if any.
    pub fn slowpath(&self) -> Option<&Slowpath> {
        self.slowpath.as_ref()
    }
}

impl<P: FramePool> Ports<P> for Loopback {
    fn released(&mut self, now: Time) -> impl Iterator<Item = HeldFrame> {
        let Loopback { slowpath, stopped, .. } = self;
        let released: &[HeldFrame] = match slowpath {
            Some(s) => {
                s.handle_timeout(now);
                s.poll_released(now, |port| stopped[port.index()])
            }
            None => &[],
        };
        released.iter().copied()
    }

    fn receive(&mut self, pool: &mut P, port: PortId, mut frame: impl FnMut(&mut P, FrameId)) -> usize {
        let ring = &mut self.rx[port.index()];
        let n = ring.len();
        for id in ring.drain(..) {
            frame(pool, id);
        }
        n
    }

    fn tx_room(&mut self, port: PortId) -> Option<usize> {
        self.room[port.index()]
    }

    fn transmit(&mut self, _pool: &mut P, port: PortId, frames: &[TxFrame]) -> Option<Time> {
        self.sent.extend(frames.iter().map(|&f| (port, f)));
        None
    }

    fn stopped(&mut self, port: PortId, stopped: Priorities) {
        self.stopped[port.index()] = stopped;
    }

    fn to_slowpath(&mut self, ev: ToSlowpath) -> Result<(), ToSlowpath> {
        if self.refuse_held && matches!(ev, ToSlowpath::Held(_)) {
            return Err(ev);
        }
        match &mut self.slowpath {
            Some(s) => {
                s.handle_event(ev);
            }
            None => self.events.push(ev),
        }
        Ok(())
    }

    fn watchdog(&mut self, ev: WatchdogEvent) {
        self.watchdog.push_back(ev);
    }
}
