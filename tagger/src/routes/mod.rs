//! Lossless route sets.
//!
//! A route is a sequence of hops, each a (switch, ingress port); it starts at a port facing
//! a host and ends by delivering to a host. Route sets given as rules are never enumerated:
//! each is a [`RouteModel`], the product of the topology with the rule's small automaton,
//! whose states are (ingress port, automaton state). A packet's whole future depends only
//! on its state, so every route of the set is a walk from a start state, and every walk
//! is a route. The tagged graph is built over these states.
//!
//! | spec | routes |
//! | --- | --- |
//! | `updown` | up-down paths in a Clos: up zero or more tiers, then down, never straight back over the link just used (in a fat-tree or leaf-spine these are the shortest paths) |
//! | `updown:bounces=K` | as `updown`, turning back up after going down at most K times (the detours of link failures) |
//! | `shortest` | every shortest path between every pair of switches with hosts |
//! | `kshortest:k=K` | the K shortest loop-free paths of every such pair (Yen), enumerated |
//! | `file:PATH` or `PATH` | the routes listed in a file (see [`explicit`]) |

pub mod dags;
pub mod explicit;
pub mod shortest;
pub mod updown;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::topology::{PortId, Topology};

/// A state of a route model's automaton product: at most `u32::MAX` of them.
pub type State = u32;

/// A route set as an automaton over the topology's ports.
pub trait RouteModel: Send + Sync {
    /// How many states there are; states are `0..num_states()`.
    fn num_states(&self) -> usize;
    /// The ingress port a packet in state `s` sits at.
    fn port(&self, s: State) -> PortId;
    /// The states packets enter the network in (at a port facing a host).
    fn starts(&self, out: &mut Vec<State>);
    /// Where a packet in state `s` may go next (appended to `out`).
    fn successors(&self, s: State, out: &mut Vec<State>);
    /// The host-facing egress ports a packet in state `s` may be delivered to.
    fn deliveries(&self, s: State, out: &mut Vec<PortId>);
}

#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("route spec {spec:?}: {problem}")]
    Spec { spec: String, problem: String },
    #[error("{0}")]
    Topology(#[from] crate::topology::TopologyError),
    #[error("{path}: {problem}")]
    File { path: String, problem: String },
    #[error("route {route}: {problem}")]
    BadRoute { route: usize, problem: String },
    #[error("no routes: no switch has a host")]
    NoHosts,
    #[error("no routes: {0} leads from one host to another")]
    NoRoutes(String),
    #[error("the route model would have {0} states, more than 2^32")]
    TooManyStates(u64),
}

/// Which route set, as given on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteSpec {
    UpDown { bounces: u32 },
    Shortest,
    KShortest { k: u32 },
    File(PathBuf),
}

impl fmt::Display for RouteSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteSpec::UpDown { bounces: 0 } => write!(f, "updown"),
            RouteSpec::UpDown { bounces } => write!(f, "updown:bounces={bounces}"),
            RouteSpec::Shortest => write!(f, "shortest"),
            RouteSpec::KShortest { k } => write!(f, "kshortest:k={k}"),
            RouteSpec::File(p) => write!(f, "file:{}", p.display()),
        }
    }
}

impl FromStr for RouteSpec {
    type Err = RouteError;

    fn from_str(spec: &str) -> Result<RouteSpec, RouteError> {
        let bad = |problem: &str| RouteError::Spec { spec: spec.to_string(), problem: problem.to_string() };
        let number = |s: &str, key: &str| -> Result<u32, RouteError> {
            s.strip_prefix(key)
                .and_then(|v| v.strip_prefix('='))
                .ok_or_else(|| bad(&format!("expected {key}=N")))?
                .parse()
                .map_err(|_| bad(&format!("{key} must be a number")))
        };
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        match name {
            "updown" if rest.is_empty() => Ok(RouteSpec::UpDown { bounces: 0 }),
            "updown" => Ok(RouteSpec::UpDown { bounces: number(rest, "bounces")? }),
            "shortest" if rest.is_empty() => Ok(RouteSpec::Shortest),
            "kshortest" => match number(rest, "k")? {
                0 => Err(bad("k must be at least 1")),
                k => Ok(RouteSpec::KShortest { k }),
            },
            "file" if !rest.is_empty() => Ok(RouteSpec::File(PathBuf::from(rest))),
            _ if std::path::Path::new(spec).is_file() => Ok(RouteSpec::File(PathBuf::from(spec))),
            _ => Err(bad("expected updown, updown:bounces=K, shortest, kshortest:k=K, file:PATH or an existing file")),
        }
    }
}

impl RouteSpec {
    pub fn model<'t>(&self, t: &'t Topology) -> Result<Box<dyn RouteModel + 't>, RouteError> {
        if !(0..t.switches.len() as u32).any(|s| t.has_hosts(s)) {
            return Err(RouteError::NoHosts);
        }
        let model: Box<dyn RouteModel + 't> = match self {
            RouteSpec::UpDown { bounces } => Box::new(updown::UpDown::new(t, *bounces)?),
            RouteSpec::Shortest => Box::new(shortest::Shortest::new(t)?),
            RouteSpec::KShortest { k } => Box::new(explicit::Explicit::k_shortest(t, *k as usize)?),
            RouteSpec::File(path) => Box::new(explicit::Explicit::read(t, path)?),
        };
        let pruned = Pruned::new(model);
        if pruned.live_starts == 0 {
            return Err(RouteError::NoRoutes(format!("no {self} route")));
        }
        Ok(Box::new(pruned))
    }
}

