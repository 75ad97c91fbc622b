//! Up-down routes in a Clos, with at most K bounces.
//!
//! The automaton has two phases, going up and going down, and counts bounces: a hop to a
//! higher tier is allowed while going up, or after going down as a bounce while fewer than
//! K were made; a hop to a lower tier is always allowed and switches to going down. Links
//! within a tier are not used, nor the link a packet just arrived on. A packet may be
//! delivered at any switch with hosts.

use super::{state_space, RouteError, RouteModel, State};
use crate::topology::{PortId, Topology};

pub struct UpDown<'t> {
    t: &'t Topology,
    layers: Vec<u32>,
    bounces: u32,
    /// Automaton states per port: (phase, bounces made).
    q: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Up,
    Down,
}

impl<'t> UpDown<'t> {
    pub fn new(t: &'t Topology, bounces: u32) -> Result<UpDown<'t>, RouteError> {
        let q = 2 * (bounces + 1);
        state_space(t.ports.len(), q as usize)?;
        Ok(UpDown { t, layers: t.layers()?, bounces, q })
    }

    fn state(&self, port: PortId, phase: Phase, made: u32) -> State {
        let phase = match phase {
            Phase::Up => 0,
            Phase::Down => 1,
        };
        port * self.q + phase * (self.bounces + 1) + made
    }

    fn decode(&self, s: State) -> (PortId, Phase, u32) {
        let (port, rest) = (s / self.q, s % self.q);
        let phase = if rest / (self.bounces + 1) == 0 { Phase::Up } else { Phase::Down };
        (port, phase, rest % (self.bounces + 1))
    }
}

impl RouteModel for UpDown<'_> {
    fn num_states(&self) -> usize {
        self.t.ports.len() * self.q as usize
    }

    fn port(&self, s: State) -> PortId {
        s / self.q
    }

    fn starts(&self, out: &mut Vec<State>) {
        for (p, _) in self.t.ports.iter().enumerate().filter(|(p, _)| self.t.faces_host(*p as PortId)) {
            out.push(self.state(p as PortId, Phase::Up, 0));
        }
    }

    fn successors(&self, s: State, out: &mut Vec<State>) {
        let (p, phase, made) = self.decode(s);
        let a = self.t.switch_of(p);
        let here = self.layers[a as usize];
        for &e in &self.t.switches[a as usize].ports {
            if e == p {
                continue;
            }
            let Some(next) = self.t.peer_port(e) else { continue };
            let there = self.layers[self.t.switch_of(next) as usize];
            if there > here {
                match phase {
                    Phase::Up => out.push(self.state(next, Phase::Up, made)),
                    Phase::Down if made < self.bounces => out.push(self.state(next, Phase::Up, made + 1)),
                    Phase::Down => {}
                }
            } else if there < here {
                out.push(self.state(next, Phase::Down, made));
            }
        }
    }

    fn deliveries(&self, s: State, out: &mut Vec<PortId>) {
        let p = self.port(s);
        out.extend(self.t.host_ports(self.t.switch_of(p)).filter(|&e| e != p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::testing::enumerate;
    use crate::topology::generate::Generator;

    #[test]
    fn leaf_spine_up_down_routes_are_the_shortest_paths() {
        let t: Topology = "leafspine:leaves=3,spines=2".parse::<Generator>().unwrap().build().unwrap();
        let m = UpDown::new(&t, 0).unwrap();
        let routes = enumerate(&m);
        // From each of 3 hosts: to each of 2 other leaves over each of 2 spines.
        assert_eq!(routes.len(), 3 * 2 * 2);
        assert!(routes.iter().all(|r| r.len() == 4), "host port, spine, leaf, delivery");
    }

    #[test]
    fn bounces_add_routes_that_turn_back_up() {
        let t: Topology = "leafspine:leaves=3,spines=2".parse::<Generator>().unwrap().build().unwrap();
        let one = enumerate(&UpDown::new(&t, 1).unwrap());
        let longest = one.iter().map(|r| r.len()).max().unwrap();
        // leaf, spine, leaf, (bounce) spine, leaf, delivery
        assert_eq!(longest, 6);
        let layers = t.layers().unwrap();
        for r in &one {
            let tiers: Vec<u32> = r[..r.len() - 1].iter().map(|&p| layers[t.switch_of(p) as usize]).collect();
            let turns_up = tiers.windows(3).filter(|w| w[0] > w[1] && w[1] < w[2]).count();
            assert!(turns_up <= 1, "{tiers:?}");
        }
    }
}
