//! What `pfcswitch ctl capture` records: frames as the switch receives them from its rx
//! rings and as it puts them on its tx rings, pause frames included, which `tcpdump` on an
//! AF_XDP port cannot see. The dataplane copies a selected frame's first [`SNAP`] bytes
//! into a slot of a bounded queue the control thread drains, so the data path pays a copy
//! per captured frame and nothing else: no allocation, no lock, no system call. A token
//! bucket caps how many frames a second it copies; what the cap or a full queue skips is
//! counted, and the capture file says how many.

use crossbeam_channel::{Sender, TrySendError};
use serde::{Deserialize, Serialize};

use crate::core::time::Time;
use crate::core::{PortId, PortSet};

/// The most bytes of a frame a capture keeps (a standard frame whole; a jumbo frame's
/// first 2 KiB, with its length).
pub const SNAP: usize = 2048;
/// Frames in flight between the dataplane and the control thread.
pub const QUEUE: usize = 1024;
/// Frames a second a capture copies unless asked otherwise.
pub const DEFAULT_RATE: u32 = 20_000;
/// The most a capture may ask for: the copies stay a small share of a forwarding core.
pub const MAX_RATE: u32 = 200_000;

/// Which way a captured frame went through its port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Way {
    Rx,
    Tx,
}

/// One captured frame, in a queue slot of its own.
pub struct CapturedFrame {
    pub port: PortId,
    pub way: Way,
    /// When the switch took it off an rx ring or put it on a tx ring.
    pub at: Time,
    /// Its length; the first `min(len, SNAP)` bytes of `data` are it.
    pub len: u32,
    pub data: Slot,
}

/// What a capture saw of one port and direction, and what it skipped (over its rate, or
/// the queue full).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WayCounts {
    pub seen: u64,
    pub skipped: u64,
}

/// What a capture saw of a port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortCounts {
    pub port: String,
    pub rx: WayCounts,
    pub tx: WayCounts,
}

/// A capture the dataplane feeds.
pub struct Capture {
    rx: PortSet,
    tx: PortSet,
    out: Sender<CapturedFrame>,
    /// Empty slots, handed back by the reader: copying into one allocates nothing.
    slots: crossbeam_channel::Receiver<Slot>,
    per_s: f64,
    tokens: f64,
    refilled: Time,
    counts: Vec<[WayCounts; 2]>,
    /// The reader is gone without stopping the capture (its thread could not reach the
    /// dataplane in time): the next capture may take its place.
    orphaned: bool,
}

impl Capture {
    /// Captures `rx` and `tx` of a switch of `ports` ports, at most `rate` frames a
    /// second, through `ends`.
    pub fn new(ports: usize, rx: PortSet, tx: PortSet, rate: u32, ends: DataplaneEnds, now: Time) -> Capture {
        let DataplaneEnds { frames: out, slots } = ends;
        let per_s = f64::from(rate.clamp(1, MAX_RATE));
        // A burst of a tenth of a second's worth, and one frame at least.
        let tokens = (per_s / 10.0).max(1.0);
        let counts = vec![[WayCounts::default(); 2]; ports];
        Capture { rx, tx, out, slots, per_s, tokens, refilled: now, counts, orphaned: false }
    }

    /// Whether frames of `port` going `way` are captured.
    fn wants(&self, port: PortId, way: Way) -> bool {
        match way {
            Way::Rx => self.rx.contains(port),
            Way::Tx => self.tx.contains(port),
        }
    }

    /// Offers the frame `bytes` (its first buffer) of `len` bytes, which `port` took or
    /// sent `way` at `now`.
    pub fn offer(&mut self, port: PortId, way: Way, now: Time, bytes: &[u8], len: usize) {
        if !self.wants(port, way) {
            return;
        }
        let c = &mut self.counts[port][way as usize];
        c.seen += 1;
        let elapsed = now.saturating_since(self.refilled).as_secs_f64();
        self.refilled = now;
        self.tokens = (self.tokens + elapsed * self.per_s).min((self.per_s / 10.0).max(1.0));
        if self.tokens < 1.0 {
            c.skipped += 1;
            return;
        }
        let mut data = match self.slots.try_recv() {
            Ok(data) => data,
            Err(e) => {
                // Every slot is in the queue (the reader is behind), or the reader is gone.
                self.orphaned |= e.is_disconnected();
                c.skipped += 1;
                return;
            }
        };
        self.tokens -= 1.0;
        let n = bytes.len().min(SNAP);
        data[..n].copy_from_slice(&bytes[..n]);
        let frame = CapturedFrame { port, way, at: now, len: len as u32, data };
        match self.out.try_send(frame) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => c.skipped += 1,
            Err(TrySendError::Disconnected(_)) => {
                self.orphaned = true;
                c.skipped += 1;
            }
        }
    }

    /// Whether its reader went away without stopping it.
    pub fn orphaned(&self) -> bool {
        self.orphaned
    }

    /// What it saw, per port (named by `name`).
    pub fn counts(&self, name: impl Fn(PortId) -> String) -> Vec<PortCounts> {
        (self.rx | self.tx)
            .iter()
            .map(|p| PortCounts { port: name(p), rx: self.counts[p][0], tx: self.counts[p][1] })
            .collect()
    }
}

