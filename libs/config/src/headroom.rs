//! The PFC headroom calculator: how many bytes can still arrive at a lossless ingress
//! queue after it crossed XOFF, and so how much headroom it needs to lose nothing.
//!
//! Everything that arrives between the XOFF crossing and the moment the upstream sender
//! stops lands in headroom:
//!
//! 1. the frame that crossed XOFF (held in headroom);
//! 2. the pause may have to wait for a maximum frame already being transmitted on the port;
//! 3. the pause frame's own time on the wire;
//! 4. the switch's processing delay before the pause leaves;
//! 5. the pause travelling upstream over the cable;
//! 6. the sender's response time (its "PFC delay", in quanta or µs);
//! 7. the frame the sender is transmitting when it stops, which it completes;
//! 8. what is still on the cable travelling downstream.
//!
//! Items 2–6 and 8 are times, during which frames keep arriving at the sender's load;
//! worst case is maximum-size frames, which bring the most buffered bytes per wire byte.

use std::time::Duration;

use crate::speed::{wire_bytes, Speed, BITS_PER_QUANTUM, MIN_FRAME_LEN};
use serde::{Deserialize, Serialize};

/// IEEE 802.3 Annex 31B.3.7 (with 802.3ba's amendment): the pause_quanta after a PAUSE
/// within which a MAC must have stopped starting new frames, measured at the MDI (Annex
/// 31D applies the same to PFC). 10 Gb/s is 60 for every PHY but 10GBASE-T, which gets
/// 74: a port's speed does not say which, so 10G takes the figure that holds for the
/// optical and direct-attach ports lossless fabrics use. 25 Gb/s (802.3by) is not tabled
/// here: this project has not read its entry.
pub fn reaction_allowance_quanta(speed: Speed) -> Option<u32> {
    match speed.bps() {
        1_000_000_000 => Some(2),
        10_000_000_000 => Some(60),
        40_000_000_000 => Some(118),
        100_000_000_000 => Some(394),
        _ => None,
    }
}

/// Signal propagation in copper and fibre: about 5 ns per metre.
pub const CABLE_NS_PER_M: f64 = 5.0;

/// What the headroom of one lossless (port, priority) depends on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalcInput {
    /// The port's line rate.
    pub speed: Speed,
    /// The cable to the upstream sender, metres.
    pub cable_m: f64,
    /// Largest frame as buffered (without FCS), e.g. 1514 for MTU 1500, 1518 tagged.
    pub max_frame: u32,
    /// The sender's response time: from a pause's arrival until it stops.
    pub response: Duration,
    /// The switch's delay from the XOFF crossing to the pause's transmission.
    pub switch_delay: Duration,
    /// Share of line rate at which the paused traffic arrives (1.0 is the worst case).
    pub load: f64,
}

/// One term of the sum: what arrives, and how many bytes of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Component {
    /// What it is, in words.
    pub what: String,
    /// Bytes buffered.
    pub bytes: f64,
}

/// The headroom a lossless (port, priority) needs, term by term.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calc {
    /// The terms, in the order the bytes arrive.
    pub components: Vec<Component>,
    /// Their sum, rounded up.
    pub total_bytes: u64,
}

impl CalcInput {
    /// From an MTU (IP packet size) and VLAN tagging.
    pub fn max_frame_for_mtu(mtu: u32, tagged: bool) -> u32 {
        mtu + 14 + if tagged { 4 } else { 0 }
    }

    /// A response time given in quanta at this input's speed.
    pub fn quanta(&self, q: u32) -> Duration {
        self.speed.bit_times(u64::from(q) * BITS_PER_QUANTUM)
    }

    /// Buffered bytes that arrive during `d` at the input's load, as maximum-size frames.
    pub fn bytes_during(&self, d: Duration) -> f64 {
        let wire_bytes_per_s = self.speed.bps() as f64 / 8.0 * self.load;
        let efficiency = f64::from(self.max_frame) / wire_bytes(self.max_frame as usize) as f64;
        wire_bytes_per_s * d.as_secs_f64() * efficiency
    }

