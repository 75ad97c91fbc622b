//! Scenario events: blocks, links, hosts that stop honouring pauses, storms.

use super::*;

impl Sim<'_> {
    pub(super) fn action(&mut self, index: usize) {
        match self.actions[index].clone() {
            Action::Block(label) => self.set_blocked(&label, true),
            Action::Unblock(label) => self.set_blocked(&label, false),
            Action::LinkDown([a, b]) => self.set_link(&a, &b, false),
            Action::LinkUp([a, b]) => self.set_link(&a, &b, true),
            Action::Storm(spec) => {
                let Some(host) = self.fabric.host_named(&spec.host) else { return };
                let until = self.now + Duration::from_nanos((spec.duration_ms * 1e6).round() as u64);
                self.storms.push(Storm { spec, host, until });
                let index = (self.storms.len() - 1) as u32;
                self.as_node(self.host_node(host), |sim| {
                    sim.at(sim.now, Ev::Storm { index });
                });
            }
            Action::IgnorePauses(name) => self.set_honour(&name, false),
            Action::HonourPauses(name) => self.set_honour(&name, true),
        }
    }

    pub(super) fn set_blocked(&mut self, label: &str, blocked: bool) {
        let Some(port) = self.fabric.port_named(label) else { return };
        let Owner::Switch(sw, local) = self.fabric.ports[port].owner else { return };
        self.as_node(self.port_node[port], |sim| {
            sim.switches[sw].switch.set_blocked(local, blocked);
            sim.after_switch(sw);
        });
    }

    /// Both directions of the links between nodes `a` and `b` go down or up.
    pub(super) fn set_link(&mut self, a: &str, b: &str, up: bool) {
        let fabric = self.fabric;
        let ends: Vec<FabricPort> =
            fabric.link_ports(a, b).into_iter().flat_map(|p| [p, fabric.ports[p].peer]).collect();
        for &p in &ends {
            let st = &mut self.ports[p];
            if st.up != up {
                st.up = up;
                st.epoch += 1;
            }
        }
        if up {
            for p in ends {
                self.as_node(self.port_node[p], |sim| sim.try_tx(p));
            }
        }
    }

    pub(super) fn set_honour(&mut self, host: &str, honour: bool) {
        if let Some(h) = self.fabric.host_named(host) {
            self.as_node(self.host_node(h), |sim| {
                sim.hosts[h].honour = honour;
                sim.try_tx(sim.fabric.hosts[h].port);
            });
        }
    }

    pub(super) fn storm(&mut self, index: usize) {
        let s = &self.storms[index];
        if self.now >= s.until {
            return;
        }
        let prios: Priorities = s.spec.priorities.iter().copied().collect();
        let port = self.fabric.hosts[s.host].port;
        let buf = self.arena.take();
        pfc::encode(
            self.arena.write(buf, pfc::MIN_FRAME_LEN),
            self.fabric.ports[port].mac,
            &MacControl::Pfc(Pfc::pause(prios, s.spec.quanta)),
        );
        self.hosts[s.host].control.push_back(buf);
        let next = self.now + Duration::from_nanos((s.spec.interval_us * 1e3).round() as u64);
        self.at(next, Ev::Storm { index: index as u32 });
        self.try_tx(port);
    }
}
