//! What the simulator's numbers name: a switch, a host, a flow, or a port of the fabric
//! (every port of every switch and host, numbered once), each a type of its own, as the
//! engine's [`PortId`] is a switch's own port. A function that takes a switch and two
//! ports says which is which, `switch_tx(sw: SwitchIx, local: PortId, port: FabricPort)`,
//! and cannot be called with them swapped.
//!
//! Each is a `u32` (events carry them, and events are copied by the million) and indexes
//! a slice or `Vec` as its `index()` does.
//!
//! [`PortId`]: pfcswitch_core::PortId

macro_rules! index {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(u32);

        impl $name {
            /// The `i`th.
            pub fn new(i: usize) -> $name {
                $name(u32::try_from(i).expect("a fabric has fewer than 2^32 of each"))
            }

            /// Its place in the vectors it indexes.
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// As an event or a message between ranks carries it.
            pub fn raw(self) -> u32 {
                self.0
            }

            /// From what [`Self::raw`] gave.
            pub const fn from_raw(raw: u32) -> $name {
                $name(raw)
            }
        }

        impl<T> std::ops::Index<$name> for [T] {
            type Output = T;
            fn index(&self, i: $name) -> &T {
                &self[i.index()]
            }
        }

        impl<T> std::ops::IndexMut<$name> for [T] {
            fn index_mut(&mut self, i: $name) -> &mut T {
                &mut self[i.index()]
            }
        }

        impl<T> std::ops::Index<$name> for Vec<T> {
            type Output = T;
            fn index(&self, i: $name) -> &T {
                &self[i.index()]
            }
        }

        impl<T> std::ops::IndexMut<$name> for Vec<T> {
            fn index_mut(&mut self, i: $name) -> &mut T {
                &mut self[i.index()]
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

index!(
    /// A switch of the fabric (its place in `Fabric::switches`).
    SwitchIx
);
index!(
    /// A host of the fabric (its place in `Fabric::hosts`).
    HostIx
);
index!(
    /// A flow (its place in `Fabric::flows`).
    FlowIx
);
index!(
    /// A port of the fabric, a switch's or a host's (its place in `Fabric::ports`); a
    /// switch's own numbering of its ports is the engine's `PortId`.
    FabricPort
);
