//! What the AF_XDP shell reads from the `[dataplane]` table: ring and frame sizes, the
//! XDP and bind modes, batching and busy polling. The engine itself uses none of it.

use serde::{Deserialize, Serialize};

/// The `[dataplane]` table: what the AF_XDP shell reads (rings, frames, XDP and bind modes,
/// batching, busy polling).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DataplaneConfig {
    /// UMEM frames shared by all ports; bounds how many frames the switch can hold.
    /// Absent: a fill ring's worth per rx queue, a tx ring's worth per port, and 16384
    /// for queued frames (see [`DataplaneConfig::umem_frames_for`]).
    pub umem_frames: Option<u32>,
    /// UMEM frame size: 2048 or 4096; chosen from the interfaces' MTU when absent.
    pub frame_size: Option<u32>,
    /// Descriptors per AF_XDP ring. What arrives while the loop is behind (off its CPU,
    /// or slower than the traffic for a while on a CPU it shares) waits on the rx ring:
    /// 8192 frames last 27 ms at 300 k frames/s.
    pub ring_size: u32,
    /// Frames handled per ring per loop turn.
    pub batch: usize,
    /// How long the loop keeps polling without sleeping after the last work it did.
    pub busy_poll_us: u64,
    /// Without a socket on a queue, drop frames instead of passing them to the kernel.
    pub drop_without_socket: bool,
    /// Pin the dataplane thread to this CPU.
    pub cpu: Option<usize>,
    /// Bind at most this many rx queues of each port (queues 0..N-1); every queue the
    /// interface has when absent. Frames the NIC steers to a queue left out are dropped
    /// by the classifier, never passed around the switch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queues: Option<u32>,
    /// How the classifier is attached: native (in the driver) or generic (after the
    /// kernel built an skb). Absent: native where the driver takes it, else generic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp_mode: Option<XdpMode>,
    /// How the AF_XDP sockets use the UMEM: zero-copy (the NIC writes frames into it) or
    /// copy. Absent: zero-copy where the driver offers it, else copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind_mode: Option<BindMode>,
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

impl Default for DataplaneConfig {
    fn default() -> DataplaneConfig {
        DataplaneConfig {
            umem_frames: None,
            frame_size: None,
            ring_size: 8192,
            batch: 64,
            busy_poll_us: 200,
            drop_without_socket: false,
            cpu: None,
            queues: None,
            xdp_mode: None,
            bind_mode: None,
        }
    }
}

impl DataplaneConfig {
    /// The UMEM size to use for `ports` ports.
    /// The UMEM size for `ports` ports with `rx_sockets` sockets in all (one per bound
    /// rx queue): a fill ring's worth per socket, a tx ring's worth per port (ports send
    /// on their first queue), and 16384 for the frames the switch holds.
    pub fn umem_frames_for(&self, ports: usize, rx_sockets: usize) -> u32 {
        self.umem_frames.unwrap_or(self.ring_frames(ports, rx_sockets) + 16384)
    }

    /// Frames the AF_XDP rings take: see [`DataplaneConfig::umem_frames_for`].
    pub fn ring_frames(&self, ports: usize, rx_sockets: usize) -> u32 {
        (ports + rx_sockets) as u32 * self.ring_size
    }
}
