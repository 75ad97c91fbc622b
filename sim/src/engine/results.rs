//! What a run leaves for its report.

use super::*;
use pfcswitch_core::stats::PortStats;

impl Sim<'_> {
    pub fn switch(&self, sw: SwitchIx) -> &Switch {
        &self.switches[sw].switch
    }

    pub fn slowpath(&self, sw: SwitchIx) -> &Slowpath {
        &self.switches[sw].slowpath
    }

    pub fn free_frames(&self, sw: SwitchIx) -> usize {
        self.switches[sw].slots.free_count()
    }

    pub fn rx_no_frame(&self, sw: SwitchIx, port: PortId) -> u64 {
        self.switches[sw].rx_no_frame[port]
    }

    /// Flow `flow`'s frames sent: how many (each counted once), and how many more times
    /// frames were sent again after a NAK.
    pub fn sent(&self, flow: FlowIx) -> FlowSent {
        let f = &self.flows[flow];
        FlowSent { frames: f.highest, again: f.sent - f.highest }
    }

    pub fn received(&self, flow: FlowIx) -> &Received {
        &self.flows[flow].rx
    }

    /// Frames on a link: sent, of which pause frames, lost to the link going down.
    pub fn link_counts(&self, port: FabricPort) -> (u64, u64, u64, u64) {
        let p = &self.link_counts[port];
        (p.tx_frames, p.tx_bytes, p.pause_frames, p.lost_link_down)
    }
}

/// A flow's frames sent ([`Sim::sent`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowSent {
    pub frames: u64,
    pub again: u64,
}

/// What a run leaves for its report, from one rank or put together from several: each
/// part from the rank that ran it (`None` where another rank did), link counts summed
/// (a link's sender counts what it sent, its receiver what the link lost).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Gathered {
    pub counts: RunCounts,
    pub switches: Vec<Option<GatheredSwitch>>,
    pub sent: Vec<Option<FlowSent>>,
    pub received: Vec<Option<Received>>,
    pub links: Vec<[u64; 4]>,
    pub timelines: Vec<Option<PauseTimeline>>,
    pub monitor: Option<Monitor>,
    pub recorded: Vec<crate::trace::Sent>,
    /// Under a split: what each rank did (one here, every rank's once merged).
    pub ranks: Vec<crate::split::RankStats>,
}

#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct GatheredSwitch {
    pub stats: SwitchStats<SimPortStats>,
    pub free_frames: u64,
    pub deadlocks: Vec<DeadlockRecord>,
}

impl Sim<'_> {
    /// This run's part: every node's, or under a split the nodes this rank ran. Takes the
    /// run, so that what it kept (every flow's latency histogram, 8 KiB each) moves into
    /// the part instead of being copied at the run's peak.
    pub(crate) fn gather(mut self) -> Gathered {
        let f = self.fabric;
        let split = self.split.take();
        let mine = |node: u32| split.as_ref().is_none_or(|s| s.rank_of(node) == s.rank);
        let now = self.now;
        // The run is over: the frames still in flight go before the report is made, and
        // each switch as soon as its part is taken. Made beside a whole run, the switches'
        // reports (a few kilobytes a port) were the run's peak: 19 of a k=16 fat-tree's
        // 151 MiB of heap.
        drop(std::mem::take(&mut self.arena));
        let switches = std::mem::take(&mut self.switches)
            .into_iter()
            .enumerate()
            .map(|(i, state)| {
                mine(1 + i as u32).then(|| GatheredSwitch {
                    stats: state
                        .switch
                        .stats(now)
                        .map_ports(|k, engine| SimPortStats { engine, rx_no_frame: state.rx_no_frame[PortId::new(k)] }),
                    free_frames: state.slots.free_count() as u64,
                    deadlocks: state.slowpath.deadlocks().deadlocks,
                })
            })
            .collect();
        let sent = f
            .flows
            .iter()
            .enumerate()
            .map(|(i, fl)| mine(self.host_node(fl.from)).then(|| self.sent(FlowIx::new(i))))
            .collect();
        let received = std::mem::take(&mut self.flows)
            .into_iter()
            .zip(&f.flows)
            .map(|(state, fl)| mine(self.host_node(fl.to)).then_some(state.rx))
            .collect();
        let links = (0..f.ports.len())
            .map(FabricPort::new)
            .map(|p| {
                let (a, b, c, d) = self.link_counts(p);
                [a, b, c, d]
            })
            .collect();
        let timelines =
            (0..f.ports.len()).map(|p| mine(self.port_node[p]).then(|| self.trace.timelines()[p].clone())).collect();
        Gathered {
            counts: self.counts,
            switches,
            sent,
            received,
            links,
            timelines,
            monitor: self.monitor.take(),
            recorded: self.trace.recorded().to_vec(),
            ranks: Vec::new(),
        }
    }
}