/// A route model without the states from which no host can be reached. A walk the rule
/// allows but that can never deliver (up-down into a leaf that lost its uplinks, a host
/// alone on its switch) is no route: nothing is sent along it, so it needs no tag.
pub struct Pruned<'t> {
    inner: Box<dyn RouteModel + 't>,
    live: Vec<u64>,
    live_starts: usize,
}

impl<'t> Pruned<'t> {
    pub fn new(inner: Box<dyn RouteModel + 't>) -> Pruned<'t> {
        let n = inner.num_states();
        let bit = |set: &[u64], s: State| set[s as usize / 64] & (1 << (s % 64)) != 0;
        let set = |set: &mut [u64], s: State| set[s as usize / 64] |= 1 << (s % 64);
        let (mut live, mut done, mut open) =
            (vec![0u64; n.div_ceil(64)], vec![0u64; n.div_ceil(64)], vec![0u64; n.div_ceil(64)]);
        let (mut starts, mut succ, mut deliver) = (Vec::new(), Vec::new(), Vec::new());
        inner.starts(&mut starts);
        // Depth first, deciding each state after its successors (post-order). A successor
        // still open closes a cycle: its state counts as live, so that pruning never hides
        // endless routes from the algorithms that report them.
        let mut stack: Vec<(State, bool)> = Vec::new();
        for &s0 in &starts {
            if bit(&done, s0) || bit(&open, s0) {
                continue;
            }
            stack.push((s0, false));
            while let Some((s, expanded)) = stack.pop() {
                succ.clear();
                inner.successors(s, &mut succ);
                if !expanded {
                    if bit(&done, s) || bit(&open, s) {
                        continue;
                    }
                    set(&mut open, s);
                    stack.push((s, true));
                    stack.extend(succ.iter().filter(|&&s2| !bit(&done, s2) && !bit(&open, s2)).map(|&s2| (s2, false)));
                    continue;
                }
                deliver.clear();
                inner.deliveries(s, &mut deliver);
                let alive = !deliver.is_empty() || succ.iter().any(|&s2| bit(&live, s2) || bit(&open, s2));
                if alive {
                    set(&mut live, s);
                }
                open[s as usize / 64] &= !(1 << (s % 64));
                set(&mut done, s);
            }
        }
        starts.sort_unstable();
        starts.dedup();
        let live_starts = starts.iter().filter(|&&s| bit(&live, s)).count();
        Pruned { inner, live, live_starts }
    }

    fn is_live(&self, s: State) -> bool {
        self.live[s as usize / 64] & (1 << (s % 64)) != 0
    }

    /// Drops the states from `out[from..]` that lead to no host.
    fn keep_live(&self, out: &mut Vec<State>, from: usize) {
        let mut k = from;
        for i in from..out.len() {
            if self.is_live(out[i]) {
                out[k] = out[i];
                k += 1;
            }
        }
        out.truncate(k);
    }
}

impl RouteModel for Pruned<'_> {
    fn num_states(&self) -> usize {
        self.inner.num_states()
    }

    fn port(&self, s: State) -> PortId {
        self.inner.port(s)
    }

    fn starts(&self, out: &mut Vec<State>) {
        let from = out.len();
        self.inner.starts(out);
        self.keep_live(out, from);
    }

    fn successors(&self, s: State, out: &mut Vec<State>) {
        let from = out.len();
        self.inner.successors(s, out);
        self.keep_live(out, from);
    }

    fn deliveries(&self, s: State, out: &mut Vec<PortId>) {
        self.inner.deliveries(s, out)
    }
}

/// `ports × per_port` as a state count that fits a [`State`].
fn state_space(ports: usize, per_port: usize) -> Result<usize, RouteError> {
    let n = ports as u64 * per_port as u64;
    if n > u32::MAX as u64 {
        return Err(RouteError::TooManyStates(n));
    }
    Ok(n as usize)
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// Every route of a model, as port sequences ending in the delivery port (for small
    /// models only).
    pub fn enumerate(m: &dyn RouteModel) -> Vec<Vec<PortId>> {
        fn walk(m: &dyn RouteModel, s: State, path: &mut Vec<PortId>, out: &mut Vec<Vec<PortId>>) {
            path.push(m.port(s));
            let mut d = Vec::new();
            m.deliveries(s, &mut d);
            for e in d {
                let mut r = path.clone();
                r.push(e);
                out.push(r);
            }
            let mut next = Vec::new();
            m.successors(s, &mut next);
            for n in next {
                walk(m, n, path, out);
            }
            path.pop();
        }
        let mut starts = Vec::new();
        m.starts(&mut starts);
        let mut out = Vec::new();
        for s in starts {
            walk(m, s, &mut Vec::new(), &mut out);
        }
        out
    }

    #[test]
    fn specs_parse() {
        assert_eq!("updown".parse::<RouteSpec>().unwrap(), RouteSpec::UpDown { bounces: 0 });
        assert_eq!("updown:bounces=2".parse::<RouteSpec>().unwrap(), RouteSpec::UpDown { bounces: 2 });
        assert_eq!("kshortest:k=3".parse::<RouteSpec>().unwrap(), RouteSpec::KShortest { k: 3 });
        assert!("kshortest:k=0".parse::<RouteSpec>().is_err());
        assert!("updown:k=2".parse::<RouteSpec>().unwrap_err().to_string().contains("bounces=N"));
        assert!("sideways".parse::<RouteSpec>().is_err());
    }
}
