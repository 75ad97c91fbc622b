//! AF_XDP for pfcswitch and its tools: what a program needs to move frames between NICs
//! and userspace without the kernel's stack, apart from what it does with them.
//!
//! - [`xsk`]: sockets on one shared UMEM, the frame pool over it (frames never leave
//!   it), batched rx, tx and completions, and the in-frame arrival stamp taken off;
//! - [`xdp`]: the classifier (`ebpf/classifier.bpf.c`, built by `build.rs`), loaded with
//!   the options the kernel allows, attached in a mode, its XSKMAP and counters;
//! - [`paths`]: what the running kernel allows (trial loads) and the paths taken, best
//!   first, and why;
//! - [`modes`]: those paths as the configuration names them;
//! - [`stages`]: where a frame waited (rx ring, the program's own work, tx ring);
//! - [`sys`]: system calls, clocks, links; [`frame_size`]: the MTU-to-UMEM-frame rule.
//!
//! The switch (`pfcswitch`) and the lab tools (`pfctools`' generators, sinks and probes)
//! use it alike.

pub mod frame_size;
pub mod modes;
pub mod paths;
pub mod stages;
pub mod sys;
pub mod xdp;
pub mod xsk;
