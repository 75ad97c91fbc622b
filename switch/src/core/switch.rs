//! The switch engine: every forwarding and flow-control decision, with no IO.
//!
//! The dataplane hands it received frames ([`Switch::receive`]) and asks it what to put on
//! each port's tx ring ([`Switch::transmit`]); frame bytes live in a [`FramePool`] the
//! caller owns (the UMEM in the dataplane, plain vectors in tests). Time is passed in.

use std::time::Duration;

use super::buffer::SharedBuffer;
use super::classify::Classifier;
use super::config::{Config, PauseMode, Scheduler};
use super::ether::{self, FrameHeader};
use super::fdb::{Fdb, Learned, PortId};
use super::histogram::Histogram;
use super::mac::MacAddr;
use super::pause::EgressPause;
use super::pfc::{self, MacControl, Pfc, PRIORITIES};
use super::queue::{Fifo, FrameId, FrameTable, NO_PORT};
use super::shaper::Shaper;
use super::speed::Speed;
use super::stats::{DropReason, PortCounters, PortStats, PrioCounters, PrioStats, SwitchStats};
use super::time::Time;

/// Frame buffers owned by the caller. Frames are identified by index.
pub trait FramePool {
    /// A free frame for a frame the switch builds itself.
    fn alloc(&mut self) -> Option<FrameId>;
    /// Gives a frame back.
    fn free(&mut self, id: FrameId);
    /// The frame's current contents.
    fn bytes(&self, id: FrameId) -> &[u8];
    /// Sets the frame's length and returns its contents for writing.
    fn write(&mut self, id: FrameId, len: usize) -> &mut [u8];
    /// Copies the contents of `from` into `to`.
    fn copy(&mut self, from: FrameId, to: FrameId);
    /// When a received frame arrived, if the receive path stamped it; else the switch
    /// takes the time it was handed over.
    fn arrival(&self, _id: FrameId) -> Option<Time> {
        None
    }
}

/// One frame to put on a tx ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxFrame {
    pub id: FrameId,
    pub len: u32,
    /// For a pause frame sent because a queue crossed XOFF: when that frame was received.
    pub xoff_trigger: Option<Time>,
}

/// Frames for one port's tx ring, filled by [`Switch::transmit`]. Never allocates.
#[derive(Debug)]
pub struct TxBatch {
    frames: [TxFrame; TxBatch::CAPACITY],
    len: usize,
    limit: usize,
}

impl TxBatch {
    pub const CAPACITY: usize = 256;

