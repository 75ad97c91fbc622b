//! Egress: what a port may send now. The pause gate (priorities the link partner
//! paused, or whose queues the watchdog or a deadlock resolution empties), the pending
//! pause frame first, then strict priority or DRR over the data queues, at the shaper's
//! pace.

use std::time::Duration;

use crate::config::Scheduler;
use crate::pause::EgressPause;
use crate::pool::FramePool;
use crate::ports::PortId;
use crate::priorities::PRIORITIES;
use crate::priorities::{Priorities, Priority};
use crate::queue::FrameId;
use crate::queue::{DataQueues, Fifo};
use crate::shaper::Shaper;
use crate::speed::Speed;
use crate::time::Time;

use super::Switch;

/// One frame to put on a tx ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxFrame {
    /// The frame, in the pool.
    pub id: FrameId,
    /// Its length, bytes.
    pub len: u32,
    /// For a pause frame sent because a queue crossed XOFF: when that frame was received.
    pub xoff_trigger: Option<Time>,
    /// A MAC control frame the switch built (PFC or 802.3x PAUSE), so that a driver that
    /// counts pause frames need not read the frame.
    pub pause: bool,
}

/// Frames for one port's tx ring, filled by [`Switch::poll_transmit`]. Never allocates.
#[derive(Debug)]
pub struct TxBatch {
    frames: [TxFrame; TxBatch::CAPACITY],
    len: usize,
    limit: usize,
}

impl TxBatch {
    /// The most frames one batch holds.
    pub const CAPACITY: usize = 256;

    /// An empty batch with room for [`TxBatch::CAPACITY`] frames.
    pub fn new() -> TxBatch {
        let empty = TxFrame { id: FrameId(0), len: 0, xoff_trigger: None, pause: false };
        TxBatch { frames: [empty; TxBatch::CAPACITY], len: 0, limit: TxBatch::CAPACITY }
    }

    /// Empties the batch and accepts at most `limit` frames (the room on the ring).
    pub fn reset(&mut self, limit: usize) {
        self.len = 0;
        self.limit = limit.min(TxBatch::CAPACITY);
    }

    fn has_room(&self) -> bool {
        self.len < self.limit
    }

    fn push(&mut self, f: TxFrame) {
        self.frames[self.len] = f;
        self.len += 1;
    }

    /// The frames to send, in order.
    pub fn frames(&self) -> &[TxFrame] {
        &self.frames[..self.len]
    }

    /// Whether the batch holds no frame.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for TxBatch {
    fn default() -> TxBatch {
        TxBatch::new()
    }
}

/// DRR quantum per unit of weight.
const DRR_QUANTUM: u32 = 1536;

/// Shaper burst: how far ahead of the wire frames may be handed to the kernel.
const SHAPER_BURST: Duration = Duration::from_micros(30);

/// How much wire time a port with frames waiting may make up after a long loop turn or
/// a stall: longer than a turn with large frames, short enough that what a port sends
/// after a stall stays a brief burst.
const SHAPER_CATCH_UP: Duration = Duration::from_millis(1);

/// What a port sends: its data queues under strict priority or DRR, the pause frames
/// it built (ahead of every data queue), the shaper that paces them at the port's
/// speed, and the pauses its link partner sent it.
#[derive(Debug)]
pub(super) struct PortTx {
    pub(super) queues: DataQueues,
    pub(super) control: Fifo,
    pub(super) drr: Option<Drr>,
    pub(super) shaper: Shaper,
    /// The link partner's pauses on this port.
    pub(super) pause: EgressPause,
    /// Per priority: what each frame sent reads and writes (side by side in one line).
    pub(super) sent: [PrioSent; PRIORITIES],
}

/// What a port remembers of one priority's sending.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PrioSent {
    /// When a received pause ends, until the priority's next frame goes out.
    pub(super) resume_due: Option<Time>,
    /// When its last frame was handed out for transmission.
    pub(super) last_tx: Time,
    /// Frames handed out since the latest pause or resume for it was applied: all of them
    /// went out after that pause ran out, so if the next pause arrived before it did,
    /// they leaked through a storm (`sent_past_pause`).
    pub(super) since_pause: u32,
}

impl PortTx {
    pub(super) fn new(speed: Speed, scheduler: &Scheduler) -> PortTx {
        PortTx {
            queues: Default::default(),
            control: Fifo::default(),
            drr: match scheduler {
                Scheduler::Strict => None,
                Scheduler::Drr { weights } => Some(Drr {
                    weights: *weights,
                    deficit: [0; PRIORITIES],
                    current: Priority::new(0),
                    credited: false,
                }),
            },
            shaper: Shaper::new(speed, SHAPER_BURST, SHAPER_CATCH_UP),
            pause: EgressPause::default(),
            sent: [PrioSent::default(); PRIORITIES],
        }
    }
}

#[derive(Debug)]
pub(super) struct Drr {
    weights: [u32; PRIORITIES],
    deficit: [u32; PRIORITIES],
    current: Priority,
    credited: bool,
}

