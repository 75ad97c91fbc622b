//! The simulator's event queue: a timing wheel of one-nanosecond slots over the next
//! [`WINDOW_NS`], a binary heap for the few events due later (pause expiries, slowpath
//! ticks, scenario actions), and a small heap for the events of the current nanosecond.
//!
//! Events pop in the order of their time and, at equal times, of their key (the `seq`
//! the simulator gives them: who scheduled the event, and the how-manieth of theirs it
//! is), exactly as a binary heap ordered by `(at, seq)` pops them. A slot of the wheel
//! is a list in the order its events were pushed (appended, one step); when the time
//! reaches it, its events move into the current nanosecond's heap, which orders them by
//! key, and an event pushed for the current time goes straight there. Events move from
//! the far heap into the wheel as soon as the window reaches their time.
//!
//! Why not the heap alone: a fat-tree keeps tens of thousands of events pending, and a
//! heap pop walks its depth through memory scattered over all of them, a cache miss per
//! level; at k=8 that was a quarter of the run. The wheel's pops walk the slots in time
//! order, and the nodes of the lists are reused most recently freed first, so the memory
//! they touch stays in the cache whatever the fabric's size. Why the slot is not kept in
//! key order as it fills: in a fabric whose links all run at line rate from the same
//! start, hundreds of events fall on one nanosecond with keys in no order, and walking
//! the list for each push was 87 % of a push and a quarter of a k=16 permutation's run.
//! `cargo bench -p pfcsim --features des-bench --bench des_engines` replays a recorded
//! fat-tree run through both.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use pfcswitch_core::prefetch::prefetch_addr;

/// How far ahead of the current time the wheel holds events, ns: 2^14, 16 µs, which
/// covers a 1518-byte frame's time on the wire and a cable at 1G and faster (pause
/// expiries, the slowpath's delay and jumbo frames at 1G go through the far heap). The
/// slots, 128 KiB, stay in the L2 cache; with 2^18 (2 MiB) a push to each new line of
/// slots missed, and an incast at 100G, a few events a line, took 1.09 times as long
/// (`farm-bench -n 9`, k=8 127:1 incast of the agreement bench).
pub const WINDOW_NS: u64 = 1 << 14;
const SLOTS: usize = WINDOW_NS as usize;
const MASK: u64 = WINDOW_NS - 1;
const NIL: u32 = u32::MAX;

/// A slot's list of events: its first and last node. Side by side, because a push to an
/// empty slot writes both, and apart they were two misses a megabyte away from each other.
#[derive(Clone, Copy)]
struct Slot {
    head: u32,
    tail: u32,
}

const EMPTY: Slot = Slot { head: NIL, tail: NIL };

/// An event in the wheel. Its time is not kept: every pending time there is less than a
/// window ahead, so its slot names it, and without it two nodes fit a cache line.
struct Node<E> {
    seq: u64,
    ev: E,
    next: u32,
}

