//! The pause example runs as a test: it asserts what it shows.

#[path = "../examples/pause.rs"]
mod pause;

#[test]
fn the_pause_example_holds_priority_3_for_exactly_the_pause_and_then_sends_it_in_order() {
    pause::main();
}
