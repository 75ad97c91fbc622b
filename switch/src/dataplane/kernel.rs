//! The counters the kernel keeps for the switch: each AF_XDP socket's (XDP_STATISTICS),
//! each classifier's per-CPU class counters, and how long the forwarding thread waited
//! for a CPU. Reading them takes system calls (a getsockopt per socket, a map lookup per
//! class, a file in /proc), so `ctl stats` and a Prometheus scrape read them on their own
//! thread, from duplicates of the descriptors kept here; the forwarding thread answers
//! with the engine's counters and only says when a port's sockets and classifier change
//! (bound, closed, bound again), which is rare. The lock is taken on those changes and on
//! a stats request, never per frame.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard};

use libbpf_rs::MapHandle;

use crate::control::StatsFromKernel;
use crate::stats::{SocketCounters, Stats};
use crate::sys::{self, SysError};

use super::port::PortSockets;
use super::xdp::{class_counters, Classifier};

/// Every port's kernel-side counters, shared between the forwarding thread (which says
/// what changed) and the threads that answer stats requests.
#[derive(Debug, Default)]
pub struct KernelCounters {
    ports: Mutex<Vec<PortKernel>>,
    /// The forwarding thread's id once it runs; 0 before.
    loop_thread: AtomicI32,
}

#[derive(Debug, Default)]
struct PortKernel {
    /// Duplicates of the port's socket descriptors (queue k's at index k).
    sockets: Vec<OwnedFd>,
    /// What the port's sockets closed before had counted, so that its counters never go
    /// back when its interface is re-created.
    closed: SocketCounters,
    /// The classifier's per-CPU class counters (a new classifier starts them at zero).
    classes: Option<MapHandle>,
}

impl KernelCounters {
    fn ports(&self) -> MutexGuard<'_, Vec<PortKernel>> {
        // A reader that panicked left nothing half-written: every change is one assignment.
        self.ports.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Port `port` was bound (at start, or again): its sockets and classifier are these.
    pub fn bound(&self, port: usize, sockets: &PortSockets, classifier: &Classifier) -> Result<(), SysError> {
        let dup = |what| move |source| SysError::Os { what, source };
        let fds = sockets
            .sockets()
            .iter()
            .map(|s| {
                // SAFETY: the socket stays open while `sockets` is borrowed.
                let fd = unsafe { BorrowedFd::borrow_raw(s.fd()) };
                fd.try_clone_to_owned().map_err(dup("duplicating a socket for its counters"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let classes = classifier.counters_map().map_err(|e| SysError::Os {
            what: "duplicating the classifier's counters map",
            source: std::io::Error::other(e),
        })?;
        let mut ports = self.ports();
        if ports.len() <= port {
            ports.resize_with(port + 1, PortKernel::default);
        }
        let p = &mut ports[port];
        p.sockets = fds;
        p.classes = Some(classes);
        Ok(())
    }

    /// Port `port`'s sockets are about to close: what they counted is kept, and their
    /// duplicates closed (a duplicate would keep a socket, and its rings, alive).
    pub fn closing(&self, port: usize) {
        if let Some(p) = self.ports().get_mut(port) {
            p.closed = p.socket_counters();
            p.sockets.clear();
        }
    }

    /// Run on the forwarding thread once: its run-queue wait is part of the stats.
    pub fn set_loop_thread(&self, tid: libc::pid_t) {
        self.loop_thread.store(tid, Ordering::Relaxed);
    }

    /// Frames the kernel dropped on the way to the switch's rx rings, all ports together
    /// (for the backlog meter, at the ends of its spells).
    pub fn rx_lost(&self) -> u64 {
        self.ports().iter().map(PortKernel::socket_counters).map(|c| c.rx_lost()).sum()
    }

    /// How long the forwarding thread has waited for a CPU, µs, where the kernel tells.
    pub fn cpu_wait_us(&self) -> Option<u64> {
        let tid = self.loop_thread.load(Ordering::Relaxed);
        (tid != 0).then(|| sys::cpu_wait(tid)).flatten().map(|d| d.as_micros() as u64)
    }
}

impl StatsFromKernel for KernelCounters {
    fn complete(&self, stats: &mut Stats) {
        {
            let ports = self.ports();
            for (report, p) in stats.switch.ports.iter_mut().zip(ports.iter()) {
                // The loop's own counts of its tx ring stay.
                let (busy, most) = (report.socket.tx_kernel_busy, report.socket.tx_in_flight_max);
                report.socket = SocketCounters { tx_kernel_busy: busy, tx_in_flight_max: most, ..p.socket_counters() };
                report.xdp = p.classes.as_ref().map(class_counters).unwrap_or_default();
            }
        }
        stats.stalls.cpu_wait_us = self.cpu_wait_us();
    }
}

impl PortKernel {
    fn socket_counters(&self) -> SocketCounters {
        let mut c = self.closed;
        for fd in &self.sockets {
            if let Some(st) = xdp_statistics(fd) {
                c.rx_dropped += st.rx_dropped;
                c.rx_invalid_descs += st.rx_invalid_descs;
                c.rx_ring_full += st.rx_ring_full;
                c.rx_fill_ring_empty += st.rx_fill_ring_empty_descs;
                c.tx_invalid_descs += st.tx_invalid_descs;
                c.tx_ring_empty += st.tx_ring_empty_descs;
            }
        }
        c
    }
}

/// An AF_XDP socket's counters (XDP_STATISTICS), or `None` if the kernel would not say.
fn xdp_statistics(fd: &OwnedFd) -> Option<libc::xdp_statistics> {
    // SAFETY: all-zero is a valid xdp_statistics (plain integers).
    let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `st`, which is that large.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
            &mut st as *mut libc::xdp_statistics as *mut libc::c_void,
            &mut len,
        )
    };
    // An older kernel's shorter struct would leave the ring counters at zero unsaid.
    (rc == 0 && len as usize == std::mem::size_of::<libc::xdp_statistics>()).then_some(st)
}
