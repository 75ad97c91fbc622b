//! DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM
//! 2015) as RoCE NICs implement it.
//!
//! Three parties: the switch marks ECN Congestion Experienced on a congested queue (the
//! congestion point, in the switch's engine); the receiver's NIC answers a marked frame
//! with a Congestion Notification Packet, at most one per flow per
//! `min_time_between_cnps` (the notification point, [`CnpPacer`]); and the sender's NIC
//! cuts the flow's rate on a CNP and raises it again while none come (the reaction point,
//! [`ReactionPoint`]).
//!
//! The reaction point keeps a current rate RC, a target rate RT and α, its estimate of how
//! congested the path is:
//!
//! - **Cut**, on a CNP: RT ← RC, RC ← RC·(1 − α/2), then α ← (1 − g)·α + g; both increase
//!   counters and the byte count start again. At most one cut per
//!   `rate_reduce_monitor_period`: a CNP within it cuts once the period is over. RT follows
//!   RC only if the rate rose since the last cut (or `clamp_tgt_rate`), so that a burst of
//!   CNPs does not drag the target down with the rate. The first CNP of a flow first sets
//!   RC to `rate_to_set_on_first_cnp`, where that is not 0.
//! - **α decays** by (1 − g) every `dce_tcp_rtt` without a CNP. It is kept lazily (the
//!   decay applied when α is read), which gives the same value as a periodic timer and
//!   costs no events.
//! - **Increase events** come from a timer (every `rpg_time_reset` since the last cut or
//!   timer event; T counts them) and from the bytes sent (every `rpg_byte_reset` bytes; BC
//!   counts them). Each event counts itself, then, with F = `rpg_threshold`:
//!   - max(T, BC) ≤ F, **fast recovery**: RC ← (RT + RC)/2 (F events of it after a cut);
//!   - min(T, BC) > F, **hyper increase**: RT ← RT + i·`rpg_hai_rate` with
//!     i = min(T, BC) − F, then RC ← (RT + RC)/2;
//!   - otherwise, **additive increase**: RT ← RT + `rpg_ai_rate`, then RC ← (RT + RC)/2.
//!
//! Rates stay between `min_rate` and the line rate. A flow that never saw a CNP sends at
//! line rate and has no timer running.

use std::time::Duration;

use pfcswitch_core::time::Time;
use serde::{Deserialize, Serialize};

/// DCQCN's parameters, named as RoCE NICs name them (mlx5's sysfs and firmware names),
/// with their common defaults (the NIC's, except where noted).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DcqcnParams {
    /// The rate-increase timer, µs.
    pub rpg_time_reset: u64,
    /// Bytes sent per byte-counter increase event.
    pub rpg_byte_reset: u64,
    /// F: increase events of fast recovery after a cut, before additive increase.
    pub rpg_threshold: u32,
    /// The additive increase step, Mb/s.
    pub rpg_ai_rate: f64,
    /// The hyper increase step, Mb/s.
    pub rpg_hai_rate: f64,
    /// α's gain g, as the NIC gives it: g = (1024 − dce_tcp_g)/1024 (1019: g ≈ 1/205).
    pub dce_tcp_g: u32,
    /// How often α decays without a CNP, µs (the paper's K, 55 µs).
    pub dce_tcp_rtt: u64,
    /// α before the first CNP, out of 1024.
    pub initial_alpha_value: u32,
    /// The rate set on a flow's first CNP before it is cut, Mb/s; 0 keeps the rate it has.
    pub rate_to_set_on_first_cnp: f64,
    /// The lowest rate a cut leaves, Mb/s.
    pub min_rate: f64,
    /// The shortest time between two cuts, µs.
    pub rate_reduce_monitor_period: u64,
    /// RT follows RC at every cut, not only at cuts after the rate rose.
    pub clamp_tgt_rate: bool,
    /// The notification point's shortest time between two CNPs of a flow, µs (50 µs, as
    /// common RoCE setups use).
    pub min_time_between_cnps: u64,
}

impl Default for DcqcnParams {
    fn default() -> DcqcnParams {
        DcqcnParams {
            rpg_time_reset: 300,
            rpg_byte_reset: 32767,
            rpg_threshold: 1,
            rpg_ai_rate: 5.0,
            rpg_hai_rate: 50.0,
            dce_tcp_g: 1019,
            dce_tcp_rtt: 55,
            initial_alpha_value: 1023,
            rate_to_set_on_first_cnp: 0.0,
            min_rate: 1.0,
            rate_reduce_monitor_period: 4,
            clamp_tgt_rate: false,
            min_time_between_cnps: 50,
        }
    }
}

