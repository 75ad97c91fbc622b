//! What a NIC is and does, as `pfcswitch doctor` reports it and `run` relies on: driver,
//! queues, MTU, link speed, XDP and zero-copy support, and whether the hardware itself
//! handles PAUSE or PFC frames (then they may never reach XDP, or the NIC sends its own).
//! [`probe`] reads the facts from the kernel; [`diagnose`] judges them without IO.

pub mod ethtool;
pub mod netlink;

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::config::ArrivalStamp;
use crate::config::{BindMode, XdpMode};
use crate::core::config::DEFAULT_PORT_SPEED as DEFAULT_SPEED;
use crate::core::speed::Speed;
use crate::stats::{KernelPaths, SpeedSource};
use crate::sys::{self, LinkState, SysError};
use afxdp::frame_size::{geometry_for_mtu, largest_frame};
use ethtool::{Channels, Driver, Ethtool, PauseSettings};
use netlink::{DcbState, XdpFeatures};

/// What the kernel says about one interface.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NicFacts {
    pub iface: String,
    pub ifindex: u32,
    pub driver: Option<Driver>,
    /// Backed by a device (PCI and the like). Virtual interfaces (veth, bridges) are not,
    /// and have no line rate whatever they report.
    pub physical: bool,
    pub mtu: u32,
    pub link_up: bool,
    /// The link speed the NIC reports, Mb/s (none while the link is down, or not known).
    pub speed_mbps: Option<u64>,
    pub rx_queues: u32,
    pub tx_queues: u32,
    pub channels: Option<Channels>,
    /// `None`: the kernel cannot say (older than 6.3).
    pub xdp: Option<XdpFeatures>,
    /// `None`: the driver has no pause settings.
    pub pause: Option<PauseSettings>,
    /// `None`: it could not be read (see `unreadable`).
    pub dcb: Option<DcbState>,
    /// What could not be read, and why.
    pub unreadable: Vec<String>,
}

impl NicFacts {
    /// The line rate, where the NIC has one: a physical link that is up.
    pub fn line_rate(&self) -> Option<Speed> {
        self.speed_mbps.filter(|&m| self.physical && m > 0).map(Speed::mbps)
    }
}

/// The line rate of `iface`, where it has one: a physical NIC whose link is up. (A veth
/// reports a nominal 10G it does not have.)
pub fn line_rate(iface: &str) -> Option<Speed> {
    let dir = sysfs(iface);
    read_speed_mbps(&dir).filter(|_| is_physical(&dir)).map(Speed::mbps)
}

fn sysfs(iface: &str) -> std::path::PathBuf {
    Path::new("/sys/class/net").join(iface)
}

/// Backed by a device: virtual interfaces have no `device` link.
fn is_physical(dir: &Path) -> bool {
    dir.join("device").exists()
}

fn read_speed_mbps(dir: &Path) -> Option<u64> {
    let mbps = fs::read_to_string(dir.join("speed")).ok()?.trim().parse::<i64>().ok()?;
    (mbps > 0).then_some(mbps as u64)
}

/// Reads everything [`NicFacts`] holds about `iface` (in this network namespace). Only a
/// missing interface is an error; a fact the driver does not offer is recorded as such.
pub fn probe(iface: &str) -> Result<NicFacts, SysError> {
    let info = sys::interface(iface)?;
    let mut unreadable = Vec::new();
    let u = &mut unreadable;
    let et = read(u, "ethtool", Ethtool::new(iface));
    let driver = et.as_ref().and_then(|e| read(u, "driver (ethtool -i)", e.driver()));
    let pause = et.as_ref().and_then(|e| read(u, "pause settings (ethtool -a)", e.pause())).flatten();
    let channels = et.as_ref().and_then(|e| read(u, "channels (ethtool -l)", e.channels())).flatten();
    let xdp = read(u, "XDP features (netdev netlink)", netlink::query_xdp_features(info.ifindex)).flatten();
    let dcb = read(u, "DCB (rtnetlink)", netlink::query_dcb(iface));
    let dir = sysfs(iface);
    Ok(NicFacts {
        iface: iface.to_string(),
        ifindex: info.ifindex,
        driver,
        physical: is_physical(&dir),
        mtu: info.mtu,
        link_up: sys::link_state(iface, info.ifindex) == Some(LinkState::Up),
        speed_mbps: read_speed_mbps(&dir),
        rx_queues: sys::rx_queues(iface)?,
        tx_queues: sys::tx_queues(iface)?,
        channels,
        xdp,
        pause,
        dcb,
        unreadable,
    })
}

/// `r`'s value, or `None` with what could not be read noted in `unreadable`.
fn read<T>(unreadable: &mut Vec<String>, what: &str, r: std::io::Result<T>) -> Option<T> {
    r.map_err(|e| unreadable.push(format!("{what}: {e}"))).ok()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Ok,
    Note,
    Warn,
    Error,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub level: Level,
    pub text: String,
}