/// A frame's room in a capture's queue.
pub type Slot = Box<[u8; SNAP]>;

/// The dataplane's ends of a capture's queues: where captured frames go, and the empty
/// slots they are copied into.
#[derive(Debug)]
pub struct DataplaneEnds {
    pub frames: Sender<CapturedFrame>,
    pub slots: crossbeam_channel::Receiver<Slot>,
}

/// The reader's ends: the captured frames, and where their slots go back.
#[derive(Debug)]
pub struct ReaderEnds {
    pub frames: crossbeam_channel::Receiver<CapturedFrame>,
    pub slots: Sender<Slot>,
}

/// A capture's two queues, their slots made before the capture starts: the data path
/// never allocates one.
pub fn queues() -> (DataplaneEnds, ReaderEnds) {
    let (out, frames) = crossbeam_channel::bounded(QUEUE);
    let (give, slots) = crossbeam_channel::bounded(QUEUE);
    for _ in 0..QUEUE {
        let _ = give.send(Box::new([0u8; SNAP]));
    }
    (DataplaneEnds { frames: out, slots }, ReaderEnds { frames, slots: give })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn capture(rate: u32) -> (Capture, crossbeam_channel::Receiver<CapturedFrame>, Sender<Slot>) {
        let (ends, reader) = queues();
        let c = Capture::new(3, PortSet::only(PortId::new(0)), PortSet::only(PortId::new(2)), rate, ends, Time::ZERO);
        (c, reader.frames, reader.slots)
    }

    #[test]
    fn only_the_chosen_ports_and_directions_are_copied_with_their_length_and_time() {
        let (mut c, frames, _give) = capture(1000);
        let t = Time::from_millis(1);
        c.offer(PortId::new(0), Way::Rx, t, &[1, 2, 3], 3);
        c.offer(PortId::new(0), Way::Tx, t, &[4], 1);
        c.offer(PortId::new(1), Way::Rx, t, &[5], 1);
        c.offer(PortId::new(2), Way::Tx, t, &[6; 4000], 9000);
        let got: Vec<CapturedFrame> = frames.try_iter().collect();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].port, got[0].way, got[0].at, got[0].len, &got[0].data[..3]),
            (PortId::new(0), Way::Rx, t, 3, &[1, 2, 3][..])
        );
        assert_eq!(
            (got[1].port, got[1].way, got[1].len),
            (PortId::new(2), Way::Tx, 9000),
            "a jumbo frame's length, its first bytes"
        );
        let counts = c.counts(|p| format!("p{p}"));
        assert_eq!(counts.len(), 2);
        assert_eq!(
            (counts[0].port.as_str(), counts[0].rx, counts[0].tx.seen),
            ("p0", WayCounts { seen: 1, skipped: 0 }, 0)
        );
    }

    #[test]
    fn over_its_rate_or_with_the_reader_behind_a_capture_skips_and_counts_what_it_skipped() {
        // 100 frames a second: a burst of 10, then one every 10 ms.
        let (mut c, frames, give) = capture(100);
        for i in 0..50u64 {
            c.offer(PortId::new(0), Way::Rx, Time::from_nanos(i * 1000), &[0; 64], 64);
        }
        let first: Vec<CapturedFrame> = frames.try_iter().collect();
        assert_eq!(first.len(), 10);
        assert_eq!(c.counts(|p| p.to_string())[0].rx, WayCounts { seen: 50, skipped: 40 });
        // The slots come back; 20 ms later two more frames are due.
        for f in first {
            give.send(f.data).unwrap();
        }
        let later = Time::from_nanos(49_000) + Duration::from_millis(20);
        for _ in 0..5 {
            c.offer(PortId::new(0), Way::Rx, later, &[0; 64], 64);
        }
        assert_eq!(frames.try_iter().count(), 2);
        // A reader that never gives slots back: the queue's worth, then skips.
        let (mut c, frames, give) = capture(MAX_RATE);
        for i in 0..(QUEUE as u64 + 100) {
            c.offer(PortId::new(0), Way::Rx, Time::from_millis(1000) + Duration::from_micros(i * 100), &[0; 64], 64);
        }
        assert_eq!(frames.len(), QUEUE);
        assert_eq!(c.counts(|p| p.to_string())[0].rx.skipped, 100);
        assert!(!c.orphaned(), "a reader that is behind is still there");
        // The reader's thread ends: both its ends go.
        drop((frames, give));
        c.offer(PortId::new(0), Way::Rx, Time::from_millis(3000), &[0; 64], 64);
        assert!(c.orphaned(), "one that went away is not");
    }
}
