//! pfctools: what tests, demos and benchmarks need around pfcswitch — a netns testbed
//! builder, a PFC-aware traffic generator and sink, PFC storms, headroom tests and the
//! benchmarks.

pub mod argv;
pub mod bench;
pub mod cli;
pub mod harness;
pub mod headroom;
pub use pfctestkit::pcap;
pub mod storm;
pub mod tagging;
pub mod testbed;
pub mod traffic;
