//! A port's AF_XDP sockets: one per bound rx queue of its interface, all on the shared
//! UMEM. A NIC (or a multi-queue veth) spreads flows over its queues, and a queue without
//! a socket would hand its frames to the kernel stack, around the switch: so every queue
//! is bound. Frames leave through the first queue's socket alone, which keeps each
//! priority's frames in order on the wire.

use std::os::fd::RawFd;

use crate::config::BindMode;
use crate::core::queue::FrameId;
use crate::core::time::Time;

use super::xsk::{BindOn, UmemPool, XskError, XskPort};

#[derive(Debug)]
pub struct PortSockets {
    iface: String,
    /// Queue k's socket at index k; the first also sends. Empty once closed (the
    /// interface is gone), until the port is bound again. (Their kernel counters are
    /// read off the forwarding thread: `super::kernel`.)
    sockets: Vec<XskPort>,
}

#[derive(Debug, thiserror::Error)]
#[error(
    "{source}; {iface} has {queues} rx queues and every one needs a socket: bind fewer with `--queues {queue}` \
     (frames the NIC steers to the others are then dropped), or give the NIC fewer with \
     `ethtool -L {iface} combined {queue}`"
)]
pub struct QueueBindError {
    pub iface: String,
    pub queue: u32,
    pub queues: u32,
    #[source]
    pub source: XskError,
}

impl PortSockets {
    /// Binds queues `0..n` of `iface` on the pool's share `on` (a socket number per queue),
    /// in `mode`, for frames of up to `buffers_per_frame` buffers (see [`XskPort::bind`]).
    /// It needs no pool, so it may run on another thread than the loop's.
    pub fn bind(
        on: BindOn,
        iface: &str,
        ring_size: u32,
        batch: usize,
        mode: Option<BindMode>,
        buffers_per_frame: usize,
    ) -> Result<PortSockets, PortError> {
        let queues = on.ids.len() as u32;
        let mut sockets = Vec::with_capacity(on.ids.len());
        for (queue, &id) in (0..).zip(&on.ids) {
            match XskPort::bind((&on.umem, id), iface, queue, ring_size, batch, mode, buffers_per_frame) {
                Ok(s) => sockets.push(s),
                // The first queue failing is the port failing; a later one, the NIC
                // having more queues than can be bound.
                Err(source) if queue == 0 => return Err(PortError::Xsk(source)),
                Err(source) => {
                    return Err(PortError::Queue(QueueBindError { iface: iface.to_string(), queue, queues, source }))
                }
            }
        }
        Ok(PortSockets { iface: iface.to_string(), sockets })
    }

    /// Closes every socket for good (see [`XskPort::close`]); returns the whole frames
    /// dropped from their rx rings. The port sends and receives nothing until re-bound.
    pub fn close(&mut self, pool: &mut UmemPool) -> usize {
        self.sockets.drain(..).map(|s| s.close(pool)).sum()
    }

    pub fn iface(&self) -> &str {
        &self.iface
    }

    pub fn sockets(&self) -> &[XskPort] {
        &self.sockets
    }

    /// The socket frames leave through.
    pub fn tx(&mut self) -> &mut XskPort {
        &mut self.sockets[0]
    }

    pub fn fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        self.sockets.iter().map(XskPort::fd)
    }

    /// Takes up to `max` received buffers off each queue, calling `on_frame` for each
    /// whole frame.
    pub fn receive(
        &mut self,
        pool: &mut UmemPool,
        max: usize,
        mut on_frame: impl FnMut(&mut UmemPool, FrameId),
    ) -> Received {
        let mut r = Received { frames: 0, emptied: true };
        for s in &mut self.sockets {
            let (buffers, frames) = s.receive(pool, max, &mut on_frame);
            r.frames += frames;
            // A full batch may have left more behind on the ring.
            r.emptied &= buffers < max;
        }
        r
    }

    /// Returns completed tx frames to the pool (only the first queue's socket sends).
    pub fn reclaim(&mut self, pool: &mut UmemPool, now: Time) -> usize {
        self.sockets.first_mut().map_or(0, |s| s.reclaim(pool, now))
    }

    /// Tops up every queue's fill ring, leaving `reserve` frames in the pool.
    pub fn refill(&mut self, pool: &mut UmemPool, reserve: usize) {
        for s in &mut self.sockets {
            s.refill(pool, reserve);
        }
    }

    pub fn tx_outstanding(&self) -> u32 {
        self.sockets.first().map_or(0, XskPort::tx_outstanding)
    }

    /// How the sockets bound: zero-copy only if every one did.
    pub fn bind_mode(&self) -> Option<BindMode> {
        let modes: Vec<Option<BindMode>> = self.sockets.iter().map(XskPort::bind_mode).collect();
        if modes.is_empty() {
            None
        } else if modes.iter().all(|m| *m == Some(BindMode::ZeroCopy)) {
            Some(BindMode::ZeroCopy)
        } else if modes.iter().all(Option::is_some) {
            Some(BindMode::Copy)
        } else {
            None
        }
    }
}

/// What one pass over a port's rx rings took.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    pub frames: usize,
    /// Every ring gave less than it was asked for, so none holds frames still.
    pub emptied: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error(transparent)]
    Xsk(#[from] XskError),
    #[error(transparent)]
    Queue(#[from] QueueBindError),
}