    pub fn new() -> TxBatch {
        let empty = TxFrame { id: FrameId(0), len: 0, xoff_trigger: None };
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

    pub fn frames(&self) -> &[TxFrame] {
        &self.frames[..self.len]
    }

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
const FDB_AGING_PERIOD: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct Drr {
    weights: [u32; PRIORITIES],
    deficit: [u32; PRIORITIES],
    current: usize,
    credited: bool,
}

/// Pauses this port owes its link partner, built into a frame at the next transmit.
#[derive(Debug, Default)]
struct PendingPause {
    pause: u8,
    resume: u8,
    /// Receive time of the frame that crossed XOFF, for the reaction-time histogram.
    trigger: Option<Time>,
    refresh_at: [Time; PRIORITIES],
}

#[derive(Debug)]
struct Port {
    name: String,
    iface: String,
    mac: MacAddr,
    speed: Speed,
    mode: PauseMode,
    flood: bool,
    max_frame: usize,
    refresh: Duration,
    shaper: Shaper,
    pause: EgressPause,
    queues: [Fifo; PRIORITIES],
    control: Fifo,
    drr: Option<Drr>,
    pending: PendingPause,
    /// Per priority: when a received pause ends, until its next frame goes out.
    resume_due: [Option<Time>; PRIORITIES],
    counters: PortCounters,
    prio: [PrioCounters; PRIORITIES],
}

#[derive(Debug)]
pub struct Switch {
    name: String,
    switch_id: u32,
    started: Time,
    ports: Vec<Port>,
    fdb: Fdb,
    buffer: SharedBuffer,
    frames: FrameTable,
    classifier: Classifier,
    lossless: u8,
    quanta: u16,
    lossy_queue_bytes: u64,
    next_aging: Time,
    reaction: Histogram,
    resume_lateness: Histogram,
}

impl Switch {
    /// A switch for `config` (validated, with every port's MAC filled in) holding frames
    /// with ids below `frame_capacity`.
    pub fn new(config: &Config, frame_capacity: u32, now: Time) -> Switch {
        let quanta = config.pfc.quanta;
        let ports = config
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let refresh = match config.pfc.refresh_us {
                    Some(us) => Duration::from_micros(us),
                    None => p.speed.quanta_duration(quanta) / 2,
                };
                Port {
                    name: config.port_name(i).to_string(),
                    iface: p.iface.clone(),
                    // The source of our pause frames: never all-zero (some peers ignore that).
                    mac: p.mac.filter(|m| !m.is_zero() && !m.is_multicast()).unwrap_or(MacAddr::local(i as u64 + 1)),
                    speed: p.speed,
                    mode: p.pause_mode,
                    flood: p.flood,
                    max_frame: p.max_frame,
                    refresh,
                    shaper: Shaper::new(p.speed, SHAPER_BURST),
                    pause: EgressPause::default(),
                    queues: Default::default(),
                    control: Fifo::default(),
                    drr: match &p.scheduler {
                        Scheduler::Strict => None,
                        Scheduler::Drr { weights } => {
                            Some(Drr { weights: *weights, deficit: [0; PRIORITIES], current: 0, credited: false })
                        }
                    },
                    pending: PendingPause::default(),
                    resume_due: [None; PRIORITIES],
                    counters: PortCounters::default(),
                    prio: Default::default(),
                }
            })
            .collect();
        let headroom = config.ports.iter().map(|p| p.headroom_bytes.unwrap_or(config.buffer.headroom_bytes)).collect();
        Switch {
            name: config.name.clone(),
            switch_id: config.switch_id(),
            started: now,
            ports,
            fdb: Fdb::new(config.fdb.max_entries, Duration::from_secs(config.fdb.aging_s)),
            buffer: SharedBuffer::new(
                config.buffer.shared_bytes,
                config.buffer.xoff_rule(),
                config.buffer.xon_rule(),
                headroom,
            ),
            frames: FrameTable::new(frame_capacity),
            classifier: Classifier::new(&config.classify),
            lossless: config.lossless_mask(),
            quanta,
            lossy_queue_bytes: config.buffer.lossy_queue_bytes,
            next_aging: now + FDB_AGING_PERIOD,
            reaction: Histogram::default(),
            resume_lateness: Histogram::default(),
        }
    }

    pub fn port_count(&self) -> usize {
        self.ports.len()
    }

    pub fn fdb(&self) -> &Fdb {
        &self.fdb
    }

    pub fn fdb_mut(&mut self) -> &mut Fdb {
        &mut self.fdb
    }

    fn is_lossless(&self, prio: usize) -> bool {
        self.lossless & (1 << prio) != 0
    }

