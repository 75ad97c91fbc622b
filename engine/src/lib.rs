//! pfcswitch's engine, sans-IO: codecs, state machines and accounting, driven by the
//! caller with frames and time. Nothing here touches a socket, a thread or a clock, so the
//! same code runs behind AF_XDP sockets (`pfcswitch`) and in tests without a network.
//! The switch crate re-exports it as `pfcswitch::core`.
//!
//! A driver needs what the crate root re-exports: a [`Switch`] built from a [`Config`],
//! the [`FramePool`] it owns frames in, a [`TxBatch`] per transmit, the [`Slowpath`] and
//! its [`ToSlowpath`] events and [`HeldFrame`]s, [`Time`] passed in, and the
//! [`SwitchStats`] snapshot. [`Switch`]'s module documents the order of the calls. The
//! modules below hold the rest: the wire codecs ([`pfc`], [`checking`]), the
//! configuration and its parts ([`config`]), what `ctl` shows ([`stats`], [`fdb`],
//! [`traffic_map`]) and the small types ([`priorities`], [`ports`], [`speed`], [`mac`]).
//! The buffer, classifier, shaper and ring the switch is made of are the crate's own.

#![warn(missing_docs)]

pub(crate) mod buffer;
pub mod checking;
pub(crate) mod classify;
pub mod counters;
pub mod dcfit;
pub mod ecmp;
pub(crate) mod ether;
pub mod fdb;
pub mod heap_pool;
pub mod histogram;
#[cfg(any(test, feature = "testing"))]
pub mod loopback;
pub mod pause;
pub mod pfc;
pub mod pfcwd;
pub mod pool;
pub mod prefetch;
pub mod queue;
pub(crate) mod ring;
pub(crate) mod shaper;
pub mod slowpath;
pub mod stats;
pub mod switch;
pub mod tagging;
pub mod time;
pub mod traffic_map;

// The configuration and the plain types it is written in live in `pfcswitch-config`;
// their modules keep their paths here.
pub use pfcswitch_config::{config, headroom, mac, ports, priorities, speed};

pub use config::Config;
pub use mac::MacAddr;
pub use pool::{FramePool, PoolSize};
pub use ports::{PortId, PortSet, MAX_PORTS};
pub use priorities::{NotAPriority, PerPriority, Priorities, Priority, PRIORITIES};
pub use queue::FrameId;
pub use slowpath::{HeldFrame, Slowpath, ToSlowpath};
pub use speed::Speed;
pub use stats::SwitchStats;
pub use switch::{PortTimer, PortTimers, Ports, Switch, Turn, TxBatch, TxFrame};
pub use time::Time;
