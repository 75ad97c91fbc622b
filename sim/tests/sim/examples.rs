//! The examples run as tests: each asserts what it shows.

#[path = "../../examples/deadlock.rs"]
mod deadlock;

#[test]
fn the_deadlock_example_forms_resolves_and_prevents_the_ring_deadlock() {
    deadlock::main();
}
