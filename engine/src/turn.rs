//! The engine's turn written once, for drivers that hold a switch and its slowpath in one
//! thread with no IO between them: the core's tests, the fuzz target and the simulator
//! (which puts a CPU delay between the two halves, so it uses the steps, not
//! [`slowpath_round_trip`]). The AF_XDP dataplane follows the same order with its rings
//! and its slowpath thread between the steps (see [`crate::switch`]'s call order).
//!
//! Behind the `testing` feature: a production driver owns its rings and threads and has
//! no use for it.

use crate::pool::FramePool;
use crate::ports::PortId;
use crate::slowpath::{Slowpath, ToSlowpath};
use crate::switch::{Switch, TxBatch};
use crate::time::Time;

/// Steps 3 and 4 of a turn for one port: its timers ([`Switch::handle_port_timeout`]),
/// then what it sends now, at most `limit` frames, into `out`. The frames in `out` are
/// the caller's to put on the wire and free.
pub fn transmit<P: FramePool>(sw: &mut Switch, now: Time, pool: &mut P, port: PortId, limit: usize, out: &mut TxBatch) {
    out.reset(limit.min(TxBatch::CAPACITY));
    sw.handle_port_timeout(now, pool, port);
    sw.poll_transmit(now, pool, port, out);
}

/// Step 5 of a turn and the slowpath's answer, with no delay between them: the switch's
/// events go to the slowpath (an event `refuse` picks goes back to the switch, as from a
/// full channel), and the frames it releases rejoin their queues (step 1 of the next
/// turn). It releases on every call: with no delay there is no recheck to wait for.
/// Returns how many were released.
pub fn slowpath_round_trip<P: FramePool>(
    sw: &mut Switch,
    slow: &mut Slowpath,
    pool: &mut P,
    now: Time,
    mut refuse: impl FnMut(&ToSlowpath) -> bool,
) -> usize {
    sw.poll_slowpath(pool, |ev| {
        if refuse(&ev) {
            return Err(ev);
        }
        slow.handle_event(ev);
        Ok(())
    });
    let released = slow.release(|port| sw.stopped(now, port));
    let n = released.len();
    sw.handle_released(now, pool, released.iter().copied());
    n
}