    /// The headroom this input needs, term by term.
    pub fn calculate(&self) -> Calc {
        let cable = Duration::from_secs_f64(self.cable_m * CABLE_NS_PER_M * 1e-9);
        let max = f64::from(self.max_frame);
        let components = vec![
            ("the frame that crossed XOFF", max),
            (
                "the pause waits for a frame in transmission",
                self.bytes_during(self.speed.wire_time(self.max_frame as usize)),
            ),
            ("the pause frame on the wire", self.bytes_during(self.speed.wire_time(MIN_FRAME_LEN))),
            ("switch delay before the pause leaves", self.bytes_during(self.switch_delay)),
            ("the pause on the cable upstream", self.bytes_during(cable)),
            ("sender response time", self.bytes_during(self.response)),
            ("the sender completes its frame in transmission", max),
            ("data on the cable downstream", self.bytes_during(cable)),
        ];
        let total = components.iter().map(|(_, b)| b).sum::<f64>().ceil() as u64;
        Calc {
            components: components.into_iter().map(|(w, b)| Component { what: w.to_string(), bytes: b }).collect(),
            total_bytes: total,
        }
    }
}

impl Calc {
    /// The terms and their sum as text, with the input they came from.
    pub fn text(&self, input: &CalcInput) -> String {
        let mut out = format!(
            "headroom for {} with {} m of cable, {} B frames, sender response {:.2} µs, switch delay {:.2} µs, load {:.0} %:\n",
            input.speed,
            input.cable_m,
            input.max_frame,
            input.response.as_secs_f64() * 1e6,
            input.switch_delay.as_secs_f64() * 1e6,
            input.load * 100.0
        );
        for c in &self.components {
            out += &format!("  {:>10.1} B  {}\n", c.bytes, c.what);
        }
        out += &format!("  {:>10} B  total per lossless priority\n", self.total_bytes);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(speed: Speed, cable_m: f64, response_quanta: u32) -> CalcInput {
        let mut i = CalcInput {
            speed,
            cable_m,
            max_frame: CalcInput::max_frame_for_mtu(1500, false),
            response: Duration::ZERO,
            switch_delay: Duration::ZERO,
            load: 1.0,
        };
        i.response = i.quanta(response_quanta);
        i
    }

    #[test]
    fn matches_a_hand_computation() {
        // 10G, 100 m, MTU 1500, 500 quanta: 1514-byte frames are 1538 bytes on the wire.
        let c = input(Speed::gbps(10), 100.0, 500).calculate();
        let eff = 1514.0 / 1538.0;
        let per_ns = 10e9 / 8.0 / 1e9 * eff; // buffered bytes per ns at line rate
        let expected = 1514.0 * 2.0
            + per_ns * (1538.0 * 8.0 / 10.0) // a max frame's wire time
            + per_ns * (84.0 * 8.0 / 10.0) // the pause frame
            + per_ns * 500.0 * 2.0 // 2 × 100 m × 5 ns
            + per_ns * 25_600.0; // 500 quanta × 512 bits at 10G
                                 // Wire times are rounded up to the nanosecond.
        assert!((c.total_bytes as f64 - expected).abs() <= 3.0, "{} vs {expected}", c.total_bytes);
        assert_eq!(c.components.len(), 8);
    }

    #[test]
    fn grows_with_response_cable_and_speed() {
        let base = input(Speed::gbps(10), 100.0, 0).calculate().total_bytes;
        assert!(input(Speed::gbps(10), 100.0, 1000).calculate().total_bytes > base);
        assert!(input(Speed::gbps(10), 300.0, 0).calculate().total_bytes > base);
        assert!(input(Speed::gbps(100), 100.0, 0).calculate().total_bytes > base);
        // Quanta scale with speed: 1000 quanta take the same bytes at any speed.
        let q10 = input(Speed::gbps(10), 0.0, 1000).calculate().components[5].bytes;
        let q100 = input(Speed::gbps(100), 0.0, 1000).calculate().components[5].bytes;
        assert!((q10 - q100).abs() < 1.0);
        // Half the load, half the time-driven bytes.
        let mut half = input(Speed::gbps(10), 0.0, 1000);
        half.load = 0.5;
        assert!((half.calculate().components[5].bytes * 2.0 - q10).abs() < 1.0);
    }
}
