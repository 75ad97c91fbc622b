//! Ports by index, and sets of them.
//!
//! A switch has at most [`MAX_PORTS`] ports: a set of ports is one machine word
//! ([`PortSet`]), which keeps the traffic map's rows, the blocked ports and a flood's
//! targets free of allocation on the hot path.

use std::fmt;

/// A port of a switch: its index in the configuration's port list.
pub type PortId = usize;

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
        PortSet(1 << port)
    }

    /// Whether `port` is in the set.
    pub const fn contains(self, port: PortId) -> bool {
        self.0 & (1 << port) != 0
    }

    /// Adds `port`.
    pub fn insert(&mut self, port: PortId) {
        self.0 |= 1 << port;
    }

    /// Removes `port`.
    pub fn remove(&mut self, port: PortId) {
        self.0 &= !(1 << port);
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
            Some(63 - self.0.leading_zeros() as usize)
        }
    }

    /// The ports in the set, lowest first.
    pub fn iter(self) -> impl Iterator<Item = PortId> {
        let mut rest = self.0;
        std::iter::from_fn(move || {
            if rest == 0 {
                return None;
            }
            let port = rest.trailing_zeros() as usize;
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
        let mut s: PortSet = [0, 5, MAX_PORTS - 1].into_iter().collect();
        assert!(s.contains(0) && s.contains(5) && s.contains(MAX_PORTS - 1) && !s.contains(1));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 5, MAX_PORTS - 1]);
        assert_eq!(s.last(), Some(MAX_PORTS - 1));
        s.remove(MAX_PORTS - 1);
        assert_eq!((s.last(), format!("{s:?}")), (Some(5), "{0, 5}".to_string()));
        assert_eq!(PortSet::only(2) | PortSet::only(3), [2, 3].into_iter().collect());
        assert!(PortSet::EMPTY.is_empty() && PortSet::EMPTY.last().is_none());
    }
}
