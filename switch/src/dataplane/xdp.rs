//! The XDP classifier (switch/bpf/classifier.bpf.c): loading, attaching, the XSKMAP, counters.
//!
//! Each port loads its own instance, so its XSKMAP (keyed by rx queue) and its class
//! counters are its own. The program is attached through a bpf_link: the kernel detaches
//! it when the link's last descriptor closes, also when the process dies.

use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

use libbpf_rs::libbpf_sys as sys;
use libbpf_rs::{MapCore, MapFlags, MapHandle, Object, ObjectBuilder};

use crate::config::XdpMode;
use crate::stats::XdpClassCounters;

/// The compiled classifier, built by build.rs with libbpf-cargo.
const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/classifier.bpf.o"));
const PROGRAM: &str = "pfcswitch_classify";
/// Class indices of `class_counters`, as in the C `enum xdp_class`.
pub(super) const CLASS_COUNT: u32 = 8;

#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    #[error(
        "loading the XDP classifier failed: {0}; is this kernel built with BPF, and does this process \
         have CAP_BPF and CAP_NET_ADMIN (run as root)?"
    )]
    Load(libbpf_rs::Error),
    #[error("the XDP classifier object lacks {0}")]
    Missing(&'static str),
    #[error("attaching XDP to {iface} ({mode}): {source}")]
    Attach { iface: String, mode: &'static str, source: libbpf_rs::Error },
    #[error(
        "interface {iface} already has an XDP program attached ({program}); another pfcswitch or a stale \
         program from a crashed run? Re-run with --force to replace it, or remove it with \
         `ip link set dev {iface} xdp off`"
    )]
    Stale { iface: String, program: String },
    #[error(
        "the XDP program on {iface} ({program}) is held by a bpf_link of a running process \
         (probably another pfcswitch or traffic tool): stop that process first"
    )]
    HeldByLink { iface: String, program: String },
    #[error("removing the stale XDP program from {iface}: {source}")]
    Detach { iface: String, source: libbpf_rs::Error },
    #[error("{what}: {source}")]
    Map { what: &'static str, source: libbpf_rs::Error },
}

/// One loaded (and possibly attached) instance of the classifier.
pub struct Classifier {
    iface: String,
    ifindex: u32,
    object: Object,
    xsks: MapHandle,
    counters: MapHandle,
    config: MapHandle,
    /// The bpf_link holding the program on the interface, and the mode it holds it in.
    link: Option<(OwnedFd, XdpMode)>,
}

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classifier").field("iface", &self.iface).field("attached", &self.link.is_some()).finish()
    }
}