/// What `pfcswitch run` would do on the interface with its defaults.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunPlan {
    pub rx_queues: u32,
    /// Native when the driver has it (tried first when the kernel cannot say), else generic.
    pub xdp_mode: XdpMode,
    /// Zero-copy when the driver has it (tried first when the kernel cannot say), else copy.
    pub bind_mode: BindMode,
    /// The UMEM frame size; `None` when no frame size holds the MTU.
    pub frame_size: Option<u32>,
    pub speed: Speed,
    /// Where the speed comes from: the NIC or the default (a port's `speed` overrides both).
    pub speed_from: SpeedSource,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub facts: NicFacts,
    pub run: RunPlan,
    pub findings: Vec<Finding>,
}

impl Diagnosis {
    pub fn worst(&self) -> Level {
        self.findings.iter().map(|f| f.level).max().unwrap_or(Level::Ok)
    }
}

/// Judges `facts`: what `run` would do, and what to fix or know first, on a kernel whose
/// XDP classifier takes the paths `kernel` says (None: not probed, taken as the best).
pub fn diagnose(facts: NicFacts, kernel: Option<&KernelPaths>) -> Diagnosis {
    let mut f = Vec::new();
    let mut say = |level, text: String| f.push(Finding { level, text });
    let iface = &facts.iface;
    let driver = facts.driver.as_ref().map_or("the driver", |d| d.name.as_str());

    if !facts.link_up {
        say(Level::Warn, "the link is down: the port carries nothing until it comes up".into());
    }
    // An in-frame arrival stamp lies in front of the frame in the UMEM.
    let stamp = kernel.map_or(ArrivalStamp::Metadata, |k| k.arrival_stamp.path);
    let frags = kernel.is_none_or(|k| k.xdp_frags.path);
    let frame = largest_frame(facts.mtu) + stamp.bytes_in_frame();
    let frame_size = match geometry_for_mtu(facts.mtu, None, stamp.bytes_in_frame(), frags) {
        Ok(g) if g.buffers_per_frame == 1 => {
            say(
                Level::Ok,
                format!(
                    "MTU {} ({frame}-byte frames) fits {}-byte UMEM frames; a port on it takes frames up to {frame} \
                     bytes unless its max_frame says otherwise",
                    facts.mtu, g.frame_size
                ),
            );
            Some(g.frame_size)
        }
        Ok(g) => {
            // Zero-copy multi-buffer needs the driver to take that many segments; copy
            // mode (veth, and any driver's fallback) builds them in the kernel.
            let zc_segs = facts.xdp.as_ref().filter(|x| x.zero_copy).map(|x| x.zc_max_segs);
            let how = match zc_segs {
                Some(segs) if segs >= g.buffers_per_frame => {
                    "zero-copy multi-buffer (the driver takes enough segments)"
                }
                Some(_) => "multi-buffer in copy mode (the driver's zero-copy takes too few segments)",
                None => "multi-buffer in copy mode",
            };
            say(
                Level::Ok,
                format!(
                    "MTU {} ({frame}-byte frames) takes {} UMEM frames of {} bytes each: AF_XDP {how}; a port on it \
                     takes frames up to {frame} bytes unless its max_frame says otherwise",
                    facts.mtu, g.buffers_per_frame, g.frame_size
                ),
            );
            Some(g.frame_size)
        }
        Err(advice) => {
            say(Level::Error, advice.replace("IF", iface));
            None
        }
    };
    let (speed, speed_from) = match facts.line_rate() {
        Some(s) => {
            say(
                Level::Ok,
                format!("link speed {s}, read from the NIC: `run` shapes the port to it unless `speed` is set"),
            );
            (s, SpeedSource::Nic)
        }
        None if facts.physical => {
            say(
                Level::Warn,
                format!("the NIC reports no link speed (is the link up?): set the port's `speed`, or `run` assumes {DEFAULT_SPEED}"),
            );
            (DEFAULT_SPEED, SpeedSource::Default)
        }
        None => {
            say(
                Level::Note,
                format!(
                    "no line rate: {driver} is virtual. Set the port's `speed` (the egress shaper enforces it); \
                     without it `run` assumes {DEFAULT_SPEED}"
                ),
            );
            (DEFAULT_SPEED, SpeedSource::Default)
        }
    };
    say(Level::Ok, format!("`run` binds all {} rx queues, one AF_XDP socket each", facts.rx_queues));
    if let Some(c) = facts.channels {
        let (now, max) = if c.max_combined > 0 { (c.combined, c.max_combined) } else { (c.rx, c.max_rx) };
        if now < max {
            say(
                Level::Note,
                format!("{now} of {max} channels in use (`ethtool -l {iface}`); more queues spread the load over more sockets"),
            );
        }
    }
    let (xdp_mode, bind_mode) = match facts.xdp {
        None => {
            say(
                Level::Warn,
                "the kernel cannot say which XDP features the driver has (no `netdev` netlink family: older than 6.3): \
                 `run` tries native XDP, then generic, and zero-copy, then copy"
                    .into(),
            );
            (XdpMode::Native, BindMode::ZeroCopy)
        }
        Some(x) => {
            let native = x.native && x.redirect;
            if native {
                say(Level::Ok, format!("native XDP with redirect in {driver}"));
            } else {
                say(
                    Level::Warn,
                    format!("no native XDP redirect in {driver}: `run` falls back to generic XDP (each frame becomes an skb first: slower)"),
                );
            }
            if x.zero_copy {
                say(Level::Ok, "AF_XDP zero-copy: frames stay in the NIC's DMA buffers".into());
            } else {
                say(Level::Note, format!("no AF_XDP zero-copy in {driver}: sockets bind in copy mode"));
            }
            (
                if native { XdpMode::Native } else { XdpMode::Generic },
                if x.zero_copy { BindMode::ZeroCopy } else { BindMode::Copy },
            )
        }
    };
    match facts.pause {
        None => say(Level::Ok, "no 802.3x pause settings in the NIC: it neither sends PAUSE nor acts on it".into()),
        Some(p) => {
            if p.rx {
                say(
                    Level::Warn,
                    format!(
                        "the NIC acts on received PAUSE frames itself (rx on), and many NICs consume them before XDP \
                         sees them: `ethtool -A {iface} autoneg off rx off tx off`"
                    ),
                );
            }
            if p.tx {
                say(
                    Level::Warn,
                    format!(
                        "the NIC sends its own PAUSE frames when its rx ring fills (tx on), stopping the link partner \
                         behind the switch's back: `ethtool -A {iface} tx off`"
                    ),
                );
            }
            if p.autoneg {
                say(
                    Level::Warn,
                    format!("pause autonegotiation is on: the link partner can turn pause back on; `ethtool -A {iface} autoneg off`"),
                );
            }
            if !(p.rx || p.tx || p.autoneg) {
                say(Level::Ok, "802.3x pause is off in the NIC".into());
            }
        }
    }
    match &facts.dcb {
        Some(DcbState::NotSupported) => {
            say(Level::Ok, "no DCB in the driver: PFC frames reach XDP as they arrive".into())
        }
        Some(DcbState::Pfc { enabled, capable }) if enabled.is_empty() => {
            say(Level::Ok, format!("IEEE PFC is off in the NIC (it could pause {capable} priorities)"))
        }
        Some(DcbState::Pfc { enabled, .. }) => {
            let prios: Vec<String> = enabled.iter().map(|p| p.to_string()).collect();
            say(
                Level::Warn,
                format!(
                    "the NIC runs PFC itself for priorities {}: it consumes PFC frames for them before XDP sees them, \
                     and sends its own; `dcb pfc set dev {iface} prio-pfc all:off`",
                    prios.join(",")
                ),
            )
        }
        Some(DcbState::NoIeeePfc) => say(
            Level::Note,
            format!(
                "the driver has DCB but reports no IEEE PFC state (CEE, or DCBX in firmware): make sure the NIC does \
                 not run PFC itself (`dcb pfc show dev {iface}`, or the vendor's tool)"
            ),
        ),
        None => say(Level::Warn, "the NIC's DCB state could not be read: check PFC by hand (`dcb pfc show`)".into()),
    }
    for u in &facts.unreadable {
        say(Level::Note, format!("not read: {u}"));
    }
    let run = RunPlan { rx_queues: facts.rx_queues, xdp_mode, bind_mode, frame_size, speed, speed_from };
    Diagnosis { facts, run, findings: f }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Priority;

    fn veth() -> NicFacts {
        NicFacts {
            iface: "eth0".into(),
            ifindex: 7,
            driver: Some(Driver { name: "veth".into(), version: "1.0".into(), ..Default::default() }),
            physical: false,
            mtu: 1500,
            link_up: true,
            speed_mbps: Some(10_000),
            rx_queues: 4,
            tx_queues: 4,
            channels: Some(Channels { max_rx: 4, max_tx: 4, rx: 4, tx: 4, ..Default::default() }),
            xdp: Some(XdpFeatures { native: true, redirect: true, zero_copy: false, bits: 35, zc_max_segs: 0 }),
            pause: None,
            dcb: Some(DcbState::NotSupported),
            unreadable: vec![],
        }
    }

    fn has(d: &Diagnosis, level: Level, text: &str) -> bool {
        d.findings.iter().any(|f| f.level == level && f.text.contains(text))
    }

    #[test]
    fn a_veth_gets_native_xdp_copy_mode_and_no_line_rate_despite_its_nominal_10g() {
        let d = diagnose(veth(), None);
        assert_eq!((d.run.xdp_mode, d.run.bind_mode), (XdpMode::Native, BindMode::Copy));
        assert_eq!((d.run.rx_queues, d.run.frame_size), (4, Some(2048)));
        assert_eq!((d.run.speed, d.run.speed_from), (Speed::gbps(10), SpeedSource::Default));
        assert!(has(&d, Level::Note, "veth is virtual"), "{:?}", d.findings);
        assert!(has(&d, Level::Ok, "PFC frames reach XDP as they arrive"));
        assert_eq!(d.worst(), Level::Note);
    }

    #[test]
    fn a_nic_that_handles_pause_or_pfc_itself_is_warned_about_with_the_command_that_stops_it() {
        let mut f = veth();
        f.driver = Some(Driver { name: "mlx5_core".into(), ..Default::default() });
        f.physical = true;
        f.speed_mbps = Some(25_000);
        f.xdp.as_mut().unwrap().zero_copy = true;
        f.pause = Some(PauseSettings { autoneg: false, rx: true, tx: true });
        f.dcb = Some(DcbState::Pfc { capable: 8, enabled: [3, 4].map(Priority::new).into_iter().collect() });
        let d = diagnose(f, None);
        assert_eq!(
            (d.run.speed, d.run.speed_from, d.run.bind_mode),
            (Speed::gbps(25), SpeedSource::Nic, BindMode::ZeroCopy)
        );
        assert!(has(&d, Level::Warn, "ethtool -A eth0 autoneg off rx off tx off"), "{:?}", d.findings);
        assert!(has(&d, Level::Warn, "sends its own PAUSE"));
        assert!(has(&d, Level::Warn, "runs PFC itself for priorities 3,4"));
        assert!(has(&d, Level::Warn, "dcb pfc set dev eth0 prio-pfc all:off"));
        assert_eq!(d.worst(), Level::Warn);
    }

    #[test]
    fn a_jumbo_mtu_takes_several_4096_byte_frames_and_one_above_9216_is_an_error() {
        let mut f = veth();
        f.mtu = 3000;
        assert_eq!(diagnose(f.clone(), None).run.frame_size, Some(4096));
        f.mtu = 9000;
        let d = diagnose(f.clone(), None);
        assert_eq!(d.run.frame_size, Some(4096));
        assert_ne!(d.worst(), Level::Error, "{:?}", d.findings);
        assert!(has(&d, Level::Ok, "MTU 9000 (9022-byte frames) takes 3 UMEM frames"), "{:?}", d.findings);
        f.mtu = 9500;
        let d = diagnose(f, None);
        assert_eq!((d.run.frame_size, d.worst()), (None, Level::Error));
        assert!(has(&d, Level::Error, "largest pfcswitch carries, 9216"), "{:?}", d.findings);
    }

    #[test]
    fn a_jumbo_mtu_on_a_kernel_without_frags_aware_xdp_is_an_error_naming_the_mtu_that_works() {
        let mut f = veth();
        f.mtu = 9000;
        let mut k = KernelPaths::best();
        k.xdp_frags.path = false;
        k.arrival_stamp.path = ArrivalStamp::InFrame;
        let d = diagnose(f.clone(), Some(&k));
        assert_eq!((d.run.frame_size, d.worst()), (None, Level::Error));
        assert!(
            has(&d, Level::Error, "the largest MTU that works is 3802 (`ip link set eth0 mtu 3802`)"),
            "{:?}",
            d.findings
        );
        f.mtu = 1500;
        assert_eq!(diagnose(f, Some(&k)).run.frame_size, Some(2048));
    }

    #[test]
    fn without_the_kernels_xdp_features_run_tries_native_then_generic() {
        let mut f = veth();
        f.xdp = None;
        f.dcb = None;
        f.physical = true;
        f.speed_mbps = None;
        f.link_up = false;
        let d = diagnose(f, None);
        assert_eq!(d.run.xdp_mode, XdpMode::Native);
        assert!(has(&d, Level::Warn, "tries native XDP, then generic"));
        assert!(has(&d, Level::Warn, "reports no link speed"));
        assert!(has(&d, Level::Warn, "link is down"));
        assert!(has(&d, Level::Warn, "DCB state could not be read"));
        let mut g = veth();
        g.xdp = Some(XdpFeatures { native: true, redirect: false, ..Default::default() });
        assert_eq!(diagnose(g, None).run.xdp_mode, XdpMode::Generic, "AF_XDP needs redirect in native mode");
    }
}
