//! `[monitor]`: what a run samples at a fixed period — the bytes queued at chosen switch
//! egress ports, and chosen flows' rates (what their receivers got in each period, and
//! what their DCQCN reaction points allowed at its end).

use serde::Serialize;

use pfcswitch_core::priorities::{Priority, PRIORITIES};
use pfcswitch_core::PortId;

use crate::ids::SwitchIx;

/// The sampled series. Sample `k` is taken at `(k + 1) × every_us` after the start.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Series {
    pub every_us: f64,
    pub queues: Vec<QueueSeries>,
    pub flows: Vec<FlowSeries>,
}

/// One egress queue's bytes at each sample (the priorities that ever held any).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct QueueSeries {
    pub port: String,
    pub priority: Priority,
    pub bytes: Vec<u64>,
}

/// One flow's rates over each period, Gb/s of frames (FCS included).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FlowSeries {
    pub flow: u16,
    pub received_gbps: Vec<f64>,
    /// Under DCQCN: the sender's allowed rate at each sample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dcqcn_gbps: Option<Vec<f64>>,
}

/// A queue being watched: its label, switch and local port, and its samples.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct WatchedQueue {
    pub label: String,
    pub switch: SwitchIx,
    pub local: PortId,
    pub samples: Vec<[u64; PRIORITIES]>,
}

/// A flow being watched: its bytes received at the last sample, and its rates.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct WatchedFlow {
    pub flow: usize,
    pub bytes_before: u64,
    pub received_gbps: Vec<f64>,
    pub dcqcn_gbps: Vec<f64>,
}

/// The monitor's state during a run.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Monitor {
    pub every_ns: u64,
    pub queues: Vec<WatchedQueue>,
    pub flows: Vec<WatchedFlow>,
}

impl Monitor {
    /// The series so far, each queue's idle priorities left out; the flows' DCQCN rates
    /// if the hosts run `dcqcn`.
    pub fn series(&self, flow_ids: impl Fn(usize) -> u16, dcqcn: bool) -> Series {
        let mut queues = Vec::new();
        for q in &self.queues {
            for prio in Priority::all() {
                if q.samples.iter().any(|s| s[prio] > 0) {
                    queues.push(QueueSeries {
                        port: q.label.clone(),
                        priority: prio,
                        bytes: q.samples.iter().map(|s| s[prio]).collect(),
                    });
                }
            }
        }
        let flows = self
            .flows
            .iter()
            .map(|f| FlowSeries {
                flow: flow_ids(f.flow),
                received_gbps: f.received_gbps.clone(),
                dcqcn_gbps: dcqcn.then(|| f.dcqcn_gbps.clone()),
            })
            .collect();
        Series { every_us: self.every_ns as f64 / 1e3, queues, flows }
    }
}
