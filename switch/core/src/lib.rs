//! pfcswitch's engine, sans-IO: codecs, state machines and accounting, driven by the
//! caller with frames and time. Nothing here touches a socket, a thread or a clock, so the
//! same code runs behind AF_XDP sockets (`pfcswitch`) and in tests without a network.
//! The switch crate re-exports it as `pfcswitch::core`.

pub mod buffer;
pub mod checking;
pub mod classify;
pub mod config;
pub mod dcfit;
pub mod ether;
pub mod fdb;
pub mod heap_pool;
pub mod histogram;
pub mod mac;
pub mod pause;
pub mod pfc;
pub mod pfcwd;
pub mod pool;
pub mod ports;
pub mod priorities;
pub mod queue;
pub mod ring;
pub mod shaper;
pub mod slowpath;
pub mod speed;
pub mod stats;
pub mod switch;
pub mod tagging;
pub mod time;
pub mod traffic_map;
