//! pfcswitch as a Mininet switch (`integrations/mininet/pfcswitch_mn.py`): Debian's Mininet
//! builds a small network through it, inside a namespace of the test's own, and a PFC
//! storm pauses a lossless flow through it.

use std::process::Command;

use netns_tests::*;
use serde_json::Value;

/// A namespace of the test's own, deleted when dropped (also when the test fails):
/// Mininet makes its links and runs the switch in the namespace it is started in.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = unique_name(tag);
        assert!(Command::new("ip").args(["netns", "add", &name]).status().unwrap().success());
        let ns = Netns(name);
        assert!(ns.exec(&["ip", "link", "set", "lo", "up"]).status().unwrap().success());
        ns
    }

    fn exec(&self, argv: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0]).args(argv);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn mininet_builds_a_network_through_pfcswitch_and_a_pfc_storm_pauses_its_lossless_flow_back_to_the_sender() {
    let _serial = serial();
    let ns = Netns::new("mn");
    let bin_dir = harness::bin("pfcswitch").unwrap().parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/../integrations/mininet/demo.py");
    // Debian's Python: the one the mininet package installs into (mn's own interpreter).
    let out = ns.exec(&["env", &format!("PATH={path}"), "timeout", "120", "/usr/bin/python3", demo]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo.py: {stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let (run, end) = (&lines[0], &lines[1]);
    assert_eq!(run["ping_loss_percent"], 0.0, "every host reaches every other: {stderr}");
    let sent = run["gen"]["sent"].as_u64().unwrap();
    let port = |iface: &str| &run["ports"][iface];
    let (h1, h3) = (port("s1-eth1"), port("s1-eth3"));
    let count = |p: &Value, field: &str| p["priorities"][3][field].as_u64().unwrap();
    eprintln!(
        "h1 sent {sent} priority-3 frames; h3's PFC frames {}; the switch paused h1 {} times; to h3: {} sent, {} dropped by the watchdog",
        count(h3, "xoff_received"),
        count(h1, "xoff_sent"),
        count(h3, "tx_frames"),
        h3["drops"]["watchdog"]
    );
    assert_eq!(sent, 2500, "h1 sent every frame it was given: {}", run["gen"]);
    assert!(count(h3, "xoff_received") >= 20, "h3's storm reached the switch: {h3}");
    assert!(count(h1, "xoff_sent") >= 1, "the held frames filled h1's ingress and the switch paused h1: {h1}");
    assert_eq!(h3["drops"]["lossless"], 0, "nothing lost for want of buffer");
    assert!(run["pfcstat"].as_str().unwrap().contains("Port Rx"));
    assert_eq!(end["switch_exit_status"], 0, "pfcswitch stopped cleanly before Mininet deleted its links");
}