impl DcqcnParams {
    /// g, the weight of the newest sample in α.
    pub fn g(&self) -> f64 {
        f64::from(1024u32.saturating_sub(self.dce_tcp_g.min(1024))) / 1024.0
    }

    /// What is wrong with these parameters, if anything.
    pub fn check(&self) -> Result<(), String> {
        let positive = [
            ("rpg_time_reset", self.rpg_time_reset as f64),
            ("rpg_byte_reset", self.rpg_byte_reset as f64),
            ("dce_tcp_rtt", self.dce_tcp_rtt as f64),
            ("min_rate", self.min_rate),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| !(*v > 0.0 && v.is_finite())) {
            return Err(format!("dcqcn.{name} must be above 0"));
        }
        let rates = [
            ("rpg_ai_rate", self.rpg_ai_rate),
            ("rpg_hai_rate", self.rpg_hai_rate),
            ("rate_to_set_on_first_cnp", self.rate_to_set_on_first_cnp),
        ];
        if let Some((name, _)) = rates.iter().find(|(_, v)| !(*v >= 0.0 && v.is_finite())) {
            return Err(format!("dcqcn.{name} must be 0 or more"));
        }
        if self.dce_tcp_g > 1024 || self.initial_alpha_value > 1024 {
            return Err("dcqcn.dce_tcp_g and dcqcn.initial_alpha_value are out of 1024".into());
        }
        Ok(())
    }
}

/// What kind of increase an increase event made (for traces and tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Increase {
    FastRecovery,
    Additive,
    Hyper,
}

/// A flow's sender under DCQCN: its rate, cut by CNPs and raised while none come.
///
/// Call order: [`ReactionPoint::handle_sent`] for what the flow sends,
/// [`ReactionPoint::handle_cnp`] for each CNP that arrives, and
/// [`ReactionPoint::handle_timeout`] once [`ReactionPoint::poll_timeout`]'s time has come;
/// [`ReactionPoint::rate_bps`] is the rate to pace at from then on.
#[derive(Clone, Debug)]
pub struct ReactionPoint {
    p: DcqcnParams,
    line_bps: f64,
    /// RC and RT, b/s.
    rate: f64,
    target: f64,
    /// α as of `alpha_at`; it decays from there every `dce_tcp_rtt`.
    alpha: f64,
    alpha_at: Time,
    /// T and BC since the last cut, and the bytes toward the next BC event.
    timer_events: u32,
    byte_events: u32,
    bytes: u64,
    /// The next timer increase event; `None` before the first cut and at line rate.
    next_increase: Option<Time>,
    /// When the last cut was; and whether a CNP waits for the monitor period to end.
    last_cut: Option<Time>,
    cut_pending: bool,
    cnps: u64,
    cuts: u64,
}

impl ReactionPoint {
    /// A flow that may send at `line_bps` and has seen no CNP yet.
    pub fn new(params: &DcqcnParams, line_bps: f64) -> ReactionPoint {
        ReactionPoint {
            p: params.clone(),
            line_bps,
            rate: line_bps,
            target: line_bps,
            alpha: f64::from(params.initial_alpha_value.min(1024)) / 1024.0,
            alpha_at: Time::ZERO,
            timer_events: 0,
            byte_events: 0,
            bytes: 0,
            next_increase: None,
            last_cut: None,
            cut_pending: false,
            cnps: 0,
            cuts: 0,
        }
    }

    /// The rate to send at now, b/s.
    pub fn rate_bps(&self) -> f64 {
        self.rate
    }

    /// The line rate it may not exceed, b/s.
    pub fn line_bps(&self) -> f64 {
        self.line_bps
    }

    /// The target rate, b/s.
    pub fn target_bps(&self) -> f64 {
        self.target
    }

    /// α at `now`.
    pub fn alpha(&self, now: Time) -> f64 {
        if self.cnps == 0 {
            return self.alpha;
        }
        let k = Duration::from_micros(self.p.dce_tcp_rtt).as_nanos().max(1);
        let periods = now.saturating_since(self.alpha_at).as_nanos() / k;
        self.alpha * (1.0 - self.p.g()).powi(i32::try_from(periods).unwrap_or(i32::MAX))
    }

