//! The CPU slowpath thread: holds the frames of blocked ports, releases them, and keeps
//! the deadlock log and the record of DCFIT forwards (the engine decides those the moment
//! a message arrives, against the exact state of its queues).
//!
//! It talks to the dataplane over two crossbeam channels (frames and events up, releases
//! and block state down) and reads which priorities are paused from a [`SharedView`] of
//! atomics the dataplane publishes every turn: no locks on either side.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{select, Receiver, Sender};
use serde::Serialize;
use serde_json::json;

use super::sys::Waker;
use crate::control::{ControlMsg, Reply, Request};
use crate::core::checking::CheckingMessage;
use crate::core::dcfit::DeadlockEvent;
use crate::core::slowpath::{Released, SlowpathBuffer, ToDataplane, ToSlowpath};

/// How often held frames are looked at again (a pause on their egress may have ended).
const RECHECK: Duration = Duration::from_millis(1);

/// What the dataplane publishes for the slowpath after every turn.
#[derive(Debug)]
pub struct SharedView {
    /// Per port: priorities its link partner has paused.
    pub paused: Vec<AtomicU8>,
}

impl SharedView {
    pub fn new(ports: usize) -> SharedView {
        SharedView { paused: (0..ports).map(|_| AtomicU8::new(0)).collect() }
    }
}

/// A deadlock as `pfcswitch ctl deadlocks` shows it.
#[derive(Clone, Debug, Serialize)]
struct DeadlockRecord {
    #[serde(flatten)]
    event: DeadlockEvent,
    switch: String,
    origin_port_name: String,
    return_port_name: String,
}

/// A checking message passed on, for the record.
#[derive(Clone, Debug, Serialize)]
struct ForwardRecord {
    message: CheckingMessage,
    from_port: String,
    to_port: String,
}

/// The most forwards remembered for `ctl deadlocks`.
const FORWARD_LOG: usize = 64;

pub struct Slowpath {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Slowpath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slowpath").finish()
    }
}

/// Everything the thread needs.
pub struct SlowpathParts {
    pub switch_name: String,
    pub port_names: Vec<String>,
    pub max_frames: usize,
    pub from_dataplane: Receiver<ToSlowpath>,
    pub to_dataplane: Sender<ToDataplane>,
    pub waker: Waker,
    pub control: Receiver<ControlMsg>,
    pub view: Arc<SharedView>,
}

impl Slowpath {
    pub fn start(parts: SlowpathParts) -> std::io::Result<Slowpath> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new().name("slowpath".into()).spawn(move || run(parts, thread_stop))?;
        Ok(Slowpath { stop, thread: Some(thread) })
    }
}

impl Drop for Slowpath {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct State {
    parts: SlowpathParts,
    buffer: SlowpathBuffer,
    deadlocks: Vec<DeadlockRecord>,
    forwards: Vec<ForwardRecord>,
    released: Vec<Released>,
}

fn run(parts: SlowpathParts, stop: Arc<AtomicBool>) {
    let ports = parts.port_names.len();
    let buffer = SlowpathBuffer::new(ports, parts.max_frames);
    let mut s = State { parts, buffer, deadlocks: Vec::new(), forwards: Vec::new(), released: Vec::new() };
    let (events, control) = (s.parts.from_dataplane.clone(), s.parts.control.clone());
    while !stop.load(Ordering::Relaxed) {
        select! {
            recv(events) -> ev => match ev {
                Ok(ev) => s.on_event(ev),
                Err(_) => break,
            },
            recv(control) -> msg => match msg {
                Ok(msg) => {
                    let reply = s.on_request(&msg.request);
                    let _ = msg.reply.send(reply);
                }
                Err(_) => break,
            },
            default(RECHECK) => {}
        }
        if s.buffer.held() > 0 {
            s.release();
        }
    }
    let left = s.buffer.drain().len();
    if left > 0 {
        tracing::warn!(frames = left, "frames held for blocked ports were discarded at shutdown");
    }
}

impl State {
    fn send(&self, msg: ToDataplane) {
        // The dataplane outlives the slowpath; a closed channel only happens at shutdown.
        let _ = self.parts.to_dataplane.send(msg);
    }

    fn on_event(&mut self, ev: ToSlowpath) {
        match ev {
            ToSlowpath::Held(frame) => self.buffer.hold(frame),
            ToSlowpath::CheckForwarded { from, to, msg } => {
                self.record_forward(usize::from(from), usize::from(to), msg)
            }
            ToSlowpath::Deadlock(event) => {
                let name = |p: usize| self.parts.port_names.get(p).cloned().unwrap_or_else(|| p.to_string());
                tracing::warn!(
                    switch = %self.parts.switch_name,
                    origin_port = %name(event.origin_port),
                    return_port = %name(event.return_port),
                    path_length = event.path_length,
                    resolved = event.resolved,
                    "PFC deadlock: our checking message came back around a cycle of pauses"
                );
                self.deadlocks.push(DeadlockRecord {
                    switch: self.parts.switch_name.clone(),
                    origin_port_name: name(event.origin_port),
                    return_port_name: name(event.return_port),
                    event,
                });
            }
            ToSlowpath::Confirmed { id, at_ns } => {
                if let Some(d) = self.deadlocks.iter_mut().find(|d| d.event.id == id) {
                    d.event.confirmations += 1;
                    d.event.last_seen_ns = at_ns;
                }
            }
        }
    }

    /// Remembers a forward the switch made, for `ctl deadlocks`.
    fn record_forward(&mut self, from: usize, to: usize, message: CheckingMessage) {
        if self.forwards.len() == FORWARD_LOG {
            self.forwards.remove(0);
        }
        let name = |p: usize| self.parts.port_names.get(p).cloned().unwrap_or_else(|| p.to_string());
        self.forwards.push(ForwardRecord { message, from_port: name(from), to_port: name(to) });
    }

    /// Gives back what may go now, in order.
    fn release(&mut self) {
        let view = &self.parts.view;
        self.released.clear();
        self.buffer.release(|e| view.paused[e].load(Ordering::Relaxed), &mut self.released);
        if self.released.is_empty() {
            return;
        }
        for r in &self.released {
            let _ = self.parts.to_dataplane.send(ToDataplane::Release(*r));
        }
        self.parts.waker.wake();
    }

    fn port(&self, name: &str) -> Result<usize, String> {
        self.parts.port_names.iter().position(|n| n == name).ok_or_else(|| {
            format!("no port {name:?} on {}; ports: {}", self.parts.switch_name, self.parts.port_names.join(", "))
        })
    }

    fn on_request(&mut self, req: &Request) -> Reply {
        match req {
            Request::Block { port } => {
                let p = self.port(port)?;
                self.buffer.block(p);
                self.send(ToDataplane::SetBlocked { port: p as u16, blocked: true });
                self.parts.waker.wake();
                Ok(json!(format!("{port} blocked")))
            }
            Request::Unblock { port } => {
                let p = self.port(port)?;
                // Release first: what comes back reaches the egress queue before new frames
                // can bypass the slowpath.
                self.buffer.unblock(p);
                self.release();
                self.send(ToDataplane::SetBlocked { port: p as u16, blocked: false });
                self.parts.waker.wake();
                let still = self.buffer.held_for(p);
                Ok(json!(format!("{port} unblocked; {still} frames still held (their priority is paused)")))
            }
            Request::Deadlocks => Ok(json!({
                "switch": self.parts.switch_name,
                "deadlocks": self.deadlocks,
                "recent_forwards": self.forwards,
            })),
            other => Err(format!("the slowpath does not handle {other:?}")),
        }
    }
}
