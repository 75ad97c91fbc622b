//! A route set made ready for an algorithm: its route model, or, for greedy over every
//! shortest route, the topology alone, tagged and verified a destination at a time (the
//! model's states grow with the square of the fabric: 9×10⁸ for a Jellyfish of 10 000
//! switches). `tagger compute` and `tagger eval` take the same path through it.

use std::cell::OnceCell;

use crate::algo::{stream, AlgoError, Algorithm, Tagging};
use crate::routes::dags::Dags;
use crate::routes::{shortest, RouteError, RouteModel, RouteSpec};
use crate::system::TagSystem;
use crate::topology::{Topology, TopologyError};
use crate::verify::{verify, verify_on, Report, Violation};

pub struct Plan<'t> {
    t: &'t Topology,
    spec: RouteSpec,
    algorithm: Algorithm,
    /// Tagged and verified a destination at a time, over `threads` threads.
    streamed: bool,
    threads: usize,
    /// The route model: made up front unless streamed, and then only if asked for.
    model: Option<Box<dyn RouteModel + 't>>,
    /// Streamed: the DAGs (and the distances between switches, 10⁸ of them for a
    /// Jellyfish of 10 000 switches), made once for the tagging and the verifier.
    dags: OnceCell<Dags<'t>>,
}

impl<'t> Plan<'t> {
    /// Fails as [`RouteSpec::model`] does on a topology with no route (streamed too).
    pub fn new(
        t: &'t Topology,
        spec: &RouteSpec,
        algorithm: Algorithm,
        threads: usize,
    ) -> Result<Plan<'t>, RouteError> {
        Plan::make(t, spec, algorithm, *spec == RouteSpec::Shortest && algorithm == Algorithm::Greedy, threads)
    }

    /// A plan to check tables against `spec`'s routes, whatever computed them (`tagger
    /// verify`): every shortest route a destination at a time. Its algorithm is never
    /// run.
    pub fn to_verify(t: &'t Topology, spec: &RouteSpec, threads: usize) -> Result<Plan<'t>, RouteError> {
        Plan::make(t, spec, Algorithm::Greedy, *spec == RouteSpec::Shortest, threads)
    }

    fn make(
        t: &'t Topology,
        spec: &RouteSpec,
        algorithm: Algorithm,
        streamed: bool,
        threads: usize,
    ) -> Result<Plan<'t>, RouteError> {
        let model = if streamed {
            shortest::check_any(t)?;
            None
        } else {
            Some(spec.model(t)?)
        };
        let threads = if streamed { threads.max(1) } else { 1 };
        Ok(Plan { t, spec: spec.clone(), algorithm, streamed, threads, model, dags: OnceCell::new() })
    }

    /// Whether the routes go a destination at a time.
    pub fn streamed(&self) -> bool {
        self.streamed
    }

    /// The threads tagging and verifying use (one unless streamed).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The route model, made now if it was not (for brute force beside streamed greedy).
    pub fn model(&mut self) -> Result<&dyn RouteModel, RouteError> {
        if self.model.is_none() {
            self.model = Some(self.spec.model(self.t)?);
        }
        Ok(self.model.as_deref().expect("made above"))
    }

    /// The route model's states, counted without making it when streamed.
    pub fn route_states(&self) -> usize {
        match &self.model {
            Some(m) => m.num_states(),
            None => self.t.ports.len() * (0..self.t.switches.len() as u32).filter(|&s| self.t.has_hosts(s)).count(),
        }
    }

    /// How the routes are walked, for a report's line.
    pub fn describe(&self) -> String {
        if self.streamed {
            format!("a DAG per destination, walked over {} threads", self.threads)
        } else {
            format!("{} route states", self.route_states())
        }
    }

    pub fn tag(&self) -> Result<Tagging, AlgoError> {
        match self.model.as_deref() {
            Some(m) if !self.streamed => self.algorithm.run(self.t, m),
            _ => stream::greedy_on(self.dags()?, self.threads),
        }
    }

    fn dags(&self) -> Result<&Dags<'t>, TopologyError> {
        if self.dags.get().is_none() {
            let _ = self.dags.set(Dags::new(self.t, self.threads)?);
        }
        Ok(self.dags.get().expect("set above"))
    }

    /// Checks `sys` against every route, as [`verify`] does.
    pub fn verify(&self, sys: &TagSystem) -> Result<Report, Violation> {
        match self.model.as_deref() {
            Some(m) if !self.streamed => verify(self.t, m, sys),
            _ => verify_on(self.dags().map_err(|e| Violation::Unwalkable(e.to_string()))?, sys, self.threads),
        }
    }
}
