//! Greedy over every shortest route, one destination at a time.
//!
//! [`super::greedy`] walks a route model's states; for shortest routes a state is an
//! (ingress port, destination switch) pair, and a Jellyfish of 10 000 switches has
//! 9×10⁸ of them: its per-state tables (levels, in-degrees, visited bits) took 5.8 GB
//! and the run did not end in ten minutes. The routes toward one destination are a DAG
//! over the switches (a switch forwards to each neighbour one hop closer), so here greedy
//! runs a destination at a time, walking that DAG farthest switch first. What it keeps
//! between destinations is per port (its depth) and per *hop*, an ingress and an egress
//! port of one switch (the candidate, demoted and decided hops of each group); per
//! destination only the ports where the next group begins, a bit each. The decisions
//! are [`super::greedy`]'s on [`crate::routes::shortest::Shortest`], rule for rule (the
//! tests compare them).
//!
//! Destinations are independent within a pass: the passes split them over threads, and
//! what the threads found is merged by union and maximum, so the result does not depend
//! on the number of threads.

use rustc_hash::FxHashSet;

use super::greedy::{demotions, Proofs};
use super::{check_ports, AlgoError, Algorithm, GroupRules, Tagging};
use crate::bits::{set, BitSet};
use crate::routes::dags::Dags;
use crate::topology::{PortId, Topology};

/// Tags every shortest route of `t` (as `--routes shortest`) with greedy, over `threads`
/// threads.
pub fn greedy_shortest(t: &Topology, threads: usize) -> Result<Tagging, AlgoError> {
    check_ports(t)?;
    greedy_on(&Dags::new(t, threads)?, threads)
}

/// [`greedy_shortest`] over DAGs made already (the verifier walks the same ones).
pub(crate) fn greedy_on(dags: &Dags<'_>, threads: usize) -> Result<Tagging, AlgoError> {
    let t = dags.t;
    check_ports(t)?;
    let words = t.ports.len().div_ceil(64);
    let mut rules = GroupRules::default();
    // (1) Group 0's candidates: every hop of the routes, were the group never to end;
    // and each port's depth, by which the demotions order the ports.
    let ports = t.ports.len();
    let zero = || ([BitSet::new(dags.hops())], vec![0u16; ports]);
    let merge = |([mut a], mut x): ([BitSet; 1], Vec<u16>), ([b], y): ([BitSet; 1], Vec<u16>)| {
        a.union(&b);
        for (x, y) in x.iter_mut().zip(y) {
            *x = (*x).max(y);
        }
        ([a], x)
    };
    let ([mut candidates], depth) = dags.fold(threads, &mut [], 0, zero, merge, |w, d, bits, _, ([found], depth)| {
        w.enter(d, None, words, bits);
        w.walk(d, bits, Some(depth), |base, [ins], next| {
            if next.is_some() {
                found.insert_bits(base, ins);
            }
            [ins]
        });
    });
    // The ports where each destination's routes enter the current group, a bit each as
    // `Numbering::bit` numbers them (none for group 0, whose routes enter at the hosts).
    let mut entries: Option<Vec<u64>> = None;
    let mut group = 0usize;
    let mut proofs = Proofs::default();
    loop {
        if group > u8::MAX as usize {
            return Err(AlgoError::TooManyTags(group));
        }
        // (2) Decisions.
        let pairs: FxHashSet<(PortId, PortId)> = candidates.iter().map(|hop| dags.pair(hop)).collect();
        let demoted_pairs = demotions(&pairs, &depth, &mut proofs);
        let mut demoted = BitSet::new(dags.hops());
        for &(p, p2) in &demoted_pairs {
            demoted.insert(dags.key(p, t.peer_port(p2).expect("a hop's next port faces a switch")));
        }
        // (3) The group as decided (the first layer): its hops, and where the next group
        // begins; and in the same walk, (1) for the next group (the second layer), which
        // a route joins where it crosses a demoted hop.
        let mut next = vec![0u64; dags.dests.len() * words];
        let [decided, ahead] = dags.pass_into(threads, &mut next, words, |w, d, bits, next, [found, ahead]| {
            w.enter(d, entries.as_deref(), words, bits);
            w.walk(d, bits, None, |base, [ins, later], p2| {
                found.insert_bits(base, ins);
                let Some(p2) = p2 else { return [ins, 0] };
                ahead.insert_bits(base, later);
                // A demoted hop's packet goes on in the next group, from the next port.
                let down = ins & demoted.bits(base, 64);
                if down != 0 {
                    set(next, p2 as usize);
                }
                [ins & !down, later | down]
            });
        });
        let g = group as u16;
        for hop in decided.iter() {
            let (p, e) = dags.ports_of(hop);
            rules.insert(p, g, e, if demoted.contains(hop) { g + 1 } else { g });
        }
        group += 1;
        if next.iter().all(|&w| w == 0) {
            break;
        }
        entries = Some(next);
        candidates = ahead;
    }
    rules.into_tagging(Algorithm::Greedy, group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::RouteSpec;
    use crate::topology::generate::Generator;

    fn both(spec: &str, threads: usize) -> (Tagging, Tagging) {
        let t = spec.parse::<Generator>().unwrap().build().unwrap();
        let m = RouteSpec::Shortest.model(&t).unwrap();
        (super::super::greedy::greedy(&t, m.as_ref()).unwrap(), greedy_shortest(&t, threads).unwrap())
    }

    #[test]
    fn a_destination_at_a_time_greedy_decides_every_rule_as_the_whole_model_s_greedy_does() {
        for spec in [
            "ring:n=8",
            "ring:n=7,hosts=2",
            "mesh:n=6",
            "fattree:k=4",
            "bcube:n=4,k=1",
            "bcube:n=3,k=2",
            "jellyfish:switches=100,degree=6",
            "jellyfish:switches=60,degree=4,hosts=2,seed=3",
        ] {
            for threads in [1, 3] {
                let (whole, streamed) = both(spec, threads);
                assert_eq!(streamed.tags, whole.tags, "{spec}");
                assert_eq!(streamed.rules, whole.rules, "{spec} over {threads} threads");
            }
        }
    }
}