    /// Takes ownership of frame `id`, received on `port`: it is queued for transmission
    /// or given back to the pool.
    pub fn receive<P: FramePool>(&mut self, now: Time, pool: &mut P, port: PortId, id: FrameId) {
        // Pauses and XOFF reactions count from when the frame arrived, not from when the
        // loop got to it (it may have been asleep).
        let arrived = pool.arrival(id).filter(|&t| t <= now).unwrap_or(now);
        let data = pool.bytes(id);
        let len = data.len();
        let Some(header) = ether::parse_header(data) else {
            self.ports[port].counters.drops.count(DropReason::Runt);
            pool.free(id);
            return;
        };
        if header.ethertype == pfc::MAC_CONTROL_ETHERTYPE {
            let decoded = pfc::decode(data, self.ports[port].mac);
            pool.free(id);
            self.on_mac_control(arrived, port, decoded);
            return;
        }
        let p = &mut self.ports[port];
        p.counters.rx_frames += 1;
        p.counters.rx_bytes += len as u64;
        if let Some(reason) = reject_reason(&header, len, p.max_frame) {
            p.counters.drops.count(reason);
            pool.free(id);
            return;
        }
        if !header.src.is_zero() && self.fdb.learn(header.src, port, now) == Learned::Moved {
            p.counters.fdb_moves += 1;
        }
        let prio = self.classifier.priority(&header);
        self.ports[port].prio[usize::from(prio)].rx_frames += 1;
        let destination = if header.dst.is_multicast() { None } else { self.fdb.lookup(header.dst, now) };
        match destination {
            Some(egress) if egress == port => self.drop_frame(pool, port, id, DropReason::Filtered),
            Some(egress) => self.enqueue(arrived, pool, port, egress, id, len, prio),
            None => self.flood(arrived, pool, port, id, len, prio),
        }
    }

    fn flood<P: FramePool>(&mut self, now: Time, pool: &mut P, ingress: PortId, id: FrameId, len: usize, prio: u8) {
        let targets: u64 =
            self.ports.iter().enumerate().filter(|(i, p)| *i != ingress && p.flood).fold(0, |m, (i, _)| m | (1 << i));
        if targets == 0 {
            self.drop_frame(pool, ingress, id, DropReason::Filtered);
            return;
        }
        let last = 63 - targets.leading_zeros() as usize;
        for egress in (0..self.ports.len()).filter(|e| targets & (1 << e) != 0) {
            if egress == last {
                self.enqueue(now, pool, ingress, egress, id, len, prio);
            } else if let Some(copy) = pool.alloc() {
                pool.copy(id, copy);
                self.enqueue(now, pool, ingress, egress, copy, len, prio);
            } else {
                self.ports[ingress].counters.drops.count(DropReason::NoBuffer);
            }
        }
    }

    fn drop_frame<P: FramePool>(&mut self, pool: &mut P, port: PortId, id: FrameId, reason: DropReason) {
        self.ports[port].counters.drops.count(reason);
        pool.free(id);
    }

    /// Admits a frame against its ingress group and queues it on `egress`.
    #[allow(clippy::too_many_arguments)]
    fn enqueue<P: FramePool>(
        &mut self,
        now: Time,
        pool: &mut P,
        ingress: PortId,
        egress: PortId,
        id: FrameId,
        len: usize,
        prio: u8,
    ) {
        let p = usize::from(prio);
        let bytes = len as u64;
        let admitted = if self.is_lossless(p) {
            let a = self.buffer.admit_lossless(ingress, p, bytes);
            if a.crossed_xoff {
                self.request_pause(now, ingress, p);
            }
            if !a.admitted {
                self.ports[ingress].prio[p].lossless_drops += 1;
                self.drop_frame(pool, ingress, id, DropReason::Lossless);
            }
            a.admitted
        } else {
            let queued = self.ports[egress].queues[p].bytes();
            let ok = self.buffer.admit_lossy(ingress, p, bytes, queued, self.lossy_queue_bytes);
            if !ok {
                self.ports[ingress].prio[p].lossy_drops += 1;
                self.drop_frame(pool, ingress, id, DropReason::Lossy);
            }
            ok
        };
        if admitted {
            self.frames.set(id, len as u32, ingress as u16, prio, now);
            self.ports[egress].queues[p].push(&mut self.frames, id);
        }
    }

    /// A lossless group of `port` crossed XOFF: the port must pause its link partner.
    fn request_pause(&mut self, now: Time, port: PortId, prio: usize) {
        let pending = &mut self.ports[port].pending;
        pending.pause |= 1 << prio;
        pending.resume &= !(1 << prio);
        pending.trigger.get_or_insert(now);
    }

