//! The forwarding database of a learning bridge (shared VLAN learning: keyed by MAC only,
//! so tagged frames are switched without touching their tags).
//!
//! Its keys are what hosts choose (their source addresses), and every lookup happens on
//! the forwarding thread, so the table hashes with a key of its own: aHash, keyed per
//! table from the OS's randomness ([`RandomState`] with `runtime-rng`), a hash built for
//! in-memory maps whose inputs an adversary picks. An unkeyed fast hash let a host pick
//! source addresses that collide and turn each lookup into a long probe. The table used
//! std's SipHash-1-3 before: learning and lookup were 8 % of the simulator's time on a
//! fat-tree, and aHash made the whole run 0.94 of that (foldhash, already in
//! the tree through hashbrown, says it should not be used where a peer can study the
//! program to make keys collide, which is the case here). Nothing the switch reports
//! depends on the key (rows are sorted), so the simulator's output stays the same from
//! run to run.

use std::collections::HashMap;
use std::time::Duration;

use ahash::RandomState;

use super::mac::MacAddr;
use super::time::Time;

use super::ports::PortId;

/// A learned station: where, and when last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    port: u16,
    last_seen: Time,
}

/// A static entry's key: the address in its six bytes, hashed as one word (as the
/// learned table's `u64` keys are; `MacAddr`'s own hash writes a length and six bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Station(MacAddr);

impl std::hash::Hash for Station {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        h.write_u64(self.0.as_u64());
    }
}

/// A static entry: its port, or its multipath group's number plus one (0: a single port).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pinned {
    port: u16,
    group: u16,
}

/// Where a lookup sends a frame: one port, or a group of equal-cost ports of which the
/// frame's flow picks one ([`crate::ecmp`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// This port.
    Port(PortId),
    /// One of this group's ports.
    Group(GroupId),
}

/// A group of equal-cost egress ports, as [`Fdb::add_static_group`] numbered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupId(u16);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Learned {
    New,
    Refreshed,
    /// The address was known on another port: the station moved.
    Moved,
    /// Not learned: the table is full (the frame is still forwarded).
    TableFull,
    /// Not learned (nor moved): the port has learned its `max_per_port` already.
    PortFull,
    /// A static entry holds this address; it is not overridden.
    Static,
}

/// Stations a new table has room for before it first grows.
pub const INITIAL_ROOM: usize = 256;

/// The forwarding database: MAC address to port, learned (and aged) or static.
#[derive(Debug)]
pub struct Fdb {
    /// Learned stations, at most `max_entries`.
    entries: HashMap<u64, Entry, RandomState>,
    /// Static entries, apart: they never age nor move, so they keep no time, and a row
    /// takes 10 bytes where a learned one takes 24. A simulated k=16 fat-tree's 320
    /// switches have an entry for each of its 1 024 hosts: in one table, 16 MiB.
    statics: HashMap<Station, Pinned, RandomState>,
    max_entries: usize,
    aging: Duration,
    /// Learned (not static) entries per port, and the most a port may have.
    per_port: Vec<u32>,
    max_per_port: u32,
    /// The static multipath entries' groups of ports.
    groups: Vec<Box<[PortId]>>,
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
    /// A static multipath entry's ports (`port` is the first of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub group: Vec<PortId>,
}

impl Fdb {
    /// Room for [`INITIAL_ROOM`] stations is reserved at the first one learned; the table
    /// doubles as more are learned, up to `max_entries`, unless [`Fdb::reserve_all`]
    /// reserved it all (a switch whose stations all have static entries learns none).
    /// Reserving all of `max_entries` for every switch made a simulated fabric's switches
    /// hold a megabyte of mostly empty table each: lookups then missed the caches and the
    /// TLB in proportion to the number of switches, which made the simulator slower per
    /// event as the fabric grew.
    /// A port learns at most `max_per_port` stations (`None`: as many as the table has).
    pub fn new(max_entries: usize, aging: Duration, ports: usize, max_per_port: Option<u32>) -> Fdb {
        let hasher = RandomState::new();
        Fdb {
            entries: HashMap::with_hasher(hasher.clone()),
            statics: HashMap::with_hasher(hasher),
            max_entries,
            aging,
            per_port: vec![0; ports],
            max_per_port: max_per_port.unwrap_or(u32::MAX),
            groups: Vec::new(),
        }
    }

