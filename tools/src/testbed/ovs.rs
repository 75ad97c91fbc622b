//! Open vSwitch's userspace datapath with AF_XDP ports, as a device under test: the
//! switch a user would pick instead of pfcswitch. Debian's `openvswitch-switch` has it;
//! no kernel module is needed. `ovsdb-server` and `ovs-vswitchd` are started by hand in the
//! switch node's namespace, their database, sockets, pid files and logs in the testbed's
//! directory, and stopped (and waited for) when the [`Ovs`] is dropped, before the
//! testbed's namespaces go.
//!
//! The bridge is OVS's as a user makes it: `datapath_type=netdev`, every interface of the
//! node a port of `type=afxdp` with OVS's defaults (its PMD thread polls the rings; the
//! XDP mode is `best-effort`, native on a veth), and the NORMAL action (MAC learning).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{run, Testbed, TestbedError};

/// Where Debian puts the schema of OVS's database.
const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// Whether OVS's daemons are installed here.
pub fn installed() -> bool {
    ["/usr/sbin/ovs-vswitchd", "/usr/sbin/ovsdb-server"].iter().all(|p| Path::new(p).exists())
        && Path::new(SCHEMA).exists()
}

/// OVS running on one node of a testbed.
#[derive(Debug)]
pub struct Ovs {
    dir: PathBuf,
    vswitchd: u32,
    ovsdb: u32,
}

impl Ovs {
    /// Starts OVS in `node`'s namespace with a bridge over every interface of the node.
    pub fn start(tb: &Testbed, node: &str) -> Result<Ovs, TestbedError> {
        Ovs::start_with_pmd_on(tb, node, None)
    }

    /// [`Ovs::start`], its PMD thread on CPU `pmd_cpu` (`other_config:pmd-cpu-mask`) when
    /// given, where OVS otherwise picks a core itself.
    pub fn start_with_pmd_on(tb: &Testbed, node: &str, pmd_cpu: Option<usize>) -> Result<Ovs, TestbedError> {
        let ns = tb.ns(node)?;
        let dir = tb.work_dir().join(format!("ovs-{node}"));
        // A fresh database each time: a bench starts OVS for each of its runs.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|source| TestbedError::Io { what: dir.display().to_string(), source })?;
        let d = |f: &str| dir.join(f).display().to_string();
        let db = format!("unix:{}", d("db.sock"));
        run("ovsdb-tool", &["create", &d("conf.db"), SCHEMA])?;
        // Started detached in the namespace; their pid files say which processes to stop.
        run(
            "ip",
            &[
                "netns",
                "exec",
                &ns,
                "ovsdb-server",
                &d("conf.db"),
                &format!("--remote=punix:{}", d("db.sock")),
                &format!("--pidfile={}", d("ovsdb-server.pid")),
                &format!("--unixctl={}", d("ovsdb-server.ctl")),
                &format!("--log-file={}", d("ovsdb-server.log")),
                "--detach",
            ],
        )?;
        let mut ovs = Ovs { dir: dir.clone(), vswitchd: 0, ovsdb: read_pid(&dir.join("ovsdb-server.pid"))? };
        let vsctl = |args: &[&str]| {
            let mut a = vec!["--db", db.as_str(), "--timeout=10"];
            a.extend(args);
            run("ovs-vsctl", &a)
        };
        vsctl(&["--no-wait", "init"])?;
        if let Some(cpu) = pmd_cpu {
            let mask = pmd_cpu_mask(cpu).ok_or_else(|| TestbedError::Ovs(format!("no PMD mask for CPU {cpu}")))?;
            vsctl(&["--no-wait", "set", "Open_vSwitch", ".", &format!("other_config:pmd-cpu-mask={mask}")])?;
        }
        run(
            "ip",
            &[
                "netns",
                "exec",
                &ns,
                "ovs-vswitchd",
                &db,
                &format!("--pidfile={}", d("ovs-vswitchd.pid")),
                &format!("--unixctl={}", d("ovs-vswitchd.ctl")),
                &format!("--log-file={}", d("ovs-vswitchd.log")),
                "--detach",
            ],
        )?;
        ovs.vswitchd = read_pid(&dir.join("ovs-vswitchd.pid"))?;
        vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"])?;
        for i in tb.interfaces_of(node) {
            vsctl(&["add-port", "br0", &i.name, "--", "set", "interface", &i.name, "type=afxdp"])?;
        }
        // The ports are ready when OVS says so for each (its AF_XDP sockets bound).
        let deadline = Instant::now() + Duration::from_secs(20);
        for i in tb.interfaces_of(node) {
            loop {
                let state = vsctl(&["get", "interface", &i.name, "link_state"]).unwrap_or_default();
                if state.trim() == "up" {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(TestbedError::Ovs(format!(
                        "OVS did not bring {} up in 20 s (see {})",
                        i.name,
                        d("ovs-vswitchd.log")
                    )));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(ovs)
    }

    /// `ovs-vswitchd`'s process: what forwards, and whose CPU time counts.
    pub fn pid(&self) -> u32 {
        self.vswitchd
    }

    /// Where its logs are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

fn read_pid(path: &Path) -> Result<u32, TestbedError> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(pid) = std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()) {
            return Ok(pid);
        }
        if Instant::now() > deadline {
            return Err(TestbedError::Ovs(format!("no pid in {}", path.display())));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops `pid` (SIGTERM, then SIGKILL after 5 s) and waits until it is gone.
fn stop(pid: u32) {
    if pid == 0 {
        return;
    }
    let alive = || Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid);
    // SAFETY: kill has no memory preconditions; `pid` is a daemon this process started.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive() {
        // SAFETY: as above.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        while alive() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(true)
}

impl Drop for Ovs {
    fn drop(&mut self) {
        // vswitchd first: it detaches its XDP programs and closes its sockets.
        stop(self.vswitchd);
        stop(self.ovsdb);
    }
}

/// OVS's `pmd-cpu-mask` for one CPU: a hexadecimal bit mask (`0x2` for CPU 1).
fn pmd_cpu_mask(cpu: usize) -> Option<String> {
    let bit = 1u128.checked_shl(u32::try_from(cpu).ok()?)?;
    Some(format!("0x{bit:x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pmd_mask_names_one_cpu_in_hexadecimal() {
        assert_eq!(pmd_cpu_mask(0).as_deref(), Some("0x1"));
        assert_eq!(pmd_cpu_mask(1).as_deref(), Some("0x2"));
        assert_eq!(pmd_cpu_mask(12).as_deref(), Some("0x1000"));
        assert_eq!(pmd_cpu_mask(128), None);
    }
}
