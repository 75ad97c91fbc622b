//! The fabric split over the ranks of an MPI job reports byte for byte as one rank
//! (`cargo test --release -p pfcsim --features mpi --test mpi`; needs `mpirun`).
#![cfg(feature = "mpi")]

use std::process::Command;

const PFCSIM: &str = env!("CARGO_BIN_EXE_pfcsim");

/// The `--json` report of `pfcsim ARGS`, alone or as `ranks` ranks of an MPI job.
fn report(scenario: &str, seed: u64, ranks: Option<usize>) -> Vec<u8> {
    let seed = seed.to_string();
    let args = ["--scenario", scenario, "--seed", &seed, "--json"];
    let out = match ranks {
        None => Command::new(PFCSIM).args(args).output(),
        // Root and more ranks than cores are allowed: the tests run as root on 2 cores.
        Some(n) => Command::new("mpirun")
            .args(["--allow-run-as-root", "--oversubscribe", "-np", &n.to_string(), PFCSIM])
            .args(args)
            .arg("--mpi")
            .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
            .output(),
    }
    .unwrap_or_else(|e| panic!("running {scenario}: {e} (mpirun comes with Debian's openmpi-bin: scripts/setup.sh)"));
    assert!(out.status.success(), "{scenario} over {ranks:?} ranks: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn scenarios_over_two_and_three_mpi_ranks_report_as_one_rank_does() {
    for scenario in ["ring-deadlock", "fattree-storm", "fattree-bounce", "dcqcn-convergence"] {
        for seed in [1, 2] {
            let one = report(scenario, seed, None);
            assert!(one.len() > 1000);
            assert!(one == report(scenario, seed, Some(2)), "{scenario} seed {seed} over 2 ranks");
        }
        assert!(report(scenario, 1, None) == report(scenario, 1, Some(3)), "{scenario} over 3 ranks");
    }
}

#[test]
fn a_sweep_over_mpi_ranks_writes_the_reports_the_runs_give_alone() {
    let out = std::env::temp_dir().join(format!("pfcsim-mpi-sweep-{}", std::process::id()));
    let status = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2", PFCSIM, "sweep", "--mpi", "--jobs", "1"])
        .args(["--scenarios", "ring-deadlock,headroom", "--seeds", "1,2", "--out"])
        .arg(&out)
        .status()
        .expect("mpirun (openmpi-bin: scripts/setup.sh)");
    assert!(status.success());
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
