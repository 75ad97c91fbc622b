//! DCQCN at the hosts: CNPs answered and taken, the reaction points' timers.

use super::*;

impl Sim<'_> {
    /// Host `h`, flow `i`'s receiver, got a CE-marked frame of it: a CNP back to the
    /// sender, unless one went less than `min_time_between_cnps` ago.
    pub(super) fn answer_ce(&mut self, i: FlowIx, h: HostIx) {
        let (Some(params), Some(cc)) = (self.dcqcn.as_ref(), self.flows[i].cc.as_mut()) else { return };
        if !cc.np.handle_marked(self.now, params) {
            return;
        }
        cc.cnps_sent += 1;
        // A NIC sends its CNPs whatever its data queues hold.
        self.reply(i, h, roce::wire::DEFAULT_CNP_DSCP, self.cnp_priority, roce::cnp_frame);
    }

    /// Host `h` got a CNP for queue pair `qp`: its flow's reaction point cuts.
    pub(super) fn take_cnp(&mut self, h: HostIx, qp: u32) {
        let Some(i) = self.sent_by(h, qp) else { return };
        let Some(cc) = self.flows[i].cc.as_mut() else { return };
        cc.rp.handle_cnp(self.now);
        self.schedule_rp(i);
    }

    /// Schedules flow `i`'s reaction point timer, if it is due before the one scheduled.
    pub(super) fn schedule_rp(&mut self, i: FlowIx) {
        let Some(cc) = self.flows[i].cc.as_mut() else { return };
        let Some(t) = cc.rp.poll_timeout() else { return };
        if cc.timer_at.is_none_or(|s| t < s) {
            cc.timer_at = Some(t);
            self.at(t.max(self.now), Ev::Rp { flow: i });
        }
    }

    /// Flow `i`'s reaction point timer event, due at `at` (stale if another was
    /// scheduled since). A rate that rose makes the next frame due sooner.
    pub(super) fn rp_timer(&mut self, i: FlowIx, at: Time) {
        let now = self.now;
        let Some(cc) = self.flows[i].cc.as_mut() else { return };
        if cc.timer_at != Some(at) {
            return;
        }
        cc.timer_at = None;
        cc.rp.handle_timeout(now);
        let sooner = now + cc.frame_time();
        if sooner < cc.due {
            cc.due = sooner;
            self.schedule_flow(i, sooner);
        }
        self.schedule_rp(i);
    }

    /// Makes sure a DCQCN flow has an event at `at` or before: one scheduled earlier
    /// looks again when it comes, so a flow has at most one pending.
    pub(super) fn schedule_flow(&mut self, i: FlowIx, at: Time) {
        let Some(cc) = self.flows[i].cc.as_mut() else { return };
        if cc.pending.is_some_and(|p| p <= at) {
            return;
        }
        cc.pending = Some(at);
        self.at(at.max(self.now), Ev::Flow { flow: i });
    }

    /// Flow `i`'s sending rate now under DCQCN, b/s, its CNPs taken and sent.
    pub fn dcqcn_state(&self, i: FlowIx) -> Option<(f64, u64, u64)> {
        self.flows[i].cc.as_ref().map(|cc| (cc.rp.rate_bps(), cc.rp.cnps(), cc.cnps_sent))
    }
}
