//! pfcswitch: a userspace Ethernet switch on AF_XDP for studying and operating lossless
//! Ethernet (802.1Qbb PFC, shared-buffer headroom, DCFIT deadlock detection).
//!
//! - [`core`]: the sans-IO switch — frame codecs, forwarding, buffer accounting, PFC.
//! - [`dataplane`]: the thin IO shell — XDP program, AF_XDP sockets, the polling loop.
//! - [`control`]: the local control socket behind `pfcswitch ctl`.
//! - [`nic`]: what a NIC is and does, for `pfcswitch doctor` and the port speeds.
//! - [`sys`], [`config`] and [`capture`]: leaves the others share (system calls, clocks
//!   and links from the AF_XDP library `afxdp`, with the binaries' logging; the config
//!   file, the engine's part and the shell's `[dataplane]`; what `ctl capture` records,
//!   which the dataplane fills and the control thread drains), importing nothing of the
//!   shell. Sockets, UMEM, the XDP loader and its probes, frame sizing: `afxdp`.
//! - [`cli`]: `pfcswitch run`'s arguments, which the lab tools start switches with.
//!
//! The modules import each other without loops: `control` and `nic` use the leaves,
//! `dataplane` uses `control`'s typed messages, `nic` and the leaves.

pub mod capture;
pub mod cli;
pub mod config;
pub mod control;
/// The engine, a crate of its own (`engine/`): re-exported so paths read `pfcswitch::core`.
pub use pfcswitch_core as core;
pub mod dataplane;
pub mod nic;
pub mod report;
pub mod stats;
pub mod sys;
pub mod views;
pub mod watch;
