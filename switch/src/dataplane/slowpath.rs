//! The CPU slowpath thread: runs the engine's I/O-free [`Slowpath`] (held frames of
//! blocked ports, the deadlock log, the record of DCFIT forwards) beside the dataplane.
//!
//! It talks to the dataplane over two crossbeam channels (events up, released frames
//! down) and reads which priorities may not be released from a [`SharedView`] of atomics
//! the dataplane publishes every turn: no locks on either side.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{select, Receiver, Sender};

use crate::control::{ControlMsg, Reply, Request, Response};
use crate::core::priorities::Priorities;
use crate::core::slowpath::{HeldFrame, Slowpath, ToSlowpath};
use crate::sys::Waker;

/// What the dataplane publishes for the slowpath after every turn.
#[derive(Debug)]
pub struct SharedView {
    /// Per port: priorities whose held frames may not go yet ([`Switch::stopped`]), as
    /// the set's bits (an atomic holds a byte).
    ///
    /// [`Switch::stopped`]: crate::core::switch::Switch::stopped
    pub stopped: Vec<AtomicU8>,
}

impl SharedView {
    pub fn new(ports: usize) -> SharedView {
        SharedView { stopped: (0..ports).map(|_| AtomicU8::new(Priorities::ALL.bits())).collect() }
    }
}

pub struct SlowpathThread {
    /// Dropped to stop the thread: its receiving end then wakes the thread at once.
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for SlowpathThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlowpathThread").finish()
    }
}

/// Everything the thread needs.
pub struct SlowpathParts {
    pub slowpath: Slowpath,
    pub from_dataplane: Receiver<ToSlowpath>,
    pub to_dataplane: Sender<HeldFrame>,
    pub waker: Waker,
    pub control: Receiver<ControlMsg>,
    pub view: Arc<SharedView>,
}

impl SlowpathThread {
    pub fn start(parts: SlowpathParts) -> std::io::Result<SlowpathThread> {
        let (stop, stopped) = crossbeam_channel::bounded(0);
        let thread = std::thread::Builder::new().name("slowpath".into()).spawn(move || run(parts, stopped))?;
        Ok(SlowpathThread { stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for SlowpathThread {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Waits for events, requests and the stop; while frames are held, it also wakes when
/// the slowpath wants to look at them again ([`Slowpath::poll_timeout`]). With none held
/// it sleeps until something arrives: a thread that woke every millisecond for nothing
/// took the dataplane's CPU from it a thousand times a second, and with it gave the
/// CPU's other tasks a thousand chances to run.
fn run(mut parts: SlowpathParts, stop: Receiver<()>) {
    let (events, control) = (parts.from_dataplane.clone(), parts.control.clone());
    loop {
        let recheck = match parts.slowpath.poll_timeout() {
            None => crossbeam_channel::never(),
            Some(at) => crossbeam_channel::after(at.saturating_since(crate::sys::now())),
        };
        select! {
            recv(events) -> ev => match ev {
                Ok(ev) => on_event(&mut parts.slowpath, ev),
                Err(_) => break,
            },
            recv(control) -> msg => match msg {
                Ok(msg) => {
                    let _ = msg.reply.send(on_request(&parts.slowpath, &msg.request));
                }
                Err(_) => break,
            },
            recv(recheck) -> _ => {}
            // Nothing is ever sent: the sender's drop disconnects it.
            recv(stop) -> _ => break,
        }
        // The slowpath's call order after every wake: the event taken above, the time,
        // then what it releases (after an unblock, or at a look due while frames are
        // held), as every driver of it does.
        let now = crate::sys::now();
        parts.slowpath.handle_timeout(now);
        release(&mut parts, now);
    }
    let left = parts.slowpath.drain().len();
    if left > 0 {
        tracing::warn!(frames = left, "frames held for blocked ports were discarded at shutdown");
    }
}

fn on_event(slowpath: &mut Slowpath, ev: ToSlowpath) {
    if let Some(d) = slowpath.handle_event(ev) {
        tracing::warn!(
            switch = %d.switch,
            origin_port = %d.origin_port_name,
            return_port = %d.return_port_name,
            path_length = d.event.path_length,
            resolved = d.event.resolved,
            "PFC deadlock: our checking message came back around a cycle of pauses"
        );
    }
}

/// Gives back what may go now, in order.
fn release(parts: &mut SlowpathParts, now: crate::core::time::Time) {
    let view = &parts.view;
    let released =
        parts.slowpath.poll_released(now, |e| Priorities::from_bits(view.stopped[e].load(Ordering::Relaxed)));
    if released.is_empty() {
        return;
    }
    for r in released {
        // The dataplane outlives the slowpath; a closed channel only happens at shutdown.
        let _ = parts.to_dataplane.send(*r);
    }
    parts.waker.wake();
}

fn on_request(slowpath: &Slowpath, req: &Request) -> Reply {
    match req {
        Request::Deadlocks => Ok(Response::Deadlocks(slowpath.deadlocks())),
        other => Err(format!("the slowpath does not handle {other:?}")),
    }
}
