//! A fabric split over ranks gives the one-rank run's report and captures, byte for byte.

use pfcsim::scenario::{Scenario, BUILT_IN};
use pfcsim::split::Partition;
use pfcsim::{simulate_recording, simulate_split};

fn json(o: &pfcsim::Outcome) -> String {
    serde_json::to_string(&o.report).unwrap()
}

#[test]
fn every_built_in_scenario_reports_the_same_over_two_and_three_ranks_as_over_one() {
    let _split = crate::one_split_at_a_time();
    for (name, _, _) in BUILT_IN {
        let s = Scenario::built_in(name).unwrap();
        for seed in [1, 2] {
            let (one, _) = simulate_recording(&s, seed, None, &[]).unwrap();
            // Three ranks at one seed: a rank with nothing but the core, or nothing at all.
            for ranks in if seed == 1 { &[2, 3][..] } else { &[2][..] } {
                let (split, _) = simulate_split(&s, seed, None, &[], *ranks).unwrap();
                assert!(json(&one) == json(&split), "{name} seed {seed} over {ranks} ranks differs from one rank");
            }
        }
    }
}

#[test]
fn the_frames_a_port_sends_and_the_pcaps_are_the_same_split_or_not() {
    let _split = crate::one_split_at_a_time();
    let s = Scenario::built_in("fattree-storm").unwrap();
    let dir = std::env::temp_dir().join(format!("pfcsim-split-{}", std::process::id()));
    let (one_dir, split_dir) = (dir.join("one"), dir.join("split"));
    simulate_recording(&s, 1, Some(&one_dir), &[]).unwrap();
    simulate_split(&s, 1, Some(&split_dir), &[], 2).unwrap();
    let mut files: Vec<_> = std::fs::read_dir(&one_dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    files.sort();
    assert!(files.len() > 10);
    for f in files {
        let (a, b) = (std::fs::read(one_dir.join(&f)).unwrap(), std::fs::read(split_dir.join(&f)).unwrap());
        assert!(a == b, "{f:?} differs");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn frames_recorded_at_ports_of_different_ranks_come_back_in_the_one_rank_order() {
    let _split = crate::one_split_at_a_time();
    let s = Scenario::built_in("headroom").unwrap();
    let record = ["dut:p2", "tx", "rx"];
    let (_, one) = simulate_recording(&s, 1, None, &record).unwrap();
    for ranks in [2, 3] {
        let (_, split) = simulate_split(&s, 1, None, &record, ranks).unwrap();
        assert!(one.len() > 1000 && one == split, "over {ranks} ranks");
    }
}

#[test]
fn a_fat_tree_splits_by_pod_and_its_lookahead_is_a_crossing_links_least_delay() {
    let s = Scenario::built_in("fattree-storm").unwrap();
    let fabric = pfcsim::fabric::Fabric::build(&s, 1).unwrap();
    let p = Partition::new(&fabric, 2);
    let text = p.describe(&fabric);
    assert!(text.contains("rank 0") && text.contains("rank 1"), "{text}");
    assert!(p.lookahead(&fabric).is_some());
    assert_eq!(Partition::new(&fabric, 1).lookahead(&fabric), None, "one rank: nothing crosses");
}
