//! A set of the eight 802.1p priorities: which are lossless, paused, past XOFF, stormed,
//! waiting. On the wire it is the PFC class-enable vector's low byte (bit n = priority n,
//! 802.1Qbb clause 36.1.3.1), and so it is held here; the type says what the bits are.

use std::fmt;
use std::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, Not};

/// The number of 802.1p priorities (traffic classes), 0 to 7.
pub const PRIORITIES: usize = 8;

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
    pub const fn only(p: usize) -> Priorities {
        assert!(p < PRIORITIES, "priorities are 0..8");
        Priorities(1 << p)
    }

    /// Whether priority `p` is in the set.
    pub const fn contains(self, p: usize) -> bool {
        p < PRIORITIES && self.0 & (1 << p) != 0
    }

    /// Whether no priority is in the set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Adds priority `p`.
    pub fn insert(&mut self, p: usize) {
        *self |= Priorities::only(p);
    }

    /// Removes priority `p`.
    pub fn remove(&mut self, p: usize) {
        *self &= !Priorities::only(p);
    }

    /// The priorities in the set, lowest first.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        (0..PRIORITIES).filter(move |&p| self.contains(p))
    }

    /// How many priorities are in the set.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The highest priority in the set, if any.
    pub fn highest(self) -> Option<usize> {
        (!self.is_empty()).then(|| 7 - self.0.leading_zeros() as usize)
    }

    /// The priorities in `0..8` for which `f` holds.
    pub fn matching(f: impl Fn(usize) -> bool) -> Priorities {
        (0..PRIORITIES).filter(|&p| f(p)).collect()
    }
}

impl FromIterator<usize> for Priorities {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Priorities {
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
        let list = Vec::<usize>::deserialize(d)?;
        match list.iter().find(|&&p| p >= PRIORITIES) {
            Some(p) => Err(serde::de::Error::custom(format!("priority {p} is not in 0..8"))),
            None => Ok(list.into_iter().collect()),
        }
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
    /// Priority `prio`'s setting, if it has one (none out of range).
    pub fn get(&self, prio: u8) -> Option<&T> {
        self.0.get(usize::from(prio))?.as_ref()
    }

    /// Sets priority `prio`'s, returning the one it replaces. `prio` must be 0..7.
    pub fn insert(&mut self, prio: u8, value: T) -> Option<T> {
        assert!(usize::from(prio) < PRIORITIES, "priorities are 0..8");
        self.0[usize::from(prio)].replace(value)
    }

    /// The priorities that have a setting, lowest first, with it.
    pub fn iter(&self) -> impl Iterator<Item = (u8, &T)> {
        self.0.iter().enumerate().filter_map(|(p, v)| Some((p as u8, v.as_ref()?)))
    }

    /// Whether no priority has a setting.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }
}

impl<T> FromIterator<(u8, T)> for PerPriority<T> {
    fn from_iter<I: IntoIterator<Item = (u8, T)>>(iter: I) -> Self {
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
                    let prio = key.parse::<u8>().ok().filter(|&p| usize::from(p) < PRIORITIES).ok_or_else(|| {
                        A::Error::custom(format!("`{key}` is not a priority: keyed by priority, 0..7"))
                    })?;
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
        let mut s: Priorities = [3, 4].into_iter().collect();
        assert_eq!(s.bits(), 0b1_1000);
        assert!(s.contains(3) && s.contains(4) && !s.contains(0) && !s.contains(8));
        s.remove(3);
        s.insert(7);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![4, 7]);
        assert_eq!(format!("{s:?}"), "{4, 7}");
        assert_eq!(s & Priorities::only(4), Priorities::only(4));
        assert_eq!(!Priorities::NONE, Priorities::ALL);
        assert_eq!(Priorities::matching(|p| p % 2 == 0).bits(), 0b0101_0101);
        assert!((s & !s).is_empty());
        assert_eq!((s.highest(), Priorities::NONE.highest()), (Some(7), None));
        assert_eq!(serde_json::to_string(&s).unwrap(), "[4,7]");
        assert_eq!(serde_json::from_str::<Priorities>("[4,7]").unwrap(), s);
        assert!(serde_json::from_str::<Priorities>("[8]").is_err());
    }
}