    fn port_full(&self, port: u16) -> bool {
        self.per_port.get(usize::from(port)).is_some_and(|&n| n >= self.max_per_port)
    }

    fn count(&mut self, port: u16, up: bool) {
        if let Some(n) = self.per_port.get_mut(usize::from(port)) {
            *n = if up { *n + 1 } else { n.saturating_sub(1) };
        }
    }

    /// Reserves room for `max_entries` now, so that learning never allocates.
    pub fn reserve_all(&mut self) {
        self.entries.reserve(self.max_entries.saturating_sub(self.entries.len()));
    }

    /// Records that `mac` was seen on `port`. Callers must not learn multicast or zero sources.
    pub(crate) fn learn(&mut self, mac: MacAddr, port: PortId, now: Time) -> Learned {
        if self.statics.contains_key(&Station(mac)) {
            return Learned::Static;
        }
        let port = port.index() as u16;
        let learned = self.entries.len();
        let port_full = self.port_full(port);
        let was = match self.entries.get_mut(&mac.as_u64()) {
            Some(e) if e.port == port => {
                e.last_seen = now;
                return Learned::Refreshed;
            }
            // A full port takes no station from another either: the entry stays where it
            // was, and ages out there if the station really moved.
            Some(_) if port_full => return Learned::PortFull,
            Some(e) => {
                e.last_seen = now;
                Some(std::mem::replace(&mut e.port, port))
            }
            None if learned >= self.max_entries => return Learned::TableFull,
            None if port_full => return Learned::PortFull,
            None => {
                if self.entries.capacity() == 0 {
                    self.entries.reserve(self.max_entries.min(INITIAL_ROOM));
                }
                self.entries.insert(mac.as_u64(), Entry { port, last_seen: now });
                None
            }
        };
        self.count(port, true);
        match was {
            Some(from) => {
                self.count(from, false);
                Learned::Moved
            }
            None => Learned::New,
        }
    }

    /// A static entry: never ages, never moves, and takes the place of what was learned
    /// of `mac`. Does not count against `max_entries`.
    pub fn add_static(&mut self, mac: MacAddr, port: PortId) {
        if let Some(was) = self.entries.remove(&mac.as_u64()) {
            self.count(was.port, false);
        }
        self.statics.insert(Station(mac), Pinned { port: port.index() as u16, group: 0 });
    }

    /// A static multipath entry: `mac` is reached by any of `ports` (at least one), one
    /// chosen per flow. Never ages, never moves.
    pub fn add_static_group(&mut self, mac: MacAddr, ports: &[PortId]) {
        let Some(&first) = ports.first() else { return };
        self.add_static(mac, first);
        if ports.len() == 1 {
            return;
        }
        let group = match self.groups.iter().position(|g| &g[..] == ports) {
            Some(g) => g,
            None => {
                self.groups.push(ports.into());
                self.groups.len() - 1
            }
        };
        if let Some(e) = self.statics.get_mut(&Station(mac)) {
            e.group = group as u16 + 1;
        }
    }

    /// Where a frame to `mac` goes: the port it was last seen on, if that is recent
    /// enough, or its static entry's port or group.
    pub fn lookup(&self, mac: MacAddr, now: Time) -> Option<Next> {
        if let Some(e) = self.statics.get(&Station(mac)) {
            return Some(match e.group {
                0 => Next::Port(PortId::new(usize::from(e.port))),
                g => Next::Group(GroupId(g - 1)),
            });
        }
        let e = self.entries.get(&mac.as_u64())?;
        (now.saturating_since(e.last_seen) < self.aging).then(|| Next::Port(PortId::new(usize::from(e.port))))
    }

    /// The ports of group `g`.
    pub fn group(&self, g: GroupId) -> &[PortId] {
        &self.groups[usize::from(g.0)]
    }

