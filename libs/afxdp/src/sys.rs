//! Thin wrappers over the system calls the dataplane needs: interface facts, privileges,
//! the monotonic clock, eventfd and ppoll.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use pfcswitch_core::mac::MacAddr;
use pfcswitch_core::time::Time;

#[derive(Debug, thiserror::Error)]
pub enum SysError {
    #[error("interface {0:?} does not exist in this network namespace")]
    NoInterface(String),
    #[error("reading {what} of interface {iface}: {source}")]
    InterfaceInfo { iface: String, what: &'static str, source: io::Error },
    #[error(
        "pfcswitch needs root, or the capabilities CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF and CAP_SYS_ADMIN \
         (AF_XDP sockets and XDP programs); run it with sudo"
    )]
    NotPrivileged,
    #[error("{what}: {source}")]
    Os { what: &'static str, source: io::Error },
}

/// What the dataplane needs to know about an interface.
#[derive(Clone, Debug)]
pub struct InterfaceInfo {
    pub name: String,
    pub ifindex: u32,
    pub mac: MacAddr,
    pub mtu: u32,
}

pub fn interface(name: &str) -> Result<InterfaceInfo, SysError> {
    let cname = CString::new(name).map_err(|_| SysError::NoInterface(name.to_string()))?;
    // SAFETY: cname is a valid NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if ifindex == 0 {
        let source = io::Error::last_os_error();
        if is_gone_error(&source) {
            return Err(SysError::NoInterface(name.to_string()));
        }
        return Err(SysError::InterfaceInfo { iface: name.to_string(), what: "index", source });
    }
    let read = |what: &'static str| {
        fs::read_to_string(format!("/sys/class/net/{name}/{what}"))
            .map(|s| s.trim().to_string())
            .map_err(|source| SysError::InterfaceInfo { iface: name.to_string(), what, source })
    };
    let mac = read("address")?.parse().unwrap_or(MacAddr::ZERO);
    let mtu = read("mtu")?.parse().unwrap_or(1500);
    Ok(InterfaceInfo { name: name.to_string(), ifindex, mac, mtu })
}

/// How many rx queues interface `name` has (its `queues/rx-N` entries in sysfs).
pub fn rx_queues(name: &str) -> Result<u32, SysError> {
    queues(name, "rx-")
}

/// How many tx queues interface `name` has.
pub fn tx_queues(name: &str) -> Result<u32, SysError> {
    queues(name, "tx-")
}

fn queues(name: &str, kind: &str) -> Result<u32, SysError> {
    let dir = format!("/sys/class/net/{name}/queues");
    let entries = fs::read_dir(&dir).map_err(|source| SysError::InterfaceInfo {
        iface: name.to_string(),
        what: "queues",
        source,
    })?;
    let n = entries.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with(kind)).count();
    Ok((n as u32).max(1))
}

/// Whether an interface can carry frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    Up,
    /// Administratively down, or no carrier (a veth whose peer is down).
    Down,
    /// Deleted, or replaced by another interface of the same name (a veth whose peer's
    /// namespace went away): the socket bound to it is dead for good.
    Gone,
}

/// The state of interface `name`, bound when it had index `ifindex`; `None` when it
/// cannot be read for now. Only "no such device" (or another interface now holding the
/// name) is gone: `if_nametoindex` opens a socket to ask, and also fails when the process
/// is out of descriptors or the kernel out of memory, which says nothing of the link.
pub fn link_state(name: &str, ifindex: u32) -> Option<LinkState> {
    let Ok(cname) = CString::new(name) else { return Some(LinkState::Gone) };
    // SAFETY: cname is a valid NUL-terminated string.
    match unsafe { libc::if_nametoindex(cname.as_ptr()) } {
        0 if is_gone_error(&io::Error::last_os_error()) => return Some(LinkState::Gone),
        0 => return None,
        now if now != ifindex => return Some(LinkState::Gone),
        _ => {}
    }
    let read = |what: &str| fs::read_to_string(format!("/sys/class/net/{name}/{what}")).unwrap_or_default();
    Some(match read("operstate").trim() {
        "up" => LinkState::Up,
        // Drivers that do not report an operational state: admin state alone.
        "unknown" => {
            let flags = u32::from_str_radix(read("flags").trim().trim_start_matches("0x"), 16).unwrap_or(0);
            if flags & libc::IFF_UP as u32 != 0 {
                LinkState::Up
            } else {
                LinkState::Down
            }
        }
        _ => LinkState::Down,
    })
}

