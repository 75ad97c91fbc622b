//! The IO shell around [`crate::core::switch::Switch`]: one AF_XDP socket per port and
//! rx queue on a shared UMEM, the XDP classifier, and a single polling loop that moves
//! frames between the rings and the engine in batches.

pub mod kernel;
pub mod port;
mod rings;
pub mod slowpath;
pub mod stall;

use afxdp::{paths, xdp, xsk};

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use crate::capture;
use crate::config::{DataplaneConfig, RunConfig, XdpMode};
use crate::control::{ControlMsg, Reply, Request, Response};
use crate::core::pfcwd::WatchdogEvent;
use crate::core::ports::PortId;
use crate::core::slowpath::{HeldFrame, Slowpath, ToSlowpath};
use crate::core::switch::{Switch, TxBatch};
use crate::core::tagging::TagTable;
use crate::core::time::Time;
use crate::core::PortSet;
use crate::stats::KernelPaths;
use crate::stats::{PortReport, SocketCounters, SpeedSource, Stats};
use crate::sys::{self, LinkState, SysError, Waker};
use afxdp::frame_size::{geometry_for, geometry_for_mtu, largest_frame, max_frame_note, Geometry};
use kernel::KernelCounters;
use paths::Probed;
use port::{PortError, PortSockets};
use rings::Rings;
use slowpath::{SharedView, SlowpathParts, SlowpathThread};
use xdp::{Classifier, ClassifierBuild, XdpError};
use xsk::{BindOn, UmemPool, XskError};

/// Frames kept out of the fill rings for frames the switch builds (PFC, flood copies).
const POOL_RESERVE: usize = 256;
/// Longest sleep, so that a stuck wake-up source cannot stall the loop.
const MAX_SLEEP: Duration = Duration::from_millis(2);
/// How much earlier than a deadline a timed sleep is set to end (on a VM they wake
/// 25–40 µs late, at p99 up to 75 µs).
const SLEEP_MARGIN: Duration = Duration::from_micros(100);
/// Kick/reclaim rounds per port per turn: copy-mode sendto sends at most 32 frames.
const KICK_ROUNDS: usize = 16;
/// The most frames a port may have on its tx ring, not yet completed, in batches. Each
/// turn puts at most one batch there and kicks until the kernel stops taking frames, so
/// frames only stay while the kernel refuses them (a full veth peer); more of them would
/// wait where XOFF, ECN marking and the scheduler cannot see them, and would still leave
/// after a pause arrived. Two batches let a turn add one while the last is still there.
const TX_IN_FLIGHT_BATCHES: usize = 2;
/// How long shutdown keeps sending what is queued.
const DRAIN_TIME: Duration = Duration::from_millis(500);
/// How often the ports' link states are read.
const LINK_CHECK: Duration = Duration::from_millis(100);
/// How many checks in a row must find a link down before the port is taken down: the
/// kernel reports a veth down for a few hundred ms when an XDP program is attached to it
/// or its peer (and link events are batched up to a second), while frames still flow.
const LINK_DOWN_CHECKS: u32 = 12;

