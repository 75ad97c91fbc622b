//! The frames the engine works on live in a pool its driver owns: the UMEM behind the
//! AF_XDP sockets, plain vectors in the simulator and in tests ([`crate::heap_pool`]).

use crate::queue::FrameId;
use crate::time::Time;

/// Descriptors per ring a driver uses unless configured otherwise (the AF_XDP shell's
/// `[dataplane] ring_size`).
pub const DEFAULT_RING_SIZE: u32 = 8192;

/// Frames a pool holds beyond what its rings take, unless configured otherwise: what the
/// switch may queue and the slowpath hold.
pub const DEFAULT_HELD_FRAMES: u32 = 16384;

/// How big a driver's frame pool is, and how much of it its rings take (a fill ring per
/// receive socket, a transmit ring per port): frames in a ring never wait in the switch,
/// so the engine shares out only the rest ([`crate::config::Config::frame_caps`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolSize {
    /// Frames in the pool: frame ids run from 0 to this.
    pub frames: u32,
    /// Frames its rings hold.
    pub in_rings: u32,
}

impl PoolSize {
    /// The pool of a switch with `ports` ports and `rx_sockets` receive sockets on rings
    /// of `ring_size` descriptors: `frames` if given, else the rings' frames and
    /// [`DEFAULT_HELD_FRAMES`] more. The AF_XDP shell sizes its UMEM so; the simulator
    /// gives a simulated switch the pool `pfcswitch run` would have (one socket per port,
    /// [`DEFAULT_RING_SIZE`]).
    pub fn for_rings(ports: usize, rx_sockets: usize, ring_size: u32, frames: Option<u32>) -> PoolSize {
        let in_rings = (ports + rx_sockets) as u32 * ring_size;
        PoolSize { frames: frames.unwrap_or(in_rings + DEFAULT_HELD_FRAMES), in_rings }
    }

    /// A pool of `frames` with no rings (a test's, shared whole).
    pub fn without_rings(frames: u32) -> PoolSize {
        PoolSize { frames, in_rings: 0 }
    }
}

/// Frame buffers owned by the caller. Frames are identified by index.
pub trait FramePool {
    /// A free buffer for a frame the switch builds itself.
    fn alloc(&mut self) -> Option<FrameId>;
    /// Gives a frame back: every buffer it takes.
    fn free(&mut self, id: FrameId);
    /// The frame's first buffer: the whole frame when it fits one buffer, and always
    /// its headers (a buffer holds at least 1792 bytes).
    fn bytes(&self, id: FrameId) -> &[u8];
    /// The frame's length, over all its buffers.
    fn len(&self, id: FrameId) -> usize {
        self.bytes(id).len()
    }
    /// The buffers a frame takes: one, unless it is larger than a buffer and arrived
    /// in several (AF_XDP multi-buffer).
    fn buffers(&self, _id: FrameId) -> u32 {
        1
    }
    /// Sets the length of a frame the switch builds in one buffer and returns its
    /// contents for writing.
    fn write(&mut self, id: FrameId, len: usize) -> &mut [u8];
    /// The frame's first buffer for rewriting its headers in place (its length unchanged).
    fn bytes_mut(&mut self, id: FrameId) -> &mut [u8];
    /// A copy of frame `id` in buffers of its own, or none when they cannot all be had
    /// (a frame is never copied in part).
    fn duplicate(&mut self, id: FrameId) -> Option<FrameId>;
    /// How many buffers [`FramePool::alloc`] could hand out now.
    fn free_frames(&self) -> usize;
    /// When a received frame arrived, if the receive path stamped it; else the switch
    /// takes the time it was handed over.
    fn arrival(&self, _id: FrameId) -> Option<Time> {
        None
    }
}