    fn request_resume(&mut self, port: PortId, prio: usize) {
        let pending = &mut self.ports[port].pending;
        pending.resume |= 1 << prio;
        pending.pause &= !(1 << prio);
    }

    fn on_mac_control(&mut self, now: Time, port: PortId, decoded: Result<pfc::ControlFrame, pfc::ControlReject>) {
        let lossless = self.lossless;
        let p = &mut self.ports[port];
        let c = &mut p.counters.mac_control;
        c.received += 1;
        let frame = match decoded {
            Ok(f) => f,
            Err(reason) => {
                c.reject(reason);
                return;
            }
        };
        if frame.src.is_zero() {
            c.zero_source += 1;
        }
        match frame.body {
            MacControl::Pause { quanta } => {
                c.pause_received += 1;
                if p.mode == PauseMode::GlobalPause {
                    p.pause.pause_port(now, p.speed.quanta_duration(quanta));
                } else {
                    c.pause_ignored += 1;
                }
            }
            MacControl::Pfc(pfc) => {
                c.pfc_received += 1;
                if p.mode != PauseMode::Pfc {
                    c.pfc_ignored += 1;
                    return;
                }
                for (prio, quanta) in pfc.classes() {
                    if lossless & (1 << prio) == 0 {
                        p.counters.mac_control.lossy_class_ignored += 1;
                        continue;
                    }
                    let d = p.speed.quanta_duration(quanta);
                    p.pause.pause_priority(now, prio, d);
                    p.resume_due[prio] = Some(now + d);
                    if quanta == 0 {
                        p.prio[prio].xon_received += 1;
                    } else {
                        p.prio[prio].xoff_received += 1;
                    }
                }
            }
        }
    }

    /// Fills `out` with what `port` sends now: its pause frames first (they bypass the
    /// pause gate and the queues), then data as the shaper and the scheduler allow.
    /// The frames in `out` belong to the caller, who frees them once sent.
    pub fn transmit<P: FramePool>(&mut self, now: Time, pool: &mut P, port: PortId, out: &mut TxBatch) {
        self.build_pause_frame(now, pool, port);
        let p = &mut self.ports[port];
        while out.has_room() {
            let Some(id) = p.control.pop(&mut self.frames) else { break };
            let len = self.frames.get(id).len;
            p.shaper.send(now, len as usize);
            out.push(TxFrame { id, len, xoff_trigger: p.pending.trigger.take() });
        }
        while out.has_room() && self.ports[port].shaper.ready(now) {
            let Some(prio) = self.pick_queue(now, port) else { break };
            let p = &mut self.ports[port];
            let id = p.queues[prio].pop(&mut self.frames).expect("picked queue is not empty");
            let meta = *self.frames.get(id);
            if let Some(due) = p.resume_due[prio].take() {
                if meta.enqueued < due {
                    // The frame waited out the pause: how late after its end did it leave?
                    self.resume_lateness.record(now.saturating_since(due));
                }
            }
            p.shaper.send(now, meta.len as usize);
            p.counters.tx_frames += 1;
            p.counters.tx_bytes += u64::from(meta.len);
            p.prio[prio].tx_frames += 1;
            out.push(TxFrame { id, len: meta.len, xoff_trigger: None });
            if meta.ingress != NO_PORT {
                let (ingress, group) = (usize::from(meta.ingress), usize::from(meta.prio));
                if self.buffer.release(ingress, group, u64::from(meta.len)) {
                    self.request_resume(ingress, group);
                }
            }
        }
    }

    /// The caller handed a pause frame to the kernel at `sent`; records the reaction time.
    pub fn record_pause_sent(&mut self, trigger: Time, sent: Time) {
        self.reaction.record(sent.saturating_since(trigger));
    }

