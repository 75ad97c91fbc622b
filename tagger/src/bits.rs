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
}
