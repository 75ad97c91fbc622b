//! The local control socket behind `pfcswitch ctl`: one JSON request per line, one JSON
//! reply per line, both typed here for the server and the client alike. The server
//! thread never touches switch state: it passes each request to the dataplane, which
//! answers between two batches, or to the slowpath thread.

pub mod client;
pub mod http;
pub mod metrics;
pub mod server;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::core::fdb::FdbRow;
use crate::core::slowpath::DeadlockReport;
use crate::core::traffic_map::TrafficMapView;
use crate::stats::Stats;

/// What `pfcswitch ctl` can ask.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case")]
pub enum Request {
    /// Counters and live state of every port and priority.
    Stats,
    /// The forwarding database.
    Fdb,
    /// Reset buffer watermarks to the current occupancy, and the stage latencies
    /// ([`crate::stats::StageLatency`]) to nothing.
    ClearWatermarks,
    /// Send frames for this port (its name or interface) to the slowpath (a controlled
    /// way to make the switch originate a pause).
    Block { port: String },
    /// Release what the slowpath holds for this port and switch it normally again.
    Unblock { port: String },
    /// The DCFIT traffic map: which ingress ports have traffic waiting on which egress.
    TrafficMap,
    /// PFC deadlocks this switch detected.
    Deadlocks,
    /// Starts the SONiC-style views (`ctl pfcstat`, `ctl pfcwd`) from zero and resets the
    /// watermarks, as `sonic-clear` does. The counters themselves, which Prometheus
    /// scrapes, are not touched: they stay monotonic.
    Clear,
    /// A stats snapshot and what the latest [`Request::Clear`] kept: what the SONiC-style
    /// views are worked out from.
    Views,
    /// Records frames the ports take and send: the connection then carries a pcapng
    /// stream after the reply line, until `count` frames, `duration_ms`, or a line
    /// from the client (`ctl capture`). One capture at a time.
    CaptureStart(CaptureRequest),
    /// Ends the running capture: what it saw and skipped, per port (the control thread
    /// asks this of the dataplane when a capture's stream ends).
    CaptureStop,
}

/// What `ctl capture` asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureRequest {
    /// Port names or interfaces.
    pub ports: Vec<String>,
    /// Frames the ports receive.
    pub rx: bool,
    /// Frames the ports send.
    pub tx: bool,
    /// At most this many frames a second are copied (the rest skipped and counted).
    pub rate: u32,
    /// Stop after this many frames.
    pub count: Option<u64>,
    /// Stop after this many milliseconds.
    pub duration_ms: Option<u64>,
}

impl Request {
    /// Requests the slowpath thread answers; the dataplane answers the others.
    pub fn for_slowpath(&self) -> bool {
        matches!(self, Request::Deadlocks)
    }
}

/// What the switch answers, one kind per request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Response {
    Stats(Box<Stats>),
    Fdb(Vec<FdbRow>),
    TrafficMap(TrafficMapView),
    Deadlocks(DeadlockReport),
    Views(Box<Views>),
    /// A capture began on these ports (index, name).
    CaptureStarted(Vec<(usize, String)>),
    /// A capture ended: what it saw and skipped, per port.
    CaptureCounts(Vec<crate::capture::PortCounts>),
    /// A command was carried out: what was done.
    Done(String),
}

impl Response {
    /// The answer's content alone (`ctl --json` prints this).
    pub fn to_json(&self) -> serde_json::Value {
        let content = match self {
            Response::Stats(s) => serde_json::to_value(s),
            Response::Fdb(rows) => serde_json::to_value(rows),
            Response::TrafficMap(m) => serde_json::to_value(m),
            Response::Deadlocks(d) => serde_json::to_value(d),
            Response::Views(v) => serde_json::to_value(v),
            Response::CaptureStarted(p) => serde_json::to_value(p),
            Response::CaptureCounts(c) => serde_json::to_value(c),
            Response::Done(what) => serde_json::to_value(what),
        };
        content.unwrap_or_else(|e| serde_json::Value::String(format!("unserializable reply: {e}")))
    }
}

/// What the SONiC-style views are worked out from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Views {
    /// The switch now.
    pub stats: Stats,
    /// The snapshot `ctl clear` took, if it was run since the switch started.
    pub cleared: Option<Cleared>,
}

/// What `ctl clear` kept: the views show what the counters gained since.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cleared {
    /// When, ms since the Unix epoch.
    pub at_unix_ms: u64,
    /// The switch then.
    pub stats: Stats,
}

/// An answer, or why the switch refused the request.
pub type Reply = Result<Response, String>;

/// One reply line on the socket.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplyLine {
    Ok(Response),
    Error(String),
}

impl From<Reply> for ReplyLine {
    fn from(r: Reply) -> ReplyLine {
        match r {
            Ok(response) => ReplyLine::Ok(response),
            Err(e) => ReplyLine::Error(e),
        }
    }
}

/// What a stats snapshot reads from the kernel, read on the thread that asked for it: the
/// forwarding thread answers with the engine's counters, and the system calls behind the
/// kernel's (sockets, XDP maps, /proc) are made by whoever asked (`ctl stats`, a scrape).
pub trait StatsFromKernel: Send + Sync + std::fmt::Debug {
    /// Fills in the kernel's counters of `stats`, a snapshot the dataplane made.
    fn complete(&self, stats: &mut Stats);
}

/// A request in flight from the control thread to the dataplane.
#[derive(Debug)]
pub struct ControlMsg {
    pub request: Request,
    pub reply: crossbeam_channel::Sender<Reply>,
    /// For [`Request::CaptureStart`]: the dataplane's ends of the capture's queues.
    pub capture: Option<crate::capture::DataplaneEnds>,
}

/// Where the control socket of switch `name` lives.
pub fn socket_path(name: &str) -> PathBuf {
    PathBuf::from(format!("/run/pfcswitch/{name}.sock"))
}

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("no switch is listening at {path} ({source}); is `pfcswitch run --name ...` running?")]
    Connect { path: String, source: std::io::Error },
    #[error("control socket {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("another switch is already running with control socket {0}; pick another --name")]
    InUse(String),
    #[error(
        "control socket {path} is {len} bytes long: a Unix socket's path holds at most 107 \
         (pick a shorter --socket or --name)"
    )]
    PathTooLong { path: String, len: usize },
    #[error("{0} exists and is not a socket; refusing to replace it (pick another --socket)")]
    NotASocket(String),
    #[error(
        "control socket directory {path} {why}: another user could replace the socket there; \
         refusing it (fix its owner or mode, or pick another --socket)"
    )]
    UnsafeDir { path: String, why: String },
    #[error("no group {0:?} for the control socket")]
    NoGroup(String),
    #[error("malformed reply from the switch: {0}")]
    BadReply(String),
    #[error("the switch answered {request} with {got}")]
    WrongReply { request: String, got: String },
    #[error("the switch refused: {0}")]
    Refused(String),
    #[error("metrics listener on {0}: {1}")]
    Metrics(String, String),
}
