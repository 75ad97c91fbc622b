//! The simplest driver of `Switch::poll`: each port a queue of frames that arrived and a
//! list of frames it sent, and no slowpath (no port is ever blocked here).

use pfcswitch_core::heap_pool::HeapPool;
use pfcswitch_core::{FrameId, FramePool, HeldFrame, PortId, Ports, Priorities, Time, ToSlowpath, TxFrame};

pub struct Wire {
    rx: Vec<Vec<FrameId>>,
    sent: Vec<(usize, Vec<u8>)>,
}

impl Wire {
    pub fn new(ports: usize) -> Wire {
        Wire { rx: vec![Vec::new(); ports], sent: Vec::new() }
    }

    /// `bytes` arrive on `port`; the switch takes them at its next turn.
    pub fn arrive(&mut self, pool: &mut HeapPool, port: usize, bytes: &[u8]) {
        self.rx[port].push(pool.put(bytes).expect("room in the pool"));
    }

    /// What each port sent since the last call, as (port, bytes).
    pub fn take_sent(&mut self) -> Vec<(usize, Vec<u8>)> {
        std::mem::take(&mut self.sent)
    }
}

impl Ports<HeapPool> for Wire {
    fn released(&mut self, _now: Time) -> impl Iterator<Item = HeldFrame> {
        std::iter::empty()
    }

    fn receive(&mut self, pool: &mut HeapPool, port: PortId, mut frame: impl FnMut(&mut HeapPool, FrameId)) -> usize {
        let ids = std::mem::take(&mut self.rx[port.index()]);
        for &id in &ids {
            frame(pool, id);
        }
        ids.len()
    }

    fn tx_room(&mut self, _port: PortId) -> Option<usize> {
        Some(64)
    }

    /// The wire takes the frames at once: their bytes are kept, the buffers freed.
    fn transmit(&mut self, pool: &mut HeapPool, port: PortId, frames: &[TxFrame]) -> Option<Time> {
        for f in frames {
            self.sent.push((port.index(), pool.contents(f.id)));
            pool.free(f.id);
        }
        None
    }

    fn stopped(&mut self, _port: PortId, _stopped: Priorities) {}

    /// No slowpath: an event is given back (a held frame would be dropped and counted).
    fn to_slowpath(&mut self, ev: ToSlowpath) -> Result<(), ToSlowpath> {
        Err(ev)
    }
}