impl Classifier {
    /// Loads a fresh instance for interface `iface`; nothing is attached yet.
    pub fn load(iface: &str, ifindex: u32, drop_without_socket: bool) -> Result<Classifier, XdpError> {
        let open = ObjectBuilder::default().open_memory(OBJECT).map_err(XdpError::Load)?;
        let object = open.load().map_err(XdpError::Load)?;
        let map = |name: &'static str| -> Result<MapHandle, XdpError> {
            let m = object.maps().find(|m| m.name() == name).ok_or(XdpError::Missing(name))?;
            MapHandle::try_from(&m).map_err(|source| XdpError::Map { what: name, source })
        };
        let (xsks, counters, config) = (map("xsks")?, map("class_counters")?, map("config")?);
        if !object.progs().any(|p| p.name() == PROGRAM) {
            return Err(XdpError::Missing("the pfcswitch_classify program"));
        }
        let value: u32 = drop_without_socket.into();
        config
            .update(&0u32.to_ne_bytes(), &value.to_ne_bytes(), MapFlags::ANY)
            .map_err(|source| XdpError::Map { what: "writing the classifier config", source })?;
        Ok(Classifier { iface: iface.to_string(), ifindex, object, xsks, counters, config, link: None })
    }

    /// Steers rx queue `queue` to the AF_XDP socket `fd`.
    pub fn bind_socket(&self, queue: u32, fd: RawFd) -> Result<(), XdpError> {
        self.xsks
            .update(&queue.to_ne_bytes(), &(fd as u32).to_ne_bytes(), MapFlags::ANY)
            .map_err(|source| XdpError::Map { what: "inserting the socket into the XSKMAP", source })
    }

    /// Attaches the program, after dealing with whatever XDP program is already there:
    /// an error naming it, or with `force` its removal. `mode` forces native or generic
    /// XDP; without it native is tried first and generic taken when the driver refuses.
    pub fn attach(&mut self, force: bool, mode: Option<XdpMode>) -> Result<(), XdpError> {
        if let Some(program) = attached_program(self.ifindex) {
            if !force {
                return Err(XdpError::Stale { iface: self.iface.clone(), program });
            }
            tracing::warn!(iface = %self.iface, %program, "replacing the XDP program already attached (--force)");
            self.detach_foreign(&program)?;
        }
        let prog = self.object.progs().find(|p| p.name() == PROGRAM).ok_or(XdpError::Missing("pfcswitch_classify"))?;
        let prog_fd = prog.as_fd().as_raw_fd();
        let link = match mode {
            Some(m) => (self.link(prog_fd, m)?, m),
            None => match self.link(prog_fd, XdpMode::Native) {
                Ok(link) => (link, XdpMode::Native),
                Err(native) => {
                    tracing::info!(iface = %self.iface, "{native}; attaching generic XDP instead");
                    (self.link(prog_fd, XdpMode::Generic)?, XdpMode::Generic)
                }
            },
        };
        // Asked once here: the kernel's word, kept for as long as the link holds it.
        let reported = self.query_mode().unwrap_or(link.1);
        self.link = Some((link.0, reported));
        Ok(())
    }

    /// A bpf_link of the program to the interface in `mode`.
    fn link(&self, prog_fd: RawFd, mode: XdpMode) -> Result<OwnedFd, XdpError> {
        // SAFETY: a zeroed options struct is valid input; only its size and flags are set.
        let mut opts: sys::bpf_link_create_opts = unsafe { std::mem::zeroed() };
        opts.sz = std::mem::size_of::<sys::bpf_link_create_opts>() as _;
        opts.flags = match mode {
            XdpMode::Native => sys::XDP_FLAGS_DRV_MODE,
            XdpMode::Generic => sys::XDP_FLAGS_SKB_MODE,
        };
        // SAFETY: a valid program fd, the interface index, and a sized options struct.
        let fd = unsafe { sys::bpf_link_create(prog_fd, self.ifindex as i32, sys::BPF_XDP, &opts) };
        if fd < 0 {
            return Err(XdpError::Attach {
                iface: self.iface.clone(),
                mode: mode.as_str(),
                source: libbpf_rs::Error::from(std::io::Error::from_raw_os_error(-fd)),
            });
        }
        // SAFETY: the kernel just gave us this descriptor; nobody else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Where the program runs: the mode the kernel reported when its bpf_link attached it,
    /// which nothing can change while the link holds it. Known without a system call: the stats that show it
    /// are composed on the forwarding thread (the kernel's own answer, [`Classifier::query_mode`],
    /// is a netlink dump of every interface, a third of that thread's time under four
    /// scrapers).
    pub fn mode(&self) -> Option<XdpMode> {
        self.link.as_ref().map(|(_, m)| *m)
    }

    /// Where the program runs, as the kernel reports it.
    pub fn query_mode(&self) -> Option<XdpMode> {
        let mut opts =
            sys::bpf_xdp_query_opts { sz: std::mem::size_of::<sys::bpf_xdp_query_opts>() as _, ..Default::default() };
        // SAFETY: opts is a properly sized, zeroed query struct.
        if unsafe { sys::bpf_xdp_query(self.ifindex as i32, 0, &mut opts) } != 0 {
            return None;
        }
        match u32::from(opts.attach_mode) {
            m if m == sys::XDP_ATTACHED_DRV => Some(XdpMode::Native),
            m if m == sys::XDP_ATTACHED_SKB => Some(XdpMode::Generic),
            _ => None,
        }
    }

    fn detach_foreign(&self, program: &str) -> Result<(), XdpError> {
        for mode in [0, sys::XDP_FLAGS_DRV_MODE, sys::XDP_FLAGS_SKB_MODE] {
            // SAFETY: plain netlink request; a null opts pointer is allowed.
            let rc = unsafe { sys::bpf_xdp_detach(self.ifindex as i32, mode, std::ptr::null()) };
            if rc == -libc::EBUSY {
                // A bpf_link owns it: only its process (or its exit) can remove it.
                return Err(XdpError::HeldByLink { iface: self.iface.clone(), program: program.to_string() });
            }
        }
        match attached_program(self.ifindex) {
            None => Ok(()),
            Some(p) => Err(XdpError::Detach {
                iface: self.iface.clone(),
                source: libbpf_rs::Error::from(std::io::Error::other(format!("{p} is still attached"))),
            }),
        }
    }

    /// Attaches through netlink instead of a bpf_link: the program then stays on the
    /// interface after this process exits, like one left by a crashed tool. Only for
    /// testing how the switch deals with stale programs.
    pub fn attach_without_link(&self) -> Result<(), XdpError> {
        let prog = self.object.progs().find(|p| p.name() == PROGRAM).ok_or(XdpError::Missing("pfcswitch_classify"))?;
        let fd = prog.as_fd().as_raw_fd();
        // SAFETY: plain netlink request with a valid program fd; null opts is allowed.
        let rc = unsafe { sys::bpf_xdp_attach(self.ifindex as i32, fd, 0, std::ptr::null()) };
        if rc != 0 {
            return Err(XdpError::Attach {
                iface: self.iface.clone(),
                mode: "without a link",
                source: libbpf_rs::Error::from(std::io::Error::from_raw_os_error(-rc)),
            });
        }
        Ok(())
    }

    /// Detaches the program: closing the link's only descriptor ends the link. Idempotent.
    pub fn detach(&mut self) {
        self.link = None;
    }

    /// Frames seen per class, summed over CPUs (the switch reads them off its forwarding
    /// thread, from [`Classifier::counters_map`]).
    pub fn class_counters(&self) -> XdpClassCounters {
        class_counters(&self.counters)
    }

    /// A duplicate of the per-CPU class counters map, for reading off the forwarding
    /// thread (`super::kernel`).
    pub fn counters_map(&self) -> Result<MapHandle, libbpf_rs::Error> {
        MapHandle::try_from(&self.counters)
    }

    /// Whether frames for queues without a socket are dropped (else passed to the kernel).
    pub fn set_drop_without_socket(&self, drop: bool) -> Result<(), XdpError> {
        let value: u32 = drop.into();
        self.config
            .update(&0u32.to_ne_bytes(), &value.to_ne_bytes(), MapFlags::ANY)
            .map_err(|source| XdpError::Map { what: "writing the classifier config", source })
    }
}

