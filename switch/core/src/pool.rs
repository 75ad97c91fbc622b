//! The frames the engine works on live in a pool its driver owns: the UMEM behind the
//! AF_XDP sockets, plain vectors in the simulator and in tests ([`crate::heap_pool`]).

use crate::queue::FrameId;
use crate::time::Time;

/// Frame buffers owned by the caller. Frames are identified by index.
pub trait FramePool {
    /// A free frame for a frame the switch builds itself.
    fn alloc(&mut self) -> Option<FrameId>;
    /// Gives a frame back.
    fn free(&mut self, id: FrameId);
    /// The frame's current contents.
    fn bytes(&self, id: FrameId) -> &[u8];
    /// Sets the frame's length and returns its contents for writing.
    fn write(&mut self, id: FrameId, len: usize) -> &mut [u8];
    /// The frame's contents for rewriting in place (its length unchanged).
    fn bytes_mut(&mut self, id: FrameId) -> &mut [u8];
    /// Copies the contents of `from` into `to`.
    fn copy(&mut self, from: FrameId, to: FrameId);
    /// How many frames [`FramePool::alloc`] could hand out now.
    fn free_frames(&self) -> usize;
    /// When a received frame arrived, if the receive path stamped it; else the switch
    /// takes the time it was handed over.
    fn arrival(&self, _id: FrameId) -> Option<Time> {
        None
    }
}
