//! Where a forwarded frame waits inside the switch, stage by stage: on the rx ring (from
//! the XDP program's arrival stamp until the loop takes it), in the engine (its queue,
//! behind pauses, the scheduler and the shaper, until it is put on a tx ring), and on the
//! tx ring (until the kernel completes its transmit). Only the engine's stage is seen by
//! XOFF, ECN marking and the scheduler; the rings' stages are buffer they cannot see, so
//! these figures say how much of a frame's wait is out of the engine's reach.
//!
//! The pool keeps one stamp per frame, "when it entered the stage it is in", and each
//! transition records the stage that ended ([`StageMeter`]): a few stores and no
//! allocation per frame.

use std::time::Duration;

use pfcswitch_core::histogram::Histogram;
use serde::{Deserialize, Serialize};

use pfcswitch_core::histogram::Percentiles;

/// The three stages' waits, since the switch started or since the last `ctl clear`.
#[derive(Clone, Debug, Default)]
pub struct StageMeter {
    rx_ring: Histogram,
    engine: Histogram,
    tx_ring: Histogram,
}

/// A stage a frame leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    RxRing,
    Engine,
    TxRing,
}

impl StageMeter {
    /// A frame stamped `since_ns` (0: not stamped, nothing recorded) leaves `stage` at
    /// `now_ns`.
    pub fn left(&mut self, stage: Stage, since_ns: u64, now_ns: u64) {
        if since_ns == 0 {
            return;
        }
        let waited = Duration::from_nanos(now_ns.saturating_sub(since_ns));
        match stage {
            Stage::RxRing => self.rx_ring.record(waited),
            Stage::Engine => self.engine.record(waited),
            Stage::TxRing => self.tx_ring.record(waited),
        }
    }

    /// The summary `ctl stats` shows.
    pub fn latency(&self) -> StageLatency {
        StageLatency {
            rx_ring: self.rx_ring.percentiles(),
            engine: self.engine.percentiles(),
            tx_ring: self.tx_ring.percentiles(),
        }
    }

    /// Starts again from nothing (`ctl clear`).
    pub fn clear(&mut self) {
        *self = StageMeter::default();
    }
}

/// Where forwarded frames waited inside the switch, since it started or since the last
/// `ctl clear`, µs per stage. Only the engine's stage is buffer that XOFF, ECN marking and
/// the scheduler act on; what waits on a ring is out of their reach.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StageLatency {
    /// From the XDP program's arrival stamp to the loop taking the frame off its rx ring.
    pub rx_ring: Percentiles,
    /// From then until the engine put it on a tx ring: its queue, pauses, scheduler and
    /// shaper.
    pub engine: Percentiles,
    /// From then until the kernel completed its transmit (every frame put on a tx ring,
    /// pause frames and flood copies too).
    pub tx_ring: Percentiles,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stage_records_only_frames_that_were_stamped() {
        let mut m = StageMeter::default();
        m.left(Stage::RxRing, 1_000, 11_000);
        m.left(Stage::Engine, 0, 50_000);
        m.left(Stage::TxRing, 2_000, 5_000);
        let l = m.latency();
        assert_eq!((l.rx_ring.count, l.engine.count, l.tx_ring.count), (1, 0, 1));
        assert_eq!(l.rx_ring.max_us, 10.0);
        assert_eq!(l.tx_ring.max_us, 3.0);
        m.clear();
        assert_eq!(m.latency(), StageLatency::default());
    }

    #[test]
    fn a_stamp_later_than_now_counts_as_no_wait() {
        let mut m = StageMeter::default();
        m.left(Stage::Engine, 9_000, 8_000);
        assert_eq!(m.latency().engine.max_us, 0.0);
    }
}
