//! Workloads (flow sizes from a distribution, Poisson arrivals), their completion times,
//! the monitor's series, and what DCQCN changes in an incast and on a fat-tree: exact,
//! deterministic runs; the figures each assertion leaves room around are in its comment.

use pfcsim::scenario::Scenario;
use pfcsim::{simulate, SimReport};

fn run(s: &Scenario) -> SimReport {
    simulate(s, 1, None).unwrap().report
}

/// The built-in scenario `name` as it is, and with its `[dcqcn]` table removed (the
/// hosts open loop, PFC alone).
fn with_and_without_dcqcn(name: &str) -> (SimReport, SimReport) {
    let mut s = Scenario::built_in(name).unwrap();
    let braked = run(&s);
    s.dcqcn = None;
    (braked, run(&s))
}

/// Pause frames sent over the whole run, and the link directions that were ever paused.
fn pauses(r: &SimReport) -> (u64, usize) {
    let frames = r.links.iter().map(|l| l.pause_frames).sum();
    let ports = r.links.iter().filter(|l| l.paused_us.iter().any(|&v| v > 0.0)).count();
    (frames, ports)
}

#[test]
fn a_flow_alone_on_an_empty_fabric_completes_in_exactly_its_ideal_time() {
    // Across the core of a fat-tree (five links, store and forward at each), whole frames.
    let s = Scenario::from_toml(
        r#"
        topology = "fattree:k=4"
        speed = "100G"
        cable_m = 10
        duration_ms = 1
        drain_ms = 1
        [[flow]]
        from = "h-edge0-0-0"
        to = "h-edge3-1-1"
        size = 1518
        load = 100
        count = 500
        "#,
    )
    .unwrap();
    let f = &run(&s).flows[0];
    assert_eq!(f.received, 500);
    // Six links of 10 m. A frame takes 124 ns on each (1538 bytes at 100G, 123.04 ns,
    // in the simulator's whole nanoseconds) and 50 on its cable: 499 frames after the
    // first one's 6 × 174 ns, 62.92 µs.
    let (fct, ideal) = (f.fct_us.unwrap(), f.ideal_fct_us.unwrap());
    assert_eq!(ideal, 62.92);
    assert_eq!(fct, ideal);
}

#[test]
fn sparse_workload_flows_of_any_size_complete_in_their_ideal_time_last_short_frame_included() {
    // Sizes uniform up to 20 kB (most flows end in a short frame), one sender, so rarely
    // that no two flows overlap.
    let cdf = std::env::temp_dir().join(format!("pfcsim-uniform-{}.cdf", std::process::id()));
    std::fs::write(&cdf, "# uniform\n0 0\n20000 100\n").unwrap();
    let s = Scenario::from_toml(&format!(
        r#"
        topology = "fattree:k=4"
        speed = "100G"
        duration_ms = 20
        drain_ms = 1
        [[workload]]
        sizes = "{}"
        load = 0.1
        from = "h-edge0-0-0"
        "#,
        cdf.display()
    ))
    .unwrap();
    let r = run(&s);
    std::fs::remove_file(&cdf).unwrap();
    let fct = r.fct.as_ref().unwrap();
    // 0.1 % of 100G in flows of 10 kB on average: 1.2 a ms, 24 in 20 ms.
    assert!((10..50).contains(&fct.flows), "{} flows", fct.flows);
    assert_eq!(fct.completed, fct.flows);
    for f in &r.flows {
        let bytes = f.bytes.unwrap();
        assert_eq!(f.sent, bytes.div_ceil(1472), "flow {} of {bytes} bytes", f.id);
        assert_eq!(
            f.slowdown,
            Some(1.0),
            "flow {} of {bytes} bytes: {:?} against {:?}",
            f.id,
            f.fct_us,
            f.ideal_fct_us
        );
    }
    assert_eq!(fct.all.slowdown_p99, 1.0);
}

#[test]
fn the_web_search_workload_starts_as_many_flows_as_its_load_asks() {
    let s = Scenario::from_toml(
        r#"
        topology = "fattree:k=4"
        speed = "100G"
        duration_ms = 10
        drain_ms = 0
        [[workload]]
        sizes = "web-search"
        load = 50
        "#,
    )
    .unwrap();
    let fabric = pfcsim::fabric::Fabric::build(&s, 1).unwrap();
    // 16 hosts × 10 ms × 50 % of 12.5 GB/s over 1.71 MB per flow (with its frames'
    // headers: × 1538/1472) = 559.6 flows; the Poisson count's σ is 23.7.
    let n = fabric.flows.len() as f64;
    assert!((n - 559.6).abs() < 5.0 * 23.7, "{n} flows");
    assert!(fabric.flows.iter().all(|f| f.from != f.to && f.bytes.is_some()));
    let bytes: u64 = fabric.flows.iter().filter_map(|f| f.bytes).sum();
    // Heavy-tailed sizes: the total is looser than the count.
    let asked = 16.0 * 0.010 * 0.5 * 12.5e9 * 1472.0 / 1538.0;
    assert!((bytes as f64 / asked - 1.0).abs() < 0.35, "{bytes} bytes against {asked}");
}

