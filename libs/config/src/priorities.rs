//! A set of the eight 802.1p priorities: which are lossless, paused, past XOFF, stormed,
//! waiting. On the wire it is the PFC class-enable vector's low byte (bit n = priority n,
//! 802.1Qbb clause 36.1.3.1), and so it is held here; the type says what the bits are.

use std::fmt;
use std::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, Not};

/// The number of 802.1p priorities (traffic classes), 0 to 7.
pub const PRIORITIES: usize = 8;

/// One 802.1p priority (traffic class), 0 to 7: the PCP of a tag, bit n of a class-enable
/// vector, the index of a per-priority table. A type of its own, so that a priority is
/// never taken for a port, a count or a DSCP, and so that one out of range is refused where
/// it is read (`checked`, the parsers) instead of being masked or indexed past a table.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Priority(u8);

/// The number alone, as in the files and on the wire: `[3, 4]` reads as it is written.
impl fmt::Debug for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Priority {
    /// Priority `p`, which must be 0..7 (for constants and literals; `checked` for input).
    pub const fn new(p: u8) -> Priority {
        assert!((p as usize) < PRIORITIES, "priorities are 0..8");
        Priority(p)
    }

    /// Priority `p`, if it is one (0..7).
    pub const fn checked(p: u8) -> Option<Priority> {
        if (p as usize) < PRIORITIES {
            Some(Priority(p))
        } else {
            None
        }
    }

    /// The priority of a 3-bit field (a VLAN tag's PCP): the low three bits of `bits`.
    pub const fn from_pcp(bits: u8) -> Priority {
        Priority(bits & 0b111)
    }

    /// Its number, 0..7, as it goes on the wire.
    pub const fn get(self) -> u8 {
        self.0
    }

    /// Its index in a per-priority table (an array of [`PRIORITIES`] indexes by it directly).
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The eight priorities, lowest first.
    pub fn all() -> impl DoubleEndedIterator<Item = Priority> + Clone {
        (0..PRIORITIES as u8).map(Priority)
    }

    /// A per-priority table with `f(p)` for each priority `p`.
    pub fn table<T>(mut f: impl FnMut(Priority) -> T) -> [T; PRIORITIES] {
        std::array::from_fn(|i| f(Priority(i as u8)))
    }

