//! Which event engine should drive the simulator: its own binary heap, or nexosim (a
//! well-kept discrete-event framework that can also spread models over cores)?
//!
//! Both replay the same recorded fat-tree run (`pfcsim::record_schedule`): every event
//! the simulator ran, at the node where it ran, scheduling the events it scheduled. The
//! switch and host work is left out, so what differs is only the engine's own cost per
//! event. Run with `cargo bench -p pfcsim --features des-bench --bench des_engines [-- k4|k8]`.

use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nexosim::model::{schedulable, BuildContext, Context, Model, ProtoModel};
use nexosim::ports::Output;
use nexosim::simulation::{Mailbox, SimInit};
use nexosim::time::MonotonicTime;
use serde::{Deserialize, Serialize};

use pfcsim::bench::fattree;
use pfcsim::engine::Schedule;
use pfcsim::queue::EventQueue;
use pfcsim::{record_schedule, simulate};

/// The same entry layout as the simulator's heap: time, order, and a 16-byte event.
#[derive(PartialEq, Eq)]
struct Entry {
    at: u64,
    seq: u64,
    payload: [u32; 4],
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The plain heap: pop the earliest, push what it scheduled. Returns the events run and
/// the distinct times they ran at (what a parallel engine could run together is at most
/// the events of one time).
fn replay_heap(s: &Schedule) -> (u64, u64) {
    let mut heap = BinaryHeap::new();
    let mut per_node = vec![0u64; s.nodes as usize];
    for id in 0..s.roots {
        heap.push(Entry { at: s.at[id as usize], seq: id as u64, payload: [id; 4] });
    }
    let (mut fired, mut steps, mut last) = (0, 0, u64::MAX);
    while let Some(e) = heap.pop() {
        if e.at > s.end {
            break;
        }
        fired += 1;
        if e.at != last {
            steps += 1;
            last = e.at;
        }
        let id = e.payload[0] as usize;
        if let Some(n) = per_node.get_mut(s.node[id] as usize) {
            *n += 1;
        }
        let (first, count) = s.children[id];
        for c in first..first + count {
            heap.push(Entry { at: s.at[c as usize], seq: c as u64, payload: [c; 4] });
        }
    }
    (fired, steps)
}

/// The simulator's own queue (a timing wheel with a heap beyond it) on the same replay;
/// with `record`, the ids in the order it popped them.
fn replay_wheel(s: &Schedule, record: bool) -> (u64, Vec<u32>) {
    let mut q = EventQueue::new(0);
    for id in 0..s.roots {
        q.push(s.at[id as usize], u64::from(id), [id; 4]);
    }
    let mut order = Vec::new();
    let mut fired = 0;
    while let Some((_, _, payload)) = q.pop_until(s.end) {
        fired += 1;
        let id = payload[0] as usize;
        if record {
            order.push(id as u32);
        }
        let (first, count) = s.children[id];
        for c in first..first + count {
            q.push(s.at[c as usize], u64::from(c), [c; 4]);
        }
    }
    (fired, order)
}

/// The ids in the order the heap pops them.
fn heap_order(s: &Schedule) -> Vec<u32> {
    let mut heap = BinaryHeap::new();
    for id in 0..s.roots {
        heap.push(Entry { at: s.at[id as usize], seq: id as u64, payload: [id; 4] });
    }
    let mut order = Vec::new();
    while let Some(e) = heap.pop() {
        if e.at > s.end {
            break;
        }
        let id = e.payload[0];
        order.push(id);
        let (first, count) = s.children[id as usize];
        for c in first..first + count {
            heap.push(Entry { at: s.at[c as usize], seq: c as u64, payload: [c; 4] });
        }
    }
    order
}

fn time(ns: u64) -> MonotonicTime {
    MonotonicTime::EPOCH + Duration::from_nanos(ns)
}

/// One node of the fabric as a nexosim model. An event for a neighbour goes out on the
/// output connected to it (delivered at once, as nexosim connects models); the receiver
/// schedules it on itself for its due time, as a link model would.
#[derive(Serialize, Deserialize)]
struct Node {
    id: u32,
    outs: Vec<Output<u32>>,
}

struct NodeEnv {
    schedule: Arc<Schedule>,
    /// Per destination node, which of `outs` reaches it.
    route: Vec<u32>,
    fired: Arc<AtomicU64>,
    unroutable: Arc<AtomicU64>,
    /// Events due now, run without going through the scheduler (it only takes future times).
    now: Vec<u32>,
}

#[Model(type Env = NodeEnv)]
impl Node {
    #[nexosim(init)]
    async fn init(&mut self, cx: &Context<Self>, env: &mut NodeEnv) {
        let s = env.schedule.clone();
        for id in 0..s.roots {
            if s.node[id as usize] == self.id {
                cx.schedule_event(time(s.at[id as usize]), schedulable!(Self::fire), id).expect("in the future");
            }
        }
    }