    /// Forgets entries older than the aging time; returns how many.
    pub fn age(&mut self, now: Time) -> usize {
        let before = self.entries.len();
        let aging = self.aging;
        let per_port = &mut self.per_port;
        self.entries.retain(|_, e| {
            let keep = now.saturating_since(e.last_seen) < aging;
            if !keep {
                if let Some(n) = per_port.get_mut(usize::from(e.port)) {
                    *n = n.saturating_sub(1);
                }
            }
            keep
        });
        before - self.entries.len()
    }

    /// Forgets what was learned on `port` (its link went away).
    pub fn flush_port(&mut self, port: PortId) {
        self.entries.retain(|_, e| usize::from(e.port) != port.index());
        if let Some(n) = self.per_port.get_mut(port.index()) {
            *n = 0;
        }
    }

    /// Stations port `port` has learned (static entries not counted).
    pub fn learned_on(&self, port: PortId) -> u32 {
        self.per_port.get(port.index()).copied().unwrap_or(0)
    }

    /// Entries, learned and static.
    pub fn len(&self) -> usize {
        self.entries.len() + self.statics.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.statics.is_empty()
    }

    /// Every entry as `ctl fdb` shows it, ordered by address.
    pub fn rows(&self, now: Time) -> Vec<FdbRow> {
        let learned = self.entries.iter().map(|(&k, e)| FdbRow {
            mac: MacAddr::from_slice(&k.to_be_bytes()[2..]),
            port: PortId::new(usize::from(e.port)),
            age_s: now.saturating_since(e.last_seen).as_secs(),
            is_static: false,
            group: Vec::new(),
        });
        let statics = self.statics.iter().map(|(&k, e)| FdbRow {
            mac: k.0,
            port: PortId::new(usize::from(e.port)),
            age_s: 0,
            is_static: true,
            group: if e.group == 0 { Vec::new() } else { self.groups[usize::from(e.group - 1)].to_vec() },
        });
        let mut rows: Vec<FdbRow> = learned.chain(statics).collect();
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
        let mut fdb = Fdb::new(2, AGING, 3, None);
        let a = MacAddr::local(1);
        let t0 = Time::from_millis(1);
        assert_eq!(fdb.learn(a, PortId::new(1), t0), Learned::New);
        assert_eq!(fdb.lookup(a, t0), Some(Next::Port(PortId::new(1))));
        assert_eq!(fdb.learn(a, PortId::new(1), t0), Learned::Refreshed);
        assert_eq!(fdb.learn(a, PortId::new(2), t0), Learned::Moved);
        assert_eq!(fdb.lookup(a, t0), Some(Next::Port(PortId::new(2))));
        let later = t0 + AGING;
        assert_eq!(fdb.lookup(a, later), None, "stale entries are not used even before a sweep");
        assert_eq!(fdb.age(later), 1);
        assert!(fdb.is_empty());
    }

    #[test]
    fn full_table_does_not_learn_and_static_entries_stay() {
        let mut fdb = Fdb::new(1, AGING, 4, None);
        let t = Time::ZERO;
        fdb.add_static(MacAddr::local(9), PortId::new(3));
        assert_eq!(fdb.learn(MacAddr::local(9), PortId::new(1), t), Learned::Static);
        assert_eq!(fdb.learn(MacAddr::local(1), PortId::new(0), t), Learned::New);
        assert_eq!(fdb.learn(MacAddr::local(2), PortId::new(0), t), Learned::TableFull);
        assert_eq!(fdb.lookup(MacAddr::local(2), t), None);
        fdb.age(t + AGING * 2);
        fdb.flush_port(PortId::new(3));
        assert_eq!(fdb.lookup(MacAddr::local(9), t + AGING * 2), Some(Next::Port(PortId::new(3))));
        assert_eq!(fdb.rows(t).len(), 1);
    }