    /// Builds one frame carrying every pause, refresh and resume `port` owes.
    fn build_pause_frame<P: FramePool>(&mut self, now: Time, pool: &mut P, port: PortId) {
        let p = &mut self.ports[port];
        if p.mode == PauseMode::Off {
            p.pending = PendingPause { refresh_at: p.pending.refresh_at, ..PendingPause::default() };
            return;
        }
        // Refresh pauses before they expire upstream while the group is still above XON.
        for prio in pfc::bits(self.lossless) {
            if self.buffer.group(port, prio).xoff && now >= p.pending.refresh_at[prio] {
                p.pending.pause |= 1 << prio;
            }
        }
        let (pause, resume) = (p.pending.pause, p.pending.resume);
        if pause | resume == 0 {
            return;
        }
        let body = if p.mode == PauseMode::GlobalPause {
            let any_xoff = pfc::bits(self.lossless).any(|prio| self.buffer.group(port, prio).xoff);
            MacControl::Pause { quanta: if any_xoff { self.quanta } else { 0 } }
        } else {
            let mut pfc = Pfc::pause(pause, self.quanta);
            pfc.enabled |= resume;
            MacControl::Pfc(pfc)
        };
        let Some(id) = pool.alloc() else {
            p.counters.mac_control.send_deferred += 1;
            return;
        };
        let len = pfc::encode(pool.write(id, pfc::MIN_FRAME_LEN), p.mac, &body);
        self.frames.set(id, len as u32, NO_PORT, 0, now);
        p.control.push(&mut self.frames, id);
        for prio in pfc::bits(pause) {
            p.pending.refresh_at[prio] = now + p.refresh;
        }
        match body {
            MacControl::Pause { .. } => p.counters.mac_control.pause_sent += 1,
            MacControl::Pfc(_) => {
                p.counters.mac_control.pfc_sent += 1;
                for prio in pfc::bits(pause) {
                    p.prio[prio].xoff_sent += 1;
                }
                for prio in pfc::bits(resume) {
                    p.prio[prio].xon_sent += 1;
                }
            }
        }
        p.pending.pause = 0;
        p.pending.resume = 0;
    }

