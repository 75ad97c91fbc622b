//! The buffer arena: every frame's bytes in one place, short and long buffers, each
//! switch's slots into it, and the engine's `FramePool` over them.

use super::*;

/// How much of a frame the simulator keeps: more than any header the engine reads or
/// writes (Ethernet, two VLAN tags, IPv6, UDP and a test frame's stamp come to 94 bytes)
/// and every MAC control frame whole.
pub(super) const HEAD: usize = 124;

/// How much a short buffer keeps: a test frame's headers and stamp (54 bytes, 58 with a
/// VLAN tag) and a MAC control frame whole (60), with the length in one cache line.
pub(super) const SHORT_HEAD: usize = 60;

/// A frame's length and its first `N` bytes, in cache lines of its own. The length sits
/// beside the headers, so that a hop that reads both (an arrival: the length bounds the
/// headers it parses) waits for memory once.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct Buf<const N: usize> {
    pub(super) len: u32,
    pub(super) head: [u8; N],
}

/// Buffers of one size, reused.
///
/// Kept in chunks of [`CHUNK`] buffers that never move, not in one Vec: a Vec doubles
/// as the frames in flight grow, and while it moves it holds both its old and new
/// buffers. At a k=16 fat-tree's 166 000 frames in flight that move was the run's peak
/// (8 MiB of old and 16 of new buffers for 11 of frames).
#[derive(Default)]
pub(super) struct Bufs<const N: usize> {
    chunks: Vec<Box<[Buf<N>; CHUNK]>>,
    made: u32,
    pub(super) free: Vec<u32>,
}

/// Buffers in a chunk: a power of two, so that a buffer's chunk and place in it are a
/// shift and a mask.
const CHUNK: usize = 1 << CHUNK_BITS;
const CHUNK_BITS: u32 = 10;

impl<const N: usize> Bufs<N> {
    fn buf(&self, i: u32) -> &Buf<N> {
        &self.chunks[(i >> CHUNK_BITS) as usize][i as usize & (CHUNK - 1)]
    }

    fn buf_mut(&mut self, i: u32) -> &mut Buf<N> {
        &mut self.chunks[(i >> CHUNK_BITS) as usize][i as usize & (CHUNK - 1)]
    }

    pub(super) fn take(&mut self) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.buf_mut(i).len = 0;
                i
            }
            None => {
                let i = self.made;
                if (i as usize).is_multiple_of(CHUNK) {
                    // Made on the heap, not moved there from the stack (128 KiB of it).
                    let chunk = vec![Buf { len: 0, head: [0; N] }; CHUNK].into_boxed_slice();
                    self.chunks.push(chunk.try_into().unwrap_or_else(|_| unreachable!("CHUNK buffers")));
                }
                self.made += 1;
                i
            }
        }
    }

    pub(super) fn give(&mut self, i: u32) {
        self.free.push(i);
    }

    pub(super) fn len(&self, i: u32) -> usize {
        self.buf(i).len as usize
    }

    pub(super) fn prefetch(&self, i: u32) {
        prefetch(self.buf(i));
    }

    pub(super) fn head(&self, i: u32) -> &[u8] {
        let b = self.buf(i);
        &b.head[..(b.len as usize).min(N)]
    }

    pub(super) fn head_mut(&mut self, i: u32) -> &mut [u8] {
        let b = self.buf_mut(i);
        &mut b.head[..(b.len as usize).min(N)]
    }

    /// Makes buffer `i` a `len`-byte frame of zeros; returns its head for writing.
    pub(super) fn write(&mut self, i: u32, len: usize) -> &mut [u8] {
        self.buf_mut(i).len = len as u32;
        let head = self.head_mut(i);
        head.fill(0);
        head
    }

    /// A buffer holding a copy of buffer `from`.
    pub(super) fn duplicate(&mut self, from: u32) -> u32 {
        let to = self.take();
        *self.buf_mut(to) = *self.buf(from);
        to
    }
}

/// Frame buffers, reused. Past its head, every frame the simulator makes is zeros (a
/// test frame's payload after its stamp: [`FlowTemplate::write_head`]), and nothing reads
/// or writes there, so it is not stored. Whole 1536-byte buffers, one allocation each,
/// made the fabric's frames in flight its largest working set (23 MB at k=8, each frame's
/// headers on a page of their own), and a host's send wrote all of a frame.
///
/// A buffer is short (one cache line) or long (two). A host's test frame, the fabric's
/// commonest, needs only its first 54 bytes: a long buffer for it would carry a line of
/// zeros that every send writes and the caches hold while it waits in queues (some
/// 15 000 frames at k=8). Frames the engine builds, whose length it says only after it
/// has its buffer, and frames of a few dozen bytes more than a short buffer holds (which
/// a long one holds whole, and readers may parse as whole frames) take long ones. A
/// buffer's id says which ([`Size::of`]).
#[derive(Default)]
pub(super) struct Arena {
    pub(super) short: Bufs<SHORT_HEAD>,
    pub(super) long: Bufs<HEAD>,
}