    /// CNPs taken, and cuts made.
    pub fn cnps(&self) -> u64 {
        self.cnps
    }

    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    /// A CNP for this flow arrived at `now`.
    pub fn handle_cnp(&mut self, now: Time) {
        if self.cnps == 0 && self.p.rate_to_set_on_first_cnp > 0.0 {
            self.rate = (self.p.rate_to_set_on_first_cnp * 1e6).min(self.line_bps);
            self.target = self.rate;
        }
        if self.cnps == 0 {
            // α holds its initial value until the first CNP, and decays from then on.
            self.alpha_at = now;
        }
        self.cnps += 1;
        match self.last_cut {
            Some(at) if now < at + self.monitor_period() => self.cut_pending = true,
            _ => self.cut(now),
        }
    }

    /// The flow sent `bytes` more at `now`: every `rpg_byte_reset` of them is an increase
    /// event. Before the first cut and at line rate, nothing is counted.
    pub fn handle_sent(&mut self, _now: Time, bytes: u64) {
        if self.last_cut.is_none() || self.at_line_rate() {
            return;
        }
        self.bytes += bytes;
        while self.bytes >= self.p.rpg_byte_reset && !self.at_line_rate() {
            self.bytes -= self.p.rpg_byte_reset;
            self.byte_events = self.byte_events.saturating_add(1);
            self.increase();
        }
    }

    /// When [`ReactionPoint::handle_timeout`] is next due, if anything is.
    pub fn poll_timeout(&self) -> Option<Time> {
        let pending_cut = self.cut_pending.then(|| self.last_cut.map(|at| at + self.monitor_period())).flatten();
        [pending_cut, self.next_increase].into_iter().flatten().min()
    }

    /// Does what is due at `now` (a pending cut, timer increase events), and returns the
    /// increases the timer made, the latest last (none if nothing was due).
    pub fn handle_timeout(&mut self, now: Time) -> Option<Increase> {
        let mut last = None;
        if self.cut_pending && self.last_cut.is_some_and(|at| now >= at + self.monitor_period()) {
            self.cut_pending = false;
            self.cut(now);
        }
        while let Some(due) = self.next_increase.filter(|due| *due <= now) {
            self.timer_events = self.timer_events.saturating_add(1);
            last = Some(self.increase());
            self.next_increase = (!self.at_line_rate()).then(|| due + self.time_reset());
        }
        last
    }

    fn cut(&mut self, now: Time) {
        let alpha = self.alpha(now);
        let rose = self.timer_events > 0 || self.byte_events > 0;
        if self.p.clamp_tgt_rate || rose || self.cuts == 0 {
            self.target = self.rate;
        }
        self.rate = (self.rate * (1.0 - alpha / 2.0)).max(self.p.min_rate * 1e6).min(self.line_bps);
        let g = self.p.g();
        self.alpha = (1.0 - g) * alpha + g;
        self.alpha_at = now;
        self.timer_events = 0;
        self.byte_events = 0;
        self.bytes = 0;
        self.last_cut = Some(now);
        self.next_increase = Some(now + self.time_reset());
        self.cuts += 1;
    }

    fn increase(&mut self) -> Increase {
        let f = self.p.rpg_threshold;
        let (t, bc) = (self.timer_events, self.byte_events);
        let kind = if t.max(bc) <= f {
            Increase::FastRecovery
        } else if t.min(bc) > f {
            Increase::Hyper
        } else {
            Increase::Additive
        };
        match kind {
            Increase::FastRecovery => {}
            Increase::Additive => self.target += self.p.rpg_ai_rate * 1e6,
            Increase::Hyper => self.target += f64::from(t.min(bc) - f) * self.p.rpg_hai_rate * 1e6,
        }
        self.target = self.target.min(self.line_bps);
        self.rate = ((self.target + self.rate) / 2.0).min(self.line_bps);
        // Within a bit per second of the target at line rate: there. (Halving the gap
        // never closes it exactly.)
        if self.target >= self.line_bps && self.line_bps - self.rate < 1.0 {
            self.rate = self.line_bps;
        }
        kind
    }

    fn at_line_rate(&self) -> bool {
        self.rate >= self.line_bps
    }

    fn time_reset(&self) -> Duration {
        Duration::from_micros(self.p.rpg_time_reset)
    }

    fn monitor_period(&self) -> Duration {
        Duration::from_micros(self.p.rate_reduce_monitor_period)
    }
}

/// A flow's receiver under DCQCN: whether a marked frame is answered with a CNP (at most
/// one per `min_time_between_cnps`).
#[derive(Clone, Copy, Debug, Default)]
pub struct CnpPacer {
    last: Option<Time>,
}

