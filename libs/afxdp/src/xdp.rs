//! The XDP classifier (ebpf/classifier.bpf.c): loading, attaching, the XSKMAP, counters.
//!
//! Each port loads its own instance, so its XSKMAP (keyed by rx queue) and its class
//! counters are its own. The program is attached through a bpf_link: the kernel detaches
//! it when the link's last descriptor closes, also when the process dies.

use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

use libbpf_rs::libbpf_sys as sys;
use libbpf_rs::{AsRawLibbpf, MapCore, MapFlags, MapHandle, Object, ObjectBuilder, OpenObject};

use serde::{Deserialize, Serialize};

use crate::modes::{ArrivalStamp, XdpMode};

/// The compiled classifier, built by build.rs with libbpf-cargo.
const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/classifier.bpf.o"));
const PROGRAM: &str = "pfcswitch_classify";
/// Class indices of `class_counters`, as in the C `enum xdp_class`.
pub(super) const CLASS_COUNT: u32 = 8;

/// What one instance of the classifier is built with: the read-only options its program
/// reads (`struct classifier_options` in the C code) and whether it loads frags-aware.
/// [`super::paths::probe`] chooses them for the kernel at hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassifierBuild {
    /// How the program stamps a frame's arrival.
    pub arrival_stamp: ArrivalStamp,
    /// The stamp's first word, which userspace checks ([`crate::xsk::UmemPool`]).
    pub stamp_magic: u32,
    /// Loaded with BPF_F_XDP_HAS_FRAGS: frames over several buffers reach it whole.
    pub frags_aware: bool,
}

impl ClassifierBuild {
    /// How the pool whose frames this classifier steers reads their arrival stamps.
    pub fn reading(&self) -> super::xsk::StampReading {
        super::xsk::StampReading { stamp: self.arrival_stamp, magic: self.stamp_magic }
    }

    /// The build in a load error: "arrival stamps: in-frame, frags-aware: yes".
    pub fn describe(&self) -> String {
        format!("arrival stamps: {}, frags-aware: {}", self.arrival_stamp, if self.frags_aware { "yes" } else { "no" })
    }
}

/// The options' defaults in the object, checked before they are overwritten: a C struct
/// laid out otherwise than [`write_options`] assumes is an error, not a wrong program.
const OPTIONS_DEFAULTS: [u32; 3] = [1, 0x5046_5453, 1];