impl Switch {
    /// Priorities a held frame for `port` may not be released on: all while the port is
    /// blocked; else those paused by the link partner, unless their queue is being emptied
    /// (a deadlock or a storm being cut off) or the watchdog ignores the pauses.
    pub fn stopped(&self, now: Time, port: PortId) -> Priorities {
        if self.is_blocked(port) {
            return Priorities::ALL;
        }
        self.effective_paused(now, port) & !self.dropping(now, port)
    }

    /// The priorities the link partner holds back on `port`: those it paused, less those
    /// whose pauses the watchdog ignores.
    pub(super) fn effective_paused(&self, now: Time, port: PortId) -> Priorities {
        let p = &self.ports[port];
        p.tx.pause.paused(now) & !p.pfcwd.forwarding()
    }

    /// Fills `out` with what `port` sends now: its pause frames first (they bypass the
    /// pause gate and the queues), then data as the shaper and the scheduler allow.
    /// The frames in `out` belong to the caller, who frees them once sent.
    pub fn poll_transmit<P: FramePool>(&mut self, now: Time, pool: &mut P, port: PortId, out: &mut TxBatch) {
        self.clock = self.clock.max(now);
        if !self.ports[port].link_up {
            return;
        }
        self.build_pause_frame(now, pool, port);
        let p = &mut self.ports[port];
        while out.has_room() {
            let Some(id) = p.tx.control.pop(&mut self.frames) else { break };
            let len = self.frames.get(id).len;
            p.tx.shaper.send(now, len as usize);
            out.push(TxFrame { id, len, xoff_trigger: p.upstream.pending.trigger.take(), pause: true });
        }
        while out.has_room() && self.ports[port].tx.shaper.ready(now) {
            let Some(prio) = self.pick_queue(now, port) else {
                // Nothing it may send: the wire idles from now, and that is not banked.
                self.ports[port].tx.shaper.idle();
                break;
            };
            let p = &mut self.ports[port];
            let id = p.tx.queues.pop(prio, &mut self.frames).expect("picked queue is not empty");
            let meta = *self.frames.get(id);
            if let Some(due) = p.tx.sent[prio].resume_due.take() {
                if meta.enqueued < due {
                    // The frame waited out the pause: how late after its end did it leave?
                    self.resume_lateness.record(now.saturating_since(due));
                }
            }
            p.tx.shaper.send(now, meta.len as usize);
            p.tx.sent[prio].last_tx = now;
            p.tx.sent[prio].since_pause = p.tx.sent[prio].since_pause.saturating_add(1);
            p.counters.tx_frames += 1;
            p.counters.tx_bytes += u64::from(meta.len);
            p.prio[prio].tx_frames += 1;
            p.prio[prio].tx_bytes += u64::from(meta.len);
            out.push(TxFrame { id, len: meta.len, xoff_trigger: None, pause: false });
            if let Some(ingress) = meta.ingress() {
                let group = meta.prio;
                self.ports[ingress].dcfit.departed[group] = Some(now);
                self.map.dequeued(ingress, port);
                if self.buffer.release(ingress, group, u64::from(meta.len), u32::from(meta.buffers)) {
                    self.request_resume(ingress, group);
                }
            }
        }
    }

    /// Takes the head of a queue that will not be sent, keeping the traffic map right.
    pub(super) fn unqueue(&mut self, port: PortId, prio: Priority) -> Option<FrameId> {
        let id = self.ports[port].tx.queues.pop(prio, &mut self.frames)?;
        let meta = *self.frames.get(id);
        if let Some(ingress) = meta.ingress() {
            self.map.dequeued(ingress, port);
        }
        Some(id)
    }

    /// The queue the scheduler serves next on `port`, skipping paused priorities.
    fn pick_queue(&mut self, now: Time, port: PortId) -> Option<Priority> {
        let paused = self.effective_paused(now, port);
        let p = &mut self.ports[port];
        let ready = p.tx.queues.nonempty() & !paused;
        let Some(drr) = &mut p.tx.drr else {
            return ready.highest();
        };
        if ready.is_empty() {
            return None;
        }
        // Weight-0 queues stay strict and go first.
        let strict = Priorities::matching(|q| drr.weights[q] == 0) & ready;
        if let Some(q) = strict.highest() {
            return Some(q);
        }
        for q in Priority::all() {
            if p.tx.queues[q].is_empty() {
                drr.deficit[q] = 0;
            }
        }
        // Each visit credits one quantum × weight; a frame needs at most 9216 / 1536 visits.
        for _ in 0..PRIORITIES * 8 {
            let q = drr.current;
            if ready.contains(q) {
                let head = p.tx.queues[q].peek().expect("ready queue has a head");
                let need = self.frames.get(head).len;
                if drr.deficit[q] >= need {
                    drr.deficit[q] -= need;
                    return Some(q);
                }
                if !drr.credited {
                    drr.deficit[q] += drr.weights[q] * DRR_QUANTUM;
                    drr.credited = true;
                    continue;
                }
            }
            drr.current = q.next_wrapping();
            drr.credited = false;
        }
        ready.highest()
    }
}
