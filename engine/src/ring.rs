//! The latest `N` values of something, the oldest overwritten, for the per-port records
//! the engine keeps (XOFF episodes, checking messages it originated, pause arrivals).
//!
//! It grows as values come, up to `N` (a few allocations in its life, none once full),
//! where a fixed array took all of `N` up front: a simulated k=16 fat-tree's pausing
//! ports held 13 XOFF episodes of 64 on average, and their fixed rings were 6 MiB.

#[derive(Clone, Debug)]
pub struct Ring<T, const N: usize> {
    /// `min(pushed, N)` values; the next goes to `pushed % N`.
    items: Vec<T>,
    /// Values pushed since the last clear.
    pushed: usize,
}

impl<T, const N: usize> Default for Ring<T, N> {
    fn default() -> Ring<T, N> {
        Ring { items: Vec::new(), pushed: 0 }
    }
}

impl<T, const N: usize> Ring<T, N> {
    /// Keeps `value`, in place of the oldest when full; returns its number (how many
    /// were pushed before it), by which [`Ring::get_mut`] finds it while it is held.
    pub fn push(&mut self, value: T) -> usize {
        if self.items.len() < N {
            self.items.push(value);
        } else {
            self.items[self.pushed % N] = value;
        }
        self.pushed += 1;
        self.pushed - 1
    }

    /// The value numbered `k` by [`Ring::push`], unless newer values have taken its place
    /// (or the ring was cleared since).
    pub fn get_mut(&mut self, k: usize) -> Option<&mut T> {
        (k < self.pushed && k + N >= self.pushed).then(|| &mut self.items[k % N])
    }

    /// Forgets every value.
    pub fn clear(&mut self) {
        self.items.clear();
        self.pushed = 0;
    }

    pub fn len(&self) -> usize {
        self.pushed.min(N)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.pushed == 0
    }

    /// The values held, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        let n = self.len();
        (0..n).map(move |k| &self.items[(self.pushed - n + k) % N])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pushed_value_is_found_by_its_number_until_newer_ones_take_its_place() {
        let mut r: Ring<u32, 3> = Ring::default();
        let k = r.push(10);
        assert_eq!(r.get_mut(k), Some(&mut 10));
        r.push(11);
        r.push(12);
        *r.get_mut(k).unwrap() = 20;
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), [20, 11, 12]);
        r.push(13);
        assert_eq!(r.get_mut(k), None, "overwritten by 13");
        assert_eq!(r.get_mut(k + 4), None, "not pushed yet");
        r.clear();
        assert_eq!(r.get_mut(k + 1), None);
    }

    #[test]
    fn keeps_the_latest_oldest_first_and_clears() {
        let mut r: Ring<u32, 3> = Ring::default();
        assert!(r.is_empty() && r.iter().next().is_none());
        r.push(1);
        r.push(2);
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![1, 2]);
        for v in 3..=5 {
            r.push(v);
        }
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![3, 4, 5]);
        r.clear();
        assert_eq!(r.len(), 0);
        r.push(7);
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![7]);
    }
}
