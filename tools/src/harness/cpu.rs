//! Where a timing-sensitive run's processes go: CPUs and nice values.

use super::*;

/// Which CPUs a timing-sensitive run gives the switch and the host-side tools, so that a
/// busy-polling switch is never preempted by a busy-polling generator, and how far above
/// the machine's other processes they run.
#[derive(Clone, Debug, Default)]
pub struct CpuPlan {
    /// The switch's dataplane thread.
    pub switch: Option<usize>,
    /// The switch's process (its forwarding thread pinned by `switch` in its config).
    pub switch_process: Placement,
    /// Everything else.
    pub hosts: Placement,
}

impl CpuPlan {
    /// The last CPU for the switch, the others for the tools, all raised
    /// ([`Placement::raised`]); nothing pinned on one CPU.
    pub fn split() -> CpuPlan {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let raised = Placement::raised;
        if n < 2 {
            return CpuPlan { switch: None, switch_process: raised(None), hosts: raised(None) };
        }
        let hosts = if n == 2 { "0".into() } else { format!("0-{}", n - 2) };
        CpuPlan { switch: Some(n - 1), switch_process: raised(None), hosts: raised(Some(hosts)) }
    }

    pub fn hosts(&self) -> &Placement {
        &self.hosts
    }
}
