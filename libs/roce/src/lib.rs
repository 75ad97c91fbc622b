//! RoCEv2 at the hosts, without IO: what a RoCE NIC does about congestion, as plain
//! deterministic state machines driven with time passed in, so that the traffic tools
//! (`pfctools gen --dcqcn`, `pfctools sink --cnp`) and the simulator's hosts run the same
//! code.
//!
//! - [`dcqcn`]: DCQCN's reaction point (the sender's rate) and notification point (when a
//!   receiver answers marked frames with a CNP), with the NIC parameter names.
//! - [`wire`]: RoCEv2's BTH, the CNP frame and the invariant CRC.

pub mod dcqcn;
pub mod wire;

pub use dcqcn::{CnpPacer, DcqcnParams, Increase, ReactionPoint};
pub use wire::{cnp_dest_qp, cnp_frame, flow_qp, nak_frame, nak_psn, qp_flow, ReplySpec};
