//! The latest `N` values of something, the oldest overwritten: a fixed array that never
//! allocates, for the per-port records the engine keeps (XOFF episodes, checking
//! messages it originated, pause arrivals).

#[derive(Clone, Copy, Debug)]
pub struct Ring<T, const N: usize> {
    items: [T; N],
    /// Values pushed since the last clear; the next goes to `pushed % N`.
    pushed: usize,
}

impl<T: Copy + Default, const N: usize> Default for Ring<T, N> {
    fn default() -> Ring<T, N> {
        Ring { items: [T::default(); N], pushed: 0 }
    }
}

impl<T: Copy + Default, const N: usize> Ring<T, N> {
    pub fn push(&mut self, value: T) {
        self.items[self.pushed % N] = value;
        self.pushed += 1;
    }

    /// Forgets every value.
    pub fn clear(&mut self) {
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

    /// The values held, in no particular order, for changing in place.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> + '_ {
        let n = self.len();
        self.items[..n].iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        r.iter_mut().for_each(|v| *v *= 10);
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![30, 40, 50]);
        r.clear();
        assert_eq!(r.len(), 0);
        r.push(7);
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![7]);
    }
}
