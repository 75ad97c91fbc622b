//! A [`FramePool`] of plain heap frames, for running the engine without a UMEM: unit
//! tests and fuzzing. It refuses to hand out a buffer twice or take one back twice, and
//! it can split frames over several buffers as AF_XDP multi-buffer does, so that what
//! the engine does with such frames is tested without a kernel.

use super::pool::FramePool;
use super::queue::FrameId;
use super::time::Time;

const NIL: u32 = u32::MAX;

/// A [`FramePool`] of plain vectors: for tests and fuzzing, where there is no UMEM.
#[derive(Debug)]
pub struct HeapPool {
    /// Each buffer's bytes (a frame's first buffer holds its headers).
    buffers: Vec<Vec<u8>>,
    /// The buffer after this one in its frame (NIL: the last).
    next: Vec<u32>,
    free: Vec<FrameId>,
    out: Vec<bool>,
    /// Bytes a buffer holds: [`HeapPool::put`] splits larger frames.
    buffer_size: usize,
    /// When each frame arrived, as a receive path stamps it ([`HeapPool::stamp`]).
    arrived: Vec<Option<Time>>,
}

impl HeapPool {
    /// A pool of `n` buffers, all free, each holding a frame of any size.
    pub fn new(n: u32) -> HeapPool {
        HeapPool::with_buffer_size(n, usize::MAX)
    }

    /// A pool of `n` buffers of `buffer_size` bytes: larger frames take several.
    pub fn with_buffer_size(n: u32, buffer_size: usize) -> HeapPool {
        assert!(buffer_size > 0, "a buffer holds at least a byte");
        HeapPool {
            buffers: vec![Vec::new(); n as usize],
            next: vec![NIL; n as usize],
            free: (0..n).rev().map(FrameId).collect(),
            out: vec![false; n as usize],
            buffer_size,
            arrived: vec![None; n as usize],
        }
    }

    /// A frame holding `bytes`, in as many buffers as it needs, if they are all free.
    pub fn put(&mut self, bytes: &[u8]) -> Option<FrameId> {
        let pieces: Vec<&[u8]> = if bytes.is_empty() { vec![bytes] } else { bytes.chunks(self.buffer_size).collect() };
        self.put_pieces(&pieces)
    }

    /// A frame made of `pieces`, one buffer each (as a driver may split a frame at
    /// any point), if enough buffers are free.
    pub fn put_pieces(&mut self, pieces: &[&[u8]]) -> Option<FrameId> {
        if pieces.is_empty() || self.free.len() < pieces.len() {
            return None;
        }
        let ids: Vec<FrameId> = pieces.iter().map(|_| self.alloc().expect("counted above")).collect();
        for (k, (&id, piece)) in ids.iter().zip(pieces).enumerate() {
            let b = &mut self.buffers[id.0 as usize];
            b.clear();
            b.extend_from_slice(piece);
            self.next[id.0 as usize] = ids.get(k + 1).map_or(NIL, |n| n.0);
        }
        Some(ids[0])
    }

    /// The whole frame, all its buffers joined.
    pub fn contents(&self, id: FrameId) -> Vec<u8> {
        self.chain(id).flat_map(|b| self.buffers[b.0 as usize].iter().copied()).collect()
    }

    /// Stamps frame `id` with when it arrived, as the XDP program stamps what it hands
    /// the switch: a frame read later than it arrived.
    pub fn stamp(&mut self, id: FrameId, arrived: Time) {
        self.arrived[id.0 as usize] = Some(arrived);
    }

    /// Buffers free now.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Buffers in the pool.
    pub fn capacity(&self) -> usize {
        self.buffers.len()
    }

    /// The buffers of frame `id`, first to last.
    fn chain(&self, id: FrameId) -> impl Iterator<Item = FrameId> + '_ {
        std::iter::successors(Some(id), |b| {
            let n = self.next[b.0 as usize];
            (n != NIL).then_some(FrameId(n))
        })
    }

    fn give_back(&mut self, id: FrameId) {
        assert!(self.out[id.0 as usize], "buffer {id:?} given back twice");
        self.out[id.0 as usize] = false;
        self.next[id.0 as usize] = NIL;
        self.arrived[id.0 as usize] = None;
        self.free.push(id);
    }
}

impl FramePool for HeapPool {
    fn alloc(&mut self) -> Option<FrameId> {
        let id = self.free.pop()?;
        self.out[id.0 as usize] = true;
        self.next[id.0 as usize] = NIL;
        Some(id)
    }
    fn free(&mut self, id: FrameId) {
        let chain: Vec<FrameId> = self.chain(id).collect();
        for b in chain {
            self.give_back(b);
        }
    }
    fn bytes(&self, id: FrameId) -> &[u8] {
        &self.buffers[id.0 as usize]
    }
    fn len(&self, id: FrameId) -> usize {
        self.chain(id).map(|b| self.buffers[b.0 as usize].len()).sum()
    }
    fn buffers(&self, id: FrameId) -> u32 {
        self.chain(id).count() as u32
    }
    fn write(&mut self, id: FrameId, len: usize) -> &mut [u8] {
        let f = &mut self.buffers[id.0 as usize];
        f.clear();
        f.resize(len, 0);
        f
    }
    fn bytes_mut(&mut self, id: FrameId) -> &mut [u8] {
        &mut self.buffers[id.0 as usize]
    }
    fn duplicate(&mut self, id: FrameId) -> Option<FrameId> {
        let pieces: Vec<Vec<u8>> = self.chain(id).map(|b| self.buffers[b.0 as usize].clone()).collect();
        let refs: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        self.put_pieces(&refs)
    }
    fn free_frames(&self) -> usize {
        self.free.len()
    }
    fn arrival(&self, id: FrameId) -> Option<Time> {
        self.arrived[id.0 as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_larger_than_a_buffer_takes_several_and_gives_them_all_back() {
        let mut pool = HeapPool::with_buffer_size(8, 100);
        let frame: Vec<u8> = (0..250u32).map(|i| i as u8).collect();
        let id = pool.put(&frame).unwrap();
        assert_eq!((pool.len(id), pool.buffers(id), pool.bytes(id).len()), (250, 3, 100));
        assert_eq!(pool.contents(id), frame);
        let copy = pool.duplicate(id).unwrap();
        assert_eq!((pool.contents(copy), pool.free_count()), (frame.clone(), 2));
        assert!(pool.duplicate(id).is_none(), "two buffers cannot hold a three-buffer copy");
        assert_eq!(pool.free_count(), 2, "a refused copy takes nothing");
        pool.free(id);
        pool.free(copy);
        assert_eq!(pool.free_count(), 8);
    }
}
