//! Built-in topologies, named by a spec such as `fattree:k=4` or
//! `jellyfish:switches=1000,degree=8,seed=1`.
//!
//! | spec | what |
//! | --- | --- |
//! | `fattree:k=K[,hosts=H]` | k-ary fat-tree (Clos): K pods of K/2 edge and K/2 aggregation switches, (K/2)² cores; H hosts per edge switch (default K/2) |
//! | `leafspine:leaves=L,spines=S[,hosts=H]` | two-tier Clos, every leaf to every spine; H hosts per leaf (default 1) |
//! | `jellyfish:switches=N,degree=D[,hosts=H,seed=X]` | random D-regular switch graph (Singla et al.), H hosts per switch (default 1) |
//! | `bcube:n=N,k=K` | BCube_K: N^(K+1) servers with K+1 ports, K+1 levels of N^K N-port switches; the servers forward, so they are switches here, each with its own host |
//! | `ring:n=N[,hosts=H]` | N switches in a cycle |
//! | `mesh:n=N[,hosts=H]` | N switches, every pair linked |

use std::fmt;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashSet;

use super::{Builder, End, Topology, TopologyError};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Generator {
    FatTree { k: u32, hosts: u32 },
    LeafSpine { leaves: u32, spines: u32, hosts: u32 },
    Jellyfish { switches: u32, degree: u32, hosts: u32, seed: u64 },
    BCube { n: u32, k: u32 },
    Ring { n: u32, hosts: u32 },
    Mesh { n: u32, hosts: u32 },
}

impl fmt::Display for Generator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Generator::FatTree { k, hosts } => write!(f, "fattree:k={k},hosts={hosts}"),
            Generator::LeafSpine { leaves, spines, hosts } => {
                write!(f, "leafspine:leaves={leaves},spines={spines},hosts={hosts}")
            }
            Generator::Jellyfish { switches, degree, hosts, seed } => {
                write!(f, "jellyfish:switches={switches},degree={degree},hosts={hosts},seed={seed}")
            }
            Generator::BCube { n, k } => write!(f, "bcube:n={n},k={k}"),
            Generator::Ring { n, hosts } => write!(f, "ring:n={n},hosts={hosts}"),
            Generator::Mesh { n, hosts } => write!(f, "mesh:n={n},hosts={hosts}"),
        }
    }
}

/// `key=value` parameters of a spec, each used at most once.
struct Params<'a> {
    spec: &'a str,
    pairs: Vec<(&'a str, &'a str, bool)>,
}

impl<'a> Params<'a> {
    fn parse(spec: &'a str, rest: &'a str) -> Result<Params<'a>, TopologyError> {
        let mut pairs = Vec::new();
        for item in rest.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = item.split_once('=').ok_or_else(|| err(spec, format!("{item:?} is not key=value")))?;
            pairs.push((k.trim(), v.trim(), false));
        }
        Ok(Params { spec, pairs })
    }

    fn take<T: FromStr>(&mut self, key: &str, default: Option<T>) -> Result<T, TopologyError> {
        match self.pairs.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, v, used)) => {
                *used = true;
                v.parse().map_err(|_| err(self.spec, format!("{key}={v} is not a valid number")))
            }
            None => default.ok_or_else(|| err(self.spec, format!("needs {key}="))),
        }
    }

    fn done(self) -> Result<(), TopologyError> {
        match self.pairs.iter().find(|(_, _, used)| !used) {
            Some((k, _, _)) => Err(err(self.spec, format!("unknown parameter {k:?}"))),
            None => Ok(()),
        }
    }
}

fn err(spec: &str, problem: impl Into<String>) -> TopologyError {
    TopologyError::Generator { spec: spec.to_string(), problem: problem.into() }
}

impl FromStr for Generator {
    type Err = TopologyError;

