//! The local control socket behind `pfcswitch ctl`: one JSON request per line, one JSON
//! reply per line. The server thread never touches switch state: it passes each request
//! to the dataplane, which answers between two batches.

pub mod client;
pub mod server;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What `pfcswitch ctl` can ask.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case")]
pub enum Request {
    /// Counters and live state of every port and priority.
    Stats,
    /// The forwarding database.
    Fdb,
    /// Reset buffer watermarks to the current occupancy.
    ClearWatermarks,
    /// Send frames for this port to the slowpath (a controlled way to make the switch
    /// originate a pause).
    Block { port: String },
    /// Release what the slowpath holds for this port and switch it normally again.
    Unblock { port: String },
    /// The DCFIT traffic map: which ingress ports have traffic waiting on which egress.
    TrafficMap,
    /// PFC deadlocks this switch detected.
    Deadlocks,
}

impl Request {
    /// Requests the slowpath thread answers; the dataplane answers the others.
    pub fn for_slowpath(&self) -> bool {
        matches!(self, Request::Block { .. } | Request::Unblock { .. } | Request::Deadlocks)
    }
}

/// The dataplane's answer: a JSON document, or an error message.
pub type Reply = Result<serde_json::Value, String>;

/// A request in flight from the control thread to the dataplane.
#[derive(Debug)]
pub struct ControlMsg {
    pub request: Request,
    pub reply: crossbeam_channel::Sender<Reply>,
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
    #[error("malformed reply from the switch: {0}")]
    BadReply(String),
    #[error("the switch refused: {0}")]
    Refused(String),
}