impl Gathered {
    /// As it travels between ranks: JSON, every float read back to the bit (serde_json's
    /// `float_roundtrip`), so the gathered report is the one-rank run's byte for byte.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a run's part serializes")
    }

    pub(crate) fn from_bytes(bytes: &[u8]) -> anyhow::Result<Gathered> {
        Ok(serde_json::from_slice(bytes)?)
    }

    /// The ranks' parts put together, as the one-rank run's would be. `rank_of` says
    /// which rank ran each key node.
    pub(crate) fn merge(parts: Vec<Gathered>, fabric: &Fabric, rank_of: &[u16]) -> Gathered {
        let mut parts = parts;
        let host = |h: HostIx| usize::from(rank_of[1 + fabric.switches.len() + h.index()]);
        let monitor = parts[0].monitor.clone().map(|mut m| {
            for (q, watched) in m.queues.iter_mut().enumerate() {
                let r = usize::from(rank_of[1 + watched.switch.index()]);
                watched.samples = parts[r].monitor.as_ref().expect("every rank monitors").queues[q].samples.clone();
            }
            for (k, watched) in m.flows.iter_mut().enumerate() {
                let plan = &fabric.flows[watched.flow];
                let by = |r: usize| &parts[r].monitor.as_ref().expect("every rank monitors").flows[k];
                watched.received_gbps = by(host(plan.to)).received_gbps.clone();
                watched.dcqcn_gbps = by(host(plan.from)).dcqcn_gbps.clone();
            }
            m
        });
        let mut out = Gathered {
            counts: RunCounts::default(),
            switches: (0..fabric.switches.len()).map(|_| None).collect(),
            sent: vec![None; fabric.flows.len()],
            received: vec![None; fabric.flows.len()],
            links: vec![[0; 4]; fabric.ports.len()],
            timelines: vec![None; fabric.ports.len()],
            monitor,
            recorded: Vec::new(),
            ranks: Vec::new(),
        };
        for part in &mut parts {
            out.counts.events += part.counts.events;
            out.counts.frame_hops += part.counts.frame_hops;
            fill(&mut out.switches, &mut part.switches);
            fill(&mut out.sent, &mut part.sent);
            fill(&mut out.received, &mut part.received);
            for (o, p) in out.links.iter_mut().zip(&part.links) {
                for (a, b) in o.iter_mut().zip(p) {
                    *a += b;
                }
            }
            fill(&mut out.timelines, &mut part.timelines);
            out.recorded.append(&mut part.recorded);
            out.ranks.append(&mut part.ranks);
        }
        out.recorded.sort_by_key(|s| (s.at_ns, s.order));
        out
    }
}

/// Takes each entry a rank gave (the rank that owns it; the others gave `None`).
fn fill<T>(out: &mut [Option<T>], part: &mut Vec<Option<T>>) {
    for (o, p) in out.iter_mut().zip(part.drain(..)) {
        if p.is_some() {
            *o = p;
        }
    }
}

/// A port in the report.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SimPortStats {
    /// What the engine knows of the port.
    #[serde(flatten)]
    pub engine: PortStats,
    /// Frames that arrived when the pool had no free frame, and were dropped (what
    /// AF_XDP counts as an empty fill ring).
    pub rx_no_frame: u64,
}

/// Reads as the engine's port for everything but `rx_no_frame`.
impl std::ops::Deref for SimPortStats {
    type Target = PortStats;

    fn deref(&self) -> &PortStats {
        &self.engine
    }
}
