//! A port's configuration: its interface, speed, pause mode, role and scheduler.

use serde::{Deserialize, Serialize};

use crate::priorities::PerPriority;

use crate::mac::MacAddr;
use crate::priorities::PRIORITIES;
use crate::speed::Speed;
use crate::watchdog::WatchdogOverride;

use super::{BufferProfile, PortWred};

/// A `[[port]]`: an interface and how the switch treats it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// The port's name in stats and commands; the interface name when absent.
    #[serde(default)]
    pub name: Option<String>,
    /// The Linux interface the port's AF_XDP socket binds to.
    pub iface: String,
    /// Source address of the frames the switch itself sends on this port (PFC);
    /// the interface's own address when absent.
    #[serde(default)]
    pub mac: Option<MacAddr>,
    /// Line rate, enforced by the egress shaper. Absent: the NIC's link speed, where it
    /// has one (`pfcswitch run` reads it), else [`DEFAULT_PORT_SPEED`].
    #[serde(default)]
    pub speed: Option<Speed>,
    /// Cable length in metres, used by the headroom calculator.
    #[serde(default = "default_cable_m")]
    pub cable_m: f64,
    /// Which pauses the port sends and obeys: PFC per priority, 802.3x for the whole link, or none.
    #[serde(default)]
    pub pause_mode: PauseMode,
    /// What is at the other end: a host (the default) or another switch. Only
    /// switch-facing ports carry DCFIT checking messages, in either direction.
    #[serde(default)]
    pub role: PortRole,
    /// Whether unknown-unicast, broadcast and multicast frames are flooded out of this port.
    #[serde(default = "default_true")]
    pub flood: bool,
    /// Largest frame accepted, without FCS; larger frames are dropped and counted as
    /// `oversize`. Absent: what the interface's MTU lets it receive
    /// ([`max_frame_for_mtu`]), which the shell fills in at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_frame: Option<usize>,
    /// Overrides `buffer.headroom_bytes` for this port's lossless priorities.
    #[serde(default)]
    pub headroom_bytes: Option<u64>,
    /// A static XOFF threshold for this port's lossless priorities, overriding the
    /// buffer's rule (per-port buffer profiles).
    #[serde(default)]
    pub xoff_bytes: Option<u64>,
    /// `[port.priority.N]`: this port's own profile for priority N, overriding every
    /// other level.
    #[serde(default, skip_serializing_if = "PerPriority::is_empty")]
    pub priority: PerPriority<BufferProfile>,
    /// How its egress queues share the link.
    #[serde(default)]
    pub scheduler: Scheduler,
    /// Overrides `[pfcwd]` for this port, e.g. `pfcwd = { action = "alert" }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfcwd: Option<WatchdogOverride>,
    /// `[port.wred.priority.N]`: this port's own WRED profiles, over `[wred.priority.N]`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub wred: PortWred,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// How a port sends and obeys link-level flow control.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum PauseMode {
    /// 802.1Qbb per-priority flow control on the lossless priorities; 802.3x PAUSE is ignored.
    #[default]
    Pfc,
    /// 802.3x PAUSE for the whole port.
    GlobalPause,
    /// Neither sends nor obeys pause frames.
    Off,
}

impl PauseMode {
    /// The mode as the configuration spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            PauseMode::Pfc => "pfc",
            PauseMode::GlobalPause => "global-pause",
            PauseMode::Off => "off",
        }
    }
}

/// What a port faces. A host is not trusted with DCFIT: a checking message it sends
/// could make the switch see (and with `resolution = "drop"` break) a deadlock that is
/// not there.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum PortRole {
    /// Checking messages it sends are counted and ignored; its pauses carry none.
    #[default]
    Host,
    /// A link to another DCFIT switch: checking messages cross it both ways.
    Switch,
}

/// Egress scheduling among a port's eight priority queues.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum Scheduler {
    /// Highest priority first.
    #[default]
    Strict,
    /// Deficit round robin with a weight per priority (0..7); weight 0 keeps that queue strict,
    /// served before the weighted ones.
    Drr {
        /// Per priority: its share of the link; 0 keeps it strict.
        weights: [u32; PRIORITIES],
    },
}

/// The speed of a port whose `speed` is not set and whose NIC reports none.
pub const DEFAULT_PORT_SPEED: Speed = Speed::gbps(10);

/// A speed nothing says otherwise about is a port's default speed.
impl Default for Speed {
    fn default() -> Speed {
        DEFAULT_PORT_SPEED
    }
}

fn default_cable_m() -> f64 {
    10.0
}

fn default_true() -> bool {
    true
}

/// The largest frame (without FCS) an interface with `mtu` receives: the payload, the
/// Ethernet header and up to two VLAN tags (the switch reads through two). The one rule
/// for what a port accepts when `max_frame` is not set, for what `run` and `doctor` say of
/// an interface, and for how large the AF_XDP shell's UMEM frames must be.
pub const fn max_frame_for_mtu(mtu: u32) -> usize {
    mtu as usize + 14 + 2 * 4
}

/// A port's largest frame when neither the config nor an interface says: that of the
/// standard 1500-byte MTU.
pub const DEFAULT_MAX_FRAME: usize = max_frame_for_mtu(1500);

impl PortConfig {
    /// A port on interface `iface` with every default.
    pub fn new(iface: &str) -> PortConfig {
        PortConfig {
            name: None,
            iface: iface.to_string(),
            mac: None,
            speed: None,
            cable_m: default_cable_m(),
            pause_mode: PauseMode::default(),
            role: PortRole::default(),
            flood: true,
            max_frame: None,
            headroom_bytes: None,
            xoff_bytes: None,
            priority: PerPriority::default(),
            scheduler: Scheduler::default(),
            pfcwd: None,
            wred: PortWred::default(),
        }
    }

    /// The largest frame the port accepts: `max_frame`, or that of the standard MTU
    /// when nothing filled it in (a simulated port, a test's).
    pub fn max_frame(&self) -> usize {
        self.max_frame.unwrap_or(DEFAULT_MAX_FRAME)
    }

    /// The line rate: the configured one, else [`DEFAULT_PORT_SPEED`] (the dataplane
    /// fills in the NIC's own before the engine starts, where it has one).
    pub fn speed(&self) -> Speed {
        self.speed.unwrap_or(DEFAULT_PORT_SPEED)
    }
}
