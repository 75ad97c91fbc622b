//! The netns integration tests, one module per area, in one test binary: a binary per
//! file linked every crate again (about a minute of a clean build on two cores), and the
//! tests that send traffic take turns anyway (`netns_tests::serial`).
//! Run one area with `cargo test --release -p netns-tests --test netns pfc::`.

mod bench;
mod capture;
mod dcfit;
mod ecn;
mod foundation;
mod headroom;
mod mininet;
mod mtu;
mod pfc;
mod sonic;
mod tagger;
mod views;
