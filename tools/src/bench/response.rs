//! `bench pause-response`: how much of a paused priority pfcswitch still lets out after
//! a PFC XOFF reaches it, per port speed, beside what IEEE 802.3 allows a MAC; and
//! whether a storm of XOFFs then holds the priority at zero.
//!
//! A dense, smooth flow on priority 3 crosses the switch (its defaults, every port at the
//! speed under test) to a probe, which sends pauses back into the switch's egress port
//! and counts the frames of the priority that still arrive (`pfctools pause-probe`).

use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use pfcswitch::config::ArrivalStamp;
use pfcswitch::core::speed::{Speed, BITS_PER_QUANTUM};
use pfcswitch_table::Table;

use super::pfc::{response_time_of, run_probe, ProbedFlow};
use crate::traffic::probe::{StormTrial, STORM_SETTLE};

#[derive(Args, Clone, Debug)]
pub struct ResponseArgs {
    /// Port speeds. A speed above what this testbed carries (100G on veth) leaves the
    /// flow unshaped: the pause lasts as long as at that speed, and nothing else changes.
    #[arg(long, value_delimiter = ',', default_value = "10G,25G,40G,100G")]
    pub speeds: Vec<Speed>,
    /// Single pauses judged per speed (twice as many are sent: see `headroom --response-time`).
    #[arg(long, default_value_t = 10)]
    pub repeats: usize,
    /// Storms per speed.
    #[arg(long, default_value_t = 3)]
    pub storms: usize,
    /// Each storm's length, ms (under the watchdog's default detection time of 200 ms,
    /// which would otherwise end it by dropping the queue).
    #[arg(long, default_value_t = 50)]
    pub storm_ms: u64,
    /// The flow's frames per second.
    #[arg(long, default_value_t = 200e3, value_parser = crate::cli::parse_positive)]
    pub rate: f64,
    /// The flow's frame size on the wire (FCS included); the generator's default if absent.
    #[arg(long)]
    pub size: Option<usize>,
    /// How the switch and the probe stamp arrivals (metadata, in-frame, rx-clock): the
    /// best this kernel allows when absent.
    #[arg(long)]
    pub arrival_stamp: Option<ArrivalStamp>,
    #[arg(long)]
    pub json: bool,
}

/// The priority the probed flow runs on and the storms pause.
const STORM_PRIORITY: u8 = 3;

/// How many pause arrivals the switch keeps per port (its `pause_arrivals_ns`).
const STORM_PAUSES_KEPT: usize = 64;

/// One storm: what the receiver saw, and when the switch received its pauses.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Storm {
    #[serde(flatten)]
    pub trial: StormTrial,
    /// Its length, ms.
    pub storm_ms: u64,
    /// Pauses the switch stamped on arrival.
    pub switch_received: u32,
    /// The longest time between two of them arriving, µs.
    pub switch_longest_gap_us: f64,
    /// Frames of the priority the switch counts as sent after a refresh that held it had
    /// arrived (its `sent_past_pause`): its own verdict, from its arrival stamps.
    pub switch_sent_past_pause: u64,
}

impl Storm {
    fn new(trial: StormTrial, storm_ms: u64, arrivals_ns: &[u64], sent_past_pause: u64) -> Storm {
        let longest = arrivals_ns.windows(2).map(|w| w[1].saturating_sub(w[0])).max().unwrap_or(0);
        Storm {
            trial,
            storm_ms,
            switch_received: arrivals_ns.len() as u32,
            switch_longest_gap_us: longest as f64 / 1e3,
            switch_sent_past_pause: sent_past_pause,
        }
    }

    /// The switch received every pause of the storm, each before the last ran out: it
    /// was asked to hold the priority throughout, so a frame through it is the switch's.
    /// Otherwise the testbed held a refresh back (the probe sent it on time) and the
    /// pause lapsed at the switch.
    fn held_at_switch(&self, pause: Duration) -> bool {
        self.switch_received == self.trial.pauses && self.switch_longest_gap_us * 1e3 < pause.as_nanos() as f64
    }
}

/// The largest frame at MTU 1500 on the wire (FCS included): the frame a port may be
/// sending when a pause arrives, which it completes.
const MAX_FRAME_WIRE: u64 = 1518;

