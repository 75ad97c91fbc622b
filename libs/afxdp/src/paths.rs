//! What this kernel lets the XDP classifier do, found once at start by loading it as each
//! optional part asks (a trial load: the kernel's verifier is the only authority, and
//! libbpf's helper probe takes "program of this type cannot use helper" for a yes), and
//! the path taken for each part, with the reason. Nothing optional stops the switch: a
//! part the kernel refuses is left out and its fallback taken, unless the configuration
//! asked for that part by name.
//!
//! The optional parts and their fallbacks, best first:
//! - arrival stamps ([`ArrivalStamp`]): the frame's metadata area, 16 bytes pushed in front
//!   of the frame, the loop's own clock at rx (`dataplane.arrival_stamp`);
//! - frags awareness: loaded with BPF_F_XDP_HAS_FRAGS, or without it, when frames over one
//!   UMEM frame cannot arrive and a jumbo MTU is refused at start (`dataplane.xdp_frags`).
//!
//! Per port, and decided where the port is bound: native XDP, else generic
//! (`dataplane.xdp_mode`); zero-copy, else copy (`dataplane.bind_mode`).

use super::xdp::{ClassifierBuild, XdpError};
use serde::{Deserialize, Serialize};

use crate::modes::ArrivalStamp;

/// What the configuration asks of the optional parts (`None`: the best the kernel allows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wanted {
    pub arrival_stamp: Option<ArrivalStamp>,
    pub xdp_frags: Option<bool>,
}

/// The probe's answer: what to build every port's classifier as, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probed {
    pub build: ClassifierBuild,
    pub paths: KernelPaths,
}

/// Probes this kernel by trial loads (no interface is touched) and chooses.
pub fn probe(wanted: Wanted) -> Result<Probed, XdpError> {
    choose(wanted, random_magic(), super::xdp::try_load)
}

/// Chooses each part's path given `try_load`, which says whether the kernel loads a build:
/// frags awareness first (on the plainest program), then the best arrival stamp on top
/// of what that chose. A part asked for by name that the kernel refuses is the error.
pub fn choose(
    wanted: Wanted,
    stamp_magic: u32,
    mut try_load: impl FnMut(&ClassifierBuild) -> Result<(), XdpError>,
) -> Result<Probed, XdpError> {
    let mut build = ClassifierBuild { arrival_stamp: ArrivalStamp::RxClock, stamp_magic, frags_aware: true };
    let xdp_frags = match wanted.xdp_frags {
        Some(false) => {
            build.frags_aware = false;
            try_load(&build)?;
            Choice { path: false, why: "dataplane.xdp_frags = false".into() }
        }
        Some(true) => {
            try_load(&build)?;
            Choice { path: true, why: "dataplane.xdp_frags = true".into() }
        }
        None => match try_load(&build) {
            Ok(()) => Choice {
                path: true,
                why:
                    "this kernel loads frags-aware XDP programs: frames over one UMEM frame reach the classifier whole"
                        .into(),
            },
            Err(e @ XdpError::Privileges { .. }) => return Err(e),
            Err(refused) => {
                build.frags_aware = false;
                try_load(&build)?;
                Choice {
                    path: false,
                    why: format!(
                        "this kernel refuses frags-aware XDP programs (BPF_F_XDP_HAS_FRAGS, Linux 5.18 and later: \
                         {}); an MTU whose frames take more than one UMEM frame is refused at start",
                        complaint(&refused)
                    ),
                }
            }
        },
    };
    let arrival_stamp = match wanted.arrival_stamp {
        Some(stamp) => {
            build.arrival_stamp = stamp;
            try_load(&build)?;
            Choice { path: stamp, why: format!("dataplane.arrival_stamp = \"{stamp}\"") }
        }
        None => {
            let mut refusals = Vec::new();
            let mut chosen = None;
            for stamp in ArrivalStamp::ALL {
                build.arrival_stamp = stamp;
                // The stamp-less program loaded above: the rx clock needs no second try.
                let loaded = if stamp.at_arrival() { try_load(&build) } else { Ok(()) };
                match loaded {
                    Ok(()) => {
                        chosen = Some(stamp);
                        break;
                    }
                    Err(e @ XdpError::Privileges { .. }) => return Err(e),
                    Err(refused) => refusals.push((stamp, complaint(&refused))),
                }
            }
            let path = chosen.expect("the rx clock needs nothing of the kernel");
            Choice { path, why: stamp_reason(path, &refusals) }
        }
    };
    Ok(Probed { build, paths: KernelPaths { arrival_stamp, xdp_frags } })
}

