//! The monitor's samples.

use super::*;

impl Sim<'_> {
    /// Takes `[monitor]`'s samples and schedules the next.
    pub(super) fn sample(&mut self, at: Time) {
        let Some(m) = self.monitor.as_mut() else { return };
        for q in &mut m.queues {
            let sw = &self.switches[q.switch].switch;
            q.samples.push(Priority::table(|prio| sw.egress_queue_bytes(q.local, prio)));
        }
        let period = m.every_ns as f64;
        for f in &mut m.flows {
            let state = &self.flows[f.flow];
            f.received_gbps.push((state.rx.bytes - f.bytes_before) as f64 * 8.0 / period);
            f.bytes_before = state.rx.bytes;
            if let Some(cc) = &state.cc {
                f.dcqcn_gbps.push(cc.rp.rate_bps() / 1e9);
            }
        }
        let next = at + Duration::from_nanos(m.every_ns);
        self.at(next, Ev::Sample);
    }

    /// What `[monitor]` sampled, if the scenario has one.
    pub fn series(&self) -> Option<crate::monitor::Series> {
        let m = self.monitor.as_ref()?;
        Some(m.series(|i| self.fabric.flows[i].id, self.dcqcn.is_some()))
    }
}