impl CnpPacer {
    /// A frame marked CE arrived at `now`: whether to send a CNP for it (the pacer then
    /// counts it as sent).
    pub fn handle_marked(&mut self, now: Time, params: &DcqcnParams) -> bool {
        let gap = Duration::from_micros(params.min_time_between_cnps);
        if self.last.is_some_and(|at| now < at + gap) {
            return false;
        }
        self.last = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: f64 = 100e9;

    fn us(n: u64) -> Time {
        Time::from_micros(n)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn a_flow_without_cnps_sends_at_line_rate_with_no_timer() {
        let mut rp = ReactionPoint::new(&DcqcnParams::default(), LINE);
        rp.handle_sent(us(10), 1 << 20);
        assert_eq!((rp.rate_bps(), rp.poll_timeout()), (LINE, None));
    }

    #[test]
    fn one_cnp_cuts_the_rate_by_half_of_alpha_and_raises_alpha() {
        let p = DcqcnParams::default();
        let mut rp = ReactionPoint::new(&p, LINE);
        rp.handle_cnp(us(100));
        let a0 = 1023.0 / 1024.0;
        assert!(close(rp.rate_bps(), LINE * (1.0 - a0 / 2.0)), "{}", rp.rate_bps());
        assert_eq!(rp.target_bps(), LINE, "the target is the rate before the cut");
        let g = 5.0 / 1024.0;
        assert!(close(rp.alpha(us(100)), (1.0 - g) * a0 + g));
        assert_eq!(rp.poll_timeout(), Some(us(400)), "the increase timer runs from the cut");
    }

    #[test]
    fn alpha_decays_by_one_minus_g_every_dce_tcp_rtt_without_a_cnp() {
        let p = DcqcnParams::default();
        let mut rp = ReactionPoint::new(&p, LINE);
        rp.handle_cnp(us(0));
        let a1 = rp.alpha(us(0));
        let g = p.g();
        assert!(close(rp.alpha(us(54)), a1), "not a whole period yet");
        assert!(close(rp.alpha(us(55)), a1 * (1.0 - g)));
        assert!(close(rp.alpha(us(55 * 10 + 3)), a1 * (1.0 - g).powi(10)));
        // The next cut uses the decayed α.
        let before = rp.rate_bps();
        rp.handle_cnp(us(550));
        let a = a1 * (1.0 - g).powi(10);
        assert!(close(rp.rate_bps(), before * (1.0 - a / 2.0)));
        assert!(close(rp.alpha(us(550)), (1.0 - g) * a + g));
    }

    #[test]
    fn f_timer_events_of_fast_recovery_halve_the_gap_to_the_target_then_additive_increase() {
        let p = DcqcnParams { rpg_threshold: 5, rpg_byte_reset: u64::MAX, ..DcqcnParams::default() };
        let mut rp = ReactionPoint::new(&p, LINE);
        rp.handle_cnp(us(0));
        let target = rp.target_bps();
        let mut rate = rp.rate_bps();
        for k in 1..=5 {
            let due = rp.poll_timeout().unwrap();
            assert_eq!(due, us(300 * k));
            assert_eq!(rp.handle_timeout(due), Some(Increase::FastRecovery), "event {k}");
            rate = (target + rate) / 2.0;
            assert!(close(rp.rate_bps(), rate) && rp.target_bps() == target, "event {k}");
        }
        assert_eq!(rp.handle_timeout(us(1800)), Some(Increase::Additive));
        let target = (target + 5e6).min(LINE);
        assert!(close(rp.target_bps(), target) && close(rp.rate_bps(), (target + rate) / 2.0));
    }

    #[test]
    fn the_byte_counter_makes_increase_events_and_both_counters_past_f_make_hyper_increase() {
        // A first CNP that sets 1 Gb/s leaves room below the 10 Gb/s line for the target.
        let p = DcqcnParams {
            rpg_threshold: 1,
            rpg_byte_reset: 1000,
            rate_to_set_on_first_cnp: 1000.0,
            ..DcqcnParams::default()
        };
        let mut rp = ReactionPoint::new(&p, 10e9);
        rp.handle_cnp(us(0));
        let cut_to = rp.target_bps();
        assert_eq!(cut_to, 1e9);
        // BC = 1: fast recovery; BC = 2 (T = 0): additive.
        rp.handle_sent(us(21), 1000);
        assert_eq!(rp.target_bps(), cut_to);
        rp.handle_sent(us(22), 1000);
        assert!(close(rp.target_bps(), cut_to + 5e6));
        // T = 1 (BC = 2): additive; T = 2: both past F, hyper with i = 1.
        assert_eq!(rp.handle_timeout(us(320)), Some(Increase::Additive));
        assert_eq!(rp.handle_timeout(us(620)), Some(Increase::Hyper));
        assert!(close(rp.target_bps(), cut_to + 2.0 * 5e6 + 50e6));
        // BC = 3, T = 2: i = min(T, BC) - F = 1 again.
        let t = rp.target_bps();
        rp.handle_sent(us(700), 1000);
        assert!(close(rp.target_bps(), t + 50e6));
    }

    #[test]
    fn cuts_come_at_most_once_per_monitor_period_and_a_cnp_within_it_cuts_at_its_end() {
        let p = DcqcnParams::default();
        let mut rp = ReactionPoint::new(&p, LINE);
        rp.handle_cnp(us(0));
        let once = rp.rate_bps();
        rp.handle_cnp(us(1));
        rp.handle_cnp(us(2));
        assert_eq!((rp.rate_bps(), rp.cuts(), rp.cnps()), (once, 1, 3));
        assert_eq!(rp.poll_timeout(), Some(us(4)));
        rp.handle_timeout(us(4));
        assert_eq!(rp.cuts(), 2);
        assert!(rp.rate_bps() < once);
    }

    #[test]
    fn cuts_without_a_rise_between_them_keep_the_target() {
        let p = DcqcnParams::default();
        let mut rp = ReactionPoint::new(&p, LINE);
        rp.handle_cnp(us(0));
        rp.handle_cnp(us(10));
        assert_eq!(rp.target_bps(), LINE, "the rate did not rise since the first cut");
        let clamped = DcqcnParams { clamp_tgt_rate: true, ..p };
        let mut rp = ReactionPoint::new(&clamped, LINE);
        rp.handle_cnp(us(0));
        let after_first = rp.rate_bps();
        rp.handle_cnp(us(10));
        assert_eq!(rp.target_bps(), after_first);
    }

    #[test]
    fn the_rate_stays_between_min_rate_and_line_rate() {
        let p = DcqcnParams { min_rate: 100.0, ..DcqcnParams::default() };
        let mut rp = ReactionPoint::new(&p, LINE);
        for k in 0..2000 {
            rp.handle_cnp(us(5 * k));
        }
        assert_eq!(rp.rate_bps(), 100e6);
        // No CNP for long: back to line rate, and the timer stops.
        let mut now = us(10_000);
        while let Some(due) = rp.poll_timeout() {
            now = due;
            rp.handle_timeout(now);
            rp.handle_sent(now, 1 << 20);
        }
        assert_eq!(rp.rate_bps(), LINE);
        assert!(now < Time::from_millis(1000), "recovered in {now:?}");
    }

    #[test]
    fn rate_to_set_on_first_cnp_sets_the_rate_before_the_first_cut() {
        let p = DcqcnParams { rate_to_set_on_first_cnp: 1000.0, ..DcqcnParams::default() };
        let mut rp = ReactionPoint::new(&p, LINE);
        rp.handle_cnp(us(0));
        let a0 = 1023.0 / 1024.0;
        assert!(close(rp.rate_bps(), 1e9 * (1.0 - a0 / 2.0)));
        assert_eq!(rp.target_bps(), 1e9);
    }

    #[test]
    fn the_notification_point_sends_one_cnp_per_flow_per_min_time_between_cnps() {
        let p = DcqcnParams::default();
        let mut np = CnpPacer::default();
        let sent: Vec<u64> = (0..200).filter(|&t| np.handle_marked(us(t), &p)).collect();
        assert_eq!(sent, [0, 50, 100, 150]);
    }

    #[test]
    fn parameters_read_from_toml_with_the_nic_names_and_defaults_for_the_rest() {
        let p: DcqcnParams = toml::from_str("rpg_time_reset = 55\nrpg_ai_rate = 40\n").unwrap();
        assert_eq!((p.rpg_time_reset, p.rpg_ai_rate, p.min_time_between_cnps), (55, 40.0, 50));
        assert!(toml::from_str::<DcqcnParams>("rpg_time_rest = 1").is_err(), "a misspelt name is refused");
        assert!(DcqcnParams { min_rate: 0.0, ..p }.check().is_err());
        assert!(DcqcnParams::default().check().is_ok());
    }
}
