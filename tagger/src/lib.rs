//! Tagger (Hu et al., CoNEXT 2017): deadlock-free PFC tag tables for any topology and set
//! of lossless routes.
//!
//! A switch puts a packet arriving on ingress port i with tag x into lossless queue x, and
//! at egress may rewrite the tag. If, within every tag, the buffers packets can wait in
//! never depend on each other in a cycle, and tags only ever go down along a route, no set
//! of pauses can deadlock. The tables are computed offline from the topology and the routes
//! that must stay lossless ([`algo`]), checked by an independent [`verify`], and written
//! per switch ([`system`]).
//!
//! Everything here is deterministic and runs without a network.

pub mod algo;
mod bits;
pub mod eval;
pub mod plan;
pub mod routes;
pub mod system;
mod threads;
pub mod topology;
pub mod verify;

use std::path::Path;

use topology::{generate::Generator, Topology, TopologyError};

/// A topology from a file path, or else from a generator spec (`fattree:k=4`, ...).
pub fn load_topology(arg: &str) -> Result<Topology, TopologyError> {
    let path = Path::new(arg);
    if path.is_file() {
        return topology::file::read(path);
    }
    match arg.parse::<Generator>() {
        Ok(g) => g.build(),
        Err(e) if !arg.contains(':') && (arg.contains('/') || arg.contains('.')) => {
            Err(TopologyError::Parse(format!("{arg}: no such file ({e})")))
        }
        Err(e) => Err(e),
    }
}
