//! An acyclicity check of greedy's tags over every shortest route of a 1 000-switch
//! Jellyfish, written apart from the tagger's verifier: its own distances, its own walk
//! of each destination's routes through the rules, its own cycle search.

use std::collections::{HashMap, HashSet, VecDeque};

use tagger::algo::stream::greedy_shortest;
use tagger::topology::generate::Generator;
use tagger::topology::{PortId, Topology};

/// Hops from every switch to `dest` over switch links.
fn hops_to(t: &Topology, dest: u32) -> Vec<u32> {
    let mut dist = vec![u32::MAX; t.switches.len()];
    let mut queue = VecDeque::from([dest]);
    dist[dest as usize] = 0;
    while let Some(a) = queue.pop_front() {
        for &p in &t.switches[a as usize].ports {
            if let Some(q) = t.peer_port(p) {
                let b = t.switch_of(q) as usize;
                if dist[b] == u32::MAX {
                    dist[b] = dist[a as usize] + 1;
                    queue.push_back(b as u32);
                }
            }
        }
    }
    dist
}

/// Whether the directed graph `edges` has no cycle (Kahn: every node can be removed).
fn acyclic(edges: &HashSet<(PortId, PortId)>) -> bool {
    let mut indegree: HashMap<PortId, usize> = HashMap::new();
    let mut out: HashMap<PortId, Vec<PortId>> = HashMap::new();
    for &(a, b) in edges {
        indegree.entry(a).or_insert(0);
        *indegree.entry(b).or_insert(0) += 1;
        out.entry(a).or_default().push(b);
    }
    let mut ready: Vec<PortId> = indegree.iter().filter(|&(_, &n)| n == 0).map(|(&p, _)| p).collect();
    let mut removed = 0;
    while let Some(p) = ready.pop() {
        removed += 1;
        for &q in out.get(&p).map_or(&[][..], Vec::as_slice) {
            let n = indegree.get_mut(&q).expect("every node counted");
            *n -= 1;
            if *n == 0 {
                ready.push(q);
            }
        }
    }
    removed == indegree.len()
}

#[test]
fn every_tag_of_greedy_s_system_for_a_thousand_switch_jellyfish_is_acyclic_by_a_check_of_its_own() {
    let t = "jellyfish:switches=1000,degree=8".parse::<Generator>().unwrap().build().unwrap();
    let tagging = greedy_shortest(&t, 2).unwrap();
    assert_eq!(tagging.tags, 4, "greedy's count at 1 000 switches (docs/tagger.md)");
    let mut within: HashMap<u8, HashSet<(PortId, PortId)>> = HashMap::new();
    let mut hops = 0u64;
    for dest in (0..t.switches.len() as u32).filter(|&s| t.has_hosts(s)) {
        let dist = hops_to(&t, dest);
        // Every (port, tag) a packet toward `dest` waits at, from every host's port.
        let mut seen: HashSet<(PortId, u8)> = HashSet::new();
        let mut todo: Vec<(PortId, u8)> = Vec::new();
        for a in (0..t.switches.len() as u32).filter(|&a| a != dest && t.has_hosts(a)) {
            for p in t.host_ports(a) {
                if seen.insert((p, tagging.tags)) {
                    todo.push((p, tagging.tags));
                }
            }
        }
        while let Some((p, tag)) = todo.pop() {
            let a = t.switch_of(p);
            for &e in &t.switches[a as usize].ports {
                let next = match t.peer_port(e) {
                    Some(q) if dist[t.switch_of(q) as usize] + 1 == dist[a as usize] => Some(q),
                    None if a == dest && e != p => None,
                    _ => continue,
                };
                hops += 1;
                let to =
                    *tagging.rules.get(&(p, tag, e)).unwrap_or_else(|| panic!("no rule for {p} tag {tag} out of {e}"));
                assert!((1..=tag).contains(&to), "{p} tag {tag} out of {e}: to tag {to}");
                if let Some(q) = next {
                    if to == tag {
                        within.entry(tag).or_default().insert((p, q));
                    }
                    if seen.insert((q, to)) {
                        todo.push((q, to));
                    }
                }
            }
        }
    }
    assert!(hops > 1_000_000, "{hops} hops walked");
    for (tag, edges) in &within {
        assert!(acyclic(edges), "tag {tag} has a cycle among its {} edges", edges.len());
    }
}
