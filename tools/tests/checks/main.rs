//! The tools' integration tests in one test binary, one module per area: `cargo test -p
//! pfctools --test checks dissector::`.

mod closed_stdout;
mod dissector;
