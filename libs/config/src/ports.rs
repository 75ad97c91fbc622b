//! Ports by index, and sets of them.
//!
//! A switch has at most [`MAX_PORTS`] ports: a set of ports is one machine word
//! ([`PortSet`]), which keeps the traffic map's rows, the blocked ports and a flood's
//! targets free of allocation on the hot path.

use std::fmt;

/// A port of a switch: its index in the configuration's port list. A type of its own, so
/// that a port is never taken for a priority, a count or a frame id; `.index()` where a
/// list is indexed by port (a `Vec` or a slice indexes by `PortId` directly).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct PortId(u16);

impl PortId {
    /// Port `index` of the switch (below [`MAX_PORTS`]).
    pub const fn new(index: usize) -> PortId {
        assert!(index < MAX_PORTS, "a switch has at most MAX_PORTS ports");
        PortId(index as u16)
    }

    /// Port `index`, if a switch can have it (an index read off the wire may not).
    pub const fn checked(index: usize) -> Option<PortId> {
        if index < MAX_PORTS {
            Some(PortId(index as u16))
        } else {
            None
        }
    }

    /// Its index in the switch's port list.
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The first `n` ports of a switch, in order.
    pub fn all(n: usize) -> impl Iterator<Item = PortId> + Clone {
        (0..n).map(PortId::new)
    }
}

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<T> std::ops::Index<PortId> for Vec<T> {
    type Output = T;
    fn index(&self, port: PortId) -> &T {
        &self[port.index()]
    }
}

impl<T> std::ops::IndexMut<PortId> for Vec<T> {
    fn index_mut(&mut self, port: PortId) -> &mut T {
        &mut self[port.index()]
    }
}

impl<T> std::ops::Index<PortId> for [T] {
    type Output = T;
    fn index(&self, port: PortId) -> &T {
        &self[port.index()]
    }
}

impl<T> std::ops::IndexMut<PortId> for [T] {
    fn index_mut(&mut self, port: PortId) -> &mut T {
        &mut self[port.index()]
    }
}

/// The most ports a switch has: a [`PortSet`] holds them in one `u64`.
pub const MAX_PORTS: usize = 64;

/// A set of ports of one switch.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct PortSet(u64);

impl PortSet {
    /// No port.
    pub const EMPTY: PortSet = PortSet(0);

    /// The set holding `port` alone.
    pub const fn only(port: PortId) -> PortSet {
        PortSet(1 << port.index())
    }

    /// Whether `port` is in the set.
    pub const fn contains(self, port: PortId) -> bool {
        self.0 & (1 << port.index()) != 0
    }

    /// Adds `port`.
    pub fn insert(&mut self, port: PortId) {
        self.0 |= 1 << port.index();
    }

    /// Removes `port`.
    pub fn remove(&mut self, port: PortId) {
        self.0 &= !(1 << port.index());
    }

    /// Whether no port is in the set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The highest port in the set.
    pub const fn last(self) -> Option<PortId> {
        if self.0 == 0 {
            None
        } else {
            Some(PortId::new(63 - self.0.leading_zeros() as usize))
        }
    }

    /// The ports in the set, lowest first.
    pub fn iter(self) -> impl Iterator<Item = PortId> {
        let mut rest = self.0;
        std::iter::from_fn(move || {
            if rest == 0 {
                return None;
            }
            let port = PortId::new(rest.trailing_zeros() as usize);
            rest &= rest - 1;
            Some(port)
        })
    }
}

impl std::ops::BitOr for PortSet {
    type Output = PortSet;
    fn bitor(self, other: PortSet) -> PortSet {
        PortSet(self.0 | other.0)
    }
}

impl FromIterator<PortId> for PortSet {
    fn from_iter<I: IntoIterator<Item = PortId>>(ports: I) -> PortSet {
        let mut set = PortSet::EMPTY;
        for p in ports {
            set.insert(p);
        }
        set
    }
}

impl fmt::Debug for PortSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_holds_every_port_up_to_the_limit_and_iterates_in_order() {
        let p = PortId::new;
        let mut s: PortSet = [p(0), p(5), p(MAX_PORTS - 1)].into_iter().collect();
        assert!(s.contains(p(0)) && s.contains(p(5)) && s.contains(p(MAX_PORTS - 1)) && !s.contains(p(1)));
        assert_eq!(s.iter().map(PortId::index).collect::<Vec<_>>(), vec![0, 5, MAX_PORTS - 1]);
        assert_eq!(s.last(), Some(p(MAX_PORTS - 1)));
        s.remove(p(MAX_PORTS - 1));
        assert_eq!((s.last(), format!("{s:?}")), (Some(p(5)), "{PortId(0), PortId(5)}".to_string()));
        assert_eq!(PortSet::only(p(2)) | PortSet::only(p(3)), [p(2), p(3)].into_iter().collect());
        assert!(PortSet::EMPTY.is_empty() && PortSet::EMPTY.last().is_none());
    }
}