#[derive(Debug, thiserror::Error)]
pub enum DataplaneError {
    #[error(transparent)]
    Sys(#[from] SysError),
    #[error(transparent)]
    Xdp(#[from] XdpError),
    #[error(transparent)]
    Xsk(#[from] XskError),
    #[error(transparent)]
    Port(#[from] PortError),
    #[error("{field}: {problem}")]
    Config { field: String, problem: String },
    #[error("kicking tx on {iface}: {source}")]
    Kick { iface: String, source: std::io::Error },
    #[error("binding {iface} again on a thread of its own: {problem}")]
    Rebind { iface: String, problem: String },
}

/// Start-up options that are not part of the switch configuration.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Replace XDP programs already attached to the interfaces.
    pub force: bool,
    /// The Tagger table to apply, compiled for this configuration.
    pub tags: Option<TagTable>,
    /// Where stats requests read the kernel's counters (the control server's and the
    /// metrics endpoint's routes hold it too).
    pub kernel: Arc<KernelCounters>,
}

pub struct Dataplane {
    // Field order is drop order: stop the slowpath, detach XDP, close sockets, free the UMEM.
    _slowpath: SlowpathThread,
    classifiers: Vec<Classifier>,
    ports: Vec<PortSockets>,
    pool: UmemPool,
    switch: Switch,
    config: RunConfig,
    batch: TxBatch,
    /// UMEM frames the largest frame takes (above one: AF_XDP multi-buffer), which a tx
    /// ring must have room for per frame.
    buffers_per_frame: usize,
    waker: Waker,
    /// Per port: turns in which the kernel took none of the outstanding tx frames.
    tx_busy: Vec<u64>,
    /// Per port: the most frames it had on its tx ring at once (since start or
    /// `ctl clear`), at most [`TX_IN_FLIGHT_BATCHES`] batches.
    tx_in_flight_max: Vec<u32>,
    /// Some port's kernel tx queue made no progress this turn.
    tx_blocked: bool,
    to_slowpath: Sender<ToSlowpath>,
    from_slowpath: Receiver<HeldFrame>,
    view: Arc<SharedView>,
    /// Per port: the interface index it was bound at. Whether a port is up the engine
    /// keeps ([`Switch::link_up`]); only ports that are up are polled, received from and
    /// sent on.
    ifindex: Vec<u32>,
    /// Per port: the MTU its interface had at start, which the UMEM is sized for.
    mtu: Vec<u32>,
    /// Per port: its interface is gone (deleted, or replaced by another of the same name)
    /// and its sockets closed, until an interface of that name is back and up.
    gone: Vec<bool>,
    /// Per port: its link could not be read at the last check (said once per spell).
    unreadable: Vec<bool>,
    /// Per port: binding it again failed at the last try (said once per spell).
    rebind_failed: Vec<bool>,
    /// Per port: binding it again, under way on a thread of its own.
    rebinding: Vec<Option<Rebinding>>,
    /// Per port: consecutive checks that found the link down while it counted as up.
    down_checks: Vec<u32>,
    next_link_check: Time,
    /// A port went up or down since the poll set was last made.
    links_changed: bool,
    stalls: stall::StallMeter,
    backlog: stall::BacklogMeter,
    /// Frames taken off the rx rings so far, for the backlog meter.
    rx_taken: u64,
    /// The kernel's counters, read by whoever asks for stats.
    kernel: Arc<KernelCounters>,
    /// Per port: where its speed came from.
    speed_from: Vec<SpeedSource>,
    /// The running `ctl capture`, if any.
    capture: Option<capture::Capture>,
    /// What every port's classifier is built as (a port bound again is built the same).
    build: ClassifierBuild,
    /// The paths taken for the kernel's optional parts, and why.
    paths: KernelPaths,
}

/// A port being bound again on a thread of its own ([`Dataplane::try_rebind`]).
struct Rebinding {
    handle: std::thread::JoinHandle<Result<(Classifier, PortSockets), DataplaneError>>,
    /// The interface it binds.
    ifindex: u32,
}

impl std::fmt::Debug for Dataplane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataplane").field("ports", &self.ports).field("pool", &self.pool).finish()
    }
}

/// Picks the UMEM geometry for the largest frame any port can receive (see
/// [`geometry_for`]), with what an in-frame arrival stamp adds to it; a frame over one
/// UMEM frame needs a frags-aware classifier.
fn geometry(config: &RunConfig, mtus: &[(String, u32)], build: &ClassifierBuild) -> Result<Geometry, XskError> {
    let overhead = build.arrival_stamp.bytes_in_frame();
    let Some((iface, mtu)) = mtus.iter().max_by_key(|(_, mtu)| *mtu) else {
        return Ok(geometry_for(largest_frame(1500) + overhead, config.dataplane.frame_size).expect("MTU 1500 fits"));
    };
    geometry_for_mtu(*mtu, config.dataplane.frame_size, overhead, build.frags_aware).map_err(|advice| {
        XskError::FrameTooLarge {
            iface: iface.clone(),
            mtu: *mtu,
            frame: largest_frame(*mtu) + overhead,
            advice: advice.replace("IF", iface),
        }
    })
}

impl Dataplane {
    /// Opens every port: checks privileges and interfaces, loads and attaches the XDP
    /// classifier, binds the AF_XDP sockets. Anything opened is closed again on error.
    /// `waker` is the handle other threads use to interrupt the loop's sleep;
    /// `slowpath_control` carries the control requests the slowpath thread answers.
    pub fn open(
        mut config: RunConfig,
        options: Options,
        waker: Waker,
        slowpath_control: Receiver<ControlMsg>,
    ) -> Result<Dataplane, DataplaneError> {
        sys::check_privileges()?;
        let mut infos = Vec::new();
        for port in &config.ports {
            infos.push(sys::interface(&port.iface)?);
        }
        for (port, info) in config.ports.iter_mut().zip(&infos) {
            if port.mac.is_none() {
                port.mac = Some(info.mac);
            }
            // A port takes what its interface's MTU lets through, unless told otherwise;
            // a configured limit that disagrees with the MTU is said (frames above an
            // MTU never arrive, and frames the MTU allows but the limit refuses stall TCP).
            match port.max_frame {
                None => port.max_frame = Some(largest_frame(info.mtu) as usize),
                Some(m) => {
                    if let Some(note) = max_frame_note(port.name.as_deref().unwrap_or(&port.iface), m, info.mtu) {
                        tracing::warn!("{note}");
                    }
                }
            }
        }
        let speed_from = speeds_from_nics(&mut config)?;
        let d = &config.dataplane;
        // Every rx queue gets a socket, unless `dataplane.queues` binds fewer.
        let mut queues = Vec::new();
        for info in &infos {
            let has = sys::rx_queues(&info.name)?;
            let bind = d.queues.map_or(has, |q| q.min(has));
            if bind < has {
                tracing::warn!(
                    iface = %info.name,
                    queues = has,
                    bound = bind,
                    "binding only some rx queues: frames the NIC steers to the others are dropped; \
                     `ethtool -L {} combined {bind}` steers every frame to the bound ones",
                    info.name
                );
            }
            queues.push((has, bind));
        }
        let rx_sockets: usize = queues.iter().map(|&(_, bind)| bind as usize).sum();
        let pool_size = d.pool(config.ports.len(), rx_sockets);
        let umem_frames = pool_size.frames;
        let rings_need = pool_size.in_rings + POOL_RESERVE as u32;
        if umem_frames < rings_need {
            return Err(DataplaneError::Config {
                field: "dataplane.umem_frames".into(),
                problem: format!(
                    "{umem_frames} frames cannot fill the rings of {} ports ({rx_sockets} rx queues) with ring_size {} \
                     (need at least {rings_need})",
                    config.ports.len(),
                    d.ring_size
                ),
            });
        }
        // Once for every port: what the kernel allows does not change between them.
        let Probed { build, paths } =
            paths::probe(paths::Wanted { arrival_stamp: d.arrival_stamp, xdp_frags: d.xdp_frags })?;
        for line in paths.lines() {
            tracing::info!("{line}");
        }
        let mtus: Vec<(String, u32)> = infos.iter().map(|i| (i.name.clone(), i.mtu)).collect();
        let geometry = geometry(&config, &mtus, &build)?;
        let buffers_per_frame = geometry.buffers_per_frame as usize;
        if buffers_per_frame > 1 {
            tracing::info!(
                frame_size = geometry.frame_size,
                buffers_per_frame,
                "jumbo frames: each takes up to {buffers_per_frame} UMEM frames (AF_XDP multi-buffer)"
            );
        }
        let mut pool = UmemPool::new(umem_frames, geometry.frame_size, d.ring_size, build.reading())?;
        let mut classifiers = Vec::new();
        let mut ports = Vec::new();
        for (i, (info, &queues)) in infos.iter().zip(&queues).enumerate() {
            let on = pool.bind_on(queues.1);
            let (classifier, port) = bind_port(on, d, &build, info, queues.0, buffers_per_frame, options.force)?;
            options.kernel.bound(i, &port, &classifier)?;
            classifiers.push(classifier);
            ports.push(port);
        }
        let mut switch = Switch::new(&config, options.tags, pool_size, sys::now());
        switch.reserve_tables();
        let frame_caps = config.frame_caps(pool_size);
        tracing::info!(
            name = %config.name,
            ports = config.ports.len(),
            rx_queues = ?queues.iter().map(|q| q.1).collect::<Vec<_>>(),
            umem_frames = pool.capacity(),
            frame_size = geometry.frame_size,
            "dataplane ready"
        );
        let tx_busy = vec![0; ports.len()];
        let tx_in_flight_max = vec![0; ports.len()];
        // Every held frame is a UMEM frame: a channel this deep never refuses one.
        let (to_slowpath, slowpath_events) = crossbeam_channel::bounded(pool.capacity() as usize + 4096);
        let (slowpath_out, from_slowpath) = crossbeam_channel::bounded(pool.capacity() as usize + 4096);
        let view = Arc::new(SharedView::new(ports.len()));
        let slowpath = SlowpathThread::start(SlowpathParts {
            slowpath: Slowpath::new(&config.name, switch.port_names(), frame_caps.slowpath as usize),
            from_dataplane: slowpath_events,
            to_dataplane: slowpath_out,
            waker: waker.try_clone()?,
            control: slowpath_control,
            view: view.clone(),
        })
        .map_err(|source| SysError::Os { what: "starting the slowpath thread", source })?;
        let mut dp = Dataplane {
            _slowpath: slowpath,
            classifiers,
            ports,
            pool,
            switch,
            config,
            batch: TxBatch::new(),
            buffers_per_frame,
            waker,
            tx_busy,
            tx_in_flight_max,
            tx_blocked: false,
            to_slowpath,
            from_slowpath,
            view,
            ifindex: infos.iter().map(|i| i.ifindex).collect(),
            mtu: infos.iter().map(|i| i.mtu).collect(),
            gone: vec![false; infos.len()],
            unreadable: vec![false; infos.len()],
            rebind_failed: vec![false; infos.len()],
            rebinding: infos.iter().map(|_| None).collect(),
            down_checks: vec![0; infos.len()],
            next_link_check: sys::now(),
            links_changed: false,
            stalls: stall::StallMeter::default(),
            backlog: stall::BacklogMeter::default(),
            rx_taken: 0,
            kernel: options.kernel,
            speed_from,
            capture: None,
            build,
            paths,
        };
        for port in &mut dp.ports {
            port.refill(&mut dp.pool, POOL_RESERVE);
        }
        Ok(dp)
    }

    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// Runs until `stop` is set (checked at least every 2 ms, `MAX_SLEEP`), then drains.
    /// `wake_fds` (e.g. a signal pipe) also interrupt a sleep.
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        commands: &Receiver<ControlMsg>,
        wake_fds: &[RawFd],
    ) -> Result<(), DataplaneError> {
        sys::tighten_timer_slack();
        self.kernel.set_loop_thread(sys::thread_id());
        if let Some(cpu) = self.config.dataplane.cpu {
            sys::pin_to_cpu(cpu)?;
            tracing::info!(cpu, "dataplane pinned");
        }
        // Held for as long as the loop runs (see `dataplane.wake_latency_us`).
        let _wake = self.config.dataplane.wake_latency_us.and_then(|us| {
            let hold = sys::WakeLatencyHold::hold(us);
            match (&hold, sys::cpuidle_driver()) {
                (Some(_), Some(driver)) => tracing::info!(us, driver, "idle CPUs held to this wake-up latency"),
                (Some(_), None) => tracing::warn!(
                    "dataplane.wake_latency_us: held, but this machine's CPUs have no cpuidle driver \
                     (/sys/devices/system/cpu/cpuidle/current_driver): idle CPUs halt all the same"
                ),
                (None, _) => tracing::warn!("dataplane.wake_latency_us: /dev/cpu_dma_latency cannot be held here"),
            }
            hold
        });
        let busy_poll = Duration::from_micros(self.config.dataplane.busy_poll_us);
        let mut pollfds = self.poll_set(wake_fds);
        let mut idle_since = sys::now();
        // Opened by the loop's thread: it reads that thread's wait.
        let cpu_wait = sys::CpuWait::this_thread();
        while !stop.load(Ordering::Relaxed) {
            let now = sys::now();
            self.stalls.poll(now, || cpu_wait.as_ref().map_or(Duration::ZERO, sys::CpuWait::read));
            if now >= self.next_link_check {
                self.next_link_check = now + LINK_CHECK;
                self.check_links();
            }
            if std::mem::take(&mut self.links_changed) {
                pollfds = self.poll_set(wake_fds);
            }
            let mut work = self.turn(now, true)?;
            while let Ok(mut msg) = commands.try_recv() {
                let reply = self.handle(now, &msg.request, msg.capture.take());
                let _ = msg.reply.send(reply);
                work += 1;
            }
            if self.tx_blocked {
                // The kernel could not take our frames (a full veth peer ring stops the tx
                // queue); the work that frees it may be waiting for this very CPU in
                // ksoftirqd, which a spinning loop would starve.
                std::thread::yield_now();
            }
            if work > 0 {
                idle_since = now;
                continue;
            }
            let wake = self.switch.poll_timeout(now).min(self.next_link_check);
            if wake <= now || self.tx_outstanding() > 0 {
                continue;
            }
            let until_wake = wake.saturating_since(now);
            // Timed sleeps wake late: sleep short of a deadline (a pause expiring, the
            // shaper) and spin the rest, so resumes happen on time.
            if now.saturating_since(idle_since) < busy_poll || until_wake <= SLEEP_MARGIN * 2 {
                std::hint::spin_loop();
                continue;
            }
            let timeout = (until_wake - SLEEP_MARGIN).min(MAX_SLEEP);
            self.stalls.sleeping(now + timeout);
            sys::wait_readable(&mut pollfds, timeout)?;
            self.backlog.slept();
            self.waker.drain();
        }
        self.drain()
    }