    fn from_str(spec: &str) -> Result<Generator, TopologyError> {
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        let mut p = Params::parse(spec, rest)?;
        let g = match name {
            "fattree" | "clos" => {
                let k = p.take("k", None)?;
                Generator::FatTree { k, hosts: p.take("hosts", Some(k / 2))? }
            }
            "leafspine" => Generator::LeafSpine {
                leaves: p.take("leaves", None)?,
                spines: p.take("spines", None)?,
                hosts: p.take("hosts", Some(1))?,
            },
            "jellyfish" => Generator::Jellyfish {
                switches: p.take("switches", None)?,
                degree: p.take("degree", None)?,
                hosts: p.take("hosts", Some(1))?,
                seed: p.take("seed", Some(1))?,
            },
            "bcube" => Generator::BCube { n: p.take("n", None)?, k: p.take("k", None)? },
            "ring" => Generator::Ring { n: p.take("n", None)?, hosts: p.take("hosts", Some(1))? },
            "mesh" => Generator::Mesh { n: p.take("n", None)?, hosts: p.take("hosts", Some(1))? },
            _ => {
                return Err(err(spec, "unknown generator (fattree, leafspine, jellyfish, bcube, ring, mesh)"));
            }
        };
        p.done()?;
        g.check().map_err(|problem| err(spec, problem))?;
        Ok(g)
    }
}

impl Generator {
    fn check(&self) -> Result<(), String> {
        match *self {
            Generator::FatTree { k, .. } if k < 2 || k % 2 == 1 || k > 64 => Err("k must be even, 2..=64".into()),
            Generator::LeafSpine { leaves, spines, .. } if leaves < 1 || spines < 1 => {
                Err("needs at least one leaf and one spine".into())
            }
            Generator::Jellyfish { switches, degree, .. } if degree < 1 || degree >= switches => {
                Err("degree must be at least 1 and less than the number of switches".into())
            }
            Generator::Jellyfish { switches, .. } if switches > 100_000 => Err("at most 100000 switches".into()),
            Generator::BCube { n, k } if n < 2 || n.checked_pow(k + 1).is_none_or(|s| s > 100_000) => {
                Err("n must be at least 2 and n^(k+1) at most 100000".into())
            }
            Generator::Ring { n, .. } if n < 3 => Err("a ring needs at least 3 switches".into()),
            Generator::Mesh { n, .. } if n < 2 => Err("a mesh needs at least 2 switches".into()),
            _ => Ok(()),
        }
    }

    pub fn build(&self) -> Result<Topology, TopologyError> {
        let mut b = Builder::new();
        match *self {
            Generator::FatTree { k, hosts } => fat_tree(&mut b, k, hosts),
            Generator::LeafSpine { leaves, spines, hosts } => {
                for s in 0..spines {
                    b.switch(format!("spine{s}"), Some(1));
                }
                for l in 0..leaves {
                    b.switch(format!("leaf{l}"), Some(0));
                    add_hosts(&mut b, &format!("leaf{l}"), hosts);
                }
                for l in 0..leaves {
                    for s in 0..spines {
                        b.link(End::node(format!("leaf{l}")), End::node(format!("spine{s}")));
                    }
                }
            }
            Generator::Jellyfish { switches, degree, hosts, seed } => {
                for s in 0..switches {
                    b.switch(format!("s{s}"), None);
                    add_hosts(&mut b, &format!("s{s}"), hosts);
                }
                for (x, y) in jellyfish_links(switches, degree, seed) {
                    b.link(End::node(format!("s{x}")), End::node(format!("s{y}")));
                }
            }
            Generator::BCube { n, k } => bcube(&mut b, n, k),
            Generator::Ring { n, hosts } => {
                for s in 0..n {
                    b.switch(format!("s{s}"), None);
                    add_hosts(&mut b, &format!("s{s}"), hosts);
                }
                for s in 0..n {
                    b.link(End::node(format!("s{s}")), End::node(format!("s{}", (s + 1) % n)));
                }
            }
            Generator::Mesh { n, hosts } => {
                for s in 0..n {
                    b.switch(format!("s{s}"), None);
                    add_hosts(&mut b, &format!("s{s}"), hosts);
                }
                for x in 0..n {
                    for y in x + 1..n {
                        b.link(End::node(format!("s{x}")), End::node(format!("s{y}")));
                    }
                }
            }
        }
        let t = b.build()?;
        if let Generator::Jellyfish { seed, .. } = self {
            if !t.connected() {
                return Err(err(
                    &self.to_string(),
                    format!("seed {seed} gives a disconnected graph; try another seed"),
                ));
            }
        }
        Ok(t)
    }
}