#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    #[error(
        "loading the XDP classifier failed: {source}; this process lacks the privileges to load BPF programs \
         (CAP_BPF and CAP_NET_ADMIN: run as root)"
    )]
    Privileges { source: libbpf_rs::Error },
    #[error("loading the XDP classifier ({what}) failed: {source}{}", verifier_said(.log))]
    Load { what: String, source: libbpf_rs::Error, log: String },
    #[error("the XDP classifier object is not laid out as this loader expects: {0}")]
    Layout(&'static str),
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

fn verifier_said(log: &str) -> String {
    if log.is_empty() {
        String::new()
    } else {
        format!("; the kernel said: {log}")
    }
}

/// The object opened with `build`'s options written and its load flags set, not loaded.
fn open(build: &ClassifierBuild) -> Result<OpenObject, XdpError> {
    let mut open = ObjectBuilder::default().open_memory(OBJECT).map_err(|source| XdpError::Load {
        what: "opening the object".into(),
        source,
        log: String::new(),
    })?;
    {
        let mut rodata = open
            .maps_mut()
            .find(|m| m.name().to_string_lossy().ends_with(".rodata"))
            .ok_or(XdpError::Layout("no .rodata section"))?;
        let bytes = rodata.initial_value_mut().ok_or(XdpError::Layout(".rodata has no initial value"))?;
        write_options(bytes, build)?;
    }
    let mut prog = open.progs_mut().find(|p| p.name() == PROGRAM).ok_or(XdpError::Missing("pfcswitch_classify"))?;
    // SAFETY: a valid program of an open object; reading its flags changes nothing.
    let flags = unsafe { sys::bpf_program__flags(prog.as_libbpf_object().as_ptr()) };
    prog.set_flags(if build.frags_aware {
        flags | sys::BPF_F_XDP_HAS_FRAGS
    } else {
        flags & !sys::BPF_F_XDP_HAS_FRAGS
    });
    Ok(open)
}

/// Writes `build`'s options over the object's `struct classifier_options`, the only thing
/// in its .rodata, after checking that the defaults the C code gives stand there.
fn write_options(rodata: &mut [u8], build: &ClassifierBuild) -> Result<(), XdpError> {
    if rodata.len() != 4 * OPTIONS_DEFAULTS.len() {
        return Err(XdpError::Layout(".rodata is not struct classifier_options alone"));
    }
    let word = |i: usize, r: &[u8]| u32::from_ne_bytes(r[4 * i..4 * i + 4].try_into().expect("4 bytes"));
    if (0..OPTIONS_DEFAULTS.len()).any(|i| word(i, rodata) != OPTIONS_DEFAULTS[i]) {
        return Err(XdpError::Layout("struct classifier_options does not hold the defaults this loader knows"));
    }
    let stamp = match build.arrival_stamp {
        ArrivalStamp::RxClock => 0u32,
        ArrivalStamp::Metadata => 1,
        ArrivalStamp::InFrame => 2,
    };
    for (i, v) in [stamp, build.stamp_magic, u32::from(build.frags_aware)].into_iter().enumerate() {
        rodata[4 * i..4 * i + 4].copy_from_slice(&v.to_ne_bytes());
    }
    Ok(())
}

/// Loads the classifier built as `build` into the kernel and drops it again: whether this
/// kernel takes that build, and if not, what it said.
pub fn try_load(build: &ClassifierBuild) -> Result<(), XdpError> {
    load_object(build, "a trial").map(drop)
}

/// Loads the classifier built as `build`; the error holds what the kernel said (the
/// verifier's complaint), and libbpf prints nothing of it meanwhile.
fn load_object(build: &ClassifierBuild, what: &str) -> Result<Object, XdpError> {
    let open = open(build)?;
    let (loaded, log) = libbpf_log::captured(|| open.load());
    loaded.map_err(|source| {
        if source.kind() == libbpf_rs::ErrorKind::PermissionDenied {
            XdpError::Privileges { source }
        } else {
            XdpError::Load {
                what: format!("{what}, {}", build.describe()),
                source,
                log: libbpf_log::the_complaint(&log),
            }
        }
    })
}

/// libbpf's messages: to stderr as libbpf prints them, except while a load is tried
/// ([`captured`]), when they are kept for the error instead.
mod libbpf_log {
    use std::cell::RefCell;
    use std::io::Write;
    use std::sync::Once;

    use libbpf_rs::PrintLevel;

    thread_local! {
        static KEPT: RefCell<Option<String>> = const { RefCell::new(None) };
    }

    fn print(_level: PrintLevel, msg: String) {
        let kept = KEPT.with(|k| k.borrow_mut().as_mut().map(|buf| buf.push_str(&msg)).is_some());
        if !kept {
            let _ = std::io::stderr().write_all(msg.as_bytes());
        }
    }

    /// Runs `f` with what libbpf says on this thread kept, and returns both.
    pub(super) fn captured<T>(f: impl FnOnce() -> T) -> (T, String) {
        static INSTALL: Once = Once::new();
        // libbpf's own default level (Info): what it prints does not change.
        INSTALL.call_once(|| {
            let _ = libbpf_rs::set_print(Some((PrintLevel::Info, print)));
        });
        KEPT.with(|k| *k.borrow_mut() = Some(String::new()));
        let out = f();
        let log = KEPT.with(|k| k.borrow_mut().take()).unwrap_or_default();
        (out, log)
    }

    /// The line of a load's log that says why the kernel refused it: the verifier's last
    /// words before libbpf's own, else libbpf's last line.
    pub(super) fn the_complaint(log: &str) -> String {
        let lines: Vec<&str> = log.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        let verifier = match lines.iter().position(|l| l.contains("-- END PROG LOAD LOG --")) {
            Some(end) => lines[..end].iter().rev().find(|l| !l.starts_with("processed ") && !l.starts_with("libbpf:")),
            None => None,
        };
        verifier.or(lines.last()).map(|l| l.to_string()).unwrap_or_default()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_complaint_is_the_verifiers_last_word_not_libbpfs_summary() {
            let log = "libbpf: prog 'meta': BPF program load failed: Invalid argument\n\
                       libbpf: prog 'meta': -- BEGIN PROG LOAD LOG --\n\
                       0: R1=ctx() R10=fp0\n\
                       6: (85) call bpf_xdp_adjust_meta#54\n\
                       program of this type cannot use helper bpf_xdp_adjust_meta#54\n\
                       processed 7 insns (limit 1000000)\n\
                       -- END PROG LOAD LOG --\n\
                       libbpf: prog 'meta': failed to load: -22\n";
            assert_eq!(the_complaint(log), "program of this type cannot use helper bpf_xdp_adjust_meta#54");
            assert_eq!(the_complaint("libbpf: failed to load object: -1\n"), "libbpf: failed to load object: -1");
            assert_eq!(the_complaint(""), "");
        }
    }
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
    /// What it was built as.
    build: ClassifierBuild,
}

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classifier").field("iface", &self.iface).field("attached", &self.link.is_some()).finish()
    }
}