    /// The queue the scheduler serves next on `port`, skipping paused priorities.
    fn pick_queue(&mut self, now: Time, port: PortId) -> Option<usize> {
        let p = &mut self.ports[port];
        let paused = p.pause.paused_mask(now);
        let ready: u8 =
            (0..PRIORITIES).filter(|&q| !p.queues[q].is_empty() && paused & (1 << q) == 0).fold(0, |m, q| m | (1 << q));
        if ready == 0 {
            return None;
        }
        let Some(drr) = &mut p.drr else {
            return Some(7 - ready.leading_zeros() as usize);
        };
        // Weight-0 queues stay strict and go first.
        let strict = (0..PRIORITIES).filter(|&q| drr.weights[q] == 0).fold(0u8, |m, q| m | (1 << q)) & ready;
        if strict != 0 {
            return Some(7 - strict.leading_zeros() as usize);
        }
        for q in 0..PRIORITIES {
            if p.queues[q].is_empty() {
                drr.deficit[q] = 0;
            }
        }
        // Each visit credits one quantum × weight; a frame needs at most 9216 / 1536 visits.
        for _ in 0..PRIORITIES * 8 {
            let q = drr.current;
            if ready & (1 << q) != 0 {
                let head = p.queues[q].peek().expect("ready queue has a head");
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
            drr.current = (q + 1) % PRIORITIES;
            drr.credited = false;
        }
        Some(7 - ready.leading_zeros() as usize)
    }

    /// Periodic work not tied to a frame: FDB aging.
    pub fn on_timer(&mut self, now: Time) {
        if now >= self.next_aging {
            self.fdb.age(now);
            self.next_aging = now + FDB_AGING_PERIOD;
        }
    }

    /// When the switch next has something to do without new input; `Some(now)` or earlier
    /// means right away.
    pub fn next_wakeup(&self, now: Time) -> Time {
        let mut next = self.next_aging;
        for (i, p) in self.ports.iter().enumerate() {
            if p.pending.pause | p.pending.resume != 0 || !p.control.is_empty() {
                return now;
            }
            if p.mode != PauseMode::Off {
                for prio in pfc::bits(self.lossless) {
                    if self.buffer.group(i, prio).xoff {
                        next = next.min(p.pending.refresh_at[prio]);
                    }
                }
            }
            let queued = (0..PRIORITIES).filter(|&q| !p.queues[q].is_empty()).fold(0u8, |m, q| m | (1 << q));
            if queued == 0 {
                continue;
            }
            let paused = p.pause.paused_mask(now);
            let at = if queued & !paused != 0 {
                p.shaper.ready_at()
            } else {
                p.pause.resume_at(now, queued).unwrap_or(now).max(p.shaper.ready_at())
            };
            next = next.min(at);
        }
        next
    }

    /// Frames held in egress queues.
    pub fn queued_frames(&self) -> u64 {
        self.ports.iter().flat_map(|p| p.queues.iter().chain([&p.control])).map(|q| u64::from(q.len())).sum()
    }

    pub fn stats(&self, now: Time) -> SwitchStats {
        SwitchStats {
            name: self.name.clone(),
            switch_id: self.switch_id,
            uptime_s: now.saturating_since(self.started).as_secs_f64(),
            fdb_entries: self.fdb.len(),
            shared_buffer_bytes: self.buffer.shared_total(),
            shared_buffer_used: self.buffer.shared_used(),
            xoff_threshold: self.buffer.xoff_threshold(),
            xon_threshold: self.buffer.xon_threshold(),
            free_frames: 0,
            pfc_reaction: self.reaction.percentiles(),
            resume_lateness: self.resume_lateness.percentiles(),
            ports: self.ports.iter().enumerate().map(|(i, p)| self.port_stats(now, i, p)).collect(),
        }
    }

    fn port_stats(&self, now: Time, index: usize, p: &Port) -> PortStats {
        let paused = p.pause.paused_mask(now);
        let priorities = (0..PRIORITIES)
            .map(|prio| {
                let g = self.buffer.group(index, prio);
                PrioStats {
                    priority: prio as u8,
                    lossless: self.is_lossless(prio),
                    counters: p.prio[prio],
                    ingress_bytes: g.occupancy(),
                    ingress_watermark: g.watermark,
                    headroom_bytes: g.headroom,
                    headroom_watermark: g.headroom_watermark,
                    xoff: g.xoff,
                    egress_queue_frames: p.queues[prio].len(),
                    egress_queue_bytes: p.queues[prio].bytes(),
                    egress_paused: paused & (1 << prio) != 0,
                    paused_us: p.pause.paused_time(now, prio).as_micros() as u64,
                }
            })
            .collect();
        PortStats {
            name: p.name.clone(),
            iface: p.iface.clone(),
            mac: p.mac.to_string(),
            speed: p.speed.to_string(),
            pause_mode: format!("{:?}", p.mode).to_lowercase(),
            blocked: false,
            counters: p.counters,
            xdp: Default::default(),
            socket: Default::default(),
            priorities,
        }
    }

    /// Clears every watermark (for a fresh measurement).
    pub fn clear_watermarks(&mut self) {
        self.buffer.clear_watermarks();
    }
}

/// Frames a bridge refuses before learning from them.
fn reject_reason(h: &FrameHeader, len: usize, max_frame: usize) -> Option<DropReason> {
    if len > max_frame {
        Some(DropReason::Oversize)
    } else if h.dst.is_link_local() {
        Some(DropReason::LinkLocal)
    } else if h.src.is_multicast() {
        Some(DropReason::BadSource)
    } else {
        None
    }
}

#[cfg(test)]
#[path = "switch_tests.rs"]
mod tests;
