//! The `tagger` binary: compute, verify, topology, and its errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tagger::system::{read_tables, SwitchTables};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("tagger-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tagger(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tagger")).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn compute(topology: &str, routes: &str, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["compute", "--topology", topology, "--routes", routes, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    tagger(&args)
}

#[test]
fn compute_writes_verified_tables_that_verify_accepts_and_a_tampered_one_fails() {
    let dir = TempDir::new("compute");
    let out = compute("fattree:k=4", "updown:bounces=1", &dir.0, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("greedy: 2 lossless tags (brute force: 9)"), "{text}");
    assert!(text.contains("verified:"), "{text}");
    assert!(text.contains("hosts stamp tag 2; tag 2 → priority 2, tag 1 → priority 1"), "{text}");
    let tables = read_tables(&dir.0).unwrap();
    assert_eq!(tables.len(), 20);
    assert!(dir.0.join("summary.txt").is_file());
    let verify = |dir: &Path| {
        tagger(&[
            "verify",
            "--topology",
            "fattree:k=4",
            "--routes",
            "updown:bounces=1",
            "--tables",
            dir.to_str().unwrap(),
        ])
    };
    let ok = verify(&dir.0);
    assert!(ok.status.success(), "{}{}", stdout(&ok), stderr(&ok));
    assert!(stdout(&ok).starts_with("OK: 2 lossless tags"), "{}", stdout(&ok));

    // One edge switch now sends a packet back up with a higher tag.
    let (file, mut tab): (String, SwitchTables) = tables.into_iter().find(|(_, t)| t.switch == "edge0-0").unwrap();
    let rule = tab.rewrite.iter_mut().find(|r| r.tag == 1).unwrap();
    rule.new_tag = 2;
    std::fs::write(&file, toml::to_string(&tab).unwrap()).unwrap();
    let bad = verify(&dir.0);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stdout(&bad).contains("FAILED: the tag rises from 1 to 2"), "{}", stdout(&bad));
    assert!(stdout(&bad).contains("edge0-0"), "{}", stdout(&bad));
}

