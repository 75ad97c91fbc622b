//! Every shortest path between every pair of switches with hosts (ECMP's route set).
//!
//! The automaton state is the destination switch: from switch A toward D a packet may
//! take any link to a neighbour one hop closer to D.

use rustc_hash::FxHashMap;

use super::{state_space, RouteError, RouteModel, State};
use crate::topology::{Distances, PortId, SwitchId, Topology};

pub struct Shortest<'t> {
    t: &'t Topology,
    dist: Distances,
    /// The switches with hosts, as destinations.
    dests: Vec<SwitchId>,
}

impl<'t> Shortest<'t> {
    pub fn new(t: &'t Topology) -> Result<Shortest<'t>, RouteError> {
        let dests: Vec<SwitchId> = (0..t.switches.len() as SwitchId).filter(|&s| t.has_hosts(s)).collect();
        state_space(t.ports.len(), dests.len())?;
        Ok(Shortest { t, dist: t.distances()?, dests })
    }

    fn q(&self) -> u32 {
        self.dests.len() as u32
    }

    fn dest(&self, s: State) -> SwitchId {
        self.dests[(s % self.q()) as usize]
    }
}

/// The errors [`super::RouteSpec::model`] gives for `shortest` (no host at all, or no
/// two hosts a route joins), found without the model: a switch with two hosts, or two
/// switches with hosts linked through switches.
pub fn check_any(t: &Topology) -> Result<(), RouteError> {
    let with_hosts: Vec<SwitchId> = (0..t.switches.len() as SwitchId).filter(|&s| t.has_hosts(s)).collect();
    if with_hosts.is_empty() {
        return Err(RouteError::NoHosts);
    }
    if with_hosts.iter().any(|&s| t.host_ports(s).nth(1).is_some()) {
        return Ok(());
    }
    // Two switches with hosts in one component are joined by a route.
    let component = t.switch_components();
    let mut seen = std::collections::HashSet::new();
    if with_hosts.iter().all(|&s| seen.insert(component[s as usize])) {
        return Err(RouteError::NoRoutes("no shortest route".into()));
    }
    Ok(())
}

impl RouteModel for Shortest<'_> {
    fn num_states(&self) -> usize {
        self.t.ports.len() * self.dests.len()
    }

    fn port(&self, s: State) -> PortId {
        s / self.q()
    }

    fn starts(&self, out: &mut Vec<State>) {
        let index: FxHashMap<SwitchId, u32> = self.dests.iter().enumerate().map(|(i, &d)| (d, i as u32)).collect();
        for &a in &self.dests {
            let host_ports: Vec<PortId> = self.t.host_ports(a).collect();
            for &p in &host_ports {
                for &d in &self.dests {
                    // To a host on the same switch only when there is another one.
                    let reachable = self.dist.get(a, d) != u8::MAX;
                    if reachable && (d != a || host_ports.len() > 1) {
                        out.push(p * self.q() + index[&d]);
                    }
                }
            }
        }
    }

    fn successors(&self, s: State, out: &mut Vec<State>) {
        let (p, d) = (self.port(s), self.dest(s));
        let a = self.t.switch_of(p);
        let togo = self.dist.get(a, d);
        if togo == 0 {
            return;
        }
        let qi = s % self.q();
        for &e in &self.t.switches[a as usize].ports {
            let Some(next) = self.t.peer_port(e) else { continue };
            if self.dist.get(self.t.switch_of(next), d) == togo - 1 {
                out.push(next * self.q() + qi);
            }
        }
    }

    fn deliveries(&self, s: State, out: &mut Vec<PortId>) {
        let p = self.port(s);
        let a = self.t.switch_of(p);
        if a == self.dest(s) {
            out.extend(self.t.host_ports(a).filter(|&e| e != p));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::testing::enumerate;
    use crate::topology::generate::Generator;

    #[test]
    fn a_ring_has_one_shortest_path_per_pair_and_two_between_opposite_switches() {
        let t: Topology = "ring:n=4".parse::<Generator>().unwrap().build().unwrap();
        let routes = enumerate(&Shortest::new(&t).unwrap());
        // 4 sources × (2 neighbours + 2 paths to the opposite switch).
        assert_eq!(routes.len(), 16);
        assert_eq!(routes.iter().map(|r| r.len()).max(), Some(4));
    }
}
