//! Per-flow receive accounting: received, lost, reordered, duplicated, latency.

use std::collections::BTreeMap;
use std::time::Duration;

use pfcswitch::core::histogram::Percentiles;
use pfcswitch::core::time::Time;
use serde::{Deserialize, Serialize};

use super::flow::Stamp;
use super::latency::Latency;

#[derive(Debug, Default)]
struct FlowRx {
    received: u64,
    bytes: u64,
    highest: Option<u32>,
    reordered: u64,
    duplicates: u64,
    /// Bit per sequence number seen.
    seen: Vec<u64>,
    first: Option<Time>,
    last: Option<Time>,
    largest_gap: Duration,
    latency: Latency,
    pcp: Option<u8>,
    vlan: Option<u16>,
    dscp: u8,
    ce: u64,
    bad_ip_checksum: u64,
}

/// One flow's results.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowReport {
    pub flow: u16,
    /// Distinct frames: a copy of one already received counts in `duplicates` instead.
    pub received: u64,
    pub bytes: u64,
    /// Sequence numbers missing below the highest one received (or below `expected`).
    pub lost: u64,
    /// Frames that arrived after a higher sequence number.
    pub reordered: u64,
    pub duplicates: u64,
    pub highest_seq: Option<u32>,
    pub pcp: Option<u8>,
    pub vlan: Option<u16>,
    /// The DSCP of the latest frame.
    pub dscp: u8,
    /// Frames that arrived marked ECN Congestion Experienced.
    #[serde(default)]
    pub ce: u64,
    /// Frames whose IPv4 header checksum was wrong.
    #[serde(default)]
    pub bad_ip_checksum: u64,
    /// Receive rate between the first and last frame.
    pub pps: f64,
    /// The longest time between two frames of the flow (e.g. while it was paused), µs.
    pub largest_gap_us: f64,
    /// First and last arrival (monotonic clock, ns): comparable across namespaces.
    pub first_ns: u64,
    pub last_ns: u64,
    /// One-way latency (sender and sink share CLOCK_MONOTONIC).
    pub latency: Percentiles,
}

/// The most flows a sink follows.
pub const MAX_FLOWS: usize = 4096;
/// The most sequence-bitmap words all flows hold together (128 MiB): a stamp with a
/// huge sequence number, forged or corrupt, must not make the sink allocate gigabytes.
pub const MAX_SEEN_WORDS: usize = 1 << 24;

/// Grows `f`'s bitmap to `words` if all flows' bitmaps together (`seen_words`) stay within
/// [`MAX_SEEN_WORDS`]; says whether it did.
fn grow_seen(seen_words: &mut usize, f: &mut FlowRx, words: usize) -> bool {
    let others = *seen_words - f.seen.len();
    if others + words > MAX_SEEN_WORDS {
        return false;
    }
    *seen_words = others + words;
    f.seen.resize(words, 0);
    true
}

#[derive(Debug, Default)]
pub struct RxStats {
    flows: BTreeMap<u16, FlowRx>,
    /// Words of every flow's `seen` together.
    seen_words: usize,
    /// Frames that were not test frames.
    pub other_frames: u64,
    /// Test frames not followed: beyond [`MAX_FLOWS`] flows or [`MAX_SEEN_WORDS`].
    pub untracked_frames: u64,
}

impl RxStats {
    pub fn record(&mut self, now: Time, stamp: &Stamp, len: usize) {
        if self.flows.len() >= MAX_FLOWS && !self.flows.contains_key(&stamp.flow) {
            self.untracked_frames += 1;
            return;
        }
        let f = self.flows.entry(stamp.flow).or_default();
        let seq = stamp.seq;
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if f.seen.len() <= word {
            // Grows by doubling: amortised, not per packet; by just enough near the budget.
            let doubled = (word + 1).max(f.seen.len() * 2);
            if !grow_seen(&mut self.seen_words, f, doubled) && !grow_seen(&mut self.seen_words, f, word + 1) {
                self.untracked_frames += 1;
                return;
            }
        }
        if f.seen[word] & (1 << bit) != 0 {
            f.duplicates += 1;
            return;
        }
        f.seen[word] |= 1 << bit;
        f.received += 1;
        f.bytes += len as u64;
        match f.highest {
            Some(h) if seq < h => f.reordered += 1,
            _ => f.highest = Some(seq),
        }
        f.first.get_or_insert(now);
        if let Some(last) = f.last {
            f.largest_gap = f.largest_gap.max(now.saturating_since(last));
        }
        f.last = Some(now);
        let now_ns = now.as_nanos() as u32;
        f.latency.record(Duration::from_nanos(u64::from(now_ns.wrapping_sub(stamp.tx_ns))));
        f.pcp = stamp.pcp;
        f.vlan = stamp.vlan;
        f.dscp = stamp.dscp;
        f.ce += u64::from(stamp.ecn == 3);
        f.bad_ip_checksum += u64::from(!stamp.ip_checksum_ok);
    }