    /// What the loop sleeps on: one entry per (port that is up, rx queue), then the waker
    /// and `wake_fds`. A port that is down or gone is left out: its socket may report an
    /// error for ever, and the loop would spin on it.
    fn poll_set(&self, wake_fds: &[RawFd]) -> Vec<libc::pollfd> {
        let up = self.ports.iter().enumerate().filter(|(i, _)| self.switch.link_up(PortId::new(*i)));
        let mut set: Vec<libc::pollfd> = up.flat_map(|(_, p)| p.fds()).map(sys::pollfd).collect();
        set.push(sys::pollfd(self.waker.fd()));
        set.extend(wake_fds.iter().map(|&fd| sys::pollfd(fd)));
        set
    }

    /// One turn of the engine ([`Switch::poll`]) over the rings, then what it found that
    /// only the dataplane can act on (fill rings to top up, a port gone, the backlog
    /// meter). Returns frames moved.
    fn turn(&mut self, now: Time, receive: bool) -> Result<usize, DataplaneError> {
        let Dataplane { ports, pool, switch, batch, capture, .. } = self;
        let mut rings = Rings {
            now,
            ports,
            config: &self.config,
            capture,
            to_slowpath: &self.to_slowpath,
            from_slowpath: &self.from_slowpath,
            view: &self.view,
            buffers_per_frame: self.buffers_per_frame,
            tx_busy: &mut self.tx_busy,
            tx_in_flight_max: &mut self.tx_in_flight_max,
            receive,
            emptied: true,
            rx_taken: &mut self.rx_taken,
            tx_blocked: false,
            gone: PortSet::default(),
            error: None,
        };
        let turn = switch.poll(now, pool, &mut rings, batch);
        let Rings { emptied, tx_blocked, gone, error, .. } = rings;
        self.tx_blocked = tx_blocked;
        for (i, port) in self.ports.iter_mut().enumerate() {
            if self.switch.link_up(PortId::new(i)) {
                port.refill(&mut self.pool, POOL_RESERVE);
            }
        }
        for port in gone.iter() {
            self.link_changed(port.index(), LinkState::Gone);
        }
        if let Some(e) = error {
            return Err(e);
        }
        if receive {
            let (kernel, rx_taken) = (&self.kernel, self.rx_taken);
            self.backlog.turn(now, emptied, || stall::Reading {
                cpu: sys::thread_cpu_time(),
                rx_lost: kernel.rx_lost(),
                rx_taken,
            });
        }
        Ok(turn.work())
    }

