//! The fabric split over the ranks of an MPI job reports byte for byte as one rank
//! (`cargo test --release -p pfcsim --features mpi --test sim mpi::`; needs `mpirun`).
#![cfg(feature = "mpi")]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

const PFCSIM: &str = env!("CARGO_BIN_EXE_pfcsim");

/// `mpirun ARGS` to its end, with a session directory of its own. OpenMPI 4 makes
/// `$TMPDIR/ompi.HOST.UID` for every job of a user, and two jobs starting at once race
/// to create it: the loser fails in `orte_init` ("mkdir: File exists", open-mpi/ompi#8510).
/// This file's tests run at once, and a clean-clone suite beside `yes` lost that race.
/// Root and more ranks than cores are allowed: the tests run as root on 2 cores.
fn mpirun(args: &[&str]) -> Output {
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let session: PathBuf = std::env::temp_dir().join(format!("pfcsim-mpi-session-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&session).expect("a session directory for mpirun");
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "--mca", "orte_tmpdir_base"])
        .arg(&session)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("mpirun {args:?}: {e} (mpirun comes with Debian's openmpi-bin: scripts/setup.sh)"));
    let _ = std::fs::remove_dir_all(&session);
    out
}

/// The `--json` report of `pfcsim ARGS`, alone or as `ranks` ranks of an MPI job.
fn report(scenario: &str, seed: u64, ranks: Option<usize>) -> Vec<u8> {
    let seed = seed.to_string();
    let args = ["--scenario", scenario, "--seed", &seed, "--json"];
    let out = match ranks {
        None => Command::new(PFCSIM).args(args).output().unwrap_or_else(|e| panic!("running {scenario}: {e}")),
        Some(n) => mpirun(&[&["-np", &n.to_string(), PFCSIM], &args[..], &["--mpi"]].concat()),
    };
    assert!(out.status.success(), "{scenario} over {ranks:?} ranks: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn scenarios_over_two_and_three_mpi_ranks_report_as_one_rank_does() {
    let _split = crate::one_split_at_a_time();
    for scenario in ["ring-deadlock", "fattree-storm", "fattree-bounce", "dcqcn-convergence"] {
        for seed in [1, 2] {
            let one = report(scenario, seed, None);
            assert!(one.len() > 1000);
            assert!(one == report(scenario, seed, Some(2)), "{scenario} seed {seed} over 2 ranks");
            if seed == 1 {
                assert!(one == report(scenario, 1, Some(3)), "{scenario} over 3 ranks");
            }
        }
    }
}

#[test]
fn a_sweep_over_mpi_ranks_writes_the_reports_the_runs_give_alone() {
    let _split = crate::one_split_at_a_time();
    let out = std::env::temp_dir().join(format!("pfcsim-mpi-sweep-{}", std::process::id()));
    let out_dir = out.display().to_string();
    let done = mpirun(&[
        "-np",
        "2",
        PFCSIM,
        "sweep",
        "--mpi",
        "--jobs",
        "1",
        "--scenarios",
        "ring-deadlock,headroom",
        "--seeds",
        "1,2",
        "--out",
        &out_dir,
    ]);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    for scenario in ["ring-deadlock", "headroom"] {
        for seed in [1, 2] {
            let written = std::fs::read(out.join(format!("{scenario}-seed{seed}.json"))).unwrap();
            // `--json` prints the same pretty JSON, and a newline.
            assert_eq!([written, b"\n".to_vec()].concat(), report(scenario, seed, None), "{scenario} seed {seed}");
        }
    }
    assert!(std::fs::read_to_string(out.join("summary.md")).unwrap().contains("ring-deadlock"));
    std::fs::remove_dir_all(&out).unwrap();
}