#[test]
fn at_a_held_queue_depth_the_switch_marks_the_fraction_its_profile_gives() {
    // h1 sends at line rate into h3's 100G port; h2 adds 30 frames at the start, so the
    // queue holds 30 frames (45 540 bytes, one frame more while one arrives) for as long
    // as h1 sends: every frame of h1's meets that depth. The profile: 10 000 to 100 000
    // bytes, 50 % at the top.
    let s = Scenario::from_toml(
        r#"
        speed = "100G"
        duration_ms = 2
        drain_ms = 1
        [topology]
        host = [{ name = "h1" }, { name = "h2" }, { name = "h3" }]
        switch = [{ name = "sw" }]
        link = [{ a = "h1:eth0", b = "sw:p1" }, { a = "h2:eth0", b = "sw:p2" }, { a = "h3:eth0", b = "sw:p3" }]
        [switch_defaults.pfc]
        lossless = [3]
        [switch_defaults.wred.priority.3]
        green_min_threshold = 10000
        green_max_threshold = 100000
        green_drop_probability = 50
        [monitor]
        every_us = 20
        queues = ["sw:p3"]
        [[flow]]
        from = "h1"
        to = "h3"
        size = 1518
        load = 100
        ecn = 2
        [[flow]]
        from = "h2"
        to = "h3"
        size = 1518
        load = 100
        count = 30
        ecn = 2
        "#,
    )
    .unwrap();
    let r = run(&s);
    let q = &r.series.as_ref().unwrap().queues[0];
    // Held: every sample while h1 sends (after the first 20 µs) within a frame of 30.
    let frame = 1518 - 4;
    let held = &q.bytes[1..(2000 / 20) - 1];
    assert!(held.iter().all(|&b| b.abs_diff(30 * frame) <= frame), "{held:?}");
    let f = &r.flows[0];
    let fraction = f.ce as f64 / f.received as f64;
    // The chance at 29 and 30 frames queued: 50 % × (depth − 10 000) / 90 000.
    let p = |frames: u64| 0.5 * (frames * frame) as f64 / 90_000.0 - 0.5 * 10_000.0 / 90_000.0;
    let (lo, hi) = (p(29), p(30));
    let sigma = (hi * (1.0 - hi) / f.received as f64).sqrt();
    eprintln!("{} of {} frames marked: {fraction:.4}, the profile gives {lo:.4} to {hi:.4}", f.ce, f.received);
    assert!(fraction > lo - 4.0 * sigma && fraction < hi + 4.0 * sigma);
    assert_eq!(r.lossless_lost, 0);
}

#[test]
fn in_an_incast_dcqcn_keeps_the_queue_in_the_marking_band_and_cuts_the_pauses_twentyfold() {
    let (braked, open) = with_and_without_dcqcn("incast-dcqcn");
    let ((braked_pauses, _), (open_pauses, _)) = (pauses(&braked), pauses(&open));
    let queue = &braked.series.as_ref().unwrap().queues[0];
    let every = braked.series.as_ref().unwrap().every_us;
    // From 1 ms, after DCQCN's first cuts, to 6.5 ms (flows finish from 3.8 ms on, the
    // last at 8.2 ms: DCQCN shares the port unevenly, and the scenario runs 12 ms).
    let settled = &queue.bytes[(1000.0 / every) as usize..(6500.0 / every) as usize];
    let highest = settled.iter().copied().max().unwrap();
    let open_queue = &open.series.as_ref().unwrap().queues[0].bytes;
    eprintln!(
        "pause frames: {open_pauses} open loop, {braked_pauses} under DCQCN; queue from 1 to 6.5 ms at most {highest} \
         bytes (open loop: {} bytes)",
        open_queue[(3000.0 / every) as usize]
    );
    for r in [&braked, &open] {
        assert_eq!(r.lossless_lost, 0);
        assert!(r.flows.iter().all(|f| f.fct_us.is_some()));
    }
    // 6704 pause frames open loop, 320 under DCQCN, all of them in the first few cuts.
    assert!(braked_pauses * 15 < open_pauses, "{open_pauses} -> {braked_pauses}");
    // Settled, the queue never reaches the top of the marking band (64 KiB); at most
    // 45.8 KiB measured. Open loop it sits at XOFF (761 KiB).
    assert!(highest < 64 * 1024, "{highest}");
    assert!(open_queue[(3000.0 / every) as usize] > 512 * 1024);
}