    pub async fn deliver(&mut self, id: u32, cx: &Context<Self>, env: &mut NodeEnv) {
        let at = time(env.schedule.at[id as usize]);
        if at > cx.time() {
            cx.schedule_event(at, schedulable!(Self::fire), id).expect("in the future");
        } else {
            self.fire(id, cx, env).await;
        }
    }

    #[nexosim(schedulable)]
    async fn fire(&mut self, id: u32, cx: &Context<Self>, env: &mut NodeEnv) {
        let s = env.schedule.clone();
        let now = cx.time();
        let mut fired = 0;
        env.now.push(id);
        while let Some(e) = env.now.pop() {
            fired += 1;
            let (first, count) = s.children[e as usize];
            for c in first..first + count {
                let (n, at) = (s.node[c as usize], time(s.at[c as usize]));
                if n == self.id {
                    if at > now {
                        cx.schedule_event(at, schedulable!(Self::fire), c).expect("in the future");
                    } else {
                        env.now.push(c);
                    }
                } else if let Some(&o) = env.route.get(n as usize).filter(|&&o| o != u32::MAX) {
                    self.outs[o as usize].send(c).await;
                } else {
                    env.unroutable.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        env.fired.fetch_add(fired, Ordering::Relaxed);
    }
}

struct ProtoNode {
    node: Node,
    env: NodeEnv,
}

impl ProtoModel for ProtoNode {
    type Model = Node;
    fn build(self, _: &mut BuildContext<Self>) -> (Node, NodeEnv) {
        (self.node, self.env)
    }
}

fn replay_nexosim(s: &Arc<Schedule>, threads: usize) -> (u64, u64) {
    let fired = Arc::new(AtomicU64::new(0));
    let unroutable = Arc::new(AtomicU64::new(0));
    let mailboxes: Vec<Mailbox<Node>> = (0..s.nodes).map(|_| Mailbox::new()).collect();
    let mut protos = Vec::new();
    for id in 0..s.nodes as usize {
        let mut route = vec![u32::MAX; s.nodes as usize];
        let mut outs = Vec::new();
        for &nb in &s.neighbours[id] {
            if route[nb as usize] == u32::MAX {
                route[nb as usize] = outs.len() as u32;
                let mut o = Output::default();
                o.connect(Node::deliver, &mailboxes[nb as usize]);
                outs.push(o);
            }
        }
        let env = NodeEnv {
            schedule: s.clone(),
            route,
            fired: fired.clone(),
            unroutable: unroutable.clone(),
            now: Vec::new(),
        };
        protos.push(ProtoNode { node: Node { id: id as u32, outs }, env });
    }
    let mut bench = SimInit::with_num_threads(threads);
    for (id, (proto, mailbox)) in protos.into_iter().zip(mailboxes).enumerate() {
        bench = bench.add_model(proto, mailbox, &format!("n{id}"));
    }
    let mut simu = bench.init(MonotonicTime::EPOCH).expect("the bench assembles");
    simu.step_until(time(s.end)).expect("the replay runs");
    (fired.load(Ordering::Relaxed), unroutable.load(Ordering::Relaxed))
}

fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    for (name, k) in [("k4", 4), ("k8", 8)] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let scenario = fattree(k, 50.0, 10.0);
        let started = Instant::now();
        let outcome = simulate(&scenario, 1, None).expect("the fat-tree runs");
        let full = started.elapsed().as_secs_f64();
        let events = outcome.counts.events;
        let s = Arc::new(record_schedule(&scenario, 1).expect("recorded"));
        println!(
            "fat-tree {name}: {events} events; the whole simulator: {full:.2} s ({:.2} M events/s)",
            events as f64 / full / 1e6
        );
        let started = Instant::now();
        let (fired, steps) = replay_heap(&s);
        let heap = started.elapsed().as_secs_f64();
        assert_eq!(fired, events, "the heap replays every event");
        println!("  {:.2} events per distinct time", events as f64 / steps as f64);
        println!("  plain heap            {heap:6.2} s  {:6.2} M events/s", events as f64 / heap / 1e6);
        let started = Instant::now();
        let (fired, _) = replay_wheel(&s, false);
        let wheel = started.elapsed().as_secs_f64();
        assert_eq!(fired, events, "the wheel replays every event");
        let (_, order) = replay_wheel(&s, true);
        assert_eq!(order, heap_order(&s), "the wheel pops in the heap's order");
        println!(
            "  timing wheel          {wheel:6.2} s  {:6.2} M events/s  ({:.1}x the heap)",
            events as f64 / wheel / 1e6,
            wheel / heap
        );
        for threads in [1, 2] {
            let started = Instant::now();
            let (fired, unroutable) = replay_nexosim(&s, threads);
            let t = started.elapsed().as_secs_f64();
            assert_eq!(unroutable, 0, "every event goes to the node itself or a neighbour");
            assert_eq!(fired, events, "nexosim replays every event");
            println!(
                "  nexosim, {threads} thread{}    {t:6.2} s  {:6.2} M events/s  ({:.1}x the heap)",
                if threads == 1 { " " } else { "s" },
                events as f64 / t / 1e6,
                t / heap
            );
        }
    }
}