    /// The next priority up, 7 wrapping to 0: a round robin's next turn.
    pub const fn next_wrapping(self) -> Priority {
        Priority((self.0 + 1) % PRIORITIES as u8)
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<Priority> for u8 {
    fn from(p: Priority) -> u8 {
        p.0
    }
}

/// What `--prio 9` and `priority = 9` say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("priority {0} is not in 0..8")]
pub struct NotAPriority(pub String);

impl TryFrom<u8> for Priority {
    type Error = NotAPriority;
    fn try_from(p: u8) -> Result<Priority, NotAPriority> {
        Priority::checked(p).ok_or_else(|| NotAPriority(p.to_string()))
    }
}

impl std::str::FromStr for Priority {
    type Err = NotAPriority;
    fn from_str(s: &str) -> Result<Priority, NotAPriority> {
        s.trim().parse::<u8>().ok().and_then(Priority::checked).ok_or_else(|| NotAPriority(s.to_string()))
    }
}

impl<'de> serde::Deserialize<'de> for Priority {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Priority, D::Error> {
        let p = u64::deserialize(d)?;
        u8::try_from(p)
            .ok()
            .and_then(Priority::checked)
            .ok_or_else(|| serde::de::Error::custom(format!("priority {p} is not in 0..8")))
    }
}

impl<T> std::ops::Index<Priority> for [T; PRIORITIES] {
    type Output = T;
    fn index(&self, p: Priority) -> &T {
        &self[p.index()]
    }
}

impl<T> std::ops::IndexMut<Priority> for [T; PRIORITIES] {
    fn index_mut(&mut self, p: Priority) -> &mut T {
        &mut self[p.index()]
    }
}

impl<T> std::ops::Index<Priority> for Vec<T> {
    type Output = T;
    fn index(&self, p: Priority) -> &T {
        &self[p.index()]
    }
}

impl<T> std::ops::IndexMut<Priority> for Vec<T> {
    fn index_mut(&mut self, p: Priority) -> &mut T {
        &mut self[p.index()]
    }
}

/// The priorities by name, for tests: `P3` reads as priority 3 where `Priority::new(3)`
/// would crowd an assertion.
#[cfg(any(test, feature = "testing"))]
pub mod names {
    use super::Priority;
    /// Priority 0.
    pub const P0: Priority = Priority(0);
    /// Priority 1.
    pub const P1: Priority = Priority(1);
    /// Priority 2.
    pub const P2: Priority = Priority(2);
    /// Priority 3.
    pub const P3: Priority = Priority(3);
    /// Priority 4.
    pub const P4: Priority = Priority(4);
    /// Priority 5.
    pub const P5: Priority = Priority(5);
    /// Priority 6.
    pub const P6: Priority = Priority(6);
    /// Priority 7.
    pub const P7: Priority = Priority(7);
}

/// A set of priorities (0..7), one bit each.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Priorities(u8);

impl Priorities {
    /// No priority.
    pub const NONE: Priorities = Priorities(0);
    /// All eight.
    pub const ALL: Priorities = Priorities(0xff);

    /// The set a class-enable vector (or any bit n = priority n byte) names.
    pub const fn from_bits(bits: u8) -> Priorities {
        Priorities(bits)
    }

    /// The set as a class-enable vector's byte.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Priority `p` alone.
    pub const fn only(p: Priority) -> Priorities {
        Priorities(1 << p.0)
    }

    /// Whether priority `p` is in the set.
    pub const fn contains(self, p: Priority) -> bool {
        self.0 & (1 << p.0) != 0
    }

    /// Whether no priority is in the set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Adds priority `p`.
    pub fn insert(&mut self, p: Priority) {
        *self |= Priorities::only(p);
    }

    /// Removes priority `p`.
    pub fn remove(&mut self, p: Priority) {
        *self &= !Priorities::only(p);
    }

    /// The priorities in the set, lowest first.
    pub fn iter(self) -> impl Iterator<Item = Priority> {
        Priority::all().filter(move |&p| self.contains(p))
    }

    /// How many priorities are in the set.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The highest priority in the set, if any.
    pub fn highest(self) -> Option<Priority> {
        (!self.is_empty()).then(|| Priority(7 - self.0.leading_zeros() as u8))
    }

    /// The priorities in `0..8` for which `f` holds.
    pub fn matching(f: impl Fn(Priority) -> bool) -> Priorities {
        Priority::all().filter(|&p| f(p)).collect()
    }
}

impl FromIterator<Priority> for Priorities {
    fn from_iter<I: IntoIterator<Item = Priority>>(iter: I) -> Priorities {
        iter.into_iter().fold(Priorities::NONE, |set, p| set | Priorities::only(p))
    }
}

impl BitOr for Priorities {
    type Output = Priorities;
    fn bitor(self, o: Priorities) -> Priorities {
        Priorities(self.0 | o.0)
    }
}

impl BitAnd for Priorities {
    type Output = Priorities;
    fn bitand(self, o: Priorities) -> Priorities {
        Priorities(self.0 & o.0)
    }
}

impl Not for Priorities {
    type Output = Priorities;
    fn not(self) -> Priorities {
        Priorities(!self.0)
    }
}

impl BitOrAssign for Priorities {
    fn bitor_assign(&mut self, o: Priorities) {
        self.0 |= o.0;
    }
}

impl BitAndAssign for Priorities {
    fn bitand_assign(&mut self, o: Priorities) {
        self.0 &= o.0;
    }
}

/// In JSON a list of priorities, `[3, 4]`.
impl serde::Serialize for Priorities {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> serde::Deserialize<'de> for Priorities {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Priorities, D::Error> {
        Ok(Vec::<Priority>::deserialize(d)?.into_iter().collect())
    }
}

/// `{3, 4}`: the priorities, not a byte to decode.
impl fmt::Debug for Priorities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// At most one setting per priority: the `[buffer.priority.N]` and `[wred.priority.N]`
/// tables, read from a table keyed "0" to "7" and checked as they are read, so that a
/// lookup is an index and a key that is not a priority is a parse error.
#[derive(Clone, PartialEq, Eq)]
pub struct PerPriority<T>([Option<T>; PRIORITIES]);

impl<T> Default for PerPriority<T> {
    fn default() -> Self {
        PerPriority(std::array::from_fn(|_| None))
    }
}

impl<T> PerPriority<T> {
    /// Priority `prio`'s setting, if it has one.
    pub fn get(&self, prio: Priority) -> Option<&T> {
        self.0[prio].as_ref()
    }

