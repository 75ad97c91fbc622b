//! Which member of a multipath entry (`[[fdb_group]]`) a frame leaves by, as
//! `fdb.multipath` says: by a hash of its flow ([`crate::ecmp`]), by the members' queues
//! frame by frame (adaptive routing), or by the queues at the start of each flowlet (a
//! burst of a flow after a pause longer than `fdb.flowlet_gap_us`), as switches' dynamic
//! load balancing does. Every member chosen is up while any member is.
//!
//! A flowlet's member is kept in a table of [`FLOWLETS`] slots indexed by the flow's
//! hash, allocated once with the switch (no allocation per frame); two flows whose hashes
//! share a slot share its flowlet, as in a switch's flowlet table. A slot is 8 bytes, its
//! last frame's time in whole microseconds that wrap after 71 minutes (a flow idle for a
//! multiple of that may keep its member): a k=16 fat-tree's 320 switches hold 10 MiB of
//! them, where the 16 bytes of a full `Time` made it 20.

use crate::config::{FdbConfig, Multipath};
use crate::ecmp::{self, FlowKey};
use crate::ports::PortId;
use crate::time::Time;

/// Slots of the flowlet table (a power of two).
pub(crate) const FLOWLETS: usize = 4096;

/// A switch's multipath choices and what they keep between frames.
#[derive(Debug)]
pub(crate) struct Multipaths {
    mode: Multipath,
    /// The seed of the flow hash ([`crate::ecmp`]): switches of one fabric want different
    /// seeds, or every tier splits flows alike.
    seed: u64,
    /// Where the next choice between members with equal queues starts.
    turn: u32,
    /// The pause after which a flow's next frame starts a new flowlet, µs.
    gap_us: u32,
    /// Under [`Multipath::Flowlet`]: each slot's member and its last frame's time, µs.
    flowlets: Box<[(Option<PortId>, u32)]>,
}

impl Multipaths {
    pub(crate) fn new(config: &FdbConfig) -> Multipaths {
        let slots = if config.multipath == Multipath::Flowlet { FLOWLETS } else { 0 };
        Multipaths {
            mode: config.multipath,
            seed: config.ecmp_seed,
            turn: 0,
            gap_us: u32::try_from(config.flowlet_gap_us).unwrap_or(u32::MAX),
            flowlets: vec![(None, 0); slots].into_boxed_slice(),
        }
    }

    /// The member of `members` a frame leaves by at `now`. `key` gives the frame's flow
    /// (read only where the mode needs it), `up` whether a member's link is up, `queued`
    /// the bytes waiting in the member's queue for the frame's priority.
    pub(crate) fn pick(
        &mut self,
        now: Time,
        members: &[PortId],
        key: impl FnOnce() -> FlowKey,
        up: impl Fn(PortId) -> bool,
        queued: impl Fn(PortId) -> u64,
    ) -> PortId {
        match self.mode {
            Multipath::Hash => {
                // The hash's member, or while its link is down the next that is up: the
                // flows of the members that are up keep theirs.
                let first = ecmp::member(key().hash(self.seed), members.len());
                rotated(members, first).find(|&p| up(p)).unwrap_or(members[first])
            }
            Multipath::Adaptive => self.least_queued(members, up, queued),
            Multipath::Flowlet => {
                let slot = key().hash(self.seed) as usize & (FLOWLETS - 1);
                let now_us = (now.as_nanos() / 1000) as u32;
                let (kept, last_us) = self.flowlets[slot];
                let port = kept
                    .filter(|&p| now_us.wrapping_sub(last_us) <= self.gap_us && members.contains(&p) && up(p))
                    .unwrap_or_else(|| self.least_queued(members, up, queued));
                self.flowlets[slot] = (Some(port), now_us);
                port
            }
        }
    }

    /// Of the members that are up, the one with the fewest bytes queued; ties go to the
    /// first from a start that moves on by one each call, so that a quiet group is
    /// sprayed round robin and the choice stays deterministic.
    fn least_queued(
        &mut self,
        members: &[PortId],
        up: impl Fn(PortId) -> bool,
        queued: impl Fn(PortId) -> u64,
    ) -> PortId {
        self.turn = self.turn.wrapping_add(1);
        let first = self.turn as usize % members.len();
        rotated(members, first).filter(|&p| up(p)).min_by_key(|&p| queued(p)).unwrap_or(members[first])
    }
}

/// `members` from index `first` on, round to the one before it.
fn rotated(members: &[PortId], first: usize) -> impl Iterator<Item = PortId> + '_ {
    (0..members.len()).map(move |i| members[(first + i) % members.len()])
}