struct Far<E> {
    at: u64,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Far<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<E> Eq for Far<E> {}
impl<E> PartialOrd for Far<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Far<E> {
    /// Reversed: the heap pops the earliest, and among equal times the first scheduled.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Pending events of type `E`, due at nanosecond times, popped in `(time, seq)` order.
pub struct EventQueue<E> {
    /// The time of the latest pop: nothing earlier may be pushed.
    now: u64,
    /// Arrays of a fixed length, not Vecs: a slot number is a time masked to the wheel, so
    /// the compiler sees that every index is in bounds and checks none.
    slots: Box<[Slot; SLOTS]>,
    /// Which slots hold events: a bit per slot, a bit per word of those, and a bit per
    /// word of the second level, so the next event is found in a few word operations.
    level0: Box<[u64; SLOTS / 64]>,
    level1: [u64; SLOTS / 64 / 64],
    level2: u64,
    nodes: Vec<Node<E>>,
    free: u32,
    far: BinaryHeap<Far<E>>,
    /// The events due at `now`, earliest key on top. Every event pending at `now` is
    /// here (the wheel's slot for `now` is always empty); the time moves on only when
    /// this is empty.
    current: BinaryHeap<Current<E>>,
    len: usize,
}

/// An event of the current nanosecond, ordered by its key alone.
struct Current<E> {
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Current<E> {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
    }
}
impl<E> Eq for Current<E> {}
impl<E> PartialOrd for Current<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Current<E> {
    /// Reversed: the heap pops the smallest key.
    fn cmp(&self, other: &Self) -> Ordering {
        other.seq.cmp(&self.seq)
    }
}

impl<E: Copy> EventQueue<E> {
    /// An empty queue whose time starts at `now` ns.
    pub fn new(now: u64) -> EventQueue<E> {
        EventQueue {
            now,
            slots: boxed(EMPTY),
            level0: boxed(0),
            level1: [0; SLOTS / 64 / 64],
            level2: 0,
            nodes: Vec::new(),
            free: NIL,
            far: BinaryHeap::new(),
            current: BinaryHeap::new(),
            len: 0,
        }
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Schedules `ev` at `at` ns (not before the latest pop's time) with key `seq`, unique
    /// among the events pending at `at`. Inlined whole into its caller, the wheel's part
    /// too: a run pushes an event for nearly every one it pops, and two calls' register
    /// saves and restores were a fifth of a push's instructions.
    #[inline(always)]
    pub fn push(&mut self, at: u64, seq: u64, ev: E) {
        debug_assert!(at >= self.now, "an event in the past: {at} < {}", self.now);
        self.len += 1;
        if at == self.now {
            self.current.push(Current { seq, ev });
        } else if at - self.now < WINDOW_NS {
            self.link(at, seq, ev);
        } else {
            self.far.push(Far { at, seq, ev });
        }
    }

    /// When the earliest pending event is due, ns.
    pub fn next_at(&self) -> Option<u64> {
        if !self.current.is_empty() {
            return Some(self.now);
        }
        match self.next_slot() {
            Some(slot) => Some(self.slot_time(slot)),
            None => self.far.peek().map(|f| f.at),
        }
    }

    /// The earliest event, if it is due at `end` ns or before: `(at, seq, ev)`.
    pub fn pop_until(&mut self, end: u64) -> Option<(u64, u64, E)> {
        if self.current.is_empty() {
            let at = match self.next_slot() {
                Some(slot) => self.slot_time(slot),
                None => self.far.peek()?.at,
            };
            if at > end {
                return None;
            }
            self.advance(at);
        } else if self.now > end {
            return None;
        }
        let Current { seq, ev } = self.current.pop().expect("the current time has an event");
        self.len -= 1;
        if self.current.is_empty() {
            // The next time's first node was written when it was scheduled, a wire time
            // and many events ago, and is seldom still in the cache: ask for it now, so
            // that the wait overlaps this event's work (an event this one schedules may
            // come first; the hint is then wasted, nothing else).
            if let Some(node) = self.next_slot().and_then(|s| self.nodes.get(self.slots[s].head as usize)) {
                prefetch_addr(std::ptr::from_ref(node).cast());
            }
        }
        Some((self.now, seq, ev))
    }

    /// The next event if it is due at the current time (its node is in the cache: a
    /// caller may look at it to ask for what it will touch).
    #[inline(always)]
    pub fn peek_current(&self) -> Option<&E> {
        self.current.peek().map(|c| &c.ev)
    }

    /// Moves the time on to `at`, the earliest pending event's, and its events into the
    /// current nanosecond's heap.
    fn advance(&mut self, at: u64) {
        self.now = at;
        // The window now reaches further: what the far heap holds for the newly covered
        // times goes to their slots (this time's too: it is drained next).
        while self.far.peek().is_some_and(|f| f.at - self.now < WINDOW_NS) {
            let f = self.far.pop().expect("peeked");
            self.link(f.at, f.seq, f.ev);
        }
        let slot = (at & MASK) as usize;
        let mut events = std::mem::take(&mut self.current).into_vec();
        let mut i = self.slots[slot].head;
        while i != NIL {
            let node = &self.nodes[i as usize];
            let next = node.next;
            events.push(Current { seq: node.seq, ev: node.ev });
            self.nodes[i as usize].next = self.free;
            self.free = i;
            i = next;
        }
        self.slots[slot] = EMPTY;
        self.unmark(slot);
        // Heapified whole, in linear time; the Vec keeps its capacity from time to time.
        self.current = BinaryHeap::from(events);
    }

    /// Every pending event as `(at, seq, ev)`, in no particular order.
    pub fn pending(&self) -> Vec<(u64, u64, E)> {
        let mut out: Vec<(u64, u64, E)> = self.far.iter().map(|f| (f.at, f.seq, f.ev)).collect();
        out.extend(self.current.iter().map(|c| (self.now, c.seq, c.ev)));
        for (slot, s) in self.slots.iter().enumerate().filter(|(_, s)| s.head != NIL) {
            let at = self.slot_time(slot);
            let mut i = s.head;
            while i != NIL {
                let n = &self.nodes[i as usize];
                out.push((at, n.seq, n.ev));
                i = n.next;
            }
        }
        out
    }

    #[inline(always)]
    fn link(&mut self, at: u64, seq: u64, ev: E) {
        let node = Node { seq, ev, next: NIL };
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = node;
            i
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        let slot = (at & MASK) as usize;
        match self.slots[slot].tail {
            NIL => {
                self.slots[slot].head = i;
                self.mark(slot);
            }
            t => self.nodes[t as usize].next = i,
        }
        self.slots[slot].tail = i;
    }

    /// The time `slot` holds events for: the one in the window that starts now.
    #[inline(always)]
    fn slot_time(&self, slot: usize) -> u64 {
        self.now + ((slot as u64).wrapping_sub(self.now) & MASK)
    }

    fn mark(&mut self, slot: usize) {
        let w = slot >> 6;
        self.level0[w] |= 1 << (slot & 63);
        self.level1[w >> 6] |= 1 << (w & 63);
        self.level2 |= 1 << (w >> 6);
    }

    fn unmark(&mut self, slot: usize) {
        let w = slot >> 6;
        self.level0[w] &= !(1 << (slot & 63));
        if self.level0[w] == 0 {
            self.level1[w >> 6] &= !(1 << (w & 63));
            if self.level1[w >> 6] == 0 {
                self.level2 &= !(1 << (w >> 6));
            }
        }
    }

    /// The slot of the earliest event in the wheel: the first marked slot from the
    /// current time's on, else (the window wraps round) from slot 0 on.
    fn next_slot(&self) -> Option<usize> {
        let from = (self.now & MASK) as usize;
        self.first_marked_from(from).or_else(|| self.first_marked_from(0))
    }

    fn first_marked_from(&self, slot: usize) -> Option<usize> {
        /// Bits at `n` and above.
        fn from_bit(n: usize) -> u64 {
            if n >= 64 {
                0
            } else {
                !0 << n
            }
        }
        let lowest = |word: u64| word.trailing_zeros() as usize;
        let w = slot >> 6;
        let bits = self.level0[w] & from_bit(slot & 63);
        if bits != 0 {
            return Some((w << 6) | lowest(bits));
        }
        let w1 = w >> 6;
        let words = self.level1[w1] & from_bit((w & 63) + 1);
        if words != 0 {
            let w = (w1 << 6) | lowest(words);
            return Some((w << 6) | lowest(self.level0[w]));
        }
        let groups = self.level2 & from_bit(w1 + 1);
        if groups != 0 {
            let w1 = lowest(groups);
            let w = (w1 << 6) | lowest(self.level1[w1]);
            return Some((w << 6) | lowest(self.level0[w]));
        }
        None
    }
}

/// `[value; N]` on the heap, never on the stack (a wheel of slots at any size it may take).
fn boxed<T: Copy, const N: usize>(value: T) -> Box<[T; N]> {
    vec![value; N].into_boxed_slice().try_into().unwrap_or_else(|_| unreachable!("a Vec of N is N long"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The reference: a binary heap ordered by (at, seq).
    fn heap_order(events: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let mut v = events.to_vec();
        v.sort();
        v
    }

    #[test]
    fn events_pushed_out_of_key_order_still_pop_in_it() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut q = EventQueue::new(0);
        let mut pending = Vec::new();
        let mut keys: Vec<u64> = (0..5000).collect();
        // Keys shuffled, times crowded onto a few slots near and far.
        for k in (1..keys.len()).rev() {
            keys.swap(k, rng.random_range(0..=k));
        }
        for &key in &keys {
            let at = rng.random_range(0..8) * (WINDOW_NS / 3);
            q.push(at, key, ());
            pending.push((at, key));
        }
        let popped: Vec<(u64, u64)> = std::iter::from_fn(|| q.pop_until(u64::MAX)).map(|(at, k, _)| (at, k)).collect();
        assert_eq!(popped, heap_order(&pending));
    }

    #[test]
    fn events_pop_in_time_then_scheduling_order_as_from_a_heap_near_and_far_alike() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut q = EventQueue::new(1000);
        let (mut seq, mut now) = (0u64, 1000u64);
        let mut popped = Vec::new();
        let mut pending = Vec::new();
        // Pushes and pops interleaved, as a run does: most events a few hundred ns
        // ahead, some at the same ns, some far beyond the window.
        for round in 0..20_000 {
            for _ in 0..rng.random_range(0..3) {
                let ahead = match rng.random_range(0..10) {
                    0 => 0,
                    1 => rng.random_range(WINDOW_NS - 10..WINDOW_NS + 10),
                    2 => rng.random_range(0..5 * WINDOW_NS),
                    _ => rng.random_range(0..400),
                };
                seq += 1;
                q.push(now + ahead, seq, round as u32);
                pending.push((now + ahead, seq));
            }
            if let Some((at, s, _)) = q.pop_until(u64::MAX) {
                assert!(at >= now);
                now = at;
                popped.push((at, s));
            }
        }
        while let Some((at, s, _)) = q.pop_until(u64::MAX) {
            popped.push((at, s));
        }
        assert!(q.is_empty());
        assert_eq!(popped, heap_order(&pending));
    }

    #[test]
    fn keys_in_any_order_pushed_between_pops_pop_as_a_heap_pops_them() {
        // Keys as the simulator draws them: any order at a time, unique among its events,
        // pushed to the current time and to later ones between pops. Each pop is checked
        // against a heap given the same pushes.
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut q = EventQueue::new(0);
        let mut heap = std::collections::BinaryHeap::new();
        let mut now = 0u64;
        let mut next_key = 0u64;
        for _ in 0..50_000 {
            for _ in 0..rng.random_range(0..4) {
                let ahead = match rng.random_range(0..8) {
                    0 | 1 => 0,
                    2 => rng.random_range(0..3 * WINDOW_NS),
                    _ => rng.random_range(0..6),
                };
                // Unique keys in a shuffled order: a count with its bits scrambled.
                next_key += 1;
                let key = next_key.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
                q.push(now + ahead, key, ());
                heap.push(std::cmp::Reverse((now + ahead, key)));
            }
            let got = q.pop_until(u64::MAX).map(|(at, key, ())| (at, key));
            let want = heap.pop().map(|std::cmp::Reverse(e)| e);
            assert_eq!(got, want);
            if let Some((at, _)) = got {
                now = at;
            }
        }
        while let Some(std::cmp::Reverse(want)) = heap.pop() {
            assert_eq!(q.pop_until(u64::MAX).map(|(at, key, ())| (at, key)), Some(want));
        }
        assert!(q.is_empty());
    }

    #[test]
    fn nothing_after_the_end_pops_and_the_time_does_not_move_past_it() {
        let mut q = EventQueue::new(0);
        q.push(10, 1, 'a');
        q.push(WINDOW_NS * 3, 2, 'b');
        assert_eq!(q.pop_until(5), None);
        assert_eq!(q.pop_until(10), Some((10, 1, 'a')));
        assert_eq!(q.pop_until(WINDOW_NS), None);
        // Still allowed: the time stayed at the last pop.
        q.push(20, 3, 'c');
        assert_eq!(q.pop_until(u64::MAX), Some((20, 3, 'c')));
        assert_eq!(q.pop_until(u64::MAX), Some((WINDOW_NS * 3, 2, 'b')));
        assert_eq!(q.len(), 0);
    }
}