impl Classifier {
    /// Loads a fresh instance for interface `iface`, built as `build`; nothing is
    /// attached yet.
    pub fn load(
        iface: &str,
        ifindex: u32,
        drop_without_socket: bool,
        build: &ClassifierBuild,
    ) -> Result<Classifier, XdpError> {
        let object = load_object(build, &format!("for {iface}"))?;
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
        Ok(Classifier { iface: iface.to_string(), ifindex, object, xsks, counters, config, link: None, build: *build })
    }

    /// What it was built as.
    pub fn build(&self) -> &ClassifierBuild {
        &self.build
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

/// Frames the XDP program saw, per class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdpClassCounters {
    /// 802.3x PAUSE frames.
    pub pause: u64,
    /// PFC frames.
    pub pfc: u64,
    /// Other MAC control frames.
    pub mac_control_other: u64,
    /// VLAN-tagged frames.
    pub vlan: u64,
    /// IPv4 frames.
    pub ipv4: u64,
    /// IPv6 frames.
    pub ipv6: u64,
    /// Anything else.
    pub other: u64,
    /// Frames shorter than an Ethernet header.
    pub runt: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_build_opens_with_its_options_written_where_the_c_struct_has_them() {
        for arrival_stamp in ArrivalStamp::ALL {
            for frags_aware in [true, false] {
                let build = ClassifierBuild { arrival_stamp, stamp_magic: 0xdead_beef, frags_aware };
                let open = open(&build).unwrap_or_else(|e| panic!("{}: {e}", build.describe()));
                let rodata = open.maps().find(|m| m.name().to_string_lossy().ends_with(".rodata")).unwrap();
                let bytes = rodata.initial_value().unwrap();
                let words: Vec<u32> = bytes.chunks(4).map(|w| u32::from_ne_bytes(w.try_into().unwrap())).collect();
                let stamp = ArrivalStamp::ALL.iter().position(|&a| a == arrival_stamp).unwrap() as u32;
                // The C code's numbering: rx clock 0, metadata 1, in-frame 2.
                assert_eq!(words, [[1, 2, 0][stamp as usize], 0xdead_beef, u32::from(frags_aware)]);
            }
        }
    }

    #[test]
    fn options_over_a_rodata_laid_out_otherwise_are_refused() {
        let build = ClassifierBuild { arrival_stamp: ArrivalStamp::Metadata, stamp_magic: 1, frags_aware: true };
        assert!(matches!(write_options(&mut [0u8; 8], &build), Err(XdpError::Layout(_))));
        assert!(matches!(write_options(&mut [0u8; 12], &build), Err(XdpError::Layout(_))));
    }
}