impl Drop for Classifier {
    fn drop(&mut self) {
        self.detach();
    }
}

/// The XDP program attached to `ifindex`, described as "name (id N)", if any.
pub fn attached_program(ifindex: u32) -> Option<String> {
    let mut opts =
        sys::bpf_xdp_query_opts { sz: std::mem::size_of::<sys::bpf_xdp_query_opts>() as _, ..Default::default() };
    // SAFETY: opts is a properly sized, zeroed query struct.
    let rc = unsafe { sys::bpf_xdp_query(ifindex as i32, 0, &mut opts) };
    if rc != 0 {
        return None;
    }
    let id = [opts.prog_id, opts.drv_prog_id, opts.skb_prog_id, opts.hw_prog_id].into_iter().find(|&i| i != 0)?;
    Some(format!("{} (id {id})", program_name(id).unwrap_or_else(|| "unnamed".into())))
}

fn program_name(id: u32) -> Option<String> {
    // SAFETY: plain libbpf calls; the fd is closed below and the info struct is sized.
    unsafe {
        let fd = sys::bpf_prog_get_fd_by_id(id);
        if fd < 0 {
            return None;
        }
        let mut info: sys::bpf_prog_info = std::mem::zeroed();
        let mut len = std::mem::size_of::<sys::bpf_prog_info>() as u32;
        let rc = sys::bpf_obj_get_info_by_fd(fd, &mut info as *mut _ as *mut std::ffi::c_void, &mut len);
        libc::close(fd);
        if rc != 0 {
            return None;
        }
        let name = CStr::from_ptr(info.name.as_ptr()).to_string_lossy().into_owned();
        Some(name)
    }
}

/// Frames the classifier saw per class, summed over CPUs.
pub fn class_counters(map: &MapHandle) -> XdpClassCounters {
    let mut totals = [0u64; CLASS_COUNT as usize];
    for (class, total) in totals.iter_mut().enumerate() {
        if let Ok(Some(per_cpu)) = map.lookup_percpu(&(class as u32).to_ne_bytes(), MapFlags::ANY) {
            *total = per_cpu.iter().map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap_or([0; 8]))).sum();
        }
    }
    let [pause, pfc, mac_control_other, vlan, ipv4, ipv6, other, runt] = totals;
    XdpClassCounters { pause, pfc, mac_control_other, vlan, ipv4, ipv6, other, runt }
}
