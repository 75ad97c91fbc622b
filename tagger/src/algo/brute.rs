//! The brute-force system: group = hop count, so the tag decreases by one every hop and
//! every tag's subgraph has no edges at all. Tags needed: the longest route's hops.

use super::{check_ports, egress_to, starts, AlgoError, Algorithm, GroupRules, Tagging};
use crate::bits::BitSet;
use crate::routes::RouteModel;
use crate::topology::Topology;

pub fn brute_force(t: &Topology, m: &dyn RouteModel) -> Result<Tagging, AlgoError> {
    check_ports(t)?;
    let mut rules = GroupRules::default();
    let mut frontier = starts(m);
    let mut next_seen = BitSet::new(m.num_states());
    let (mut succ, mut deliver, mut next) = (Vec::new(), Vec::new(), Vec::new());
    let mut group: usize = 0;
    while !frontier.is_empty() {
        // Also the bound for a route model with a cycle.
        if group > u8::MAX as usize {
            return Err(AlgoError::TooManyTags(group));
        }
        next_seen.clear();
        next.clear();
        for &s in &frontier {
            let p = m.port(s);
            succ.clear();
            m.successors(s, &mut succ);
            for &s2 in &succ {
                rules.insert(p, group as u16, egress_to(t, m.port(s2)), group as u16 + 1);
                if next_seen.insert(s2 as usize) {
                    next.push(s2);
                }
            }
            deliver.clear();
            m.deliveries(s, &mut deliver);
            for &e in &deliver {
                rules.insert(p, group as u16, e, group as u16);
            }
        }
        std::mem::swap(&mut frontier, &mut next);
        group += 1;
    }
    rules.into_tagging(Algorithm::BruteForce, group)
}
