//! A [`FramePool`] of plain heap frames, for running the engine without a UMEM: unit
//! tests and fuzzing. It refuses to hand out a frame twice or take one back twice.

use super::pool::FramePool;
use super::queue::FrameId;

/// A [`FramePool`] of plain vectors: for tests and fuzzing, where there is no UMEM.
#[derive(Debug)]
pub struct HeapPool {
    frames: Vec<Vec<u8>>,
    free: Vec<FrameId>,
    out: Vec<bool>,
}

impl HeapPool {
    /// A pool of `n` frames, all free.
    pub fn new(n: u32) -> HeapPool {
        HeapPool {
            frames: vec![Vec::new(); n as usize],
            free: (0..n).rev().map(FrameId).collect(),
            out: vec![false; n as usize],
        }
    }

    /// A frame holding `bytes`, if one is free.
    pub fn put(&mut self, bytes: &[u8]) -> Option<FrameId> {
        let id = self.alloc()?;
        self.write(id, bytes.len()).copy_from_slice(bytes);
        Some(id)
    }

    /// Frames free now.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Frames in the pool.
    pub fn capacity(&self) -> usize {
        self.frames.len()
    }
}

impl FramePool for HeapPool {
    fn alloc(&mut self) -> Option<FrameId> {
        let id = self.free.pop()?;
        self.out[id.0 as usize] = true;
        Some(id)
    }
    fn free(&mut self, id: FrameId) {
        assert!(self.out[id.0 as usize], "frame {id:?} given back twice");
        self.out[id.0 as usize] = false;
        self.free.push(id);
    }
    fn bytes(&self, id: FrameId) -> &[u8] {
        &self.frames[id.0 as usize]
    }
    fn write(&mut self, id: FrameId, len: usize) -> &mut [u8] {
        let f = &mut self.frames[id.0 as usize];
        f.clear();
        f.resize(len, 0);
        f
    }
    fn bytes_mut(&mut self, id: FrameId) -> &mut [u8] {
        &mut self.frames[id.0 as usize]
    }
    fn copy(&mut self, from: FrameId, to: FrameId) {
        let data = self.frames[from.0 as usize].clone();
        self.frames[to.0 as usize] = data;
    }
    fn free_frames(&self) -> usize {
        self.free.len()
    }
}