#[test]
fn on_a_fat_tree_at_half_load_dcqcn_loses_nothing_pauses_fewer_ports_and_speeds_up_small_flows() {
    let (braked, open) = with_and_without_dcqcn("fattree-dcqcn");
    let ((bp, bports), (op, oports)) = (pauses(&braked), pauses(&open));
    let small = |r: &SimReport| r.fct.as_ref().unwrap().buckets[0].slowdown_p99;
    eprintln!(
        "pause frames {op} -> {bp}, ports paused {oports} -> {bports}, small flows' p99 slowdown {:.1} -> {:.1}",
        small(&open),
        small(&braked)
    );
    for r in [&braked, &open] {
        let fct = r.fct.as_ref().unwrap();
        assert_eq!((r.lossless_lost, r.lossless_dropped), (0, 0));
        assert_eq!(fct.completed, fct.flows);
    }
    // Measured: 54 444 pause frames against 2522, 52 paused ports against 47, and a p99
    // slowdown of flows under 10 KB of 146 against 26.
    assert!(bports < oports);
    assert!(bp * 10 < op, "{op} -> {bp}");
    assert!(small(&braked) * 3.0 < small(&open));
}

#[test]
fn a_workload_or_monitor_that_names_what_is_not_there_is_refused_with_the_field_named() {
    let base = "topology = \"fattree:k=4\"\n";
    let err = |extra: &str| match Scenario::from_toml(&format!("{base}{extra}")) {
        Err(e) => e.to_string(),
        Ok(s) => match simulate(&s, 1, None) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{extra} was accepted"),
        },
    };
    assert!(err("[[workload]]\nsizes = \"mice\"\nload = 50\n").contains("workload[0].sizes"));
    assert!(err("[[workload]]\nsizes = \"hadoop\"\nload = 150\n").contains("workload[0].load"));
    assert!(err("[[workload]]\nsizes = \"hadoop\"\nload = 50\nto = \"h9\"\n").contains("no host \"h9\""));
    assert!(err("[[workload]]\nsizes = \"hadoop\"\nload = 50\nframe = 9000\n").contains("workload[0].frame"));
    assert!(err("[monitor]\nqueues = [\"edge0-0:nope\"]\n").contains("monitor.queues"));
    assert!(err("[monitor]\nqueues = [\"h-edge0-0-0\"]\n").contains("a host's"));
    assert!(err("[monitor]\nflows = [3]\n").contains("no flow 3"));
    assert!(err("[monitor]\nevery_us = 0.001\n").contains("monitor.every_us"));
    // Tagger's tables are for each flow's hashed path, which adaptive routing leaves.
    let flow = "[[flow]]\nfrom = \"h-edge0-0-0\"\nto = \"h-edge3-1-1\"\nrate_fps = 1000\n";
    for routing in ["adaptive", "flowlet"] {
        assert!(err(&format!("tagger = true\nrouting = \"{routing}\"\n{flow}")).contains("Tagger's tables"));
    }
}

/// A k=4 fat-tree at 100G running the flows of `file`, in `format`.
fn with_flow_file(file: &std::path::Path, format: &str) -> Scenario {
    Scenario::from_toml(&format!(
        "topology = \"fattree:k=4\"\nspeed = \"100G\"\ncable_m = 10\nduration_ms = 2\ndrain_ms = 0\n\
         [[flow_file]]\npath = \"{}\"\nformat = \"{format}\"\n",
        file.display()
    ))
    .unwrap()
}