/// The helper each stamp needs of the kernel.
fn helper(stamp: ArrivalStamp) -> &'static str {
    match stamp {
        ArrivalStamp::Metadata => "bpf_xdp_adjust_meta",
        ArrivalStamp::InFrame => "bpf_xdp_adjust_head",
        ArrivalStamp::RxClock => "nothing",
    }
}

/// Why `path` was taken, after the better paths were refused as `refusals` say.
fn stamp_reason(path: ArrivalStamp, refusals: &[(ArrivalStamp, String)]) -> String {
    let what = match path {
        ArrivalStamp::Metadata => {
            "the XDP program writes it in the frame's metadata area (bpf_xdp_adjust_meta); a driver with no \
             metadata area leaves its frames to the rx clock, and ctl stats counts them"
        }
        ArrivalStamp::InFrame => {
            "the XDP program pushes it in front of the frame (bpf_xdp_adjust_head) and the loop takes it off \
             again, moving the frame's first buffer by 16 bytes"
        }
        ArrivalStamp::RxClock => {
            "the dataplane's clock as the loop takes the frame off its rx ring: pause timers and reaction times \
             count from the rx batch, and the rx ring's wait is not measured"
        }
    };
    let refused: Vec<String> = refusals.iter().map(|(stamp, said)| format!("{} ({said})", helper(*stamp))).collect();
    if refused.is_empty() {
        what.to_string()
    } else {
        format!("{what}; this kernel refuses {} in XDP programs", refused.join(" and "))
    }
}

/// What the kernel said when it refused a build.
fn complaint(e: &XdpError) -> String {
    match e {
        XdpError::Load { log, source, .. } if !log.is_empty() => format!("{log}, {source}"),
        other => other.to_string(),
    }
}

/// A stamp's first word for this process: a frame that merely begins with the same
/// bytes is then not taken for a stamp (a sender cannot guess it).
fn random_magic() -> u32 {
    let mut bytes = [0u8; 4];
    // SAFETY: getrandom writes at most `len` bytes into the buffer it is given.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    let magic = if n == 4 {
        u32::from_ne_bytes(bytes)
    } else {
        // No getrandom (before 3.17): the clock's low bits, still unknown to a sender.
        crate::sys::now().as_nanos() as u32 ^ std::process::id().rotate_left(16)
    };
    magic.max(1)
}

/// One optional part: the path taken, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice<T> {
    pub path: T,
    pub why: String,
}

/// The paths taken for the kernel's optional parts, as the start-up log, `doctor` and
/// `ctl stats` say them (chosen here).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelPaths {
    pub arrival_stamp: Choice<ArrivalStamp>,
    /// Whether the classifier loads frags-aware.
    pub xdp_frags: Choice<bool>,
}

impl KernelPaths {
    /// The best of every part, as on a kernel that allows them all (for tests and for a
    /// report that has no kernel to ask).
    pub fn best() -> KernelPaths {
        KernelPaths {
            arrival_stamp: Choice { path: ArrivalStamp::Metadata, why: "the best path".into() },
            xdp_frags: Choice { path: true, why: "the best path".into() },
        }
    }

