//! The kernel paths a port can take, as the switch's configuration names them: where
//! the XDP program runs, how a socket gets its frames, and how a frame's arrival time
//! reaches the loop.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How the XDP classifier hands a frame's arrival time to the loop, best first: the
/// pause timers, the reaction figures and the rx ring's wait count from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArrivalStamp {
    /// In the metadata area in front of the frame (`bpf_xdp_adjust_meta`): free.
    Metadata,
    /// In 16 bytes pushed in front of the frame (`bpf_xdp_adjust_head`), which the loop
    /// takes off again: a copy of the frame's first buffer per frame.
    InFrame,
    /// None: the loop's clock when it takes the frame off its rx ring (the rx batch's
    /// time), so whatever waited on the ring is not seen.
    RxClock,
}

impl ArrivalStamp {
    /// Every path, best first.
    pub const ALL: [ArrivalStamp; 3] = [ArrivalStamp::Metadata, ArrivalStamp::InFrame, ArrivalStamp::RxClock];

    /// The path's name in the config file, logs, `doctor` and `ctl stats`.
    pub fn as_str(self) -> &'static str {
        match self {
            ArrivalStamp::Metadata => "metadata",
            ArrivalStamp::InFrame => "in-frame",
            ArrivalStamp::RxClock => "rx-clock",
        }
    }

    /// Bytes the stamp adds in front of a received frame in the UMEM: the in-frame
    /// stamp's 16 (struct rx_meta in the C code), which the loop takes off again.
    pub const fn bytes_in_frame(self) -> u32 {
        if matches!(self, ArrivalStamp::InFrame) {
            16
        } else {
            0
        }
    }

    /// Whether the time is taken where the frame arrived (in the XDP program), not by
    /// the loop that reads it.
    pub fn at_arrival(self) -> bool {
        self != ArrivalStamp::RxClock
    }
}

impl std::str::FromStr for ArrivalStamp {
    type Err = String;

    fn from_str(s: &str) -> Result<ArrivalStamp, String> {
        ArrivalStamp::ALL.into_iter().find(|a| a.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = ArrivalStamp::ALL.iter().map(|a| a.as_str()).collect();
            format!("{s:?} is no arrival stamp: one of {}", names.join(", "))
        })
    }
}

impl fmt::Display for ArrivalStamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an XDP program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum XdpMode {
    /// In the driver, before any skb is built.
    Native,
    /// In the kernel's generic path, on an skb: works on any interface, slower.
    Generic,
}

impl XdpMode {
    /// The mode's name in logs, messages and stats tables.
    pub fn as_str(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
}

/// How an AF_XDP socket gets its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BindMode {
    /// The driver receives into (and sends from) the UMEM itself.
    ZeroCopy,
    /// The kernel copies each frame between its buffers and the UMEM.
    Copy,
}

impl BindMode {
    /// The mode as `ctl stats` and the logs name it.
    pub fn as_str(self) -> &'static str {
        match self {
            BindMode::ZeroCopy => "zero-copy",
            BindMode::Copy => "copy",
        }
    }
}