/// Whether a send failed because the interface is gone (not a fault of ours).
pub fn is_gone_error(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENXIO | libc::ENODEV))
}

/// Whether a send failed for a moment (a full queue, a link that is down for now): the
/// frames stay on the ring and go with a later kick.
pub fn is_transient_error(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENETDOWN | libc::ENOBUFS | libc::EAGAIN | libc::EBUSY))
}

/// Fails early, with a clear message, when the process cannot use AF_XDP and XDP.
pub fn check_privileges() -> Result<(), SysError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    // Not root: accept the effective capabilities that AF_XDP and XDP attach need.
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_NET_RAW: u32 = 13;
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_BPF: u32 = 39;
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let needed = [CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_SYS_ADMIN];
    if needed.iter().all(|c| eff & (1 << c) != 0) {
        Ok(())
    } else {
        Err(SysError::NotPrivileged)
    }
}

/// The calling thread's id.
pub fn thread_id() -> libc::pid_t {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// How long thread `tid` of this process has spent runnable but waiting for a CPU (the
/// second field of its schedstat), where the kernel keeps that figure.
pub fn cpu_wait(tid: libc::pid_t) -> Option<Duration> {
    schedstat_wait(&fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?)
}

/// The run-queue wait in a schedstat's text: "<on-CPU ns> <run-queue wait ns>
/// <timeslices>".
fn schedstat_wait(text: &str) -> Option<Duration> {
    text.split_ascii_whitespace().nth(1)?.parse().ok().map(Duration::from_nanos)
}

/// The calling thread's run-queue wait, read from its schedstat through a file kept open
/// (one `pread` a reading, no allocation: the dataplane reads it as it polls).
#[derive(Debug)]
pub struct CpuWait {
    file: fs::File,
}

impl CpuWait {
    /// For the calling thread (`/proc/thread-self` names the thread that opens it); `None`
    /// where the kernel keeps no schedstat.
    pub fn this_thread() -> Option<CpuWait> {
        fs::File::open("/proc/thread-self/schedstat").ok().map(|file| CpuWait { file })
    }

    /// How long the thread has spent runnable but waiting for a CPU so far (zero when the
    /// file cannot be read).
    pub fn read(&self) -> Duration {
        use std::os::unix::fs::FileExt;
        // Three u64 and their separators fit.
        let mut buf = [0u8; 96];
        let n = self.file.read_at(&mut buf, 0).unwrap_or(0);
        std::str::from_utf8(&buf[..n]).ok().and_then(schedstat_wait).unwrap_or(Duration::ZERO)
    }
}

/// The calling thread's CPU time so far (a system call, unlike [`now`]).
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec; every thread has a CPU-time clock.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The monotonic clock as the core's [`Time`].
pub fn now() -> Time {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    Time::from_nanos(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Asks the kernel to wake timed sleeps on time (the default slack is 50 µs).
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Pins the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> Result<(), SysError> {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it; sched_setaffinity on the
    // calling thread with the set's size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(SysError::Os {
                what: "pinning the dataplane",
                source: io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(SysError::Os {
                what: "pinning the dataplane (sched_setaffinity)",
                source: io::Error::last_os_error(),
            });
        }
    }
    Ok(())
}

/// The calling thread's CPUs.
fn affinity() -> Result<libc::cpu_set_t, SysError> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity on the calling thread with its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(SysError::Os { what: "sched_getaffinity", source: io::Error::last_os_error() });
        }
        Ok(set)
    }
}

/// The CPUs the calling thread may run on, in order.
pub fn allowed_cpus() -> Result<Vec<usize>, SysError> {
    let set = affinity()?;
    // SAFETY: CPU_ISSET reads within the set (cpu is below its size in bits).
    Ok((0..8 * std::mem::size_of::<libc::cpu_set_t>()).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) }).collect())
}

