//! Running the real binaries on a testbed: a switch in a node's namespace, the sink and
//! the generator on hosts. Shared by the netns tests, the demo and the benchmarks.

mod configs;
mod cpu;
mod procs;
mod readings;
mod retry;

pub use configs::*;
pub use cpu::*;
pub use procs::*;
pub use readings::*;
pub use retry::*;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use pfcswitch::cli::RunArgs;
use pfcswitch::config::RunConfig;
use pfcswitch::control::{self, client, Request};
use pfcswitch::core::config::{PortRole, StaticFdbEntry, TaggerConfig};
use pfcswitch::core::fdb::FdbRow;
use pfcswitch::core::mac::MacAddr;
use pfcswitch::core::slowpath::DeadlockReport;
use pfcswitch::core::speed::Speed;
use pfcswitch::core::traffic_map::TrafficMapView;
use pfcswitch::stats::Stall;
use pfcswitch::stats::Stats;

use crate::argv;
use crate::cli::{GenArgs, SinkArgs};
use crate::storm::StormArgs;
use crate::tagging::{self, TestbedTables};
use crate::testbed::TestbedTopology;
use crate::testbed::{Finished, Placement, Proc, Testbed, Topology};
use crate::traffic::gen::GenReport;
use crate::traffic::sink::{SinkReport, READY_LINE};

/// Path of a binary built alongside this one (`pfcswitch`, `pfctools`), or from
/// `PFCSWITCH_BIN_DIR`.
pub fn bin(name: &str) -> Result<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("PFCSWITCH_BIN_DIR") {
        dirs.push(PathBuf::from(d));
    }
    if let Ok(exe) = std::env::current_exe() {
        // target/<profile>/pfctools, or target/<profile>/deps/<test> for test binaries.
        for d in exe.ancestors().skip(1).take(2) {
            dirs.push(d.to_path_buf());
        }
    }
    for d in &dirs {
        let p = d.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!("cannot find the {name} binary (looked in {dirs:?}); build it first: cargo build --release --workspace")
}

/// The command line that runs binary `exe`'s `subcommand` with `args`.
pub fn command_line<T: clap::Args + serde::Serialize>(exe: &str, subcommand: &str, args: &T) -> Result<Vec<String>> {
    let mut line = vec![bin(exe)?.display().to_string(), subcommand.to_string()];
    line.extend(argv::to_args(args)?);
    Ok(line)
}

/// `pfctools gen` sending to `dst_mac` with every other argument at its default (the
/// harness fills in the interface).
pub fn gen_to(dst_mac: MacAddr) -> GenArgs {
    argv::with_defaults(serde_json::json!({ "iface": "", "dst_mac": dst_mac })).expect("gen's defaults parse")
}

/// `pfctools sink` with every argument at its default (the harness fills in the interface).
pub fn sink_defaults() -> SinkArgs {
    argv::with_defaults(serde_json::json!({ "iface": "" })).expect("sink's defaults parse")
}

/// `pfctools storm` on `iface` with every other argument at its default.
pub fn storm_defaults(iface: &str) -> StormArgs {
    argv::with_defaults(serde_json::json!({ "iface": [iface] })).expect("storm's defaults parse")
}

/// Default control socket of a switch named `name` (when not started by the harness).
pub fn default_socket(name: &str) -> PathBuf {
    control::socket_path(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  2073375 0 358177 1805162 4362 0 493600 20204 0 0
cpu0 1009757 0 194071 915917 2623 0 242625 10366 0 0
cpu1 1063618 0 164105 889244 1739 0 250975 9838 0 0
intr 1 2 3
ctxt 88
";

    #[test]
    fn repeats_wait_longer_each_time_up_to_eight_times_the_first_pause() {
        let waits: Vec<u64> = (1..=6).map(|n| retry_pause(RETRY_PAUSE, n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 8, 8]);
        assert_eq!(retry_pause(Duration::ZERO, 3), Duration::ZERO);
    }

    #[test]
    fn steal_is_read_per_cpu_from_the_eighth_column_and_the_total_line_is_left_out() {
        let s = HostSteal::parse(STAT, Duration::from_millis(10));
        assert_eq!(s, HostSteal(vec![Duration::from_millis(103_660), Duration::from_millis(98_380)]));
    }

    #[test]
    fn what_the_host_took_is_the_largest_growth_on_one_cpu() {
        let tick = Duration::from_millis(10);
        let before = HostSteal::parse(STAT, tick);
        let after = HostSteal::parse(&STAT.replace(" 10366 ", " 10368 ").replace(" 9838 ", " 9848 "), tick);
        assert_eq!(after.most_since(&before), Duration::from_millis(100));
        assert_eq!(before.most_since(&before), Duration::ZERO);
        assert_eq!(after.most_since(&HostSteal::default()), Duration::ZERO, "nothing to compare with");
    }
}