    /// Reserves room for `frames` sequence numbers per flow, so recording does not grow.
    pub fn reserve(&mut self, flow: u16, frames: u64) {
        let f = self.flows.entry(flow).or_default();
        let words = (frames.div_ceil(64) as usize).min(MAX_SEEN_WORDS);
        if f.seen.len() < words {
            grow_seen(&mut self.seen_words, f, words);
        }
    }

    pub fn received(&self) -> u64 {
        self.flows.values().map(|f| f.received).sum()
    }

    /// Results; `expected` gives how many frames each flow sent, when known.
    pub fn report(&self, expected: Option<u64>) -> Vec<FlowReport> {
        self.flows
            .iter()
            .filter(|(_, f)| f.received > 0 || expected.is_some())
            .map(|(&flow, f)| {
                let span = match expected {
                    Some(n) => n,
                    None => f.highest.map_or(0, |h| u64::from(h) + 1),
                };
                let lost = span.saturating_sub(f.received);
                let secs = match (f.first, f.last) {
                    (Some(a), Some(b)) => b.saturating_since(a).as_secs_f64(),
                    _ => 0.0,
                };
                FlowReport {
                    flow,
                    received: f.received,
                    bytes: f.bytes,
                    lost,
                    reordered: f.reordered,
                    duplicates: f.duplicates,
                    highest_seq: f.highest,
                    pcp: f.pcp,
                    vlan: f.vlan,
                    dscp: f.dscp,
                    ce: f.ce,
                    bad_ip_checksum: f.bad_ip_checksum,
                    pps: if secs > 0.0 { (f.received.saturating_sub(1)) as f64 / secs } else { 0.0 },
                    largest_gap_us: f.largest_gap.as_secs_f64() * 1e6,
                    first_ns: f.first.map_or(0, Time::as_nanos),
                    last_ns: f.last.map_or(0, Time::as_nanos),
                    latency: f.latency.percentiles(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(seq: u32) -> Stamp {
        Stamp { flow: 1, seq, tx_ns: 0, pcp: None, vlan: None, dscp: 0, ecn: 0, ip_checksum_ok: true }
    }

    #[test]
    fn counts_loss_reorder_and_duplicates() {
        let mut s = RxStats::default();
        for (i, seq) in [0, 1, 3, 2, 2, 5, 200].into_iter().enumerate() {
            let t = Time::from_millis(if i < 6 { 1 + i as u64 } else { 50 });
            s.record(t, &stamp(seq), 60);
        }
        let r = &s.report(None)[0];
        assert_eq!((r.received, r.duplicates, r.reordered), (6, 1, 1));
        assert_eq!(r.lost, 201 - 6);
        assert_eq!(s.report(Some(300))[0].lost, 294);
        assert_eq!(r.highest_seq, Some(200));
        assert_eq!(r.largest_gap_us, 44_000.0, "6 ms → 50 ms");
    }

    #[test]
    fn forged_sequence_numbers_and_flows_cannot_grow_the_sink_without_bound() {
        let mut s = RxStats::default();
        s.record(Time::from_millis(1), &stamp(0), 60);
        s.record(Time::from_millis(2), &stamp(u32::MAX), 60);
        assert_eq!(s.untracked_frames, 1, "a bitmap up to 2^32 would be 512 MiB");
        assert!(s.seen_words <= MAX_SEEN_WORDS);
        // Up to the budget, far sequence numbers are still followed.
        s.record(Time::from_millis(3), &stamp(64 * (MAX_SEEN_WORDS as u32 - 1)), 60);
        assert_eq!((s.untracked_frames, s.seen_words), (1, MAX_SEEN_WORDS));
        let mut s = RxStats::default();
        for flow in 0..MAX_FLOWS as u16 + 10 {
            s.record(Time::from_millis(4), &Stamp { flow, ..stamp(0) }, 60);
        }
        assert_eq!(s.report(None).len(), MAX_FLOWS);
        assert_eq!(s.untracked_frames, 10);
    }

    proptest::proptest! {
        #[test]
        fn in_order_delivery_has_no_loss(n in 1u32..5000) {
            let mut s = RxStats::default();
            s.reserve(1, u64::from(n));
            for seq in 0..n {
                s.record(Time::from_micros(u64::from(seq)), &stamp(seq), 60);
            }
            let r = &s.report(Some(u64::from(n)))[0];
            proptest::prop_assert_eq!((r.received, r.lost, r.reordered, r.duplicates), (u64::from(n), 0, 0, 0));
        }
    }
}