/// Takes `cpu` out of the calling thread's CPUs (threads it starts later inherit that),
/// unless it would leave none; says whether it did.
pub fn avoid_cpu(cpu: usize) -> Result<bool, SysError> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    let mut set = affinity()?;
    // SAFETY: the CPU_* macros stay within the set (cpu is checked against its size);
    // sched_setaffinity on the calling thread with its size.
    unsafe {
        if cpu >= 8 * size || !libc::CPU_ISSET(cpu, &set) || libc::CPU_COUNT(&set) < 2 {
            return Ok(false);
        }
        libc::CPU_CLR(cpu, &mut set);
        if libc::sched_setaffinity(0, size, &set) != 0 {
            return Err(SysError::Os { what: "sched_setaffinity", source: io::Error::last_os_error() });
        }
    }
    Ok(true)
}

/// Moves the calling thread to SCHED_FIFO at `priority` (1..99).
pub fn realtime_priority(priority: i32) -> Result<(), SysError> {
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: sched_setscheduler on the calling thread with a valid parameter.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(SysError::Os { what: "sched_setscheduler(SCHED_FIFO)", source: io::Error::last_os_error() });
    }
    Ok(())
}

/// An eventfd another thread can use to wake the dataplane out of `ppoll`.
#[derive(Debug)]
pub struct Waker(OwnedFd);

impl Waker {
    pub fn new() -> Result<Waker, SysError> {
        // SAFETY: eventfd with valid flags; the fd is owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(SysError::Os { what: "eventfd", source: io::Error::last_os_error() });
        }
        // SAFETY: fd is a fresh, valid descriptor we own.
        Ok(Waker(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd. A full counter only means
        // a wake-up is already pending.
        unsafe { libc::write(self.0.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
    }

    /// Clears pending wake-ups.
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64; non-blocking.
        unsafe { libc::read(self.0.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
    }

    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    pub fn try_clone(&self) -> Result<Waker, SysError> {
        self.0.try_clone().map(Waker).map_err(|source| SysError::Os { what: "duplicating the eventfd", source })
    }
}

/// Waits until one of `fds` is readable or `timeout` passes. Interrupted waits return early.
pub fn wait_readable(fds: &mut [libc::pollfd], timeout: Duration) -> Result<(), SysError> {
    let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as _ };
    // SAFETY: fds is a valid slice of pollfd; ts is a valid timespec; no signal mask change.
    let rc = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(SysError::Os { what: "ppoll", source: err });
        }
    }
    Ok(())
}

pub fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd { fd, events: libc::POLLIN, revents: 0 }
}

/// The running kernel's release (`uname -r`), as `doctor` and the benches name it; empty
/// where it cannot be read.
pub fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string()
}

/// The kernel's cpuidle driver (`/sys/devices/system/cpu/cpuidle/current_driver`), or
/// `None` where it has none. Without one an idle CPU halts (on a VM, until the host runs
/// its vCPU again), and no wake-up latency request ([`WakeLatencyHold`]) is consulted:
/// the kernel reads them only when a driver offers idle states to choose from.
pub fn cpuidle_driver() -> Option<String> {
    let name = fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver").ok()?;
    let name = name.trim();
    (!name.is_empty() && name != "none").then(|| name.to_string())
}

/// Keeps this machine's idle CPUs from sleeping deeper than `max_us` allows while it
/// lives: the PM QoS request of `/dev/cpu_dma_latency` (as cyclictest makes; the kernel
/// drops it when the descriptor closes). On a virtual machine an idle vCPU that halts
/// waits for the host to run it again when its timer or an interrupt fires: on the
/// 2-core VMs here a sleep of 100 µs then overran by more than 600 µs once in a hundred,
/// and a ping through an idle switch took 126 µs (p50) against 32 µs with 0 held
/// (docs/notes/measuring.md). The price: idle CPUs poll instead of halting, and take that time
/// from a busy sibling on the host. `None` where the machine offers no such request.
#[derive(Debug)]
pub struct WakeLatencyHold {
    // Never read: the request lasts as long as the descriptor is open.
    _request: fs::File,
}

impl WakeLatencyHold {
    /// Asks for a wake-up latency of at most `max_us` for as long as the value lives.
    pub fn hold(max_us: u32) -> Option<WakeLatencyHold> {
        use std::io::Write;
        let mut f = fs::OpenOptions::new().write(true).open("/dev/cpu_dma_latency").ok()?;
        // The request is a binary 32-bit value in µs.
        f.write_all(&i32::try_from(max_us).unwrap_or(i32::MAX).to_ne_bytes()).ok()?;
        Some(WakeLatencyHold { _request: f })
    }
}
