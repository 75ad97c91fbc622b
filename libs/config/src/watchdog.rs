//! The PFC watchdog's configuration (`[pfcwd]` and a port's `pfcwd = { ... }`); the
//! watchdog itself is `pfcswitch_core::pfcwd`.

use serde::{Deserialize, Serialize};

/// What the watchdog does to a stormed priority.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum WatchdogAction {
    /// Drop the priority's queue and every frame arriving for it until restored.
    #[default]
    Drop,
    /// Send the priority's frames as if the partner had not paused it.
    Forward,
    /// Only count and log.
    Alert,
    /// No watchdog.
    Off,
}

/// `[pfcwd]`: SONiC's defaults (200 ms, 200 ms, drop).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WatchdogConfig {
    /// What a stormed priority leads to.
    pub action: WatchdogAction,
    /// How long a priority must stay paused, with frames waiting, before the watchdog acts.
    pub detection_ms: u64,
    /// How long without a pause on the priority before it is restored.
    pub restoration_ms: u64,
}

impl Default for WatchdogConfig {
    fn default() -> WatchdogConfig {
        WatchdogConfig { action: WatchdogAction::Drop, detection_ms: 200, restoration_ms: 200 }
    }
}

/// A port's `pfcwd = { ... }`: any field given overrides `[pfcwd]` for that port.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WatchdogOverride {
    /// This port's action, if not the switch's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<WatchdogAction>,
    /// This port's detection time, if not the switch's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection_ms: Option<u64>,
    /// This port's restoration time, if not the switch's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restoration_ms: Option<u64>,
}

impl WatchdogConfig {
    /// This configuration with a port's override applied.
    pub fn with(&self, over: Option<&WatchdogOverride>) -> WatchdogConfig {
        let Some(o) = over else { return self.clone() };
        WatchdogConfig {
            action: o.action.unwrap_or(self.action),
            detection_ms: o.detection_ms.unwrap_or(self.detection_ms),
            restoration_ms: o.restoration_ms.unwrap_or(self.restoration_ms),
        }
    }
}