#[test]
fn verify_takes_every_shortest_route_a_destination_at_a_time_and_a_tampered_table_fails() {
    let dir = TempDir::new("verify-shortest");
    let out = compute("ring:n=6", "shortest", &dir.0, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let verify = |threads: &str| {
        tagger(&[
            "verify",
            "--topology",
            "ring:n=6",
            "--routes",
            "shortest",
            "--tables",
            dir.0.to_str().unwrap(),
            "--threads",
            threads,
        ])
    };
    for threads in ["1", "3"] {
        let ok = verify(threads);
        assert!(ok.status.success(), "{}{}", stdout(&ok), stderr(&ok));
        assert!(stdout(&ok).starts_with("OK: 2 lossless tags"), "{}", stdout(&ok));
    }
    let tables = read_tables(&dir.0).unwrap();
    let (file, mut tab): (String, SwitchTables) =
        tables.into_iter().find(|(_, t)| t.rewrite.iter().any(|r| r.tag == 1)).unwrap();
    let rule = tab.rewrite.iter_mut().find(|r| r.tag == 1).unwrap();
    rule.new_tag = 2;
    std::fs::write(&file, toml::to_string(&tab).unwrap()).unwrap();
    for threads in ["1", "3"] {
        let bad = verify(threads);
        assert_eq!(bad.status.code(), Some(1));
        assert!(stdout(&bad).contains("FAILED: the tag rises from 1 to 2"), "{}", stdout(&bad));
        assert!(stdout(&bad).contains(&tab.switch), "{}", stdout(&bad));
    }
}

#[test]
fn json_tables_with_chosen_priorities() {
    let dir = TempDir::new("json");
    let dot = dir.0.join("tagged.dot");
    let out = compute(
        "ring:n=5",
        "shortest",
        &dir.0,
        &["--format", "json", "--priorities", "3,4", "--dot", dot.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let graph = std::fs::read_to_string(&dot).unwrap();
    assert!(graph.starts_with("digraph tagged") && graph.contains("cluster_tag2") && graph.contains("style=dashed"));
    let tables = read_tables(&dir.0).unwrap();
    assert!(tables.iter().all(|(f, _)| f.ends_with(".json")));
    assert!(tables.iter().flat_map(|(_, t)| &t.ingress).all(|e| e.priority == 3 || e.priority == 4));
    let ok = tagger(&["verify", "--topology", "ring:n=5", "--routes", "shortest", "--tables", dir.0.to_str().unwrap()]);
    assert!(ok.status.success(), "{}", stdout(&ok));
}

#[test]
fn a_topology_file_and_a_routes_file() {
    let dir = TempDir::new("files");
    let topo = tagger(&["topology", "ring:n=4"]);
    assert!(topo.status.success());
    let topo_file = dir.0.join("ring.toml");
    std::fs::write(&topo_file, topo.stdout).unwrap();
    // Two routes that chase each other around half the ring each way.
    let routes_file = dir.0.join("routes.toml");
    std::fs::write(
        &routes_file,
        r#"
        [[route]]
        path = ["h-s0-0", "s0", "s1", "s2", "h-s2-0"]
        [[route]]
        path = ["h-s2-0", "s2", "s3", "s0", "h-s0-0"]
        [[route]]
        path = ["h-s1-0", "s1", "s2", "s3", "h-s3-0"]
        [[route]]
        path = ["h-s3-0", "s3", "s0", "s1", "h-s1-0"]
        "#,
    )
    .unwrap();
    let out_dir = dir.0.join("tables");
    let routes = format!("file:{}", routes_file.display());
    let out = compute(topo_file.to_str().unwrap(), &routes, &out_dir, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    // A cycle of four dependencies around the ring: one tag is not enough.
    assert!(stdout(&out).contains("greedy: 2 lossless tags (brute force: 3)"), "{}", stdout(&out));
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = TempDir::new("errors");
    let cases: [(&[&str], &str); 6] = [
        (&["compute", "--topology", "fattree:k=3", "--routes", "updown", "--out", "x"], "k must be even"),
        (&["compute", "--topology", "nosuch/topo.toml", "--routes", "updown", "--out", "x"], "no such file"),
        (&["compute", "--topology", "ring:n=4", "--routes", "diagonal", "--out", "x"], "expected updown"),
        (
            &["compute", "--topology", "ring:n=4", "--routes", "file:/nonexistent.toml", "--out", "x"],
            "/nonexistent.toml",
        ),
        (
            &["compute", "--topology", "ring:n=6", "--routes", "shortest", "--out", "x", "--priorities", "3"],
            "2 lossless tags need 2 lossless priorities",
        ),
        (
            &["verify", "--topology", "ring:n=4", "--routes", "shortest", "--tables", dir.0.to_str().unwrap()],
            "no table files",
        ),
    ];
    for (args, msg) in cases {
        let o = tagger(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains(msg), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
}

#[test]
fn eval_quick_runs_every_small_case_in_its_own_process() {
    let o = tagger(&["eval", "--quick", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<tagger::eval::Outcome> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rows.len(), tagger::eval::CASES.iter().filter(|c| !c.big).count());
    for r in &rows {
        assert!(r.verified, "{r:?}");
        assert!(r.greedy_tags <= r.brute_tags && r.greedy_peak_mib > 0.0, "{r:?}");
    }
    let tags = |name: &str| rows.iter().find(|r| r.name == name).unwrap().greedy_tags;
    assert_eq!(tags("fat-tree k=4, up-down"), 1);
    assert_eq!(tags("fat-tree k=8, 3 bounces"), 4);
    assert_eq!(tags("leaf-spine 4×8, 2 bounces"), 3);
}

/// A 3-leaf, 2-spine leaf-spine whose leaf0 has lost both uplinks (its host reaches nobody).
fn cut_off_leaf(dir: &Path) -> PathBuf {
    let text = "[[switch]]\nname = \"spine0\"\nlayer = 1\n[[switch]]\nname = \"spine1\"\nlayer = 1\n\
                [[switch]]\nname = \"leaf0\"\nlayer = 0\n[[switch]]\nname = \"leaf1\"\nlayer = 0\n\
                [[switch]]\nname = \"leaf2\"\nlayer = 0\n\
                [[host]]\nname = \"h0\"\n[[host]]\nname = \"h1\"\n[[host]]\nname = \"h2\"\n\
                [[link]]\na = \"h0\"\nb = \"leaf0\"\n[[link]]\na = \"h1\"\nb = \"leaf1\"\n[[link]]\na = \"h2\"\nb = \"leaf2\"\n\
                [[link]]\na = \"leaf1\"\nb = \"spine0\"\n[[link]]\na = \"leaf1\"\nb = \"spine1\"\n\
                [[link]]\na = \"leaf2\"\nb = \"spine0\"\n[[link]]\na = \"leaf2\"\nb = \"spine1\"\n";
    let path = dir.join("cut.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn updown_routes_that_can_reach_no_host_are_dropped_not_a_verification_failure() {
    let dir = TempDir::new("cut-leaf");
    let topo = cut_off_leaf(&dir.0);
    for routes in ["updown", "updown:bounces=1", "shortest"] {
        let out_dir = dir.0.join(routes.replace(':', "-"));
        let out = compute(topo.to_str().unwrap(), routes, &out_dir, &[]);
        assert!(out.status.success(), "{routes}: {}{}", stdout(&out), stderr(&out));
        let tables = read_tables(&out_dir).unwrap();
        let leaf0 = tables.iter().find(|(_, t)| t.switch == "leaf0").unwrap();
        assert!(leaf0.1.ingress.is_empty(), "{routes}: no route starts at leaf0's host: {:?}", leaf0.1);
        let leaf1 = tables.iter().find(|(_, t)| t.switch == "leaf1").unwrap();
        assert!(!leaf1.1.ingress.is_empty(), "{routes}: h1 still reaches h2");
    }
}

#[test]
fn a_topology_without_routes_says_so() {
    let dir = TempDir::new("no-routes");
    let lone = dir.0.join("lone.toml");
    std::fs::write(
        &lone,
        "[[switch]]\nname = \"a\"\nlayer = 0\n[[host]]\nname = \"h\"\n[[link]]\na = \"h\"\nb = \"a\"\n",
    )
    .unwrap();
    for routes in ["updown", "shortest"] {
        let out = compute(lone.to_str().unwrap(), routes, &dir.0.join("out"), &[]);
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert!(err.contains(&format!("no routes: no {routes} route leads from one host to another")), "{err}");
        assert!(!err.contains("a bug"), "{err}");
    }
}

#[test]
fn a_lossy_priority_alone_moves_the_tags_past_it() {
    let dir = TempDir::new("lossy-prio");
    let out = compute("fattree:k=4", "updown:bounces=1", &dir.0, &["--lossy-priority", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("tag 2 → priority 3, tag 1 → priority 2; anything unmatched: tag 0, priority 1"), "{text}");
    let (_, t) = read_tables(&dir.0).unwrap().remove(0);
    assert_eq!((t.priorities, t.default.priority), (vec![2, 3], 1));
}

#[test]
fn failed_links_are_routed_around_and_the_tags_before_and_after_are_reported() {
    let dir = TempDir::new("fail-links");
    let out = compute("fattree:k=8", "updown:bounces=1", &dir.0, &["--fail-links", "6", "--seed", "3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("failed 6 switch links (seed 3): "), "{text}");
    assert!(text.contains("250 switch links"), "the tables are for what is left: {text}");
    assert!(text.contains("lossless tags needed: 2 before the failures, 2 after"), "{text}");
    assert!(text.contains("verified"), "{text}");
    // Shortest routes, tagged a destination at a time.
    let out = compute("jellyfish:switches=60,degree=4", "shortest", &dir.0.join("j"), &["--fail-links", "10"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("a DAG per destination"), "{text}");
    assert!(text.contains("lossless tags needed: "), "{text}");
}

#[test]
fn a_clos_tagged_by_bounces_needs_a_tag_per_bounce_and_verifies() {
    let dir = TempDir::new("bounces");
    let out = compute("fattree:k=4", "updown:bounces=2", &dir.0, &["--algorithm", "bounces"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("bounces: 3 lossless tags"), "{text}");
    assert!(text.contains("verified:"), "{text}");
}
