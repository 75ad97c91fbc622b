//! The simulator's integration tests, one module per area, in one test binary (a binary
//! per file linked the workspace's crates eight times over). Run one area with
//! `cargo test --release -p pfcsim --test sim fidelity::`.

mod dcqcn;
mod examples;
mod fidelity;
mod mpi;
mod sonic;
mod split;
mod sweep;
mod workload;
