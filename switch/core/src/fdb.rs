//! The forwarding database of a learning bridge (shared VLAN learning: keyed by MAC only,
//! so tagged frames are switched without touching their tags).

use std::collections::HashMap;
use std::time::Duration;

use rustc_hash::FxBuildHasher;

use super::mac::MacAddr;
use super::time::Time;

use super::ports::PortId;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    port: u16,
    last_seen: Time,
    is_static: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Learned {
    New,
    Refreshed,
    /// The address was known on another port: the station moved.
    Moved,
    /// Not learned: the table is full (the frame is still forwarded).
    TableFull,
    /// A static entry holds this address; it is not overridden.
    Static,
}

/// Stations a new table has room for before it first grows.
pub const INITIAL_ROOM: usize = 256;

/// The forwarding database: MAC address to port, learned (and aged) or static.
#[derive(Debug)]
pub struct Fdb {
    entries: HashMap<u64, Entry, FxBuildHasher>,
    max_entries: usize,
    statics: usize,
    aging: Duration,
}

/// One row of the table, for display.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FdbRow {
    /// The station.
    pub mac: MacAddr,
    /// Where it was learned, or pinned.
    pub port: PortId,
    /// Seconds since it was last seen (0 for static entries).
    pub age_s: u64,
    /// A static entry from the configuration.
    pub is_static: bool,
}

impl Fdb {
    /// Room for [`INITIAL_ROOM`] stations is reserved up front; the table doubles as more
    /// are learned, up to `max_entries`, unless [`Fdb::reserve_all`] reserved it all.
    /// Reserving all of `max_entries` for every switch made a simulated fabric's switches
    /// hold a megabyte of mostly empty table each: lookups then missed the caches and the
    /// TLB in proportion to the number of switches, which made the simulator slower per
    /// event as the fabric grew.
    pub fn new(max_entries: usize, aging: Duration) -> Fdb {
        let room = max_entries.min(INITIAL_ROOM);
        Fdb { entries: HashMap::with_capacity_and_hasher(room, FxBuildHasher), max_entries, statics: 0, aging }
    }

    /// Reserves room for `max_entries` now, so that learning never allocates.
    pub fn reserve_all(&mut self) {
        self.entries.reserve(self.max_entries.saturating_sub(self.entries.len()));
    }

    /// Records that `mac` was seen on `port`. Callers must not learn multicast or zero sources.
    pub(crate) fn learn(&mut self, mac: MacAddr, port: PortId, now: Time) -> Learned {
        let port = port as u16;
        let learned = self.entries.len() - self.statics;
        match self.entries.get_mut(&mac.as_u64()) {
            Some(e) if e.is_static => Learned::Static,
            Some(e) => {
                e.last_seen = now;
                if e.port == port {
                    Learned::Refreshed
                } else {
                    e.port = port;
                    Learned::Moved
                }
            }
            None if learned >= self.max_entries => Learned::TableFull,
            None => {
                self.entries.insert(mac.as_u64(), Entry { port, last_seen: now, is_static: false });
                Learned::New
            }
        }
    }

    /// A static entry: never ages, never moves. Does not count against `max_entries`.
    pub fn add_static(&mut self, mac: MacAddr, port: PortId) {
        if !self.entries.get(&mac.as_u64()).is_some_and(|e| e.is_static) {
            self.statics += 1;
        }
        self.entries.insert(mac.as_u64(), Entry { port: port as u16, last_seen: Time::ZERO, is_static: true });
    }

    /// The port `mac` was last seen on, if that is recent enough.
    pub fn lookup(&self, mac: MacAddr, now: Time) -> Option<PortId> {
        let e = self.entries.get(&mac.as_u64())?;
        (e.is_static || now.saturating_since(e.last_seen) < self.aging).then_some(usize::from(e.port))
    }

    /// Forgets entries older than the aging time; returns how many.
    pub fn age(&mut self, now: Time) -> usize {
        let before = self.entries.len();
        let aging = self.aging;
        self.entries.retain(|_, e| e.is_static || now.saturating_since(e.last_seen) < aging);
        before - self.entries.len()
    }

    /// Forgets what was learned on `port` (its link went away).
    pub fn flush_port(&mut self, port: PortId) {
        self.entries.retain(|_, e| e.is_static || usize::from(e.port) != port);
    }

    /// Entries, learned and static.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry as `ctl fdb` shows it, ordered by address.
    pub fn rows(&self, now: Time) -> Vec<FdbRow> {
        let mut rows: Vec<FdbRow> = self
            .entries
            .iter()
            .map(|(&k, e)| FdbRow {
                mac: MacAddr::from_slice(&k.to_be_bytes()[2..]),
                port: usize::from(e.port),
                age_s: now.saturating_since(e.last_seen).as_secs(),
                is_static: e.is_static,
            })
            .collect();
        rows.sort_by_key(|r| (r.port, r.mac));
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGING: Duration = Duration::from_secs(300);

    #[test]
    fn learns_moves_and_ages() {
        let mut fdb = Fdb::new(2, AGING);
        let a = MacAddr::local(1);
        let t0 = Time::from_millis(1);
        assert_eq!(fdb.learn(a, 1, t0), Learned::New);
        assert_eq!(fdb.lookup(a, t0), Some(1));
        assert_eq!(fdb.learn(a, 1, t0), Learned::Refreshed);
        assert_eq!(fdb.learn(a, 2, t0), Learned::Moved);
        assert_eq!(fdb.lookup(a, t0), Some(2));
        let later = t0 + AGING;
        assert_eq!(fdb.lookup(a, later), None, "stale entries are not used even before a sweep");
        assert_eq!(fdb.age(later), 1);
        assert!(fdb.is_empty());
    }

    #[test]
    fn full_table_does_not_learn_and_static_entries_stay() {
        let mut fdb = Fdb::new(1, AGING);
        let t = Time::ZERO;
        fdb.add_static(MacAddr::local(9), 3);
        assert_eq!(fdb.learn(MacAddr::local(9), 1, t), Learned::Static);
        assert_eq!(fdb.learn(MacAddr::local(1), 0, t), Learned::New);
        assert_eq!(fdb.learn(MacAddr::local(2), 0, t), Learned::TableFull);
        assert_eq!(fdb.lookup(MacAddr::local(2), t), None);
        fdb.age(t + AGING * 2);
        fdb.flush_port(3);
        assert_eq!(fdb.lookup(MacAddr::local(9), t + AGING * 2), Some(3));
        assert_eq!(fdb.rows(t).len(), 1);
    }
}
