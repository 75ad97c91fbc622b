//! The binary's own behaviour at its edges, run as a user runs it.

use std::io::Read;
use std::process::{Command, Stdio};

#[test]
fn output_piped_into_a_reader_that_stops_early_ends_the_program_quietly() {
    // As `pfctools sim --json | head -c 10`: the reader goes away after a few bytes, and
    // the report (megabytes of JSON) still has most of itself to write.
    let mut child = Command::new(env!("CARGO_BIN_EXE_pfctools"))
        .args(["sim", "--scenario", "fattree-storm", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 10];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(&head[..1], b"{");
    assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{stderr}");
    // 128 + SIGPIPE, as a program the signal ended.
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}