fn add_hosts(b: &mut Builder, switch: &str, hosts: u32) {
    for h in 0..hosts {
        let name = format!("h-{switch}-{h}");
        b.host(name.clone());
        b.link(End::node(name), End::node(switch));
    }
}

fn fat_tree(b: &mut Builder, k: u32, hosts: u32) {
    let half = k / 2;
    for c in 0..half * half {
        b.switch(format!("core{c}"), Some(2));
    }
    for pod in 0..k {
        for i in 0..half {
            b.switch(format!("agg{pod}-{i}"), Some(1));
        }
        for j in 0..half {
            let edge = format!("edge{pod}-{j}");
            b.switch(edge.clone(), Some(0));
            add_hosts(b, &edge, hosts);
        }
    }
    for pod in 0..k {
        for j in 0..half {
            for i in 0..half {
                b.link(End::node(format!("edge{pod}-{j}")), End::node(format!("agg{pod}-{i}")));
            }
        }
        // Aggregation switch i reaches core group i.
        for i in 0..half {
            for m in 0..half {
                b.link(End::node(format!("agg{pod}-{i}")), End::node(format!("core{}", i * half + m)));
            }
        }
    }
}

fn bcube(b: &mut Builder, n: u32, k: u32) {
    let servers = n.pow(k + 1);
    let per_level = n.pow(k);
    for s in 0..servers {
        b.switch(format!("srv{s}"), None);
        b.host(format!("h{s}"));
        b.link(End::node(format!("h{s}")), End::node(format!("srv{s}")));
    }
    for level in 0..=k {
        for i in 0..per_level {
            b.switch(format!("bsw{level}-{i}"), None);
        }
    }
    // A level-l switch connects the n servers whose addresses differ only in digit l.
    for s in 0..servers {
        for level in 0..=k {
            let low = s % n.pow(level);
            let high = s / n.pow(level + 1);
            let index = high * n.pow(level) + low;
            b.link(End::node(format!("srv{s}")), End::node(format!("bsw{level}-{index}")));
        }
    }
}

