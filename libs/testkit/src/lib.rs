//! What pfctools and the simulator share, without the AF_XDP shell: the test frames and
//! the stamp the generator writes and the sink reads ([`flow`]), the testbed's topology
//! file ([`topology`]), the PFC headroom calculator ([`headroom`] (the engine's, re-exported)), pcap files
//! ([`pcap`]) and the progress bar of long work ([`progress`]). The simulator builds on this crate and the engine alone, so it needs no
//! clang, libbpf or root.

pub mod flow;
/// Captures in pcapng, a crate of its own so that the switch can write them without the rest of this one.
pub use pfcpcap as pcap;
/// The headroom calculator lives with the buffer model it sizes, in the engine.
pub use pfcswitch_core::headroom;
pub mod progress;
pub mod topology;

use tagger::routes::explicit::{RouteEntry, RoutesFile};

/// Host-to-host paths of node names as a routes file.
pub fn routes_file(paths: &[Vec<String>]) -> RoutesFile {
    RoutesFile { routes: paths.iter().map(|p| RouteEntry { path: Some(p.clone()), ..RouteEntry::default() }).collect() }
}
