//! Computing tag systems.
//!
//! Both algorithms work in *groups* numbered along the routes (group 0 where packets
//! enter); the result numbers tags the other way round, so that the tag decreases along
//! every route: with G groups, group g is tag G − g, packets enter with tag G, and tag 0
//! is left for lossy traffic.
//!
//! A tag system is a set of rewrite rules keyed by (ingress port, tag, egress port), so
//! that switches can apply it at line rate: a packet's next tag may depend on nothing else.
//! Both algorithms decide one rule at a time and never revise one, which keeps the system
//! a function of that key by construction.

pub mod bounces;
pub mod brute;
#[cfg(test)]
mod dyntopo;
pub mod greedy;
pub mod stream;

use std::fmt;
use std::str::FromStr;

use rustc_hash::FxHashMap;

use crate::routes::{RouteModel, State};
use crate::topology::{PortId, Topology};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// The tag decreases by one every hop: as many tags as the longest route has hops.
    BruteForce,
    /// Brute-force groups merged, first hops first, while each tag stays acyclic.
    Greedy,
    /// A tag per bounce (down to a switch, then up again) in a layered topology: the
    /// paper's construction for a Clos.
    Bounces,
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Algorithm::BruteForce => "brute-force",
            Algorithm::Greedy => "greedy",
            Algorithm::Bounces => "bounces",
        })
    }
}

impl FromStr for Algorithm {
    type Err = String;

    fn from_str(s: &str) -> Result<Algorithm, String> {
        match s {
            "brute-force" | "bruteforce" | "brute" => Ok(Algorithm::BruteForce),
            "greedy" => Ok(Algorithm::Greedy),
            "bounces" => Ok(Algorithm::Bounces),
            _ => Err(format!("unknown algorithm {s:?} (brute-force, greedy, bounces)")),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AlgoError {
    #[error("routes need {0} tags or more; a tag is one byte")]
    TooManyTags(usize),
    #[error("the route model has a cycle: some route never ends")]
    EndlessRoutes,
    #[error("the topology has {0} ports; at most 2^24 are supported")]
    TooManyPorts(usize),
    #[error("tags by bounces need the switches' tiers: {0}")]
    NoTiers(String),
    #[error(transparent)]
    Topology(#[from] crate::topology::TopologyError),
}

/// Rewrite rules: (ingress port, tag, egress port) → the tag the packet leaves with.
pub type Rules = FxHashMap<(PortId, u8, PortId), u8>;

/// What an algorithm computed: lossless tags `1..=tags`, packets entering with `tags`.
#[derive(Clone, Debug)]
pub struct Tagging {
    pub algorithm: Algorithm,
    pub tags: u8,
    pub rules: Rules,
}

impl Algorithm {
    pub fn run(self, t: &Topology, m: &dyn RouteModel) -> Result<Tagging, AlgoError> {
        match self {
            Algorithm::BruteForce => brute::brute_force(t, m),
            Algorithm::Greedy => greedy::greedy(t, m),
            Algorithm::Bounces => bounces::bounces(t, m),
        }
    }
}

/// A rule in group terms, packed into one word for fast hashing.
fn group_key(ingress: PortId, group: u16, egress: PortId) -> u64 {
    (ingress as u64) << 40 | (group as u64) << 24 | egress as u64
}

/// Rules decided in groups, converted to tags once the number of groups is known.
#[derive(Default)]
struct GroupRules {
    rules: FxHashMap<u64, u16>,
}

impl GroupRules {
    fn insert(&mut self, ingress: PortId, group: u16, egress: PortId, next: u16) {
        self.rules.insert(group_key(ingress, group, egress), next);
    }

    fn into_tagging(self, algorithm: Algorithm, groups: usize) -> Result<Tagging, AlgoError> {
        if groups > u8::MAX as usize {
            return Err(AlgoError::TooManyTags(groups));
        }
        let tag = |g: u64| (groups as u64 - g) as u8;
        let rules = self
            .rules
            .into_iter()
            .map(|(k, next)| {
                let (ingress, group, egress) = (k >> 40, (k >> 24) & 0xffff, k & 0xff_ffff);
                ((ingress as PortId, tag(group), egress as PortId), tag(next as u64))
            })
            .collect();
        Ok(Tagging { algorithm, tags: groups as u8, rules })
    }
}

fn check_ports(t: &Topology) -> Result<(), AlgoError> {
    if t.ports.len() >= 1 << 24 {
        return Err(AlgoError::TooManyPorts(t.ports.len()));
    }
    Ok(())
}

/// The egress port that leads to ingress port `next` (on the neighbour).
fn egress_to(t: &Topology, next: PortId) -> PortId {
    t.peer_port(next).expect("a successor's port faces a switch")
}

/// The start states, without duplicates.
fn starts(m: &dyn RouteModel) -> Vec<State> {
    let mut s = Vec::new();
    m.starts(&mut s);
    s.sort_unstable();
    s.dedup();
    s
}