    /// After stop: no more rx; send what is queued for a short while, then let the
    /// kernel finish what is on the tx rings.
    fn drain(&mut self) -> Result<(), DataplaneError> {
        // A port being bound again is waited for (a few seconds at most: the binding's
        // retries), so that its program and sockets close before the pool goes.
        for job in self.rebinding.iter_mut().filter_map(Option::take) {
            let _ = job.handle.join();
        }
        let start = sys::now();
        while sys::now().saturating_since(start) < DRAIN_TIME {
            let now = sys::now();
            self.turn(now, false)?;
            let queued = self.switch.queued_frames();
            let outstanding = self.tx_outstanding();
            if queued == 0 && outstanding == 0 {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let left = self.switch.queued_frames();
        if left > 0 {
            tracing::warn!(frames = left, "frames still queued (paused priorities) were discarded at shutdown");
        }
        Ok(())
    }

    /// Frames on the tx rings of ports that are up (a port that is down may keep some
    /// there until it comes back; nothing can be done for them meanwhile).
    fn tx_outstanding(&self) -> u32 {
        self.ports
            .iter()
            .enumerate()
            .filter(|(i, _)| self.switch.link_up(PortId::new(*i)))
            .map(|(_, p)| p.tx_outstanding())
            .sum()
    }

    /// Reads every port's link state and acts on changes; tries to bind a gone port again.
    fn check_links(&mut self) {
        for i in 0..self.ports.len() {
            if self.gone[i] {
                self.try_rebind(i);
                continue;
            }
            let iface = &self.config.ports[i].iface;
            let Some(mut state) = sys::link_state(iface, self.ifindex[i]) else {
                // Not readable for now (the process out of descriptors, the kernel out of
                // memory): what was known stands, and the next check reads it again.
                if !std::mem::replace(&mut self.unreadable[i], true) {
                    tracing::warn!(
                        port = self.config.port_name(i),
                        iface,
                        "link state unreadable for now; kept as it was"
                    );
                }
                continue;
            };
            self.unreadable[i] = false;
            if state == LinkState::Down && self.switch.link_up(PortId::new(i)) {
                self.down_checks[i] += 1;
                if self.down_checks[i] < LINK_DOWN_CHECKS {
                    state = LinkState::Up;
                }
            } else {
                self.down_checks[i] = 0;
            }
            self.link_changed(i, state);
        }
    }

    /// Port `i`'s link is now `state`: the engine is told, and the change logged.
    fn link_changed(&mut self, i: usize, state: LinkState) {
        let was = match (self.gone[i], self.switch.link_up(PortId::new(i))) {
            (true, _) => LinkState::Gone,
            (false, true) => LinkState::Up,
            (false, false) => LinkState::Down,
        };
        if state == was || was == LinkState::Gone {
            return;
        }
        self.gone[i] = state == LinkState::Gone;
        self.links_changed = true;
        self.switch.set_link(&mut self.pool, PortId::new(i), state == LinkState::Up);
        let (port, iface) = (self.config.port_name(i), &self.config.ports[i].iface);
        match state {
            LinkState::Up => tracing::info!(port, iface, "link up: the port forwards again"),
            LinkState::Down => tracing::warn!(port, iface, "link down: its stations forgotten, its queues dropped"),
            LinkState::Gone => {
                let on_tx = self.ports[i].tx_outstanding();
                // Its sockets are dead for good: closed now, so that the buffers on their
                // rings come back to the pool rather than wait for an interface that may
                // never return.
                self.kernel.closing(i);
                let on_rx = self.ports[i].close(&mut self.pool);
                self.rebind_failed[i] = false;
                tracing::warn!(
                    port,
                    iface,
                    lost_frames = u64::from(on_tx) + on_rx as u64,
                    "interface gone: the port is down until an interface of that name is back and up"
                )
            }
        }
    }

    /// Binds gone port `i` again once an interface of its name exists and is up (a veth
    /// re-created, a NIC back): a new classifier and sockets, then the port is up. The
    /// binding runs on a thread of its own, because it blocks for tens of milliseconds
    /// (creating sockets, attaching the program: 40-90 ms measured on a veth), which on
    /// the loop's thread would leave every other port unpolled, its pauses unsent and
    /// its lossless frames piling up; the loop picks the result up at a later check.
    fn try_rebind(&mut self, i: usize) {
        if let Some(job) = self.rebinding[i].take() {
            if !job.handle.is_finished() {
                self.rebinding[i] = Some(job);
                return;
            }
            let iface = self.config.ports[i].iface.clone();
            let rebound = job
                .handle
                .join()
                .unwrap_or_else(|_| Err(DataplaneError::Rebind { iface, problem: "the thread panicked".into() }));
            self.rebound(i, job.ifindex, rebound);
            return;
        }
        let iface = self.config.ports[i].iface.clone();
        let port = self.config.port_name(i).to_string();
        let Ok(info) = sys::interface(&iface) else { return };
        if sys::link_state(&iface, info.ifindex) != Some(LinkState::Up) {
            return;
        }
        if info.mtu > self.mtu[i] {
            let e = DataplaneError::Config {
                field: format!("port {port}"),
                problem: format!(
                    "{iface} is back with MTU {}, above the {} it had when the switch started, which its buffers \
                     are sized for: set MTU {} or restart the switch",
                    info.mtu, self.mtu[i], self.mtu[i]
                ),
            };
            self.rebound(i, info.ifindex, Err(e));
            return;
        }
        let queues = match sys::rx_queues(&iface) {
            Ok(has) => (has, self.config.dataplane.queues.map_or(has, |q| q.min(has))),
            Err(e) => return self.rebound(i, info.ifindex, Err(e.into())),
        };
        let on = self.pool.bind_on(queues.1);
        let (d, buffers_per_frame, ifindex) = (self.config.dataplane.clone(), self.buffers_per_frame, info.ifindex);
        let build = self.build;
        let spawned = std::thread::Builder::new()
            .name(format!("pfcs-bind-{port}"))
            .spawn(move || bind_port(on, &d, &build, &info, queues.0, buffers_per_frame, false));
        match spawned {
            Ok(handle) => self.rebinding[i] = Some(Rebinding { handle, ifindex }),
            Err(e) => self.rebound(i, ifindex, Err(DataplaneError::Rebind { iface, problem: e.to_string() })),
        }
    }

    /// Port `i`'s binding again (to the interface at `ifindex`) came to `rebound`.
    fn rebound(&mut self, i: usize, ifindex: u32, rebound: Result<(Classifier, PortSockets), DataplaneError>) {
        let iface = self.config.ports[i].iface.clone();
        let port = self.config.port_name(i).to_string();
        match rebound {
            Ok((classifier, sockets)) => {
                if let Err(e) = self.kernel.bound(i, &sockets, &classifier) {
                    // Its counters then stay those of the sockets closed before.
                    tracing::warn!(port, iface, "the port's kernel counters cannot be read: {e}");
                }
                self.classifiers[i] = classifier;
                self.ports[i] = sockets;
                self.ports[i].refill(&mut self.pool, POOL_RESERVE);
                self.ifindex[i] = ifindex;
                self.gone[i] = false;
                self.down_checks[i] = 0;
                tracing::info!(port, iface, ifindex, "interface back: the port is bound again");
                self.link_changed(i, LinkState::Up);
            }
            Err(e) => {
                if !std::mem::replace(&mut self.rebind_failed[i], true) {
                    tracing::warn!(port, iface, "interface back, but binding it failed (tried again every check): {e}");
                }
            }
        }
    }

    fn handle(&mut self, now: Time, request: &Request, ends: Option<capture::DataplaneEnds>) -> Reply {
        match request {
            Request::CaptureStart(c) => {
                if self.capture.as_ref().is_some_and(|c| !c.orphaned()) {
                    return Err("a capture is already running (one at a time)".into());
                }
                let ends = ends.ok_or("a capture request without its queues")?;
                let (mut rx, mut tx, mut names) = (PortSet::EMPTY, PortSet::EMPTY, Vec::new());
                for name in &c.ports {
                    let p = self.port(name)?;
                    if c.rx {
                        rx.insert(PortId::new(p));
                    }
                    if c.tx {
                        tx.insert(PortId::new(p));
                    }
                    if !names.iter().any(|(q, _)| *q == p) {
                        names.push((p, self.config.port_name(p).to_string()));
                    }
                }
                self.capture = Some(capture::Capture::new(self.ports.len(), rx, tx, c.rate, ends, now));
                Ok(Response::CaptureStarted(names))
            }
            Request::CaptureStop => {
                let c = self.capture.take().ok_or("no capture is running")?;
                Ok(Response::CaptureCounts(c.counts(|p| self.config.port_name(p.index()).to_string())))
            }
            Request::Stats => Ok(Response::Stats(Box::new(self.stats(now)))),
            Request::Fdb => Ok(Response::Fdb(self.switch.fdb().rows(now))),
            Request::ClearWatermarks => {
                self.switch.clear_watermarks();
                self.pool.clear_stages();
                self.tx_in_flight_max.fill(0);
                Ok(Response::Done("watermarks and stage latencies cleared".into()))
            }
            Request::TrafficMap => Ok(Response::TrafficMap(self.switch.traffic_map())),
            Request::Block { port } => {
                let p = self.port(port)?;
                self.switch.set_blocked(PortId::new(p), true);
                Ok(Response::Done(format!("{port} blocked: its frames go to the slowpath")))
            }
            Request::Unblock { port } => {
                let p = self.port(port)?;
                // The unblock reaches the slowpath at the end of the next turn, which
                // starts at once (a request handled counts as work).
                self.switch.set_blocked(PortId::new(p), false);
                Ok(Response::Done(format!("{port} unblocked; held frames go back as their priorities' pauses allow")))
            }
            other => Err(format!("the dataplane does not handle {other:?}")),
        }
    }

    fn port(&self, name: &str) -> Result<usize, String> {
        self.config.port_index(name).ok_or_else(|| {
            let names: Vec<String> = (0..self.ports.len())
                .map(|i| format!("{} ({})", self.config.port_name(i), self.config.ports[i].iface))
                .collect();
            format!("no port or interface {name:?} on {}; ports: {}", self.config.name, names.join(", "))
        })
    }

    /// The engine's snapshot composed with what only the shell knows: where each port's
    /// speed came from, its sockets and modes, the UMEM and the loop's stalls. The
    /// kernel's counters (sockets, XDP classes, the loop's wait for a CPU) are left for
    /// the asking thread to fill in ([`KernelCounters`]): no system call here.
    pub fn stats(&self, now: Time) -> Stats {
        let switch = self.switch.stats(now).map_ports(|i, engine| {
            let (c, x) = (&self.classifiers[i], &self.ports[i]);
            PortReport {
                engine,
                speed_from: self.speed_from[i],
                rx_queues: x.sockets().len() as u32,
                xdp_mode: c.mode(),
                bind_mode: x.bind_mode(),
                xdp: Default::default(),
                socket: SocketCounters {
                    tx_kernel_busy: self.tx_busy[i],
                    tx_in_flight_max: self.tx_in_flight_max[i],
                    ..Default::default()
                },
            }
        });
        let mut stalls = self.stalls.stats();
        stalls.backlogs = self.backlog.recent();
        Stats {
            switch,
            free_frames: self.pool.free_count() as u64,
            stalls,
            latency: self.pool.stages().latency(),
            kernel_paths: Some(self.paths.clone()),
            unstamped_frames: self.pool.unstamped(),
        }
    }
}

/// One port's part of [`Dataplane::open`], and what binds a port again when its interface
/// comes back: loads the classifier on `info`, binds a socket to each of its first
/// `queues.1` rx queues (of `queues.0`) and attaches the classifier.
fn bind_port(
    on: BindOn,
    d: &DataplaneConfig,
    build: &ClassifierBuild,
    info: &sys::InterfaceInfo,
    has: u32,
    buffers_per_frame: usize,
    force: bool,
) -> Result<(Classifier, PortSockets), DataplaneError> {
    // A queue left without a socket must not pass frames around the switch.
    let bind = on.ids.len() as u32;
    let mut classifier = Classifier::load(&info.name, info.ifindex, d.drop_without_socket || bind < has, build)?;
    let port = PortSockets::bind(on, &info.name, d.ring_size, d.batch, d.bind_mode, buffers_per_frame)?;
    for (queue, socket) in port.sockets().iter().enumerate() {
        classifier.bind_socket(queue as u32, socket.fd())?;
    }
    classifier.attach(force, d.xdp_mode)?;
    tracing::info!(
        iface = port.iface(),
        rx_queues = port.sockets().len(),
        xdp = classifier.mode().map_or("unknown", XdpMode::as_str),
        bind = ?port.bind_mode(),
        "port bound"
    );
    Ok((classifier, port))
}

/// Gives each port without a `speed` its NIC's link speed, where the NIC has one, and
/// says where every port's speed came from. The configuration is checked again with them.
fn speeds_from_nics(config: &mut RunConfig) -> Result<Vec<SpeedSource>, DataplaneError> {
    let mut from = Vec::new();
    for port in &mut config.ports {
        let source = match (port.speed, crate::nic::line_rate(&port.iface)) {
            (Some(set), Some(rate)) if set != rate => {
                // A SONiC document's or a file's speed on hardware that links at
                // another: the shaper paces at the configured one, which may be wrong.
                tracing::warn!(iface = %port.iface, configured = %set, nic = %rate, "the configured speed is not the NIC's link speed; the port is shaped to the configured one");
                SpeedSource::Config
            }
            (Some(_), _) => SpeedSource::Config,
            (None, Some(rate)) => {
                port.speed = Some(rate);
                SpeedSource::Nic
            }
            (None, None) => SpeedSource::Default,
        };
        tracing::info!(iface = %port.iface, speed = %port.speed(), from = source.as_str(), "port speed");
        from.push(source);
    }
    if from.contains(&SpeedSource::Nic) {
        config.validate().map_err(|e| DataplaneError::Config {
            field: "port speed".into(),
            problem: format!("with the link speeds read from the NICs: {e}"),
        })?;
    }
    Ok(from)
}

/// How many frames a port may put on its tx ring this turn, with `in_flight` still there:
/// one batch, within [`TX_IN_FLIGHT_BATCHES`] batches on the ring.
fn tx_budget(batch: usize, in_flight: usize) -> usize {
    (batch * TX_IN_FLIGHT_BATCHES).saturating_sub(in_flight).min(batch)
}

/// The PFC watchdog's decisions, in the log.
fn log_watchdog(config: &RunConfig, e: WatchdogEvent) {
    match e {
        WatchdogEvent::StormDetected { port, prio, at, stalled_since, action } => tracing::warn!(
            port = config.port_name(port.index()),
            prio = prio.get(),
            stalled_ms = at.saturating_since(stalled_since).as_secs_f64() * 1e3,
            ?action,
            "PFC storm: the link partner kept the priority paused with frames waiting"
        ),
        WatchdogEvent::Restored { port, prio, stormed_for, .. } => tracing::info!(
            port = config.port_name(port.index()),
            prio = prio.get(),
            stormed_ms = stormed_for.as_secs_f64() * 1e3,
            "PFC storm over: no pause for the restoration time, the priority is restored"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ArrivalStamp;

    #[test]
    fn a_port_adds_one_batch_a_turn_and_never_holds_over_two_on_its_tx_ring() {
        assert_eq!(tx_budget(64, 0), 64);
        assert_eq!(tx_budget(64, 64), 64, "one batch still there: another may join it");
        assert_eq!(tx_budget(64, 100), 28);
        assert_eq!(tx_budget(64, 128), 0, "the kernel refuses frames: the rest stay in the engine's queues");
        assert_eq!(tx_budget(64, 500), 0);
    }

    #[test]
    fn the_umem_geometry_follows_the_largest_mtu_and_jumbo_frames_take_several_buffers() {
        let c = RunConfig::for_interfaces(&["a", "b"]);
        let best = ClassifierBuild { arrival_stamp: ArrivalStamp::Metadata, stamp_magic: 1, frags_aware: true };
        let g = |c: &RunConfig, mtus: &[u32]| {
            let named: Vec<(String, u32)> = mtus.iter().map(|&m| ("a".to_string(), m)).collect();
            geometry(c, &named, &best).map(|g| (g.frame_size, g.buffers_per_frame))
        };
        assert_eq!(g(&c, &[1500, 1500]).unwrap(), (2048, 1));
        assert_eq!(g(&c, &[1500, 3000]).unwrap(), (4096, 1));
        assert_eq!(g(&c, &[9000, 1500]).unwrap(), (4096, 3));
        assert_eq!(g(&c, &[4200]).unwrap(), (4096, 2));
        let mut small = c.clone();
        small.dataplane.frame_size = Some(2048);
        assert_eq!(g(&small, &[3000]).unwrap(), (2048, 2));
        let err = g(&c, &[9500]).unwrap_err().to_string();
        assert!(err.contains("interface a has MTU 9500") && err.contains("ip link set a mtu 9216"), "{err}");
    }

    #[test]
    fn an_in_frame_stamp_counts_in_the_geometry_and_a_jumbo_mtu_without_frags_is_refused_naming_the_mtu_that_works() {
        let c = RunConfig::for_interfaces(&["a"]);
        let g = |mtu: u32, build: ClassifierBuild| geometry(&c, &[("a".to_string(), mtu)], &build);
        let in_frame = ClassifierBuild { arrival_stamp: ArrivalStamp::InFrame, stamp_magic: 1, frags_aware: true };
        // 3818 is the largest MTU one 4096-byte UMEM frame holds; 16 bytes of stamp more
        // take a second one.
        assert_eq!(g(3818, in_frame).unwrap().buffers_per_frame, 2);
        assert_eq!(g(3802, in_frame).unwrap().buffers_per_frame, 1);
        let plain = ClassifierBuild { frags_aware: false, ..in_frame };
        assert_eq!(g(1500, plain).unwrap().buffers_per_frame, 1);
        let err = g(9000, plain).unwrap_err().to_string();
        assert!(err.contains("interface a has MTU 9000") && err.contains("not frags-aware"), "{err}");
        assert!(err.contains("the largest MTU that works is 3802 (`ip link set a mtu 3802`)"), "{err}");
    }
}
