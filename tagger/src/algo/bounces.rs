//! Tags by bounces, the paper's construction for a Clos: a packet enters with the
//! highest tag and loses one at each bounce, where it arrived from a higher tier and
//! leaves for a higher tier again. Between bounces a route goes up and then down, and
//! hops that only climb and then only descend cannot wait on each other in a cycle; so
//! routes with at most K bounces need K + 1 tags, and each tag is acyclic (the verifier
//! checks it, as for any system).
//!
//! Greedy reaches the same count on fat-trees and leaf-spines (docs/tagger.md), but it
//! weighs every pair of ports of every switch against the others: a k=64 fat-tree has 21
//! million such hops, and greedy's incremental cycle checks over them took minutes. This
//! walks the route states once.

use rustc_hash::FxHashSet;

use super::{check_ports, egress_to, starts, AlgoError, Algorithm, GroupRules, Tagging};
use crate::routes::{RouteModel, State};
use crate::topology::{PortId, Topology};

pub fn bounces(t: &Topology, m: &dyn RouteModel) -> Result<Tagging, AlgoError> {
    check_ports(t)?;
    let layers = t.layers().map_err(|e| AlgoError::NoTiers(e.to_string()))?;
    let tier = |p: PortId| layers[t.switch_of(p) as usize];
    // Whether a packet at ingress `p` arrived from a higher tier.
    let from_above = |p: PortId| t.peer_port(p).is_some_and(|q| tier(q) > tier(p));
    let mut rules = GroupRules::default();
    // (state, bounces made so far): the group.
    let mut seen: FxHashSet<(State, u16)> = FxHashSet::default();
    let mut todo: Vec<(State, u16)> = starts(m).into_iter().map(|s| (s, 0)).collect();
    seen.extend(todo.iter().copied());
    let (mut succ, mut deliver) = (Vec::new(), Vec::new());
    let mut groups = 0usize;
    while let Some((s, g)) = todo.pop() {
        if usize::from(g) > u8::MAX as usize {
            return Err(AlgoError::TooManyTags(usize::from(g)));
        }
        groups = groups.max(usize::from(g) + 1);
        let p = m.port(s);
        succ.clear();
        m.successors(s, &mut succ);
        for &s2 in &succ {
            let p2 = m.port(s2);
            let next = if from_above(p) && tier(p2) > tier(p) { g + 1 } else { g };
            rules.insert(p, g, egress_to(t, p2), next);
            if seen.insert((s2, next)) {
                todo.push((s2, next));
            }
        }
        deliver.clear();
        m.deliveries(s, &mut deliver);
        for &e in &deliver {
            rules.insert(p, g, e, g);
        }
    }
    rules.into_tagging(Algorithm::Bounces, groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::RouteSpec;
    use crate::system::TagSystem;
    use crate::topology::generate::Generator;
    use crate::verify::verify;

    #[test]
    fn a_clos_needs_a_tag_per_bounce_plus_one_as_greedy_finds_and_the_verifier_passes_them() {
        for (topology, routes, tags) in [
            ("fattree:k=4", "updown", 1),
            ("fattree:k=4", "updown:bounces=2", 3),
            ("fattree:k=8", "updown:bounces=3", 4),
            ("leafspine:leaves=4,spines=8", "updown:bounces=2", 3),
        ] {
            let t = topology.parse::<Generator>().unwrap().build().unwrap();
            let m = routes.parse::<RouteSpec>().unwrap().model(&t).unwrap();
            let tagging = bounces(&t, m.as_ref()).unwrap();
            assert_eq!(tagging.tags, tags, "{topology} {routes}");
            assert_eq!(Algorithm::Greedy.run(&t, m.as_ref()).unwrap().tags, tags, "{topology} {routes}");
            verify(&t, m.as_ref(), &TagSystem::queue_per_tag(&t, &tagging)).unwrap();
        }
    }
}
