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

/// The nice value of a timing-sensitive run's processes. Beside one busy process on two
/// cores, the scheduler put it on the switch's CPU and gave it half: the switch waited
/// 200 ms for its CPU in 400 ms of traffic, in stalls of 5.5 ms, and every headroom run
/// at a long delay was disturbed; at -15 the busy process gets a few percent and 6 runs
/// in 6 were not (DEVELOPERS.md). Against a busy process in another session it counts
/// only as its session's (autogroup's) nice value, which the processes get with theirs
/// ([`Placement::own_session`]).
pub const TIMING_NICE: i32 = -15;

impl CpuPlan {
    /// The last CPU for the switch, the others for the tools, all at [`TIMING_NICE`];
    /// nothing pinned on one CPU.
    pub fn split() -> CpuPlan {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        // Each in a session of its own, whose autogroup gets the nice value too: in the
        // caller's session the value ranked them only against its other processes.
        let raised = |cpus: Option<String>| Placement { cpus, nice: Some(TIMING_NICE), own_session: true };
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
