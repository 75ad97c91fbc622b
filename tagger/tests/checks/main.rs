//! Tagger's integration tests in one test binary, one module per area: `cargo test -p
//! tagger --test checks properties::`.

mod acyclic;
mod cli;
mod known;
mod properties;