    #[test]
    fn a_port_learns_at_most_its_limit_and_takes_no_station_from_another_beyond_it() {
        let mut fdb = Fdb::new(100, AGING, 2, Some(2));
        let t = Time::ZERO;
        assert_eq!(fdb.learn(MacAddr::local(1), PortId::new(0), t), Learned::New);
        assert_eq!(fdb.learn(MacAddr::local(2), PortId::new(0), t), Learned::New);
        assert_eq!(fdb.learn(MacAddr::local(3), PortId::new(0), t), Learned::PortFull);
        assert_eq!(
            fdb.learn(MacAddr::local(1), PortId::new(0), t),
            Learned::Refreshed,
            "a known station is still refreshed"
        );
        assert_eq!(fdb.learn(MacAddr::local(3), PortId::new(1), t), Learned::New, "the other port has room");
        assert_eq!(fdb.learn(MacAddr::local(3), PortId::new(0), t), Learned::PortFull, "nor may it move in");
        assert_eq!(fdb.lookup(MacAddr::local(3), t), Some(Next::Port(PortId::new(1))));
        assert_eq!(fdb.learn(MacAddr::local(1), PortId::new(1), t), Learned::Moved, "moving out frees a place");
        assert_eq!((fdb.learned_on(PortId::new(0)), fdb.learned_on(PortId::new(1))), (1, 2));
        assert_eq!(fdb.learn(MacAddr::local(4), PortId::new(0), t), Learned::New);
        fdb.flush_port(PortId::new(1));
        assert_eq!(fdb.learned_on(PortId::new(1)), 0);
        assert_eq!(fdb.age(t + AGING), 2);
        assert_eq!(fdb.learned_on(PortId::new(0)), 0, "aged entries leave their port's count");
    }

    #[test]
    fn a_static_entry_takes_the_place_of_a_learned_one_and_shows_no_age() {
        let mut fdb = Fdb::new(16, AGING, 2, Some(1));
        let (a, t) = (MacAddr::local(1), Time::from_millis(9_000));
        assert_eq!(fdb.learn(a, PortId::new(0), Time::ZERO), Learned::New);
        fdb.add_static(a, PortId::new(1));
        assert_eq!(fdb.learned_on(PortId::new(0)), 0, "the learned entry left its port's count");
        assert_eq!(fdb.len(), 1);
        assert_eq!(fdb.learn(a, PortId::new(0), t), Learned::Static);
        assert_eq!(fdb.lookup(a, t + AGING), Some(Next::Port(PortId::new(1))));
        assert_eq!(fdb.rows(t)[0].age_s, 0);
        assert!(fdb.rows(t)[0].is_static);
    }

    #[test]
    fn a_multipath_entry_names_its_group_and_shows_every_port_of_it() {
        let mut fdb = Fdb::new(16, AGING, 4, None);
        let ports = [PortId::new(2), PortId::new(3)];
        fdb.add_static_group(MacAddr::local(5), &ports);
        fdb.add_static_group(MacAddr::local(6), &ports);
        let Some(Next::Group(g)) = fdb.lookup(MacAddr::local(5), Time::ZERO) else { panic!("a group") };
        assert_eq!(fdb.group(g), ports);
        assert_eq!(fdb.lookup(MacAddr::local(6), Time::ZERO), Some(Next::Group(g)), "one group for one set of ports");
        fdb.add_static_group(MacAddr::local(7), &ports[..1]);
        assert_eq!(fdb.lookup(MacAddr::local(7), Time::ZERO), Some(Next::Port(PortId::new(2))));
        let rows = fdb.rows(Time::ZERO);
        assert_eq!((rows[0].port, &rows[0].group[..]), (PortId::new(2), &ports[..]), "{rows:?}");
        assert!(rows[2].group.is_empty());
    }

    #[test]
    fn addresses_chosen_to_collide_under_an_unkeyed_hash_do_not_collide_under_the_table_s() {
        use std::hash::{BuildHasher, Hasher};
        // Two tables hash the same address differently: a host cannot compute in advance
        // which addresses share a bucket.
        let (a, b) = (Fdb::new(16, AGING, 1, None), Fdb::new(16, AGING, 1, None));
        let hash = |f: &Fdb, k: u64| {
            let mut h = f.entries.hasher().build_hasher();
            h.write_u64(k);
            h.finish()
        };
        let same = (0..64u64).filter(|&k| hash(&a, k) == hash(&b, k)).count();
        assert_eq!(same, 0);
    }
}
