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

/// Held by the tests whose runs are split over ranks (threads or MPI processes), so that
/// one runs at a time. The ranks meet at every window's end, and a rank that waits for one
/// off its CPU spins and yields first: with two such tests at once on two cores this
/// binary took 139 s of CPU in 75 s; one at a time, 91 s in 62 s (2026-12-02).
pub fn one_split_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SPLIT: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SPLIT.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