pub use pfcswitch_core::headroom::reaction_allowance_quanta;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ResponseRow {
    pub speed: String,
    /// 802.3's allowance at this speed, in quanta and in µs (None: not tabled here).
    pub allowance_quanta: Option<u32>,
    pub allowance_us: Option<f64>,
    /// The allowance in bytes the port may still send: the quanta's bits and the one
    /// maximum frame under way.
    pub allowance_bytes: Option<u64>,
    /// Single pauses sent, and those whose stop the receiver could place.
    pub trials: usize,
    pub placed: usize,
    /// Frames of the paused priority that reached the receiver after the pause was sent.
    pub after_pause_p50_frames: f64,
    pub after_pause_max_frames: u32,
    pub after_pause_max_bytes: u64,
    /// The bound: one maximum frame and one tx batch of the flow's frames.
    pub bound_bytes: u64,
    pub within_bound: bool,
    /// From the pause being sent to the flow's stop, as the receiver places it.
    pub stop_p50_us: f64,
    pub stop_max_us: f64,
    /// The switch's own account: from the pause's arrival stamp to the last frame of the
    /// priority it put on a tx ring after it.
    pub dut_p50_us: f64,
    pub dut_max_us: f64,
    /// Each storm's length, ms: the one asked for, or shorter where the switch's record
    /// of pause arrivals would not hold it whole.
    pub storm_ms: u64,
    /// Storms run; storms judged (the switch received every pause before the last ran
    /// out, and some span of on-time refreshes held past its settling time); the frames
    /// that came through the judged ones; and storms whose pause lapsed at the switch
    /// (the testbed held a refresh back).
    pub storms: usize,
    pub storms_judged: usize,
    pub storm_leaked_frames: u32,
    pub storms_lapsed_at_switch: usize,
    /// Over every storm, the frames the switch itself counts as sent after a refresh
    /// that held the priority had arrived: the verdict a busy testbed cannot blur, since
    /// it reads the switch's own arrival stamps and transmits, not the receiver's view.
    #[serde(default)]
    pub storm_sent_past_pause: u64,
    /// The most frames any storm's first pause let out (its response).
    pub storm_first_response_max_frames: u32,
    /// Refreshes the probe sent late (over three quarters of a pause after the last),
    /// over all storms, and the longest any were apart, µs.
    pub storm_late_refreshes: u32,
    pub storm_longest_refresh_us: f64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ResponseResult {
    /// How the switch and the probe stamped arrivals: what every figure counts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_stamp: Option<ArrivalStamp>,
    pub frame_bytes: usize,
    pub rate: f64,
    pub batch: usize,
    pub storm_ms: u64,
    pub rows: Vec<ResponseRow>,
}

impl ResponseResult {
    /// The longest a row at `speed` took to stop the flow after a pause was sent, µs: the
    /// response a peer's headroom must cover for a port of this switch at that speed.
    pub fn stop_max_us(&self, speed: Speed) -> Option<f64> {
        let row = self.rows.iter().find(|r| r.speed == speed.to_string())?;
        (row.placed > 0).then_some(row.stop_max_us)
    }
}

pub fn run(args: &ResponseArgs) -> Result<()> {
    let frame_bytes = super::pfc::frame_bytes(args.size);
    let batch = pfcswitch::config::DataplaneConfig::default().batch;
    let mut rows = Vec::new();
    let mut arrival_stamp = args.arrival_stamp;
    for &speed in &args.speeds {
        eprintln!("  pause response at {speed}: single pauses, then storms");
        let flow = ProbedFlow {
            speed,
            batch: None,
            rate: args.rate,
            size: args.size,
            smooth: true,
            stamp: args.arrival_stamp,
        };
        let (r, _) = response_time_of(&flow, args.repeats)?;
        arrival_stamp = arrival_stamp.or(r.arrival_stamp);
        // A storm needs no smooth flow (a leak is any frame at all), and a spinning sender
        // would take the CPU the probe refreshes its pauses from. One switch per storm, and
        // storms short enough for the switch's record of pause arrivals to hold them all.
        let bursty = ProbedFlow { smooth: false, ..flow };
        let pause = speed.quanta_duration(u16::MAX);
        let fits = (pause / 2 * (STORM_PAUSES_KEPT as u32 - 4)).as_millis() as u64;
        let storm_ms = args.storm_ms.min(fits).max(1);
        let mut storms = Vec::new();
        for _ in 0..args.storms {
            let (report, stats) = run_probe(&bursty, &[u16::MAX], 1, Some(storm_ms))?;
            let trials: Vec<StormTrial> = serde_json::from_str(&report).context("reading the storm probe's report")?;
            let egress = &stats.ports[1];
            let past = egress.priorities[usize::from(STORM_PRIORITY)].counters.sent_past_pause;
            for trial in trials {
                storms.push(Storm::new(trial, storm_ms, &egress.pause_arrivals_ns, past));
            }
        }
        rows.push(row(speed, frame_bytes, batch, &r, &storms));
    }
    let result = ResponseResult { arrival_stamp, frame_bytes, rate: args.rate, batch, storm_ms: args.storm_ms, rows };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", render(&result));
    }
    Ok(())
}

