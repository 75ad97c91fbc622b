//! The PFC-aware traffic generator and the sink: sans-IO pieces (frames, pacing, pause
//! response, receive accounting) and the AF_XDP loops that drive them.

pub use pfctestkit::flow;
pub mod gen;
pub mod inject;
pub mod latency;
pub mod pace;
pub mod pause;
pub mod probe;
pub mod rawsock;
pub mod rxstats;
pub mod sink;
pub mod xdp_port;
