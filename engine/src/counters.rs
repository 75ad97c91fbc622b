//! CounterField structs declared once: [`counters!`] writes the struct (each field with its
//! doc and serde attributes) and, from the same lines, the list of its fields marked as
//! counters with their names and help, which the exporters (Prometheus, the operator's
//! tables) read instead of naming the fields again, as `drop_reasons!` does for drops.

/// One field of a struct declared with [`counters!`]: its name (also its JSON key), its
/// doc (its help text) and what kind of field it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterField {
    /// The field's name.
    pub name: &'static str,
    /// What it counts, if it is a count.
    pub kind: CounterKind,
    doc: &'static str,
}

/// What a field of a counter struct is, as its declaration marks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterKind {
    /// A count exported on its own (`=> count`).
    Count,
    /// MAC-control frames received and not acted on, one reason of several (`=> ignored`).
    Ignored,
    /// State the exporters show by their own rule: a nested group, a time (unmarked).
    Other,
}

impl CounterField {
    #[doc(hidden)]
    pub const fn new(name: &'static str, kind: CounterKind, doc: &'static str) -> CounterField {
        CounterField { name, kind, doc }
    }

    /// The field's doc as one line without its closing period (what Prometheus shows as
    /// the metric's help; the encoder adds the period).
    pub fn help(&self) -> &'static str {
        let doc = self.doc.trim();
        doc.strip_suffix('.').unwrap_or(doc)
    }
}

/// Declares a struct of counters: the struct, and `FIELDS` with each field's name, kind
/// and doc, and `counts()` and `ignored()` with the values of the fields marked
/// `=> count` and `=> ignored`, in declared order.
macro_rules! counters {
    (@kind count) => { $crate::counters::CounterKind::Count };
    (@kind ignored) => { $crate::counters::CounterKind::Ignored };
    (@kind) => { $crate::counters::CounterKind::Other };
    (@value $kind:ident, $value:expr) => { $value };
    (@value , $value:expr) => { 0u64 };
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[serde($($serde:tt)*)])?
                pub $field:ident: $ty:ty $(=> $kind:ident)?,
            )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $(
                $(#[doc = $doc])*
                $(#[serde($($serde)*)])?
                pub $field: $ty,
            )*
        }

        impl $name {
            /// Every field with its name, kind and doc, in declared order.
            pub const FIELDS: &'static [$crate::counters::CounterField] = &[
                $( $crate::counters::CounterField::new(stringify!($field), counters!(@kind $($kind)?), concat!($($doc),*)), )*
            ];

            /// The value of every field, in declared order (0 for the fields that are not counts).
            fn values(&self) -> [u64; Self::FIELDS.len()] {
                [ $( counters!(@value $($kind)?, self.$field), )* ]
            }

            /// Each field marked `=> count` with its value.
            pub fn counts(&self) -> impl Iterator<Item = (&'static $crate::counters::CounterField, u64)> {
                self.of_kind($crate::counters::CounterKind::Count)
            }

            /// Each field marked `=> ignored` with its value.
            pub fn ignored(&self) -> impl Iterator<Item = (&'static $crate::counters::CounterField, u64)> {
                self.of_kind($crate::counters::CounterKind::Ignored)
            }

            fn of_kind(&self, kind: $crate::counters::CounterKind) -> impl Iterator<Item = (&'static $crate::counters::CounterField, u64)> {
                Self::FIELDS.iter().zip(self.values()).filter(move |(c, _)| c.kind == kind)
            }
        }
    };
}

pub(crate) use counters;