fn row(speed: Speed, frame_bytes: usize, batch: usize, r: &super::pfc::ResponseTime, storms: &[Storm]) -> ResponseRow {
    let pause = speed.quanta_duration(u16::MAX);
    let allowance_quanta = reaction_allowance_quanta(speed);
    let quantum_us = BITS_PER_QUANTUM as f64 / speed.bps() as f64 * 1e6;
    let bound_bytes = MAX_FRAME_WIRE + (batch * frame_bytes) as u64;
    let after_pause_max_bytes = u64::from(r.after_pause_max_frames) * frame_bytes as u64;
    let held: Vec<&Storm> = storms.iter().filter(|s| s.held_at_switch(pause)).collect();
    let judged: Vec<&StormTrial> = held.iter().map(|s| &s.trial).filter(|t| t.leaked.is_some()).collect();
    // A placed trial is needed to say a row is within the bound.
    ResponseRow {
        speed: speed.to_string(),
        allowance_quanta,
        allowance_us: allowance_quanta.map(|q| f64::from(q) * quantum_us),
        allowance_bytes: allowance_quanta.map(|q| u64::from(q) * BITS_PER_QUANTUM / 8 + MAX_FRAME_WIRE),
        trials: r.external_trials,
        placed: r.external_count,
        after_pause_p50_frames: r.after_pause_p50_frames,
        after_pause_max_frames: r.after_pause_max_frames,
        after_pause_max_bytes,
        bound_bytes,
        within_bound: r.external_count > 0 && after_pause_max_bytes <= bound_bytes,
        stop_p50_us: r.external_p50_us,
        stop_max_us: r.external_max_us,
        dut_p50_us: r.dut.p50_us,
        dut_max_us: r.dut.max_us,
        storm_ms: storms.first().map_or(0, |s| s.storm_ms),
        storms: storms.len(),
        storms_judged: judged.len(),
        storm_leaked_frames: judged.iter().filter_map(|s| s.leaked).sum(),
        storms_lapsed_at_switch: storms.len() - held.len(),
        storm_sent_past_pause: storms.iter().map(|s| s.switch_sent_past_pause).sum(),
        storm_first_response_max_frames: storms.iter().map(|s| s.trial.before_window).max().unwrap_or(0),
        storm_late_refreshes: storms.iter().map(|s| s.trial.late_refreshes).sum(),
        storm_longest_refresh_us: storms.iter().map(|s| s.trial.longest_refresh_us).fold(0.0, f64::max),
    }
}

