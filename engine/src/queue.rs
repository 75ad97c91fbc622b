//! Egress queues as intrusive FIFOs threaded through a per-frame table.
//!
//! A frame is in at most one queue at a time, so one `next` link per frame is enough:
//! enqueue and dequeue never allocate, whatever the queue depth.

use super::ports::PortId;
use super::priorities::{Priorities, Priority, PRIORITIES};
use super::time::Time;

/// Identifies a frame buffer (a UMEM frame in the dataplane).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(pub u32);

const NIL: u32 = u32::MAX;

/// What the switch remembers about a frame it holds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameMeta {
    pub len: u32,
    /// Pool buffers it takes (more than one for a multi-buffer frame): what frame caps count.
    pub buffers: u8,
    /// The port it arrived on, charged for its buffer (see [`FrameMeta::ingress`]).
    ingress: u16,
    pub prio: Priority,
    /// When the switch queued it.
    pub enqueued: Time,
    next: u32,
}

/// `ingress` of a frame the switch built itself (a pause frame), charged to no port.
const NO_PORT: u16 = u16::MAX;

impl FrameMeta {
    /// The port the frame arrived on and is charged to; none for a frame the switch built.
    pub fn ingress(&self) -> Option<PortId> {
        (self.ingress != NO_PORT).then_some(PortId::new(usize::from(self.ingress)))
    }
}

impl Default for FrameMeta {
    fn default() -> FrameMeta {
        FrameMeta { len: 0, buffers: 1, ingress: NO_PORT, prio: Priority::new(0), enqueued: Time::ZERO, next: NIL }
    }
}

/// The per-frame table the queues are threaded through, indexed by frame id.
///
/// It grows (by doubling) to the highest id the switch has queued, never past the pool's
/// `frames`, unless [`FrameTable::reserve_all`] filled it out: a simulated switch of a
/// large fabric uses a few hundred of the hundreds of thousands of frames its pool could
/// hold (a table filled out up front made a k=16 fat-tree need gigabytes), while the
/// AF_XDP shell uses them all and must not grow a table on its data path.
#[derive(Debug)]
pub(crate) struct FrameTable {
    meta: Vec<FrameMeta>,
    frames: u32,
}

impl FrameTable {
    pub fn new(frames: u32) -> FrameTable {
        FrameTable { meta: Vec::new(), frames }
    }

    /// Fills the table out to the whole pool now.
    pub fn reserve_all(&mut self) {
        self.meta.resize(self.frames as usize, FrameMeta::default());
    }

    pub fn get(&self, id: FrameId) -> &FrameMeta {
        &self.meta[id.0 as usize]
    }

    /// Records a frame of `len` bytes in `buffers` pool buffers about to be queued:
    /// received on `ingress` (charged to its group `prio`), or built by the switch (`None`).
    pub fn set(&mut self, id: FrameId, len: u32, buffers: u8, ingress: Option<PortId>, prio: Priority, now: Time) {
        let i = id.0 as usize;
        if i >= self.meta.len() {
            let room = (i + 1).next_power_of_two().max(64).min(self.frames as usize).max(i + 1);
            self.meta.resize(room, FrameMeta::default());
        }
        let ingress = ingress.map_or(NO_PORT, |p| p.index() as u16);
        self.meta[i] = FrameMeta { len, buffers, ingress, prio, enqueued: now, next: NIL };
    }

    pub fn get_mut(&mut self, id: FrameId) -> &mut FrameMeta {
        &mut self.meta[id.0 as usize]
    }

