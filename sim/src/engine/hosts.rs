//! Hosts: paced flows out, frames in, pauses obeyed.

use super::*;

impl Sim<'_> {
    pub(super) fn host_tx(&mut self, h: HostIx, port: FabricPort) {
        let now = self.now;
        let host = &mut self.hosts[h];
        if let Some(buf) = host.control.pop_front() {
            self.send(port, buf, self.arena.len(buf), true);
            return;
        }
        let mut earliest = Time::MAX;
        for prio in Priority::all().rev() {
            if host.queues[prio].is_empty() {
                continue;
            }
            let until = if host.honour { host.paused_until[prio] } else { Time::ZERO };
            if until > now {
                earliest = earliest.min(until);
                continue;
            }
            let buf = host.queues[prio].pop_front().expect("not empty");
            let waiting = std::mem::take(&mut host.waiting[prio]);
            for f in waiting {
                self.flows[f].blocked = false;
                self.at(now, Ev::Flow { flow: f });
            }
            self.send(port, buf, self.arena.len(buf), false);
            return;
        }
        if earliest != Time::MAX {
            self.wake(port, earliest);
        }
    }

    pub(super) fn host_rx(&mut self, h: HostIx, buf: u32) {
        let bytes = self.arena.head(buf);
        if is_mac_control(bytes) {
            if self.hosts[h].honour {
                let delay = self.fabric.hosts[h].response_delay;
                self.at(self.now + delay, Ev::HostPause { host: h, buf });
            } else {
                self.arena.give(buf);
            }
            return;
        }
        if self.dcqcn.is_some() {
            if let Some(qp) = roce::cnp_dest_qp(bytes) {
                self.arena.give(buf);
                self.take_cnp(h, qp);
                return;
            }
        }
        if self.go_back_n {
            if let Some((qp, psn)) = roce::nak_psn(bytes) {
                self.arena.give(buf);
                self.take_nak(h, qp, psn);
                return;
            }
        }
        if let Some(stamp) = read_stamp_in(bytes, self.arena.len(buf)) {
            let (flow, seq, tx_ns) = (FlowIx::new(usize::from(stamp.flow)), stamp.seq, stamp.tx_ns);
            // A frame of a flow this host receives (a stray stamp is ignored).
            let ours = self.fabric.flows.get(flow.index()).is_some_and(|f| f.to == h);
            if ours && stamp.ecn == 3 && self.dcqcn.is_some() {
                self.answer_ce(flow, h);
            }
            if let Some(f) = self.flows.get_mut(flow.index()).filter(|_| ours) {
                let rx = &mut f.rx;
                if seq != rx.next_seq && self.fabric.hosts[h].out_of_order == OutOfOrder::GoBackN {
                    // Dropped, as a NIC that places data in order drops it; the first
                    // frame after a gap asks the sender back to the gap.
                    rx.reordered += 1;
                    let expected = rx.next_seq;
                    let ask = seq > expected && rx.nak_for != Some(expected);
                    if ask {
                        rx.nak_for = Some(expected);
                    }
                    self.arena.give(buf);
                    if ask {
                        self.send_nak(flow, h, expected);
                    }
                    return;
                }
                rx.frames += 1;
                if seq < rx.next_seq {
                    rx.reordered += 1;
                } else {
                    rx.next_seq = seq + 1;
                }
                let now32 = since_epoch(self.now) as u32;
                rx.latency.record(Duration::from_nanos(u64::from(now32.wrapping_sub(tx_ns))));
                rx.last_ns = since_epoch(self.now);
                rx.bytes += self.arena.len(buf) as u64 + 4;
                rx.ce += u64::from(stamp.ecn == 3);
                if self.fabric.flows[flow].count == Some(rx.frames) {
                    rx.completed_ns = Some(rx.last_ns);
                }
            }
        }
        self.arena.give(buf);
    }

    pub(super) fn host_pause(&mut self, h: HostIx, buf: u32) {
        let port = self.fabric.hosts[h].port;
        let spec = &self.fabric.ports[port];
        let decoded = pfc::decode(self.arena.head(buf), spec.mac);
        self.arena.give(buf);
        let Ok(frame) = decoded else { return };
        if !self.hosts[h].honour {
            return;
        }
        let host = &mut self.hosts[h];
        match frame.body {
            MacControl::Pfc(p) => {
                for (prio, quanta) in p.classes() {
                    host.paused_until[prio] = self.now + spec.speed.quanta_duration(quanta);
                }
            }
            MacControl::Pause { quanta } => {
                host.paused_until = [self.now + spec.speed.quanta_duration(quanta); PRIORITIES]
            }
        }
        self.try_tx(port);
    }

    pub(super) fn flow_send(&mut self, i: FlowIx) {
        let plan = &self.fabric.flows[i];
        let f = &mut self.flows[i];
        if let Some(cc) = f.cc.as_mut().filter(|cc| cc.pending.is_some_and(|p| p <= self.now)) {
            // This is (or comes after) the event scheduled for it.
            cc.pending = None;
        }
        if f.done || f.blocked {
            return;
        }
        let stop = EPOCH + plan.stop;
        if self.now >= stop || plan.count.is_some_and(|c| f.next >= c) {
            f.done = true;
            return;
        }
        if let Some(cc) = f.cc.as_mut() {
            if self.now < cc.due {
                // Scheduled at an earlier rate, or woken by room in its queue: the frame is
                // due later.
                let due = cc.due;
                self.schedule_flow(i, due);
                return;
            }
        }
        let h = plan.from;
        let prio = plan.priority;
        let host = &mut self.hosts[h];
        if host.queues[prio].len() >= self.fabric.hosts[h].queue_frames {
            f.blocked = true;
            host.waiting[prio].push(i);
            return;
        }
        let seq = f.next as u32;
        let template = match &f.last {
            Some(last) if plan.count == Some(f.next + 1) => last,
            _ => &f.template,
        };
        let len = template.len();
        let buf = self.arena.take_for(len, template.zeros_from());
        template.write_head(self.arena.write(buf, len), seq, since_epoch(self.now) as u32);
        f.sent += 1;
        f.next += 1;
        f.highest = f.highest.max(f.next);
        host.queues[prio].push_back(buf);
        match f.cc.as_mut() {
            // Paced at its reaction point's rate, one frame after another.
            Some(cc) => {
                cc.rp.handle_sent(self.now, len as u64);
                cc.due = self.now + cc.frame_time();
                let due = cc.due;
                self.schedule_flow(i, due);
            }
            // Paced from the flow's start: the k-th frame is due at start + k × interval,
            // or at once when the sender fell behind (its queue was full).
            None => {
                let due =
                    EPOCH + plan.start + Duration::from_nanos((f.sent as f64 * plan.interval.as_nanos() as f64) as u64);
                self.at(due.max(self.now), Ev::Flow { flow: i });
            }
        }
        self.try_tx(self.fabric.hosts[h].port);
    }

    /// Host `h`, flow `i`'s receiver, sends its sender what `frame` builds from their
    /// addresses and the flow's queue pair (a CNP, a NAK), on `dscp`, in its queue for
    /// `prio`.
    pub(super) fn reply(
        &mut self,
        i: FlowIx,
        h: HostIx,
        dscp: u8,
        prio: Priority,
        frame: impl FnOnce(&roce::ReplySpec) -> Vec<u8>,
    ) {
        let (sender, fabric) = (self.fabric.flows[i].from, self.fabric);
        let mac = |host: HostIx| fabric.ports[fabric.hosts[host].port].mac.0;
        let spec =
            roce::ReplySpec::for_flow(fabric.flows[i].id, (mac(h), host_ip(h)), (mac(sender), host_ip(sender)), dscp);
        let frame = frame(&spec);
        let buf = self.arena.take();
        self.arena.write(buf, frame.len()).copy_from_slice(&frame);
        self.hosts[h].queues[prio].push_back(buf);
        self.try_tx(fabric.hosts[h].port);
    }

    /// The flow host `h` sends that queue pair `qp` names, if it names one (what a CNP
    /// or a NAK is for).
    pub(super) fn sent_by(&self, h: HostIx, qp: u32) -> Option<FlowIx> {
        let i = FlowIx::new(usize::from(roce::qp_flow(qp)?));
        self.fabric.flows.get(i.index()).filter(|f| f.from == h).map(|_| i)
    }

    /// Host `h`, receiving flow `i` under go-back-N, asks its sender to go back to frame
    /// `seq`: a NAK on the flow's DSCP and priority.
    fn send_nak(&mut self, i: FlowIx, h: HostIx, seq: u32) {
        let f = &self.fabric.flows[i];
        self.reply(i, h, self.fabric.dscp_of(f), f.priority, |spec| roce::nak_frame(spec, seq & PSN_MASK));
    }

    /// Host `h` got a NAK for queue pair `qp` asking for `psn`: its flow sends again from
    /// there (a flow that had sent everything starts again).
    fn take_nak(&mut self, h: HostIx, qp: u32, psn: u32) {
        let Some(i) = self.sent_by(h, qp) else { return };
        let f = &mut self.flows[i];
        // A PSN has 24 bits: the frame it names is the latest at or before the next one
        // whose number ends in them.
        let Some(back) = f.next.checked_sub(u64::from((f.next as u32).wrapping_sub(psn) & PSN_MASK)) else { return };
        if back >= f.next {
            return;
        }
        f.next = back;
        if std::mem::take(&mut f.done) {
            if f.cc.is_some() {
                self.schedule_flow(i, self.now);
            } else {
                self.at(self.now, Ev::Flow { flow: i });
            }
        }
    }
}

/// The bits of a RoCE packet sequence number.
const PSN_MASK: u32 = 0xff_ffff;