/// Jellyfish's construction: join random pairs of switches with free ports that are not yet
/// neighbours; when only unjoinable ports remain, break a random link (u, v) and join both
/// ends to a switch with two free ports.
fn jellyfish_links(n: u32, degree: u32, seed: u64) -> Vec<(u32, u32)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut free = vec![degree; n as usize];
    let mut adj: FxHashSet<(u32, u32)> = FxHashSet::default();
    let mut links: Vec<(u32, u32)> = Vec::new();
    let key = |a: u32, b: u32| (a.min(b), a.max(b));
    let mut open: Vec<u32> = (0..n).collect();
    loop {
        open.retain(|&s| free[s as usize] > 0);
        let mut joined = false;
        if open.len() >= 2 {
            for _ in 0..64 {
                let (a, b) = (open[rng.random_range(0..open.len())], open[rng.random_range(0..open.len())]);
                if a != b && !adj.contains(&key(a, b)) {
                    adj.insert(key(a, b));
                    links.push(key(a, b));
                    free[a as usize] -= 1;
                    free[b as usize] -= 1;
                    joined = true;
                    break;
                }
            }
            if !joined {
                'search: for (i, &a) in open.iter().enumerate() {
                    for &b in &open[i + 1..] {
                        if !adj.contains(&key(a, b)) {
                            adj.insert(key(a, b));
                            links.push(key(a, b));
                            free[a as usize] -= 1;
                            free[b as usize] -= 1;
                            joined = true;
                            break 'search;
                        }
                    }
                }
            }
        }
        if joined {
            continue;
        }
        let Some(&x) = open.iter().find(|&&s| free[s as usize] >= 2) else { break };
        let mut rewired = false;
        for _ in 0..10_000 {
            if links.is_empty() {
                break;
            }
            let i = rng.random_range(0..links.len());
            let (u, v) = links[i];
            if u == x || v == x || adj.contains(&key(x, u)) || adj.contains(&key(x, v)) {
                continue;
            }
            links.swap_remove(i);
            adj.remove(&(u, v));
            for w in [u, v] {
                adj.insert(key(x, w));
                links.push(key(x, w));
            }
            free[x as usize] -= 2;
            rewired = true;
            break;
        }
        if !rewired {
            break;
        }
    }
    links.sort_unstable();
    links
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(spec: &str) -> Topology {
        spec.parse::<Generator>().unwrap().build().unwrap()
    }

    #[test]
    fn a_fat_tree_has_the_textbook_counts() {
        let t = build("fattree:k=4");
        assert_eq!(t.switches.len(), 20);
        assert_eq!(t.hosts.len(), 16);
        assert_eq!(t.switch_links(), 32);
        assert!(t.switches.iter().all(|s| s.ports.len() == 4));
        let t = build("fattree:k=16,hosts=1");
        assert_eq!((t.switches.len(), t.switch_links()), (320, 2048));
    }

    #[test]
    fn jellyfish_is_regular_connected_and_reproducible() {
        let t = build("jellyfish:switches=50,degree=4,seed=7");
        let degrees: Vec<usize> =
            t.switches.iter().map(|s| s.ports.iter().filter(|&&p| !t.faces_host(p)).count()).collect();
        // At most one switch may keep a free port (when switches × degree is odd).
        assert!(degrees.iter().filter(|&&d| d != 4).count() <= 1, "{degrees:?}");
        assert_eq!(t.switch_links(), 100);
        let again = build("jellyfish:switches=50,degree=4,seed=7");
        assert_eq!(again.ports, t.ports);
        let other = build("jellyfish:switches=50,degree=4,seed=8");
        assert_ne!(other.ports, t.ports);
    }

    #[test]
    fn bcube_servers_reach_each_other_in_at_most_k_plus_one_switch_hops() {
        let t = build("bcube:n=4,k=1");
        assert_eq!(t.switches.len(), 16 + 8);
        let d = t.distances().unwrap();
        let servers: Vec<u32> = (0..t.switches.len() as u32).filter(|&s| t.has_hosts(s)).collect();
        assert_eq!(servers.len(), 16);
        let far = servers.iter().flat_map(|&a| servers.iter().map(move |&b| (a, b))).map(|(a, b)| d.get(a, b)).max();
        // server - switch - server - switch - server
        assert_eq!(far, Some(4));
    }

    #[test]
    fn specs_are_checked() {
        for (spec, msg) in [
            ("fattree:k=3", "even"),
            ("fattree", "needs k="),
            ("fattree:k=4,pods=2", "unknown parameter"),
            ("ring:n=x", "not a valid number"),
            ("torus:n=4", "unknown generator"),
        ] {
            let e = spec.parse::<Generator>().unwrap_err().to_string();
            assert!(e.contains(msg), "{spec}: {e}");
        }
        assert_eq!(build("ring:n=5").switch_links(), 5);
        assert_eq!(build("mesh:n=5").switch_links(), 10);
        assert_eq!(build("leafspine:leaves=4,spines=2").switch_links(), 8);
    }
}
