//! The frames the engine works on live in a pool its driver owns: the UMEM behind the
//! AF_XDP sockets, plain vectors in the simulator and in tests ([`crate::heap_pool`]).

use crate::queue::FrameId;
use crate::time::Time;

pub use pfcswitch_config::pool::{PoolSize, DEFAULT_HELD_FRAMES, DEFAULT_RING_SIZE};

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
