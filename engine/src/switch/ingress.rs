//! Ingress: a received frame is parsed, classified (priority, Tagger tag), placed on
//! each egress it goes to (ingress group, egress queue, rewritten tag) and admitted or
//! dropped with a counted reason; MAC control frames go to [`flow_control`](super::flow_control).

use crate::ecmp::FlowKey;
use crate::ether::{self, FrameHeader, IpAt};
use crate::fdb::{GroupId, Learned, Next};
use crate::pfc;
use crate::pool::FramePool;
use crate::ports::{PortId, PortSet};
use crate::priorities::{Priorities, Priority};
use crate::queue::FrameId;
use crate::slowpath::{HeldFrame, ToSlowpath};
use crate::stats::DropReason;
use crate::tagging::TAGS;
use crate::time::Time;

use super::wred::Verdict;
use super::{Switch, PAUSE_RESERVE, TAG_SLOTS};

/// How a received frame was classified: the priority it is charged to at ingress and,
/// under a Tagger table, its tag.
#[derive(Clone, Copy, Debug)]
struct Class {
    prio: Priority,
    tag: Tagged,
    ip: Option<IpAt>,
    vlan: bool,
    /// ECT(0), ECT(1) or CE: WRED marks it rather than drops it.
    ecn_capable: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tagged {
    /// No table: the priority is the frame's, unchanged on every egress.
    Off,
    /// Matched the ingress rule for this tag: lossless while the egress has a rewrite rule.
    Lossless(u8),
    /// Matched no rule (or has no IP header): the table's default, lossy.
    Default,
}

/// Where a classified frame goes on one egress: the ingress group it is charged to, the
/// egress queue it waits in, and the tag it leaves with (when it is rewritten).
#[derive(Clone, Copy, Debug)]
struct Placement {
    group: Priority,
    queue: Priority,
    tag: Option<u8>,
    /// The tag comes from a rewrite rule (not the default).
    by_rule: bool,
}

impl Switch {
    /// Takes ownership of frame `id`, received on `port`: it is queued for transmission
    /// or given back to the pool.
    pub fn handle_frame<P: FramePool>(&mut self, now: Time, pool: &mut P, port: PortId, id: FrameId) {
        self.clock = self.clock.max(now);
        // Pauses and XOFF reactions count from when the frame arrived, not from when the
        // loop got to it (it may have been asleep).
        let arrived = pool.arrival(id).filter(|&t| t <= now).unwrap_or(now);
        let data = pool.bytes(id);
        let len = pool.len(id);
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
        if !header.src.is_zero() {
            match self.fdb.learn(header.src, port, now) {
                Learned::Moved => p.counters.fdb_moves += 1,
                Learned::TableFull => p.counters.fdb_full += 1,
                Learned::PortFull => p.counters.fdb_port_full += 1,
                Learned::New | Learned::Refreshed | Learned::Static => {}
            }
        }
        let class = self.classify(port, &header);
        let counters = &mut self.ports[port].prio[class.prio];
        counters.rx_frames += 1;
        counters.rx_bytes += len as u64;
        let next = if header.dst.is_multicast() { None } else { self.fdb.lookup(header.dst, now) };
        let destination = match next {
            None => None,
            Some(Next::Port(p)) => Some(p),
            Some(Next::Group(g)) => Some(self.member(now, g, pool.bytes(id), &header, class.prio)),
        };
        match destination {
            Some(egress) if egress == port => self.drop_frame(pool, port, id, DropReason::Filtered),
            Some(egress) => self.enqueue(arrived, pool, port, egress, id, len, class),
            None => {
                if !header.dst.is_multicast() {
                    self.ports[port].counters.unknown_unicast_flooded += 1;
                }
                self.flood(arrived, pool, port, id, len, class)
            }
        }
    }

    /// The member of group `g` a frame of class `prio` leaves by at `now`, as the
    /// switch's `fdb.multipath` says ([`multipath`](super::multipath)).
    fn member(&mut self, now: Time, g: GroupId, frame: &[u8], header: &FrameHeader, prio: Priority) -> PortId {
        let ports = &self.ports;
        self.multipath.pick(
            now,
            self.fdb.group(g),
            || FlowKey::of(frame, header, prio),
            |p| ports[p].link_up,
            |p| ports[p].tx.queues[prio].bytes(),
        )
    }