/// A buffer id read: the size of the buffer and its index among buffers of that size.
pub(super) enum Size {
    Short(u32),
    Long(u32),
}

impl Size {
    /// The bit of a buffer id that marks a long buffer.
    pub(super) const LONG: u32 = 1 << 31;

    pub(super) fn of(id: u32) -> Size {
        if id & Size::LONG != 0 {
            Size::Long(id & !Size::LONG)
        } else {
            Size::Short(id)
        }
    }

    pub(super) fn id(self) -> u32 {
        match self {
            Size::Short(i) => i,
            Size::Long(i) => i | Size::LONG,
        }
    }
}

impl Arena {
    /// An empty long buffer.
    pub(super) fn take(&mut self) -> u32 {
        Size::Long(self.long.take()).id()
    }

    /// An empty buffer of the size `long` says: for a frame another rank sent, in a
    /// buffer of the size its own had.
    pub(super) fn take_sized(&mut self, long: bool) -> u32 {
        if long {
            self.take()
        } else {
            Size::Short(self.short.take()).id()
        }
    }

    /// Whether buffer `id` is a long one.
    pub(super) fn is_long(id: u32) -> bool {
        matches!(Size::of(id), Size::Long(_))
    }

    /// An empty buffer for a frame of `len` bytes that is zeros from byte `zeros_from` on:
    /// a short one if that is all a long one would hold but for zeros.
    pub(super) fn take_for(&mut self, len: usize, zeros_from: Option<usize>) -> u32 {
        let short = zeros_from.is_some_and(|z| z <= SHORT_HEAD) && (len <= SHORT_HEAD || len > HEAD);
        if short {
            Size::Short(self.short.take()).id()
        } else {
            self.take()
        }
    }

    pub(super) fn give(&mut self, id: u32) {
        match Size::of(id) {
            Size::Short(i) => self.short.give(i),
            Size::Long(i) => self.long.give(i),
        }
    }

    /// The frame's length on its way (FCS not included).
    pub(super) fn len(&self, id: u32) -> usize {
        match Size::of(id) {
            Size::Short(i) => self.short.len(i),
            Size::Long(i) => self.long.len(i),
        }
    }

    /// The bytes of the frame that are kept: all of it up to what its buffer holds.
    pub(super) fn head(&self, id: u32) -> &[u8] {
        match Size::of(id) {
            Size::Short(i) => self.short.head(i),
            Size::Long(i) => self.long.head(i),
        }
    }

    pub(super) fn head_mut(&mut self, id: u32) -> &mut [u8] {
        match Size::of(id) {
            Size::Short(i) => self.short.head_mut(i),
            Size::Long(i) => self.long.head_mut(i),
        }
    }

    /// Makes buffer `id` a `len`-byte frame of zeros; returns its head for writing.
    pub(super) fn write(&mut self, id: u32, len: usize) -> &mut [u8] {
        match Size::of(id) {
            Size::Short(i) => self.short.write(i, len),
            Size::Long(i) => self.long.write(i, len),
        }
    }

    /// Asks the cache for buffer `id`'s first line (its length and headers) without waiting.
    pub(super) fn prefetch(&self, id: u32) {
        match Size::of(id) {
            Size::Short(i) => self.short.prefetch(i),
            Size::Long(i) => self.long.prefetch(i),
        }
    }

    /// A buffer of buffer `from`'s size holding a copy of it.
    pub(super) fn duplicate(&mut self, from: u32) -> u32 {
        match Size::of(from) {
            Size::Short(i) => Size::Short(self.short.duplicate(i)).id(),
            Size::Long(i) => Size::Long(self.long.duplicate(i)).id(),
        }
    }
}

/// A switch's frame ids and the arena buffers behind them.
///
/// Ids are handed out as a stack of the pool's `capacity` ids would give them (lowest
/// first, the latest freed next), but the tables grow only as far as the highest id in
/// use: a switch of a large fabric holds a few hundred frames of the hundreds of
/// thousands its pool could, and tables for all of them made a k=16 fat-tree need
/// gigabytes.
pub(super) struct Slots {
    pub(super) buf: Vec<u32>,
    pub(super) free: Vec<u32>,
    pub(super) capacity: u32,
}

impl Slots {
    pub(super) fn new(capacity: u32) -> Slots {
        Slots { buf: Vec::new(), free: Vec::new(), capacity }
    }

    /// A free id for arena buffer `b`.
    pub(super) fn take(&mut self, b: u32) -> Option<u32> {
        let id = match self.free.pop() {
            Some(id) => id,
            None if (self.buf.len() as u32) < self.capacity => {
                self.buf.push(NONE);
                (self.buf.len() - 1) as u32
            }
            None => return None,
        };
        self.buf[id as usize] = b;
        Some(id)
    }

