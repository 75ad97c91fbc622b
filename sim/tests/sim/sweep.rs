//! `pfcsim sweep`: every run of the grid reports as the run alone does, and the summary
//! says what each found.

use pfcsim::scenario::Scenario;
use pfcsim::sweep::{Row, SweepArgs};

#[test]
fn a_sweep_writes_each_runs_own_report_and_a_summary_of_them_all() {
    let out = std::env::temp_dir().join(format!("pfcsim-sweep-{}", std::process::id()));
    let args = SweepArgs {
        scenarios: vec!["ring-deadlock".into(), "fattree-dcqcn".into()],
        loads: vec![20.0, 40.0],
        seeds: vec![1, 2],
        jobs: Some(2),
        out: out.clone(),
        mpi: false,
    };
    pfcsim::sweep::run(&args).unwrap();
    let rows: Vec<Row> = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    // The ring has no workload: once per seed; the fat-tree at each load and seed.
    assert_eq!(rows.len(), 2 + 2 * 2);
    for r in &rows {
        let mut s = Scenario::built_in(&r.scenario).unwrap();
        if let Some(load) = r.load {
            s = s.with_workload_load(load).unwrap();
        }
        let alone = pfcsim::simulate(&s, r.seed, None).unwrap().report;
        let written = std::fs::read_to_string(out.join(&r.report)).unwrap();
        assert_eq!(written, serde_json::to_string_pretty(&alone).unwrap(), "{}", r.report);
        assert_eq!((r.lossless_lost, r.deadlocks), (alone.lossless_lost, alone.deadlocks));
    }
    let ring = rows.iter().find(|r| r.scenario == "ring-deadlock").unwrap();
    assert!(ring.deadlocks > 0 && ring.load.is_none() && ring.slowdown_p99.is_none());
    assert!(rows.iter().filter(|r| r.load.is_some()).all(|r| r.slowdown_p99.is_some()));
    assert!(out.join("summary.md").exists() && out.join("summary.svg").exists());
    std::fs::remove_dir_all(&out).unwrap();
}