#[test]
fn an_htsim_matrix_and_an_hpcc_flow_file_run_their_flows_between_the_hosts_they_number() {
    let dir = std::env::temp_dir().join(format!("pfcsim-flow-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Host 0 is under edge 0 of pod 0, host 15 under edge 1 of pod 3 (host i under edge
    // i / 2, as htsim and HPCC number a k=4 fat-tree's hosts).
    let htsim = dir.join("m.cm");
    std::fs::write(&htsim, "Nodes 16\nConnections 2\n0->15 start 0 size 100000\n5->2 start 10 size 1000\n").unwrap();
    let hpcc = dir.join("flow.txt");
    std::fs::write(&hpcc, "2\n0 15 3 100 100000 0\n5 2 3 100 1000 0.00001\n").unwrap();
    let reports = [run(&with_flow_file(&htsim, "htsim")), run(&with_flow_file(&hpcc, "hpcc"))];
    std::fs::remove_dir_all(&dir).unwrap();
    for r in &reports {
        let ends: Vec<(&str, &str, Option<u64>, Option<f64>)> =
            r.flows.iter().map(|f| (f.from.as_str(), f.to.as_str(), f.bytes, f.start_us)).collect();
        assert_eq!(
            ends,
            [
                ("h-edge0-0-0", "h-edge3-1-1", Some(100_000), Some(0.0)),
                ("h-edge1-0-1", "h-edge0-1-0", Some(1000), Some(10.0))
            ]
        );
        assert!(r.flows.iter().all(|f| f.fct_us.is_some() && f.lost == 0), "{:?}", r.flows);
    }
    // The two formats say the same flows: the same report.
    assert_eq!(serde_json::to_string(&reports[0]).unwrap(), serde_json::to_string(&reports[1]).unwrap());
    // And as CSV, a row per flow with its figures.
    let csv = pfcsim::fct_csv(&reports[0].flows);
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows[0], ["src", "dst", "size_bytes", "start_us", "fct_us", "ideal_fct_us", "slowdown"]);
    assert_eq!((rows.len(), rows[2][..4].to_vec()), (3, vec!["h-edge1-0-1", "h-edge0-1-0", "1000", "10"]));
    let slowdown: f64 = rows[1][6].parse().unwrap();
    assert!(slowdown >= 1.0, "{csv}");
}

#[test]
fn a_flow_file_naming_a_host_the_topology_lacks_is_refused_with_its_line() {
    let dir = std::env::temp_dir().join(format!("pfcsim-bad-flow-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let htsim = dir.join("m.cm");
    std::fs::write(&htsim, "Nodes 32\nConnections 1\n0->31 start 0 size 1000\n").unwrap();
    let err = pfcsim::fabric::Fabric::build(&with_flow_file(&htsim, "htsim"), 1).err().unwrap().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(err.contains("flow_file[0]") && err.contains("0->31: the topology has 16 hosts"), "{err}");
}

#[test]
fn a_flow_files_dscp_above_63_is_refused_as_a_workloads_is() {
    let text = "topology = \"fattree:k=4\"\nspeed = \"100G\"\ncable_m = 10\nduration_ms = 1\ndrain_ms = 0\n\
                [[flow_file]]\npath = \"m.cm\"\nformat = \"htsim\"\ndscp = 64\n";
    let err = Scenario::from_toml(text).unwrap_err().to_string();
    assert!(err.contains("flow_file[0]") && err.contains("dscp 0..=63"), "{err}");
}

#[test]
fn in_a_parking_lot_each_switch_crossed_halves_a_senders_share_and_the_nearest_finishes_first() {
    // Four equal senders on a chain of four switches, into one receiver under the last.
    // Each switch serves its host port and the chain's port alike (both sit at XOFF, one
    // FIFO between them): h4 gets a half of r's link, h3 a quarter, h1 and h2 an eighth.
    let r = run(&Scenario::built_in("parking-lot").unwrap());
    assert_eq!(r.lossless_lost, 0);
    let fct = |from: &str| {
        let f = r.flows.iter().find(|f| f.from == from).unwrap();
        assert_eq!(f.received, 2000, "{from}");
        (f.fct_us.unwrap(), f.ideal_fct_us.unwrap())
    };
    let (h1, ideal) = fct("h1");
    let ((h2, _), (h3, _), (h4, _)) = (fct("h2"), fct("h3"), fct("h4"));
    // h4 at half the line rate throughout: twice its time alone (3 % for the first
    // frames, before the queues reach XOFF, and the pauses' granularity).
    assert!((h4 / ideal - 2.0).abs() < 0.06, "h4 {h4} µs, ideal {ideal}");
    // h3 at a quarter until h4 is done, then at a half: 1.55 MB then 1.48 MB, 3 ideal
    // times in all.
    assert!((h3 / ideal - 3.0).abs() < 0.09, "h3 {h3} µs, ideal {ideal}");
    // h1 and h2 alike, and last: when every byte has crossed r's link, 4 ideal times.
    assert!((h1 - h2).abs() / h1 < 0.01, "h1 {h1} µs, h2 {h2}");
    assert!((h1 / ideal - 4.0).abs() < 0.12, "h1 {h1} µs, ideal {ideal}");
}

#[test]
fn another_ecmp_seed_moves_flows_to_other_paths_and_the_default_is_the_switch_index() {
    let text = |seed: u64| {
        format!(
            r#"
            topology = "fattree:k=4"
            speed = "100G"
            duration_ms = 1
            ecmp_seed = {seed}
            [[flow]]
            from = "*"
            to = "*"
            size = 1518
            load = 10
            count = 20
            "#
        )
    };
    let links = |seed: u64| {
        let r = run(&Scenario::from_toml(&text(seed)).unwrap());
        assert_eq!(r.lossless_lost, 0);
        r.links.iter().filter(|l| l.frames > 0).map(|l| format!("{}>{}", l.from, l.to)).collect::<Vec<_>>()
    };
    let (zero, other) = (links(0), links(u64::MAX));
    assert_ne!(zero, other, "the seed moves some flows");
    assert_eq!(links(0), zero, "a seed gives the same paths every run");
}

#[test]
fn adaptive_routing_puts_frames_on_every_aggregation_to_core_link_where_a_hash_per_flow_leaves_some_idle() {
    // A k=4 permutation: about four flows leave each pod, over its four uplinks.
    let used = |r: &SimReport, from: &str, to: &str| {
        let links: Vec<_> = r.links.iter().filter(|l| l.from.starts_with(from) && l.to.starts_with(to)).collect();
        (links.iter().filter(|l| l.frames > 0).count(), links.len())
    };
    let (hashed, adaptive) = (permutation_k4("ecmp", "accept"), permutation_k4("adaptive", "accept"));
    for r in [&hashed, &adaptive] {
        assert!(r.flows.iter().all(|f| f.lost == 0 && f.received == 200 && f.fct_us.is_some()), "{:?}", r.flows);
    }
    let (h, a) = (used(&hashed, "agg", "core"), used(&adaptive, "agg", "core"));
    assert!(h.0 < h.1, "a hash per flow leaves some uplink idle: {h:?}");
    assert_eq!(a.0, a.1, "every uplink carries frames");
    assert_eq!(used(&adaptive, "core", "agg"), (16, 16), "and every downlink");
    // Frames of one flow take several paths, so some arrive out of order; a flow's
    // frames under a hash never do.
    assert!(adaptive.flows.iter().any(|f| f.reordered > 0));
    assert!(hashed.flows.iter().all(|f| f.reordered == 0));
}

/// A k=4 permutation of 200 frames a flow at line rate on lossless priority 3, routed as
/// `routing` says, received as `out_of_order` says.
fn permutation_k4(routing: &str, out_of_order: &str) -> SimReport {
    run(&Scenario::from_toml(&format!(
        r#"
        topology = "fattree:k=4"
        speed = "100G"
        duration_ms = 2
        routing = "{routing}"
        [host_defaults]
        out_of_order = "{out_of_order}"
        [switch_defaults.pfc]
        lossless = [3]
        [[flow]]
        from = "*"
        to = "*"
        priority = 3
        load = 100
        count = 200
        "#
    ))
    .unwrap())
}

#[test]
fn a_go_back_n_receiver_drops_what_comes_after_a_gap_and_its_sender_sends_again_from_the_gap() {
    let r = permutation_k4("adaptive", "go-back-n");
    for f in &r.flows {
        assert!(f.received == 200 && f.lost == 0 && f.fct_us.is_some(), "every flow arrives whole: {f:?}");
        // A flow goes back exactly when its receiver dropped frames for their order.
        assert_eq!(f.reordered > 0, f.sent_again > 0, "{f:?}");
    }
    assert!(r.flows.iter().any(|f| f.sent_again > 0), "adaptive routing reorders some flow");
    let taken = permutation_k4("adaptive", "accept");
    let fct = |r: &SimReport| r.flows.iter().filter_map(|f| f.fct_us).fold(0.0, f64::max);
    assert!(fct(&r) > fct(&taken), "going back costs time: {} against {}", fct(&r), fct(&taken));
    assert!(taken.flows.iter().all(|f| f.sent_again == 0));
}

#[test]
fn without_reordering_a_go_back_n_receiver_changes_nothing() {
    // A hash per flow keeps each flow's frames in order: no NAK, the same report.
    let json = |r: &SimReport| serde_json::to_string(r).unwrap();
    assert_eq!(json(&permutation_k4("ecmp", "go-back-n")), json(&permutation_k4("ecmp", "accept")));
}

#[test]
fn flowlet_routing_keeps_a_line_rate_flows_frames_on_one_path_and_in_order() {
    // A flow at line rate never pauses 10 µs unless PFC stops it: its first frame's
    // choice holds, and a go-back-N receiver has nothing to ask for.
    let r = permutation_k4("flowlet", "go-back-n");
    for f in &r.flows {
        assert!(f.received == 200 && f.lost == 0 && f.reordered == 0 && f.sent_again == 0, "{f:?}");
    }
}