    /// The lines the start-up log and `doctor` print, one per part.
    pub fn lines(&self) -> [String; 2] {
        [
            format!("arrival stamps: {} — {}", self.arrival_stamp.path, self.arrival_stamp.why),
            format!("frags-aware XDP: {} — {}", if self.xdp_frags.path { "yes" } else { "no" }, self.xdp_frags.why),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(build: &ClassifierBuild, said: &str) -> XdpError {
        XdpError::Load {
            what: format!("a trial, {}", build.describe()),
            source: libbpf_rs::Error::from(std::io::Error::from_raw_os_error(libc::EINVAL)),
            log: said.into(),
        }
    }

    /// The builds a fake kernel was asked to load.
    type Tried = std::rc::Rc<std::cell::RefCell<Vec<ClassifierBuild>>>;

    /// A kernel that refuses the builds `refuses` says no to, and the builds tried.
    fn kernel(
        refuses: impl Fn(&ClassifierBuild) -> Option<&'static str>,
    ) -> (impl FnMut(&ClassifierBuild) -> Result<(), XdpError>, Tried) {
        let tried = Tried::default();
        let log = tried.clone();
        let f = move |b: &ClassifierBuild| {
            log.borrow_mut().push(*b);
            refuses(b).map_or(Ok(()), |said| Err(refused(b, said)))
        };
        (f, tried)
    }

    #[test]
    fn a_kernel_that_allows_everything_gets_metadata_stamps_and_frags_in_two_loads() {
        let (k, tried) = kernel(|_| None);
        let p = choose(Wanted::default(), 7, k).unwrap();
        assert_eq!(
            p.build,
            ClassifierBuild { arrival_stamp: ArrivalStamp::Metadata, stamp_magic: 7, frags_aware: true }
        );
        assert_eq!(tried.borrow().len(), 2);
        assert!(p.paths.arrival_stamp.why.contains("metadata area"), "{:?}", p.paths);
        assert!(!p.paths.arrival_stamp.why.contains("refuses"));
    }

    #[test]
    fn a_kernel_that_refuses_adjust_meta_gets_in_frame_stamps_and_the_reason_quotes_the_verifier() {
        let said = "program of this type cannot use helper bpf_xdp_adjust_meta#54";
        let (k, _) = kernel(|b| (b.arrival_stamp == ArrivalStamp::Metadata).then_some(said));
        let p = choose(Wanted::default(), 7, k).unwrap();
        assert_eq!((p.build.arrival_stamp, p.build.frags_aware), (ArrivalStamp::InFrame, true));
        let why = &p.paths.arrival_stamp.why;
        assert!(why.contains("this kernel refuses bpf_xdp_adjust_meta (program of this type"), "{why}");
        assert!(p.paths.lines()[0].starts_with("arrival stamps: in-frame — "), "{:?}", p.paths.lines());
    }

    #[test]
    fn a_kernel_that_refuses_both_helpers_and_frags_gets_the_rx_clock_without_frags_and_still_starts() {
        let (k, _) = kernel(|b| {
            if b.frags_aware {
                Some("invalid argument")
            } else if b.arrival_stamp.at_arrival() {
                Some("unknown func")
            } else {
                None
            }
        });
        let p = choose(Wanted::default(), 7, k).unwrap();
        assert_eq!((p.build.arrival_stamp, p.build.frags_aware), (ArrivalStamp::RxClock, false));
        assert!(p.paths.arrival_stamp.why.contains("bpf_xdp_adjust_meta (unknown func"), "{:?}", p.paths);
        assert!(p.paths.arrival_stamp.why.contains("bpf_xdp_adjust_head (unknown func"));
        assert!(p.paths.xdp_frags.why.contains("refuses frags-aware XDP programs"), "{:?}", p.paths);
    }

    #[test]
    fn a_part_forced_off_is_taken_without_asking_for_better_and_one_asked_for_by_name_must_load() {
        let (k, tried) = kernel(|_| None);
        let wanted = Wanted { arrival_stamp: Some(ArrivalStamp::RxClock), xdp_frags: Some(false) };
        let p = choose(wanted, 7, k).unwrap();
        assert_eq!((p.build.arrival_stamp, p.build.frags_aware), (ArrivalStamp::RxClock, false));
        assert!(tried.borrow().iter().all(|b| !b.frags_aware && !b.arrival_stamp.at_arrival()));
        assert_eq!(p.paths.arrival_stamp.why, "dataplane.arrival_stamp = \"rx-clock\"");
        let (k, _) = kernel(|b| (b.arrival_stamp == ArrivalStamp::Metadata).then_some("cannot use helper"));
        let wanted = Wanted { arrival_stamp: Some(ArrivalStamp::Metadata), ..Wanted::default() };
        let err = choose(wanted, 7, k).unwrap_err().to_string();
        assert!(err.contains("arrival stamps: metadata") && err.contains("cannot use helper"), "{err}");
    }

    #[test]
    fn missing_privileges_end_the_probe_at_once_with_the_privileges_named() {
        let mut n = 0;
        let k = |_: &ClassifierBuild| {
            n += 1;
            Err(XdpError::Privileges { source: libbpf_rs::Error::from(std::io::Error::from_raw_os_error(libc::EPERM)) })
        };
        let err = choose(Wanted::default(), 7, k).unwrap_err().to_string();
        assert!(err.contains("run as root"), "{err}");
        assert_eq!(n, 1);
    }
}