    /// Frees `id`; returns its buffer.
    pub(super) fn give(&mut self, id: u32) -> u32 {
        let b = std::mem::replace(&mut self.buf[id as usize], NONE);
        self.free.push(id);
        b
    }

    pub(super) fn free_count(&self) -> usize {
        self.free.len() + (self.capacity as usize - self.buf.len())
    }
}

/// The [`FramePool`] a switch sees: its slots over the arena.
pub(super) struct Pool<'a> {
    pub(super) slots: &'a mut Slots,
    pub(super) arena: &'a mut Arena,
}

impl FramePool for Pool<'_> {
    fn alloc(&mut self) -> Option<FrameId> {
        self.hold(Arena::take)
    }

    fn free(&mut self, id: FrameId) {
        let b = self.slots.give(id.0);
        self.arena.give(b);
    }

    fn bytes(&self, id: FrameId) -> &[u8] {
        self.arena.head(self.slots.buf[id.0 as usize])
    }

    fn len(&self, id: FrameId) -> usize {
        self.arena.len(self.slots.buf[id.0 as usize])
    }

    fn write(&mut self, id: FrameId, len: usize) -> &mut [u8] {
        self.arena.write(self.slots.buf[id.0 as usize], len)
    }

    fn bytes_mut(&mut self, id: FrameId) -> &mut [u8] {
        self.arena.head_mut(self.slots.buf[id.0 as usize])
    }

    fn free_frames(&self) -> usize {
        self.slots.free_count()
    }

    fn duplicate(&mut self, from: FrameId) -> Option<FrameId> {
        let from = self.slots.buf[from.0 as usize];
        self.hold(|arena| arena.duplicate(from))
    }
}

impl Pool<'_> {
    /// A frame id for the buffer `take` gets from the arena, when the switch has an id
    /// free: that is asked first, so that no buffer is taken for a frame it cannot hold.
    pub(super) fn hold(&mut self, take: impl FnOnce(&mut Arena) -> u32) -> Option<FrameId> {
        if self.slots.free_count() == 0 {
            return None;
        }
        let b = take(self.arena);
        self.slots.take(b).map(FrameId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(wire_size: usize, vlan: Option<(u16, u8)>, roce: bool) -> FlowTemplate {
        FlowTemplate::build(&TemplateSpec { roce, ..TemplateSpec::example(wire_size, vlan) }).expect("a valid flow")
    }

    fn is_long(id: u32) -> bool {
        matches!(Size::of(id), Size::Long(_))
    }

    /// Writes one frame of `t` into a buffer chosen for it and one into a long buffer.
    fn both(arena: &mut Arena, t: &FlowTemplate) -> (u32, u32) {
        let chosen = arena.take_for(t.len(), t.zeros_from());
        let long = arena.take();
        for b in [chosen, long] {
            t.write_head(arena.write(b, t.len()), 41, 999);
        }
        (chosen, long)
    }

    #[test]
    fn a_test_frame_takes_one_cache_line_and_reads_as_it_would_from_two() {
        let mut arena = Arena::default();
        for (size, vlan) in [(1518, None), (1518, Some((100, 5))), (64, None), (9000, None)] {
            let t = template(size, vlan, false);
            let (short, long) = both(&mut arena, &t);
            assert!(!is_long(short), "{size} B, tag {vlan:?}: a short buffer");
            assert_eq!(arena.len(short), arena.len(long));
            let (a, b) = (arena.head(short), arena.head(long));
            assert_eq!(a, &b[..a.len()], "the same first bytes");
            assert!(b[a.len()..].iter().all(|&x| x == 0), "and only zeros past them");
            assert_eq!(read_stamp_in(a, t.len()), read_stamp_in(b, t.len()));
            assert!(read_stamp_in(a, t.len()).is_some());
        }
    }

    #[test]
    fn frames_a_short_buffer_would_cut_or_hold_in_part_take_long_ones() {
        let mut arena = Arena::default();
        // A RoCEv2 frame ends in its ICRC; a 100-byte frame fits a long buffer whole,
        // where a short one would hold only its start.
        for t in [template(1518, None, true), template(100, None, false)] {
            let (chosen, _) = both(&mut arena, &t);
            assert!(is_long(chosen), "{} B: a long buffer", t.len());
        }
    }

    #[test]
    fn a_copy_keeps_its_buffers_size_and_bytes_and_freed_buffers_are_reused_by_size() {
        let mut arena = Arena::default();
        let (short, long) = both(&mut arena, &template(1518, None, false));
        for b in [short, long] {
            let copy = arena.duplicate(b);
            assert_eq!(is_long(copy), is_long(b));
            assert_eq!((arena.len(copy), arena.head(copy)), (arena.len(b), arena.head(b)));
            arena.give(copy);
            let again = if is_long(b) { arena.take() } else { arena.take_for(1514, Some(54)) };
            assert_eq!(again, copy);
        }
    }
}