fn render(r: &ResponseResult) -> String {
    let mut out = format!(
        "Pause response: a {:.0} k frames/s flow of {} B frames on priority 3 through pfcswitch (batch {}), one \
         XOFF of 65535 quanta at a time sent back from the receiver; storms of up to {} ms (one switch each) \
         refresh the pause every half pause. After the pause: frames of the priority that still reached the receiver after it was sent; stop: \
         when the flow stopped, from the receiver; switch: from the pause's arrival to the last frame it put on a \
         tx ring. Bound: one 1518 B frame and one tx batch of the flow's frames. 802.3: Annex 31B.3.7's reaction \
         allowance at the speed (quanta, and the bytes a MAC may still send: those quanta and the frame under \
         way). Leaked: frames that came through the storms the switch held throughout (it received every refresh before \
         the last ran out), from {} ms after the first pause and after any refresh the probe sent late; lapsed: \
         storms in which the testbed held a refresh back until the pause had run out at the switch; past pause: \
         the switch's own count, over every storm, of frames it sent after a refresh that held the priority had \
         arrived (by its arrival stamps).\n",
        r.rate / 1e3,
        r.frame_bytes,
        r.batch,
        r.storm_ms,
        STORM_SETTLE.as_millis(),
    );
    out.push_str(&match r.arrival_stamp {
        Some(stamp) if stamp.at_arrival() => {
            format!("Arrival stamps: {stamp}, taken by the XDP program as each frame arrived (switch and probe).\n")
        }
        Some(stamp) => format!(
            "Arrival stamps: {stamp}: the switch and the probe take their own clock as they read each rx batch, so \
             the switch's pause counts from then and the probe places frames late by their wait on the ring.\n"
        ),
        None => String::new(),
    });
    let mut t = Table::new(&[
        "speed",
        "802.3 allowance",
        "placed",
        "after pause p50 / max",
        "max bytes",
        "bound",
        "stop p50 / max µs",
        "switch p50 / max µs",
        "storm ms",
        "storms judged",
        "leaked",
        "lapsed",
        "past pause",
    ]);
    for row in &r.rows {
        let allowance = match (row.allowance_quanta, row.allowance_us, row.allowance_bytes) {
            (Some(q), Some(us), Some(b)) => format!("{q} q = {us:.2} µs, {b} B"),
            _ => "not tabled here".to_string(),
        };
        t.row(vec![
            row.speed.clone(),
            allowance,
            format!("{}/{}", row.placed, row.trials),
            format!("{:.0} / {}", row.after_pause_p50_frames, row.after_pause_max_frames),
            row.after_pause_max_bytes.to_string(),
            match (row.placed, row.within_bound) {
                (0, _) => format!("{} B: none placed", row.bound_bytes),
                (_, true) => format!("{} B: within", row.bound_bytes),
                (_, false) => format!("{} B: OVER", row.bound_bytes),
            },
            format!("{:.0} / {:.0}", row.stop_p50_us, row.stop_max_us),
            format!("{:.0} / {:.0}", row.dut_p50_us, row.dut_max_us),
            row.storm_ms.to_string(),
            format!("{}/{}", row.storms_judged, row.storms),
            row.storm_leaked_frames.to_string(),
            row.storms_lapsed_at_switch.to_string(),
            row.storm_sent_past_pause.to_string(),
        ]);
    }
    out.push_str(&t.render());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowance_is_802_3s_at_1g_10g_40g_and_100g_and_untabled_at_25g() {
        assert_eq!(reaction_allowance_quanta(Speed::gbps(1)), Some(2));
        assert_eq!(reaction_allowance_quanta(Speed::gbps(10)), Some(60));
        assert_eq!(reaction_allowance_quanta(Speed::gbps(40)), Some(118));
        assert_eq!(reaction_allowance_quanta(Speed::gbps(100)), Some(394));
        assert_eq!(reaction_allowance_quanta(Speed::gbps(25)), None);
    }

    #[test]
    fn a_row_is_within_the_bound_only_when_its_most_after_a_pause_fits() {
        let r = super::super::pfc::ResponseTime {
            external_trials: 20,
            external_count: 18,
            after_pause_max_frames: 40,
            ..Default::default()
        };
        let pause_ns = Speed::gbps(10).quanta_duration(u16::MAX).as_nanos() as u64;
        let held = StormTrial { quanta: 65535, pauses: 3, leaked: Some(0), before_window: 7, ..Default::default() };
        // Refreshes every half pause at the switch: held; one gap longer than the pause: lapsed.
        let storms = [
            Storm::new(held.clone(), 50, &[0, pause_ns / 2, pause_ns], 0),
            Storm::new(held.clone(), 50, &[0, pause_ns / 2, pause_ns * 2], 2),
            Storm::new(StormTrial::default(), 50, &[], 0),
        ];
        let row = row(Speed::gbps(10), 64, 64, &r, &storms);
        // 10G: 60 quanta are 3840 bytes, and the frame under way.
        assert_eq!(row.allowance_bytes, Some(60 * 64 + 1518));
        assert_eq!(row.bound_bytes, 1518 + 64 * 64);
        assert!(row.within_bound, "40 frames of 64 B fit: {row:?}");
        assert_eq!((row.storms, row.storms_judged, row.storm_leaked_frames, row.storms_lapsed_at_switch), (3, 1, 0, 1));
        assert_eq!(row.storm_first_response_max_frames, 7);
        assert_eq!(row.storm_sent_past_pause, 2, "the switch's own count, over every storm");
        // The calculator reads a report back for the speed it is given.
        let report = ResponseResult { rows: vec![row.clone()], ..Default::default() };
        let read: ResponseResult = serde_json::from_str(&serde_json::to_string(&report).unwrap()).unwrap();
        assert_eq!(read.stop_max_us(Speed::gbps(10)), Some(row.stop_max_us));
        assert_eq!(read.stop_max_us(Speed::gbps(25)), None);
        let over = super::super::pfc::ResponseTime { after_pause_max_frames: 200, ..r };
        assert!(!super::row(Speed::gbps(10), 64, 64, &over, &storms).within_bound);
    }
}