    /// Sets priority `prio`'s, returning the one it replaces.
    pub fn insert(&mut self, prio: Priority, value: T) -> Option<T> {
        self.0[prio].replace(value)
    }

    /// The priorities that have a setting, lowest first, with it.
    pub fn iter(&self) -> impl Iterator<Item = (Priority, &T)> {
        Priority::all().zip(&self.0).filter_map(|(p, v)| Some((p, v.as_ref()?)))
    }

    /// Whether no priority has a setting.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }
}

impl<T> FromIterator<(Priority, T)> for PerPriority<T> {
    fn from_iter<I: IntoIterator<Item = (Priority, T)>>(iter: I) -> Self {
        let mut out = PerPriority::default();
        for (p, v) in iter {
            out.insert(p, v);
        }
        out
    }
}

impl<T: fmt::Debug> fmt::Debug for PerPriority<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<T: serde::Serialize> serde::Serialize for PerPriority<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter().map(|(p, v)| (p.to_string(), v)))
    }
}

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for PerPriority<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = PerPriority<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table keyed by priority, 0..7")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                use serde::de::Error;
                let mut out = PerPriority::default();
                while let Some(key) = map.next_key::<String>()? {
                    let prio = key
                        .parse::<Priority>()
                        .map_err(|_| A::Error::custom(format!("`{key}` is not a priority: keyed by priority, 0..7")))?;
                    if out.insert(prio, map.next_value()?).is_some() {
                        return Err(A::Error::custom(format!("priority {prio} given twice")));
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_holds_what_was_put_in_and_reads_as_the_class_enable_vector() {
        let p = Priority::new;
        let mut s: Priorities = [p(3), p(4)].into_iter().collect();
        assert_eq!(s.bits(), 0b1_1000);
        assert!(s.contains(p(3)) && s.contains(p(4)) && !s.contains(p(0)));
        s.remove(p(3));
        s.insert(p(7));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![p(4), p(7)]);
        assert_eq!(format!("{s:?}"), "{4, 7}");
        assert_eq!(s & Priorities::only(p(4)), Priorities::only(p(4)));
        assert_eq!(!Priorities::NONE, Priorities::ALL);
        assert_eq!(Priorities::matching(|p| p.get() % 2 == 0).bits(), 0b0101_0101);
        assert!((s & !s).is_empty());
        assert_eq!((s.highest(), Priorities::NONE.highest()), (Some(p(7)), None));
        assert_eq!(serde_json::to_string(&s).unwrap(), "[4,7]");
        assert_eq!(serde_json::from_str::<Priorities>("[4,7]").unwrap(), s);
        assert!(serde_json::from_str::<Priorities>("[8]").is_err());
    }

    #[test]
    fn a_priority_is_refused_out_of_range_wherever_it_is_read() {
        assert_eq!(Priority::checked(7), Some(Priority::new(7)));
        assert_eq!(Priority::checked(8), None);
        assert_eq!("3".parse::<Priority>(), Ok(Priority::new(3)));
        assert!("8".parse::<Priority>().is_err() && "-1".parse::<Priority>().is_err());
        assert_eq!(serde_json::from_str::<Priority>("5").unwrap(), Priority::new(5));
        assert!(serde_json::from_str::<Priority>("300").unwrap_err().to_string().contains("not in 0..8"));
        assert_eq!(Priority::from_pcp(0xff), Priority::new(7));
        let mut table = [0u32; PRIORITIES];
        table[Priority::new(6)] += 1;
        assert_eq!(table[6], 1);
    }
}
