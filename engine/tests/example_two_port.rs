//! The two-port example runs as a test: it asserts what it shows.

#[path = "../examples/two_port.rs"]
mod two_port;

#[test]
fn the_two_port_example_floods_then_forwards_to_the_learned_port() {
    two_port::main();
}
