//! The examples run as tests: each asserts what it shows, so an example that stops
//! showing it fails here.

#[path = "../examples/two_port.rs"]
mod two_port;

#[path = "../examples/pause.rs"]
mod pause;

#[test]
fn the_two_port_example_floods_then_forwards_to_the_learned_port() {
    two_port::main();
}

#[test]
fn the_pause_example_holds_priority_3_for_exactly_the_pause_and_then_sends_it_in_order() {
    pause::main();
}
