//! Known results (Hu et al., CoNEXT 2017): a Clos with up-down routes needs one lossless
//! tag, with k-bounce routes k + 1 — and what the verifier says about systems that are
//! wrong on purpose.

use tagger::algo::{Algorithm, Tagging};
use tagger::routes::RouteSpec;
use tagger::system::{TagPriorities, TagSystem};
use tagger::topology::Topology;
use tagger::verify::{verify, Violation};

fn topo(spec: &str) -> Topology {
    tagger::load_topology(spec).unwrap()
}

/// Greedy and brute force on `topology` × `routes`, both verified; greedy's tag count.
fn greedy_tags(topology: &str, routes: &str) -> u8 {
    let t = topo(topology);
    let m = routes.parse::<RouteSpec>().unwrap().model(&t).unwrap();
    let greedy = Algorithm::Greedy.run(&t, m.as_ref()).unwrap();
    let brute = Algorithm::BruteForce.run(&t, m.as_ref()).unwrap();
    for tagging in [&greedy, &brute] {
        let sys = TagSystem::queue_per_tag(&t, tagging);
        if let Err(v) = verify(&t, m.as_ref(), &sys) {
            panic!("{topology} {routes} {}: {v}", tagging.algorithm);
        }
    }
    assert!(greedy.tags <= brute.tags);
    greedy.tags
}

#[test]
fn a_clos_with_up_down_routes_needs_one_tag() {
    for topology in ["fattree:k=4", "fattree:k=8", "leafspine:leaves=6,spines=3", "leafspine:leaves=2,spines=5"] {
        assert_eq!(greedy_tags(topology, "updown"), 1, "{topology}");
    }
}

#[test]
fn a_clos_with_one_bounce_needs_two_tags() {
    for topology in ["fattree:k=4", "fattree:k=6", "leafspine:leaves=6,spines=3", "leafspine:leaves=3,spines=6"] {
        assert_eq!(greedy_tags(topology, "updown:bounces=1"), 2, "{topology}");
    }
}

#[test]
fn a_clos_with_k_bounces_needs_k_plus_one_tags() {
    for k in 2..=4 {
        for topology in ["fattree:k=4", "leafspine:leaves=4,spines=4"] {
            assert_eq!(greedy_tags(topology, &format!("updown:bounces={k}")), k + 1, "{topology}");
        }
    }
}

#[test]
fn brute_force_needs_as_many_tags_as_the_longest_route_has_hops() {
    let t = topo("fattree:k=4");
    for (routes, hops) in [("updown", 5), ("updown:bounces=1", 9)] {
        let m = routes.parse::<RouteSpec>().unwrap().model(&t).unwrap();
        // edge, agg, core, agg, edge — and after a bounce at the edge the same again.
        assert_eq!(Algorithm::BruteForce.run(&t, m.as_ref()).unwrap().tags, hops);
    }
}

/// A ring of four with every shortest path, and its greedy system.
fn ring() -> (Topology, Tagging) {
    let t = topo("ring:n=4");
    let g = {
        let m = RouteSpec::Shortest.model(&t).unwrap();
        Algorithm::Greedy.run(&t, m.as_ref()).unwrap()
    };
    (t, g)
}

fn check(t: &Topology, tagging: &Tagging) -> Result<(), Violation> {
    let m = RouteSpec::Shortest.model(t).unwrap();
    verify(t, m.as_ref(), &TagSystem::queue_per_tag(t, tagging)).map(|_| ())
}

#[test]
fn one_tag_on_a_ring_is_a_cyclic_buffer_dependency() {
    let (t, mut g) = ring();
    assert_eq!(g.tags, 2);
    assert!(check(&t, &g).is_ok());
    g.tags = 1;
    for v in g.rules.values_mut() {
        *v = 1;
    }
    g.rules = g.rules.iter().map(|(&(i, _, e), &v)| ((i, 1, e), v)).collect();
    match check(&t, &g) {
        Err(Violation::Cycle { tag: 1, ports }) => {
            // Around the ring and back to the first port: four ring ports.
            assert_eq!(ports.len(), 5, "{ports:?}");
            assert_eq!(ports.first(), ports.last());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_rising_tag_is_named_with_its_route() {
    let (t, mut g) = ring();
    // In this small ring, tag 1 packets are one hop from their host: a delivery rises.
    let key = *g.rules.iter().find(|(&(_, tag, _), &to)| tag == 1 && to == 1).unwrap().0;
    g.rules.insert(key, 2);
    match check(&t, &g) {
        Err(Violation::NotMonotonic { from: 1, to: 2, route, egress }) => {
            assert_eq!(egress, t.port_label(key.2));
            assert_eq!(route.0.last().unwrap().0, t.port_label(key.0));
            assert_eq!(route.0[0].1, 2, "the route starts with the initial tag: {route}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_missing_or_lossy_rule_is_named() {
    let (t, g) = ring();
    let (&key, _) = g.rules.iter().find(|(&(_, tag, _), _)| tag == 1).unwrap();
    let mut missing = g.clone();
    missing.rules.remove(&key);
    assert!(matches!(check(&t, &missing), Err(Violation::Unmapped { .. })), "{:?}", check(&t, &missing));
    let mut lossy = g.clone();
    lossy.rules.insert(key, 0);
    assert!(matches!(check(&t, &lossy), Err(Violation::Lossy { to: 0, .. })));
}

#[test]
fn two_tags_in_one_queue_are_refused() {
    let (t, g) = ring();
    let m = RouteSpec::Shortest.model(&t).unwrap();
    let mut sys = TagSystem::new(&t, &g, &TagPriorities::default()).unwrap();
    for prio in sys.queue.values_mut() {
        *prio = 3;
    }
    assert!(matches!(verify(&t, m.as_ref(), &sys), Err(Violation::SharedQueue { priority: 3, .. })));
}

#[test]
fn tables_round_trip_through_switch_files() {
    let (t, g) = ring();
    let sys = TagSystem::new(&t, &g, &TagPriorities { lossless: vec![3, 4], lossy: 0 }).unwrap();
    let tables: Vec<(String, _)> = sys.tables(&t).into_iter().map(|s| (format!("{}.toml", s.switch), s)).collect();
    for (_, tab) in &tables {
        let text = toml::to_string(tab).unwrap();
        assert_eq!(&toml::from_str::<tagger::system::SwitchTables>(&text).unwrap(), tab);
    }
    let back = TagSystem::from_tables(&t, &tables).unwrap();
    assert_eq!((back.tags, back.initial_tag), (2, 2));
    assert_eq!(back.queue, sys.queue);
    assert_eq!(back.rewrite, sys.rewrite);
    assert!(sys.queue.values().all(|&p| p == 3 || p == 4));
    let too_few = TagSystem::new(&t, &g, &TagPriorities { lossless: vec![3], lossy: 0 });
    assert!(too_few.unwrap_err().to_string().contains("2 lossless tags need 2 lossless priorities"));
}
