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

/// The simulator's progress bar is drawn on a terminal's stderr, and never into a pipe (a
/// file, a test's capture) or beside `--json`.
#[test]
fn a_progress_bar_is_drawn_on_a_terminal_and_nowhere_else() {
    let bin = env!("CARGO_BIN_EXE_pfctools");
    let piped = Command::new(bin).args(["sim", "--scenario", "fattree-dcqcn"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&piped.stderr);
    assert!(piped.status.success(), "{stderr}");
    assert!(!stderr.contains("µs simulated") && !stderr.contains('\x1b'), "{stderr}");
    // On a terminal (script(1) gives the program one): the bar, then the summary line.
    let on_tty = |extra: &str| {
        let cmd = format!("{bin} sim --scenario fattree-dcqcn {extra} > /dev/null");
        let out = Command::new("script").args(["-qfec", &cmd, "/dev/null"]).output().expect("script (util-linux)");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let shown = on_tty("");
    assert!(shown.contains("µs simulated") && shown.contains("simulated 40.0 ms in"), "{shown}");
    assert!(!on_tty("--json").contains("µs simulated"), "no bar with --json");
}
