//! What a run records besides counters: when each port was paused, per priority, and
//! (with `--pcap`) every frame on every link.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use pfcswitch_core::pfc::PRIORITIES;
use pfcswitch_core::Priority;
use pfctestkit::pcap::{CaptureWriter, Direction};

use crate::ids::FabricPort;

/// When a port's link partner had it paused: per priority, intervals [start, end) in ns
/// of simulated time. A pause that arrives while one lasts extends it; a resume ends it.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct PauseTimeline {
    pub intervals: [Vec<(u64, u64)>; PRIORITIES],
}

impl PauseTimeline {
    pub fn pause(&mut self, prio: Priority, at: u64, duration_ns: u64) {
        let list = &mut self.intervals[prio];
        let end = at + duration_ns;
        match list.last_mut() {
            Some(last) if last.1 > at => last.1 = if duration_ns == 0 { at } else { last.1.max(end) },
            _ if duration_ns > 0 => list.push((at, end)),
            _ => {}
        }
        if list.last().is_some_and(|l| l.0 == l.1) {
            list.pop();
        }
    }

    /// Paused time of `prio` up to `until` (ns).
    pub fn paused_ns(&self, prio: Priority, until: u64) -> u64 {
        self.intervals[prio].iter().map(|&(a, b)| b.min(until).saturating_sub(a)).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.iter().all(Vec::is_empty)
    }
}

/// A frame a recorded port sent: when its first bit left (ns of simulated time).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Sent {
    pub port: usize,
    pub at_ns: u64,
    pub frame: Vec<u8>,
    /// Where the send falls among those at the same nanosecond: the key of the event
    /// that sent it, and of the end of its transmission.
    pub order: (u64, u64),
}

pub struct Trace {
    timelines: Vec<PauseTimeline>,
    pcap: Option<(PathBuf, Vec<Option<Capture>>)>,
    recording: Vec<bool>,
    recorded: Vec<Sent>,
    whole: Vec<u8>,
    /// The first error writing a capture, for `finish` to report.
    failed: Option<pfctestkit::pcap::PcapError>,
}

type Capture = CaptureWriter<std::io::BufWriter<std::fs::File>>;

impl Trace {
    /// For `ports` ports; captures into `pcap_dir` (one file per link direction) if given.
    pub fn new(ports: usize, pcap_dir: Option<&Path>) -> Trace {
        Trace {
            timelines: vec![PauseTimeline::default(); ports],
            pcap: pcap_dir.map(|d| (d.to_path_buf(), (0..ports).map(|_| None).collect())),
            recording: vec![false; ports],
            recorded: Vec::new(),
            whole: Vec::new(),
            failed: None,
        }
    }

    /// Keeps every frame `port` sends, in memory (for tests).
    pub fn record(&mut self, port: FabricPort) {
        self.recording[port] = true;
    }

    pub fn recorded(&self) -> &[Sent] {
        &self.recorded
    }

    pub fn timeline(&mut self, port: FabricPort) -> &mut PauseTimeline {
        &mut self.timelines[port]
    }

    pub fn timelines(&self) -> &[PauseTimeline] {
        &self.timelines
    }

    /// Names the capture files: `file_names[port]` for frames `port` sends.
    pub fn open_captures(&mut self, file_names: &[String]) -> Result<()> {
        self.open_captures_of(file_names, |_| true)
    }

    /// [`Trace::open_captures`] for the ports `mine` says (a rank's, when the fabric is
    /// split: only the rank that runs a port writes its file).
    pub fn open_captures_of(&mut self, file_names: &[String], mine: impl Fn(FabricPort) -> bool) -> Result<()> {
        if let Some((dir, writers)) = &mut self.pcap {
            std::fs::create_dir_all(&*dir)?;
            for (w, name) in writers
                .iter_mut()
                .zip(file_names)
                .enumerate()
                .filter(|(p, _)| mine(FabricPort::new(*p)))
                .map(|(_, wn)| wn)
            {
                // One link direction a file, its interface named after it.
                let iface = name.trim_end_matches(".pcapng");
                *w = Some(CaptureWriter::create_one(dir.join(name), iface)?);
            }
        }
        Ok(())
    }

    /// Whether what `port` sends is captured (written to a pcap or recorded).
    pub fn captures(&self, port: FabricPort) -> bool {
        self.recording[port] || self.pcap.as_ref().is_some_and(|(_, writers)| writers[port].is_some())
    }

    /// A `len`-byte frame `port` sent, of which the simulator keeps `head`: the rest of
    /// every frame it makes is zeros (see `engine::Arena`), and is written out as such.
    /// Nothing is done unless [`Trace::captures`] the port.
    pub fn capture(&mut self, port: FabricPort, at_ns: u64, order: (u64, u64), head: &[u8], len: usize) {
        if !self.captures(port) {
            return;
        }
        let writer = self.pcap.as_mut().and_then(|(_, writers)| writers[port].as_mut());
        // Made whole in one buffer, reused: a capture writes every frame of a run.
        let frame = &mut self.whole;
        frame.clear();
        frame.extend_from_slice(head);
        frame.resize(len.max(head.len()), 0);
        if let Some(w) = writer {
            if let Err(e) = w.frame(0, Duration::from_nanos(at_ns), frame, frame.len(), Some(Direction::Outbound)) {
                self.failed.get_or_insert(e);
            }
        }
        if self.recording[port] {
            self.recorded.push(Sent { port: port.index(), at_ns, frame: frame.clone(), order });
        }
    }

    pub fn finish(&mut self) -> Result<()> {
        if let Some(e) = self.failed.take() {
            return Err(e.into());
        }
        if let Some((_, writers)) = &mut self.pcap {
            for w in writers.iter_mut().flatten() {
                w.flush()?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfcswitch_core::priorities::names::*;

    #[test]
    fn pauses_extend_and_a_resume_ends_them() {
        let mut t = PauseTimeline::default();
        t.pause(P3, 100, 50);
        t.pause(P3, 120, 50);
        assert_eq!(t.intervals[3], vec![(100, 170)]);
        t.pause(P3, 130, 0);
        assert_eq!(t.intervals[3], vec![(100, 130)]);
        t.pause(P3, 200, 10);
        t.pause(P3, 300, 0);
        assert_eq!(t.intervals[3], vec![(100, 130), (200, 210)]);
        assert_eq!(t.paused_ns(P3, 205), 35);
        t.pause(P4, 10, 0);
        assert!(t.intervals[4].is_empty());
    }
}
