//! A host's AF_XDP endpoint for the tools: a UMEM, one socket on queue 0, and (when the
//! tool receives) the classifier steering every frame to it.

use std::os::fd::RawFd;

use afxdp::frame_size;
use afxdp::paths::{self, Probed, Wanted};
use afxdp::xdp::Classifier;
use afxdp::xsk::{StampReading, UmemPool, XskPort};
use anyhow::{Context, Result};
use pfcswitch::config::ArrivalStamp;
use pfcswitch::stats::KernelPaths;
use pfcswitch::sys;

pub const RING_SIZE: u32 = 4096;
pub const BATCH: usize = 64;

pub struct HostPort {
    // Drop order: detach XDP, close the socket, free the UMEM.
    classifier: Option<Classifier>,
    pub port: XskPort,
    pub pool: UmemPool,
    pub mac: pfcswitch::core::mac::MacAddr,
    pub fd: RawFd,
    /// What this kernel let the receive program do, and why (none without one).
    pub kernel_paths: Option<KernelPaths>,
}

impl HostPort {
    /// Opens `iface`. With `receive`, the classifier is attached so that frames arriving
    /// on the interface reach the socket (the kernel stack no longer sees them); without
    /// it the socket only transmits and needs no XDP program.
    /// The receive program is built as the switch's classifier is: the best arrival
    /// stamp this kernel allows, unless `stamp` names one.
    pub fn open(iface: &str, receive: bool, frames: u32, force: bool, stamp: Option<ArrivalStamp>) -> Result<HostPort> {
        sys::check_privileges()?;
        let info = sys::interface(iface)?;
        let probed = if receive { Some(paths::probe(Wanted { arrival_stamp: stamp, xdp_frags: None })?) } else { None };
        let reading =
            probed.as_ref().map_or(StampReading { stamp: ArrivalStamp::RxClock, magic: 0 }, |p| p.build.reading());
        // The switch's own rule: the smallest UMEM frame that holds the MTU's frames (and
        // an in-frame stamp), or several (multi-buffer) for a jumbo MTU, which a receive
        // program that is not frags-aware cannot take.
        let frags = probed.as_ref().is_none_or(|p| p.build.frags_aware);
        let geometry = frame_size::geometry_for_mtu(info.mtu, None, reading.overhead(), frags)
            .map_err(|advice| anyhow::anyhow!("{iface}: {}", advice.replace("IF", iface)))?;
        let mut pool = UmemPool::new(frames, geometry.frame_size, RING_SIZE, reading)?;
        let buffers = geometry.buffers_per_frame as usize;
        let on = pool.bind_on(1);
        let mut port = XskPort::bind((&on.umem, on.ids[0]), iface, 0, RING_SIZE, BATCH, None, buffers)?;
        let classifier = match &probed {
            Some(Probed { build, .. }) => {
                // Buffers first: a frame that arrives once the program is attached and finds
                // the fill ring empty is dropped.
                port.refill(&mut pool, frames as usize / 2);
                let mut c = Classifier::load(iface, info.ifindex, false, build)?;
                c.bind_socket(0, port.fd())?;
                c.attach(force, None).with_context(|| format!("attaching the receive program to {iface}"))?;
                Some(c)
            }
            None => None,
        };
        let fd = port.fd();
        Ok(HostPort { classifier, port, pool, mac: info.mac, fd, kernel_paths: probed.map(|p| p.paths) })
    }

    /// How the frames it receives are stamped on arrival.
    pub fn arrival_stamp(&self) -> ArrivalStamp {
        self.pool.stamp_reading().stamp
    }

    pub fn receives(&self) -> bool {
        self.classifier.is_some()
    }

    /// Where the receive program runs, as the kernel reported it (none without one).
    pub fn xdp_mode(&self) -> Option<pfcswitch::config::XdpMode> {
        self.classifier.as_ref().and_then(|c| c.mode())
    }

    /// Frames the XDP program classified on this interface.
    pub fn xdp_counters(&self) -> Option<pfcswitch::stats::XdpClassCounters> {
        self.classifier.as_ref().map(|c| c.class_counters())
    }

    /// Kicks and reclaims until the tx ring is empty or `timeout` passes.
    pub fn flush(&mut self, timeout: std::time::Duration) {
        let start = std::time::Instant::now();
        while self.port.tx_outstanding() > 0 && start.elapsed() < timeout {
            let _ = self.port.kick();
            if self.port.reclaim(&mut self.pool, pfcswitch::sys::now()) == 0 {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }
}
