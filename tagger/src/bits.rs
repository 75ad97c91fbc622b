//! Bit sets over dense indices (route states, ports, hops): the visited sets of the
//! whole-model walks and what the per-destination walks keep. One destination's ports
//! can also be a slice of a flat array of words (all destinations' entry ports at once),
//! read and written through [`has`] and [`set`].

/// A bit set of a fixed size.
#[derive(Clone, Debug)]
pub(crate) struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    pub(crate) fn new(n: usize) -> BitSet {
        BitSet { words: vec![0; n.div_ceil(64)] }
    }

    /// Sets bit `i`; returns whether it was clear.
    pub(crate) fn insert(&mut self, i: usize) -> bool {
        let fresh = !has(&self.words, i);
        set(&mut self.words, i);
        fresh
    }

    pub(crate) fn contains(&self, i: usize) -> bool {
        has(&self.words, i)
    }

    pub(crate) fn clear(&mut self) {
        self.words.fill(0);
    }

    /// Adds every bit of `other` (of the same size).
    pub(crate) fn union(&mut self, other: &BitSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    /// Sets the bits of `mask` shifted up by `at` (bit `at + b` for bit `b` of it).
    pub(crate) fn insert_bits(&mut self, at: usize, mask: u64) {
        set_bits(&mut self.words, at, mask);
    }

    /// Bits `at..at + len` (`len` at most 64) as a mask, bit `at` lowest.
    pub(crate) fn bits(&self, at: usize, len: usize) -> u64 {
        bits_at(&self.words, at, len)
    }

    /// The bits set, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &bits)| {
            let mut b = bits;
            std::iter::from_fn(move || {
                (b != 0).then(|| {
                    let i = b.trailing_zeros() as usize;
                    b &= b - 1;
                    w * 64 + i
                })
            })
        })
    }
}

/// Bit `i` of a bit set laid out in `words`.
pub(crate) fn has(words: &[u64], i: usize) -> bool {
    words[i / 64] & (1 << (i % 64)) != 0
}

/// Sets bit `i` of a bit set laid out in `words`.
pub(crate) fn set(words: &mut [u64], i: usize) {
    words[i / 64] |= 1 << (i % 64);
}

/// Bits `at..at + len` (`len` at most 64; `at` within the set, bits past its end read
/// as clear) of a bit set laid out in `words`, as a mask, bit `at` lowest.
pub(crate) fn bits_at(words: &[u64], at: usize, len: usize) -> u64 {
    let (w, s) = (at / 64, at % 64);
    let mut v = words[w] >> s;
    if s != 0 && s + len > 64 {
        v |= words.get(w + 1).map_or(0, |&x| x << (64 - s));
    }
    if len < 64 {
        v & ((1 << len) - 1)
    } else {
        v
    }
}

/// Sets the bits of `mask` shifted up by `at` in a bit set laid out in `words` (every bit
/// set must fall within it).
pub(crate) fn set_bits(words: &mut [u64], at: usize, mask: u64) {
    let (w, s) = (at / 64, at % 64);
    words[w] |= mask << s;
    if s != 0 && mask >> (64 - s) != 0 {
        words[w + 1] |= mask >> (64 - s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bit_set_says_what_is_new_and_lists_its_bits_in_order() {
        let mut a = BitSet::new(130);
        assert!(a.insert(129) && a.insert(3) && !a.insert(3));
        let mut b = BitSet::new(130);
        b.insert(64);
        a.union(&b);
        assert_eq!(a.iter().collect::<Vec<_>>(), [3, 64, 129]);
        assert!(a.contains(64) && !a.contains(65));
        a.clear();
        assert_eq!(a.iter().count(), 0);
    }

    #[test]
    fn masks_read_and_set_the_bits_they_cover_across_a_word_boundary() {
        let mut a = BitSet::new(200);
        a.insert_bits(60, 0b1011_0001);
        assert_eq!(a.iter().collect::<Vec<_>>(), [60, 64, 65, 67]);
        assert_eq!(a.bits(60, 8), 0b1011_0001);
        assert_eq!(a.bits(61, 3), 0b000, "a window, not what lies past it");
        assert_eq!(a.bits(64, 64), 0b1011);
        a.insert_bits(128, u64::MAX);
        assert_eq!((a.bits(128, 64), a.bits(100, 64)), (u64::MAX, u64::MAX << 28));
        assert_eq!(a.bits(250, 64), 0, "past the last word: clear");
    }
}
