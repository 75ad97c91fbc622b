//! The dataplane's side of the engine's turn ([`Switch::poll`]): its AF_XDP rings, the
//! channels to the slowpath thread, and what it measures on the way (captures, the
//! kernel's progress on the tx rings, frames taken for the backlog meter).
//!
//! Borrowed from the [`super::Dataplane`] for one turn, beside its switch and pool.
//! What cannot be acted on inside the turn (a port whose interface went away, a kick
//! that failed) is kept and acted on after it.
//!
//! [`Switch::poll`]: crate::core::switch::Switch::poll

use std::sync::atomic::Ordering;

use crossbeam_channel::{Receiver, Sender};

use super::port::PortSockets;
use super::slowpath::SharedView;
use super::xsk::UmemPool;
use super::{log_watchdog, tx_budget, DataplaneError, KICK_ROUNDS};
use crate::capture::{self, Capture};
use crate::config::RunConfig;
use crate::core::pfcwd::WatchdogEvent;
use crate::core::ports::PortId;
use crate::core::priorities::Priorities;
use crate::core::queue::FrameId;
use crate::core::slowpath::{HeldFrame, ToSlowpath};
use crate::core::switch::{Ports, TxFrame};
use crate::core::time::Time;
use crate::core::{FramePool, PortSet};
use crate::sys;

/// One turn's view of the dataplane's IO.
pub(super) struct Rings<'a> {
    /// When the turn read the clock: the time its received frames are taken at.
    pub now: Time,
    pub ports: &'a mut [PortSockets],
    pub config: &'a RunConfig,
    pub capture: &'a mut Option<Capture>,
    pub to_slowpath: &'a Sender<ToSlowpath>,
    pub from_slowpath: &'a Receiver<HeldFrame>,
    pub view: &'a SharedView,
    pub buffers_per_frame: usize,
    pub tx_busy: &'a mut [u64],
    pub tx_in_flight_max: &'a mut [u32],
    /// Whether to take frames off the rx rings (not while draining at the end).
    pub receive: bool,
    /// Every rx ring gave less than it was asked for this turn.
    pub emptied: bool,
    /// Frames taken off the rx rings so far.
    pub rx_taken: &'a mut u64,
    /// Some port's kernel tx queue made no progress this turn.
    pub tx_blocked: bool,
    /// Ports found gone while kicking their tx rings.
    pub gone: PortSet,
    /// The first kick that failed for good, which ends the loop after the turn.
    pub error: Option<DataplaneError>,
}

impl Ports<UmemPool> for Rings<'_> {
    fn released(&mut self, _now: Time) -> impl Iterator<Item = HeldFrame> {
        self.from_slowpath.try_iter()
    }

    /// Completions first (frames the kernel sent go back to the pool), then up to a batch
    /// per rx ring.
    fn receive(&mut self, pool: &mut UmemPool, port: PortId, mut frame: impl FnMut(&mut UmemPool, FrameId)) -> usize {
        let now = self.now;
        let sockets = &mut self.ports[port.index()];
        sockets.reclaim(pool, now);
        if !self.receive {
            return 0;
        }
        let capture = &mut *self.capture;
        let r = sockets.receive(pool, self.config.dataplane.batch, |pool, id| {
            if let Some(c) = capture.as_mut() {
                c.offer(port, capture::Way::Rx, now, pool.bytes(id), pool.len(id));
            }
            pool.taken(id, now);
            frame(pool, id);
        });
        *self.rx_taken += r.frames as u64;
        self.emptied &= r.emptied;
        r.frames
    }

    /// In frames, each counted at the most buffers (descriptors) a frame takes, and no
    /// more than [`tx_budget`] allows on the ring at once.
    fn tx_room(&mut self, port: PortId) -> Option<usize> {
        if self.error.is_some() || self.gone.contains(port) {
            return None;
        }
        let (batch, per_frame) = (self.config.dataplane.batch, self.buffers_per_frame);
        let tx = self.ports[port.index()].tx();
        let room = tx.tx_room(batch * per_frame) / per_frame;
        let in_flight = (tx.tx_outstanding() as usize).div_ceil(per_frame);
        Some(room.min(tx_budget(batch, in_flight)))
    }

    /// Puts the frames on the ring, stamped as they go, and kicks the kernel until it
    /// takes no more (at most [`KICK_ROUNDS`] times). The frames were decided as of the
    /// turn's reading of the rx rings, not later: a pause refresh that reached the ring
    /// before the pause ran out must be read before the engine finds the pause over.
    /// Decided at a fresh reading, a loop that lost its CPU between its receive and this
    /// transmit let a whole batch through a storm whose every refresh had come in time
    /// (64 frames at 10G in a quiet `bench pause-response`).
    fn transmit(&mut self, pool: &mut UmemPool, port: PortId, frames: &[TxFrame]) -> Option<Time> {
        let i = port.index();
        let per_frame = self.buffers_per_frame;
        let tx = self.ports[i].tx();
        let now = sys::now();
        if let Some(c) = self.capture.as_mut() {
            for f in frames {
                c.offer(port, capture::Way::Tx, now, pool.bytes(f.id), f.len as usize);
            }
        }
        if !frames.is_empty() {
            tx.send(pool, now, frames.iter().map(|f| f.id));
            let on_ring = (tx.tx_outstanding() as usize).div_ceil(per_frame) as u32;
            let most = &mut self.tx_in_flight_max[i];
            *most = (*most).max(on_ring);
        }
        let mut first_kick = None;
        let mut completed = 0;
        for round in 0..KICK_ROUNDS {
            if tx.tx_outstanding() == 0 {
                break;
            }
            if let Err(source) = tx.kick() {
                if sys::is_gone_error(&source) {
                    // Gone between two link checks: found out now, acted on after the turn.
                    self.gone.insert(port);
                    return first_kick;
                }
                if sys::is_transient_error(&source) {
                    break;
                }
                self.error = Some(DataplaneError::Kick { iface: tx.iface.clone(), source });
                return first_kick;
            }
            if round == 0 {
                // Pause frames lead the batch: the first sendto put this one on the wire.
                first_kick = Some(sys::now());
            }
            let n = tx.reclaim(pool, sys::now());
            completed += n;
            if n == 0 {
                break;
            }
        }
        if completed == 0 && tx.tx_outstanding() > 0 {
            self.tx_busy[i] += 1;
            self.tx_blocked = true;
        }
        first_kick
    }

    fn stopped(&mut self, port: PortId, stopped: Priorities) {
        self.view.stopped[port.index()].store(stopped.bits(), Ordering::Relaxed);
    }

    fn to_slowpath(&mut self, ev: ToSlowpath) -> Result<(), ToSlowpath> {
        self.to_slowpath.try_send(ev).map_err(|e| e.into_inner())
    }

    fn watchdog(&mut self, ev: WatchdogEvent) {
        log_watchdog(self.config, ev);
    }
}
