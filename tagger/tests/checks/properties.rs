//! Random topologies and route sets: both algorithms always produce systems the verifier
//! accepts, greedy never needs more tags than brute force, and any tag made to rise is
//! caught.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use tagger::algo::{Algorithm, Tagging};
use tagger::routes::explicit::Explicit;
use tagger::routes::{RouteModel, RouteSpec};
use tagger::system::TagSystem;
use tagger::topology::{Builder, End, PortId, Topology};
use tagger::verify::{verify, Violation};

/// A connected random graph of `n` switches (a random tree plus `extra` random links, some
/// parallel) with 0–2 hosts each, at least two switches with hosts.
fn random_topology(n: usize, extra: usize, seed: u64) -> Topology {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut b = Builder::new();
    for s in 0..n {
        b.switch(format!("s{s}"), None);
    }
    for s in 0..n {
        let hosts = if s < 2 { 1 } else { rng.random_range(0..3) };
        for h in 0..hosts {
            b.host(format!("h{s}-{h}"));
            b.link(End::node(format!("h{s}-{h}")), End::node(format!("s{s}")));
        }
    }
    for s in 1..n {
        b.link(End::node(format!("s{s}")), End::node(format!("s{}", rng.random_range(0..s))));
    }
    for _ in 0..extra {
        let (x, y) = (rng.random_range(0..n), rng.random_range(0..n));
        if x != y {
            b.link(End::node(format!("s{x}")), End::node(format!("s{y}")));
        }
    }
    b.build().unwrap()
}

/// Random walks from host ports, delivered where the walk ends at a switch with another
/// host; walks may revisit switches and turn straight back.
fn random_routes(t: &Topology, count: usize, seed: u64) -> Explicit {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let starts: Vec<PortId> = (0..t.ports.len() as PortId).filter(|&p| t.faces_host(p)).collect();
    let mut routes = Vec::new();
    while routes.len() < count {
        let mut hops = vec![starts[rng.random_range(0..starts.len())]];
        for _ in 0..rng.random_range(0..7) {
            let here = &t.switches[t.switch_of(*hops.last().unwrap()) as usize];
            let links: Vec<PortId> = here.ports.iter().filter_map(|&e| t.peer_port(e)).collect();
            if links.is_empty() {
                break;
            }
            hops.push(links[rng.random_range(0..links.len())]);
        }
        let last = *hops.last().unwrap();
        if t.host_ports(t.switch_of(last)).any(|e| e != last) {
            routes.push((hops, Vec::new()));
        }
    }
    Explicit::new(t, routes).unwrap()
}

fn both(t: &Topology, m: &dyn RouteModel) -> Result<(Tagging, Tagging), TestCaseError> {
    let greedy = Algorithm::Greedy.run(t, m).unwrap();
    let brute = Algorithm::BruteForce.run(t, m).unwrap();
    for g in [&greedy, &brute] {
        if let Err(v) = verify(t, m, &TagSystem::queue_per_tag(t, g)) {
            return Err(TestCaseError::fail(format!("{}: {v}", g.algorithm)));
        }
    }
    prop_assert!(greedy.tags <= brute.tags, "greedy {} > brute force {}", greedy.tags, brute.tags);
    Ok((greedy, brute))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn shortest_and_k_shortest_paths_always_verify(n in 3usize..12, extra in 0usize..14, seed: u64, k in 1u32..4) {
        let t = random_topology(n, extra, seed);
        for spec in [RouteSpec::Shortest, RouteSpec::KShortest { k }] {
            let m = spec.model(&t).unwrap();
            both(&t, m.as_ref())?;
        }
    }

    #[test]
    fn random_walks_always_verify(n in 3usize..10, extra in 0usize..10, seed: u64, count in 1usize..40) {
        let t = random_topology(n, extra, seed);
        let m = random_routes(&t, count, seed ^ 0x5eed);
        let (_, brute) = both(&t, &m)?;
        // Brute force: one tag per hop of the longest route.
        let longest = tagger_longest(&m);
        prop_assert_eq!(brute.tags as usize, longest);
    }

    #[test]
    fn a_tag_made_to_rise_is_caught(n in 3usize..10, extra in 0usize..10, seed: u64, pick: prop::sample::Index) {
        let t = random_topology(n, extra, seed);
        let m = RouteSpec::KShortest { k: 2 }.model(&t).unwrap();
        let (mut greedy, _) = both(&t, m.as_ref())?;
        let mut keys: Vec<_> = greedy.rules.keys().copied().filter(|&(_, tag, _)| tag < greedy.tags).collect();
        prop_assume!(!keys.is_empty());
        keys.sort_unstable();
        let key = keys[pick.index(keys.len())];
        greedy.rules.insert(key, key.1 + 1);
        let got = verify(&t, m.as_ref(), &TagSystem::queue_per_tag(&t, &greedy));
        prop_assert!(matches!(got, Err(Violation::NotMonotonic { .. })), "{:?}", got);
    }
}

/// The most hops on any route of an explicit model.
fn tagger_longest(m: &Explicit) -> usize {
    let mut starts = Vec::new();
    m.starts(&mut starts);
    let mut longest = 0;
    for s in starts {
        let (mut len, mut at, mut next) = (1, s, Vec::new());
        loop {
            next.clear();
            m.successors(at, &mut next);
            match next.first() {
                Some(&n) => {
                    at = n;
                    len += 1;
                }
                None => break,
            }
        }
        longest = longest.max(len);
    }
    longest
}