    /// The priority a frame is charged to at ingress: its PCP or mapped DSCP, or under a
    /// Tagger table the priority of its tag's ingress rule (else the table's default).
    fn classify(&mut self, port: PortId, h: &FrameHeader) -> Class {
        let (ip, vlan, ecn_capable) = (h.ip, h.pcp.is_some(), h.ecn.is_some_and(ether::ecn_capable));
        let Some(table) = &self.tags else {
            return Class { prio: self.classifier.priority(h), tag: Tagged::Off, ip, vlan, ecn_capable };
        };
        let slot = port.index() * TAG_SLOTS + h.dscp.map_or(TAGS, usize::from);
        match h.dscp.and_then(|tag| Some((tag, table.ingress(port, tag)?))) {
            Some((tag, prio)) => {
                self.tag_counters[slot].classified += 1;
                Class { prio, tag: Tagged::Lossless(tag), ip, vlan, ecn_capable }
            }
            None => {
                self.tag_counters[slot].default_ingress += 1;
                Class { prio: table.default_priority, tag: Tagged::Default, ip, vlan, ecn_capable }
            }
        }
    }

    /// Where a frame of `class` from `ingress` waits on `egress`, and the tag it leaves with.
    fn place(&mut self, ingress: PortId, egress: PortId, class: Class) -> Placement {
        let Some(table) = &self.tags else {
            return Placement { group: class.prio, queue: class.prio, tag: None, by_rule: false };
        };
        let (prio, tag) = (table.default_priority, table.default_tag);
        let default = Placement { group: prio, queue: prio, tag: Some(tag), by_rule: false };
        match class.tag {
            Tagged::Off | Tagged::Default => default,
            Tagged::Lossless(tag) => match table.rewrite(ingress, tag, egress) {
                Some(next) => {
                    Placement { group: class.prio, queue: table.priority_of(next), tag: Some(next), by_rule: true }
                }
                None => {
                    self.tag_counters[ingress.index() * TAG_SLOTS + usize::from(tag)].default_egress += 1;
                    default
                }
            },
        }
    }

    /// Writes the tag (DSCP) and, in a VLAN-tagged frame, the egress priority (PCP).
    fn rewrite<P: FramePool>(&mut self, pool: &mut P, ingress: PortId, id: FrameId, class: Class, at: Placement) {
        let Some(tag) = at.tag else { return };
        let frame = pool.bytes_mut(id);
        if class.vlan {
            ether::set_pcp(frame, at.queue);
        }
        let changed = class.ip.is_some_and(|ip| ether::set_dscp(frame, ip, tag));
        if let (true, true, Tagged::Lossless(from)) = (changed, at.by_rule, class.tag) {
            self.tag_counters[ingress.index() * TAG_SLOTS + usize::from(from)].rewritten += 1;
        }
    }