    /// Asks the cache for frame `i`'s entry without waiting: the next head of a queue,
    /// read when it leaves, a frame's time on the wire later at the soonest (a queue's
    /// frames were written when they arrived, and are seldom still in the cache).
    fn prefetch(&self, i: u32) {
        if let Some(m) = self.meta.get(i as usize) {
            crate::prefetch::prefetch(m);
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Fifo {
    head: u32,
    tail: u32,
    frames: u32,
    /// Pool buffers its frames take (see [`FrameMeta::buffers`]).
    buffers: u32,
    bytes: u64,
    /// The most `bytes` has been since the watermarks were cleared.
    watermark: u64,
}

impl Default for Fifo {
    fn default() -> Fifo {
        Fifo { head: NIL, tail: NIL, frames: 0, buffers: 0, bytes: 0, watermark: 0 }
    }
}

impl Fifo {
    pub fn push(&mut self, table: &mut FrameTable, id: FrameId) {
        let m = table.get_mut(id);
        m.next = NIL;
        self.bytes += u64::from(m.len);
        self.watermark = self.watermark.max(self.bytes);
        self.buffers += u32::from(m.buffers);
        if self.tail == NIL {
            self.head = id.0;
        } else {
            table.meta[self.tail as usize].next = id.0;
        }
        self.tail = id.0;
        self.frames += 1;
    }

    pub fn peek(&self) -> Option<FrameId> {
        (self.head != NIL).then_some(FrameId(self.head))
    }

    pub fn pop(&mut self, table: &mut FrameTable) -> Option<FrameId> {
        if self.head == NIL {
            return None;
        }
        let id = FrameId(self.head);
        let m = table.get_mut(id);
        self.head = m.next;
        m.next = NIL;
        self.frames -= 1;
        self.buffers -= u32::from(m.buffers);
        self.bytes -= u64::from(m.len);
        if self.head == NIL {
            self.tail = NIL;
        } else {
            table.prefetch(self.head);
        }
        Some(id)
    }

    pub fn is_empty(&self) -> bool {
        self.head == NIL
    }

    pub fn len(&self) -> u32 {
        self.frames
    }

    /// Pool buffers its frames take.
    pub fn buffers(&self) -> u32 {
        self.buffers
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The most bytes the queue has held since [`DataQueues::clear_watermarks`].
    pub fn watermark(&self) -> u64 {
        self.watermark
    }
}

/// A port's data queues, one per priority, with the set of those that hold frames.
///
/// The scheduler asks which queues hold frames for every frame it sends; the set answers
/// in one word, where a look at eight queue heads reads three cache lines.
#[derive(Clone, Debug, Default)]
pub(crate) struct DataQueues {
    nonempty: Priorities,
    fifo: [Fifo; PRIORITIES],
}

impl DataQueues {
    pub fn push(&mut self, prio: Priority, table: &mut FrameTable, id: FrameId) {
        self.fifo[prio].push(table, id);
        self.nonempty.insert(prio);
    }

    pub fn pop(&mut self, prio: Priority, table: &mut FrameTable) -> Option<FrameId> {
        let id = self.fifo[prio].pop(table)?;
        if self.fifo[prio].is_empty() {
            self.nonempty.remove(prio);
        }
        Some(id)
    }

    /// The priorities whose queues hold frames.
    pub fn nonempty(&self) -> Priorities {
        self.nonempty
    }

    /// Starts every queue's watermark again from what it holds now.
    pub fn clear_watermarks(&mut self) {
        for f in &mut self.fifo {
            f.watermark = f.bytes;
        }
    }

    /// The queues, by priority.
    pub fn iter(&self) -> impl Iterator<Item = &Fifo> {
        self.fifo.iter()
    }
}

impl std::ops::Index<Priority> for DataQueues {
    type Output = Fifo;

    fn index(&self, prio: Priority) -> &Fifo {
        &self.fifo[prio]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priorities::names::*;

    #[test]
    fn fifo_order_and_counts() {
        let mut t = FrameTable::new(8);
        let (mut a, mut b) = (Fifo::default(), Fifo::default());
        for i in 0..4 {
            t.set(FrameId(i), 100 + i, 1 + i as u8, Some(PortId::new(0)), P0, Time::ZERO);
            a.push(&mut t, FrameId(i));
        }
        t.set(FrameId(7), 10, 1, Some(PortId::new(0)), P0, Time::ZERO);
        b.push(&mut t, FrameId(7));
        assert_eq!((a.len(), a.bytes(), a.buffers()), (4, 406, 10));
        assert_eq!(a.pop(&mut t), Some(FrameId(0)));
        a.push(&mut t, FrameId(0));
        let order: Vec<u32> = std::iter::from_fn(|| a.pop(&mut t)).map(|f| f.0).collect();
        assert_eq!(order, vec![1, 2, 3, 0]);
        assert!(a.is_empty() && a.bytes() == 0 && a.buffers() == 0);
        assert_eq!(a.watermark(), 406, "the most it held");
        assert_eq!(b.pop(&mut t), Some(FrameId(7)));
        assert_eq!(b.pop(&mut t), None);
    }

    #[test]
    fn data_queues_know_which_priorities_hold_frames() {
        let mut t = FrameTable::new(8);
        let mut q = DataQueues::default();
        for i in 0..3 {
            t.set(FrameId(i), 100, 1, Some(PortId::new(0)), P0, Time::ZERO);
        }
        q.push(P3, &mut t, FrameId(0));
        q.push(P3, &mut t, FrameId(1));
        q.push(P5, &mut t, FrameId(2));
        assert_eq!(q.nonempty(), Priorities::only(P3) | Priorities::only(P5));
        assert_eq!(q.pop(P5, &mut t), Some(FrameId(2)));
        assert_eq!(q.pop(P3, &mut t), Some(FrameId(0)));
        assert_eq!(q.nonempty(), Priorities::only(P3));
        assert_eq!(q.pop(P3, &mut t), Some(FrameId(1)));
        assert_eq!((q.nonempty(), q.pop(P3, &mut t)), (Priorities::NONE, None));
        assert_eq!(q[P3].len(), 0);
    }
}
