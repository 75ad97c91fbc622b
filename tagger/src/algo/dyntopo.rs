//! Incremental cycle detection: a topological order kept up to date as edges are added
//! (Pearce and Kelly, "A dynamic topological sort algorithm for directed acyclic graphs",
//! JEA 2006). An edge that agrees with the order costs nothing; one that does not searches
//! only the nodes between its ends in the order.
//!
//! Greedy's demotions used it until they took their edges in an order that makes a
//! confined search enough (`greedy::demotions`); the tests hold those to its answers.

pub struct DynTopo {
    /// Position of each node in the order.
    ord: Vec<u32>,
    out: Vec<Vec<u32>>,
    inn: Vec<Vec<u32>>,
    mark: Vec<bool>,
    touched: Vec<u32>,
    fwd: Vec<u32>,
    back: Vec<u32>,
    stack: Vec<u32>,
    slots: Vec<u32>,
}

impl DynTopo {
    /// A graph without edges whose nodes start in the order `ord` (a permutation of
    /// `0..ord.len()`).
    pub fn new(ord: Vec<u32>) -> DynTopo {
        let n = ord.len();
        DynTopo {
            ord,
            out: vec![Vec::new(); n],
            inn: vec![Vec::new(); n],
            mark: vec![false; n],
            touched: Vec::new(),
            fwd: Vec::new(),
            back: Vec::new(),
            stack: Vec::new(),
            slots: Vec::new(),
        }
    }

    pub fn before(&self, u: u32, v: u32) -> bool {
        self.ord[u as usize] < self.ord[v as usize]
    }

    fn push_edge(&mut self, u: u32, v: u32) {
        self.out[u as usize].push(v);
        self.inn[v as usize].push(u);
    }

    fn visit(&mut self, n: u32) {
        self.mark[n as usize] = true;
        self.touched.push(n);
        self.stack.push(n);
    }

    fn clear_marks(&mut self) {
        for &n in &self.touched {
            self.mark[n as usize] = false;
        }
        self.touched.clear();
        self.stack.clear();
    }

    /// Adds `u → v` unless it would close a cycle; returns whether it was added.
    pub fn try_add(&mut self, u: u32, v: u32) -> bool {
        if u == v {
            return false;
        }
        let (lb, ub) = (self.ord[v as usize], self.ord[u as usize]);
        if lb > ub {
            self.push_edge(u, v);
            return true;
        }
        // Forward from v through nodes not after u: reaching u means a cycle.
        self.fwd.clear();
        self.visit(v);
        while let Some(n) = self.stack.pop() {
            self.fwd.push(n);
            for i in 0..self.out[n as usize].len() {
                let w = self.out[n as usize][i];
                if w == u {
                    self.clear_marks();
                    return false;
                }
                if !self.mark[w as usize] && self.ord[w as usize] < ub {
                    self.visit(w);
                }
            }
        }
        // Backward from u through nodes not before v.
        self.back.clear();
        self.visit(u);
        while let Some(n) = self.stack.pop() {
            self.back.push(n);
            for i in 0..self.inn[n as usize].len() {
                let w = self.inn[n as usize][i];
                if !self.mark[w as usize] && self.ord[w as usize] > lb {
                    self.visit(w);
                }
            }
        }
        // u's ancestors move before v's descendants, into the same positions.
        let ord = &mut self.ord;
        self.back.sort_unstable_by_key(|&n| ord[n as usize]);
        self.fwd.sort_unstable_by_key(|&n| ord[n as usize]);
        self.slots.clear();
        self.slots.extend(self.back.iter().chain(&self.fwd).map(|&n| ord[n as usize]));
        self.slots.sort_unstable();
        for (&n, &slot) in self.back.iter().chain(&self.fwd).zip(&self.slots) {
            ord[n as usize] = slot;
        }
        self.clear_marks();
        self.push_edge(u, v);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_cycle_is_refused_and_the_order_follows_the_edges() {
        let mut g = DynTopo::new(vec![0, 1, 2, 3]);
        assert!(g.try_add(3, 2));
        assert!(g.try_add(2, 1));
        assert!(g.try_add(1, 0));
        assert!(!g.try_add(0, 3), "0 → 3 → 2 → 1 → 0");
        assert!(!g.try_add(2, 2));
        assert!(g.before(3, 2) && g.before(2, 1) && g.before(1, 0));
    }

    /// Whether `to` is reachable from `from` over `edges` (the reference).
    fn reaches(n: usize, edges: &[(u32, u32)], from: u32, to: u32) -> bool {
        let mut seen = vec![false; n];
        let mut stack = vec![from];
        while let Some(x) = stack.pop() {
            if x == to {
                return true;
            }
            for &(a, b) in edges {
                if a == x && !seen[b as usize] {
                    seen[b as usize] = true;
                    stack.push(b);
                }
            }
        }
        false
    }

    proptest! {
        #[test]
        fn agrees_with_plain_reachability(n in 2usize..12, tries in prop::collection::vec((0u32..12, 0u32..12), 1..60)) {
            let mut g = DynTopo::new((0..n as u32).collect());
            let mut kept: Vec<(u32, u32)> = Vec::new();
            for (u, v) in tries {
                let (u, v) = (u % n as u32, v % n as u32);
                let closes = u == v || reaches(n, &kept, v, u);
                prop_assert_eq!(g.try_add(u, v), !closes);
                if !closes {
                    kept.push((u, v));
                }
                for &(a, b) in &kept {
                    prop_assert!(g.before(a, b));
                }
            }
        }
    }
}