    fn flood<P: FramePool>(&mut self, now: Time, pool: &mut P, ingress: PortId, id: FrameId, len: usize, class: Class) {
        let targets: PortSet = PortId::all(self.ports.len())
            .filter(|&i| i != ingress && self.ports[i].flood && self.ports[i].link_up)
            .collect();
        let Some(last) = targets.last() else {
            self.drop_frame(pool, ingress, id, DropReason::Filtered);
            return;
        };
        for egress in targets.iter() {
            if egress == last {
                self.enqueue(now, pool, ingress, egress, id, len, class);
            } else if let Some(copy) =
                (pool.free_frames() >= PAUSE_RESERVE + pool.buffers(id) as usize).then(|| pool.duplicate(id)).flatten()
            {
                self.enqueue(now, pool, ingress, egress, copy, len, class);
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
        class: Class,
    ) {
        self.ready.insert(egress);
        if !self.ports[egress].link_up {
            self.ports[egress].counters.drops.count(DropReason::LinkDown);
            pool.free(id);
            return;
        }
        let at = self.place(ingress, egress, class);
        let (p, q) = (at.group, at.queue);
        let bytes = len as u64;
        let lossless_queue = self.is_lossless(p) || self.is_lossless(q);
        let depth = self.ports[egress].tx.queues[q].bytes();
        let wred = self.wred.verdict(egress, q, depth, class.ecn_capable, lossless_queue);
        if wred == Verdict::Drop {
            self.ports[egress].prio[q].wred_dropped += 1;
            self.drop_frame(pool, ingress, id, DropReason::Wred);
            return;
        }
        // A frame takes at most 6 buffers (9216 bytes in 1792-byte ones).
        let buffers = pool.buffers(id).min(u32::from(u8::MAX)) as u8;
        let admitted = if self.is_lossless(p) {
            let a = self.buffer.admit_lossless(ingress, p, bytes, u32::from(buffers));
            if a.crossed_xoff {
                if a.by_frames {
                    self.ports[ingress].prio[p].xoff_by_frames += 1;
                }
                self.request_pause(now, ingress, p);
            }
            if self.buffer.group(ingress, p).xoff {
                let log = self.ports[ingress].upstream.log_mut();
                let after = now.saturating_since(log.xoff_since[p]);
                log.upstream_response[p] = log.upstream_response[p].max(after);
            }
            if !a.admitted {
                self.ports[ingress].prio[p].lossless_drops += 1;
                self.drop_frame(pool, ingress, id, DropReason::Lossless);
            }
            a.admitted
        } else if self.lossy_buffers(egress) >= self.frame_caps.lossy_port {
            self.ports[ingress].prio[p].lossy_drops += 1;
            self.drop_frame(pool, ingress, id, DropReason::FrameCap);
            false
        } else {
            let out = &self.ports[egress];
            let charge = (bytes, u32::from(buffers));
            let ok = self.buffer.admit_lossy(ingress, p, charge, out.tx.queues[q].bytes(), out.lossy_queue_bytes);
            if !ok {
                self.ports[ingress].prio[p].lossy_drops += 1;
                self.drop_frame(pool, ingress, id, DropReason::Lossy);
            }
            ok
        };
        if !admitted {
            return;
        }
        self.rewrite(pool, ingress, id, class, at);
        self.frames.set(id, len as u32, buffers, Some(ingress), at.group, now);
        if self.dropping(now, egress).contains(q) {
            // A deadlock is being broken, or a storm is being cut off, on this queue.
            self.discard(pool, egress, q, id);
            return;
        }
        match wred {
            Verdict::Mark => {
                if let Some(ip) = class.ip {
                    ether::set_ce(pool.bytes_mut(id), ip);
                }
                self.ports[egress].prio[q].ecn_marked += 1;
            }
            Verdict::PassNotCapable => self.ports[egress].prio[q].ecn_not_capable_passed += 1,
            Verdict::Pass | Verdict::Drop => {}
        }
        let e = &self.ports[egress];
        // Paused takes precedence over blocked: a paused priority queues as usual. But a
        // frame never overtakes earlier frames of its (egress, priority) the slowpath holds.
        let paused = e.tx.pause.paused(now).contains(q);
        let to_slowpath = self.map.held_at_slowpath(egress, q) > 0 || (self.blocked.contains(egress) && !paused);
        if to_slowpath {
            if self.map.held_buffers() >= self.frame_caps.slowpath {
                self.ports[ingress].counters.drops.count(DropReason::FrameCap);
                self.give_back(pool, id);
                return;
            }
            self.map.handed_to_slowpath(ingress, egress, q, buffers);
            let held = HeldFrame { id, len: len as u32, ingress, egress, prio: at.queue };
            self.outbox.push(ToSlowpath::Held(held));
        } else {
            self.ports[egress].tx.queues.push(q, &mut self.frames, id);
            self.map.queued(ingress, egress);
        }
    }

    /// Priorities whose frames for `port` are dropped now: a deadlock being broken
    /// (DCFIT's `drop` resolution) or a PFC storm being cut off (the watchdog's `drop`).
    pub(super) fn dropping(&self, now: Time, port: PortId) -> Priorities {
        let p = &self.ports[port];
        let deadlock =
            p.dcfit.deadlock_drop.filter(|(until, _)| now < *until).map_or(Priorities::NONE, |(_, prios)| prios);
        deadlock | p.pfcwd.dropping()
    }

    /// Frames in `egress`'s lossy queues.
    /// Pool buffers the frames in `egress`'s lossy queues take: what its lossy frame cap counts.
    fn lossy_buffers(&self, egress: PortId) -> u32 {
        let queues = &self.ports[egress].tx.queues;
        Priority::all().filter(|&q| !self.is_lossless(q)).map(|q| queues[q].buffers()).sum()
    }

    /// Drops an admitted frame bound for queue `q` of `egress` (see [`Switch::dropping`]).
    pub(super) fn discard<P: FramePool>(&mut self, pool: &mut P, egress: PortId, q: Priority, id: FrameId) {
        self.ports[egress].counters.drops.count(DropReason::Watchdog);
        if self.ports[egress].pfcwd.dropping().contains(q) {
            self.ports[egress].pfcwd.note_dropped(q);
        }
        self.give_back(pool, id);
    }

    /// Frees an admitted frame that will not be sent: its buffer is released as if it had
    /// been (which may resume its ingress).
    pub(super) fn give_back<P: FramePool>(&mut self, pool: &mut P, id: FrameId) {
        let meta = *self.frames.get(id);
        if let Some(ingress) = meta.ingress() {
            let group = meta.prio;
            if self.buffer.release(ingress, group, u64::from(meta.len), u32::from(meta.buffers)) {
                self.request_resume(ingress, group);
            }
        }
        pool.free(id);
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
