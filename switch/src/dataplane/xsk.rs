//! AF_XDP sockets over one shared UMEM, with our own descriptor bookkeeping.
//!
//! Frames never leave the UMEM: a frame received on one port is put on another port's tx
//! ring as is. xsk-rs gives us the rings; which frame is where, and how long each frame
//! is, is tracked here (the completion ring resets descriptor lengths, so a descriptor
//! that comes back from it cannot be trusted for anything but its address).

use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, RawFd};

use xsk_rs::config::{BindFlags, FrameSize, LibxdpFlags, QueueSize, SocketConfig, UmemConfig};
use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, Socket, TxQueue, Umem};

use crate::config::BindMode;
use crate::core::queue::FrameId;
use crate::core::switch::{FramePool, TxBatch};
use crate::core::time::Time;
use crate::frame_size::usable_frame_bytes;

/// How long binding keeps retrying a queue the kernel still reports busy.
const BIND_RETRY: std::time::Duration = std::time::Duration::from_secs(3);

#[derive(Debug, thiserror::Error)]
pub enum XskError {
    #[error("creating the UMEM ({frames} frames of {frame_size} bytes): {source}")]
    Umem { frames: u32, frame_size: u32, source: xsk_rs::umem::UmemCreateError },
    #[error("invalid UMEM or ring geometry: {0}")]
    Geometry(String),
    #[error(
        "creating the AF_XDP socket on {iface} queue {queue}: {source}{hint}",
        hint = socket_hint(.source)
    )]
    Socket { iface: String, queue: u32, source: xsk_rs::socket::SocketCreateError },
    #[error("interface {iface} has MTU {mtu}: frames up to {frame} bytes do not fit a {frame_size}-byte UMEM frame ({usable} usable); {advice}")]
    FrameTooLarge { iface: String, mtu: u32, frame: u32, frame_size: u32, usable: u32, advice: String },
    #[error("the UMEM is shared by the first socket created on it; this socket has no fill/completion rings")]
    NoRings,
}

fn os_error(e: &xsk_rs::socket::SocketCreateError) -> Option<i32> {
    use std::error::Error;
    e.source().and_then(|s| s.downcast_ref::<std::io::Error>()).and_then(|s| s.raw_os_error())
}

fn socket_hint(e: &xsk_rs::socket::SocketCreateError) -> &'static str {
    match os_error(e) {
        Some(libc::EBUSY) => " (EBUSY: another AF_XDP socket or XDP program holds this queue)",
        Some(libc::EPERM) => " (EPERM: run as root)",
        Some(libc::ENOMEM | libc::ENOBUFS) => " (out of locked memory: raise `ulimit -l`)",
        Some(libc::EOPNOTSUPP) => {
            " (EOPNOTSUPP: the driver has no zero-copy AF_XDP; use --bind-mode copy, or leave the mode out to fall back)"
        }
        _ => "",
    }
}

/// What the XDP classifier writes in front of each frame (struct rx_meta in the C code).
const RX_META_MAGIC: u32 = 0x5046_5453;
const RX_META_LEN: usize = 16;

/// The UMEM as a pool of frames: which are free, and each frame's current descriptor.
pub struct UmemPool {
    umem: Umem,
    frame_size: usize,
    /// A descriptor per frame as the UMEM handed them out (address of the data area).
    pristine: Vec<FrameDesc>,
    /// Each frame's descriptor as of now: its received or written length.
    current: Vec<FrameDesc>,
    /// When each received frame arrived, per the XDP program (0: unknown).
    arrival_ns: Vec<u64>,
    free: Vec<FrameId>,
}

impl std::fmt::Debug for UmemPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UmemPool").field("frames", &self.pristine.len()).field("free", &self.free.len()).finish()
    }
}

impl UmemPool {
    pub fn new(frames: u32, frame_size: u32, ring_size: u32) -> Result<UmemPool, XskError> {
        let geometry = |e: &dyn std::fmt::Display| XskError::Geometry(e.to_string());
        let config = UmemConfig::builder()
            .frame_size(FrameSize::new(frame_size).map_err(|e| geometry(&e))?)
            .fill_queue_size(QueueSize::new(ring_size).map_err(|e| geometry(&e))?)
            .comp_queue_size(QueueSize::new(ring_size).map_err(|e| geometry(&e))?)
            .build()
            .map_err(|e| geometry(&e))?;
        let count = NonZeroU32::new(frames).ok_or_else(|| XskError::Geometry("zero UMEM frames".into()))?;
        let (umem, descs) =
            Umem::new(config, count, false).map_err(|source| XskError::Umem { frames, frame_size, source })?;
        Ok(UmemPool {
            umem,
            frame_size: frame_size as usize,
            current: descs.clone(),
            arrival_ns: vec![0; frames as usize],
            free: (0..frames).rev().map(FrameId).collect(),
            pristine: descs,
        })
    }

    pub fn umem(&self) -> &Umem {
        &self.umem
    }

    pub fn capacity(&self) -> u32 {
        self.pristine.len() as u32
    }

    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Largest frame one UMEM frame holds.
    pub fn bytes_capacity(&self) -> usize {
        usable_frame_bytes(self.frame_size as u32) as usize
    }

    /// The frame a ring descriptor points into.
    pub fn id_of(&self, desc: &FrameDesc) -> FrameId {
        FrameId((desc.addr() / self.frame_size) as u32)
    }

    /// Records a frame the rx ring handed us: its descriptor carries address and length,
    /// the metadata in front of it the arrival time.
    pub fn received(&mut self, desc: &FrameDesc) -> FrameId {
        let id = self.id_of(desc);
        self.current[id.0 as usize] = *desc;
        self.arrival_ns[id.0 as usize] = self.take_arrival(desc);
        id
    }

    /// Reads (and clears, so a later frame without metadata cannot inherit it) the
    /// arrival stamp the classifier put just before the frame's data.
    fn take_arrival(&self, desc: &FrameDesc) -> u64 {
        let chunk_start = desc.addr() / self.frame_size * self.frame_size;
        if desc.addr() < chunk_start + RX_META_LEN {
            return 0;
        }
        // SAFETY: the frame is ours (just taken off the rx ring); the 16 bytes before its
        // data lie in the same UMEM chunk (checked above), inside the mapping.
        unsafe {
            let data = self.umem.data(desc).contents().as_ptr();
            let meta = data.sub(RX_META_LEN) as *mut u8;
            let magic = u32::from_ne_bytes(std::ptr::read_unaligned(meta as *const [u8; 4]));
            if magic != RX_META_MAGIC {
                return 0;
            }
            let ns = u64::from_ne_bytes(std::ptr::read_unaligned(meta.add(8) as *const [u8; 8]));
            std::ptr::write_unaligned(meta as *mut [u8; 4], [0; 4]);
            ns
        }
    }

    /// The descriptor to put on a tx ring for frame `id`.
    pub fn tx_desc(&self, id: FrameId) -> FrameDesc {
        self.current[id.0 as usize]
    }

    /// A descriptor for the fill ring (only the address matters there).
    pub fn fill_desc(&self, id: FrameId) -> FrameDesc {
        self.pristine[id.0 as usize]
    }
}

impl FramePool for UmemPool {
    fn alloc(&mut self) -> Option<FrameId> {
        self.free.pop()
    }

    fn free_frames(&self) -> usize {
        self.free_count()
    }

    fn free(&mut self, id: FrameId) {
        debug_assert!(self.free.len() < self.pristine.len(), "more frees than frames");
        self.free.push(id);
    }

    fn bytes(&self, id: FrameId) -> &[u8] {
        // SAFETY: the frame is owned by userspace (not on a fill or tx ring) whenever the
        // caller holds its id, so the kernel does not write it concurrently.
        unsafe { self.umem.data(&self.current[id.0 as usize]) }.contents()
    }

    fn write(&mut self, id: FrameId, len: usize) -> &mut [u8] {
        let i = id.0 as usize;
        self.current[i] = self.pristine[i];
        self.arrival_ns[i] = 0;
        // SAFETY: as in `bytes`; the frame is ours while we hold its id.
        let mut data = unsafe { self.umem.data_mut(&mut self.current[i]) };
        // The cursor appends from the descriptor's length: position it to set the length.
        data.cursor().set_pos(len);
        let slice = data.contents_mut();
        let (ptr, n) = (slice.as_mut_ptr(), slice.len());
        // SAFETY: the slice points into the UMEM mapping, which lives as long as `self`;
        // `&mut self` makes this the only access to the frame for the returned lifetime.
        unsafe { std::slice::from_raw_parts_mut(ptr, n) }
    }

    fn bytes_mut(&mut self, id: FrameId) -> &mut [u8] {
        // SAFETY: as in `bytes`; the frame is ours while we hold its id.
        let mut data = unsafe { self.umem.data_mut(&mut self.current[id.0 as usize]) };
        let slice = data.contents_mut();
        let (ptr, n) = (slice.as_mut_ptr(), slice.len());
        // SAFETY: as in `write`: the UMEM outlives the borrow of `self`, which is exclusive.
        unsafe { std::slice::from_raw_parts_mut(ptr, n) }
    }

    fn arrival(&self, id: FrameId) -> Option<Time> {
        match self.arrival_ns[id.0 as usize] {
            0 => None,
            ns => Some(Time::from_nanos(ns)),
        }
    }

    fn copy(&mut self, from: FrameId, to: FrameId) {
        let src_desc = self.current[from.0 as usize];
        // SAFETY: both frames are owned by userspace; they are distinct frames.
        let src = unsafe { self.umem.data(&src_desc) };
        let len = src.contents().len();
        let i = to.0 as usize;
        self.current[i] = self.pristine[i];
        // SAFETY: as above.
        let mut dst = unsafe { self.umem.data_mut(&mut self.current[i]) };
        dst.cursor().set_pos(len);
        dst.contents_mut().copy_from_slice(src.contents());
    }
}

/// One AF_XDP socket (one interface queue) with its four rings.
pub struct XskPort {
    pub iface: String,
    pub queue: u32,
    _socket_fd: RawFd,
    tx: TxQueue,
    rx: RxQueue,
    fill: FillQueue,
    comp: CompQueue,
    /// Frames on the tx ring not yet returned by the completion ring.
    tx_outstanding: u32,
    scratch: Vec<FrameDesc>,
}

impl std::fmt::Debug for XskPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskPort").field("iface", &self.iface).field("tx_outstanding", &self.tx_outstanding).finish()
    }
}

impl XskPort {
    /// Binds a socket to `iface`/`queue` on the pool's UMEM, without letting libxdp load
    /// an XDP program of its own (we steer frames with our classifier's XSKMAP). `mode`
    /// forces zero-copy or copy; without it the kernel takes zero-copy where the driver
    /// offers it and copies otherwise.
    pub fn bind(
        pool: &UmemPool,
        iface: &str,
        queue: u32,
        ring_size: u32,
        batch: usize,
        mode: Option<BindMode>,
    ) -> Result<XskPort, XskError> {
        let geometry = |e: &dyn std::fmt::Display| XskError::Geometry(e.to_string());
        let flags = BindFlags::XDP_USE_NEED_WAKEUP
            | match mode {
                Some(BindMode::ZeroCopy) => BindFlags::XDP_ZEROCOPY,
                Some(BindMode::Copy) => BindFlags::XDP_COPY,
                None => BindFlags::empty(),
            };
        let config = SocketConfig::builder()
            .rx_queue_size(QueueSize::new(ring_size).map_err(|e| geometry(&e))?)
            .tx_queue_size(QueueSize::new(ring_size).map_err(|e| geometry(&e))?)
            .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
            .bind_flags(flags)
            .build();
        let name = iface.parse().map_err(|_| XskError::Geometry(format!("interface name {iface:?}")))?;
        // A socket closed a moment ago (a restart) releases its queue asynchronously in the
        // kernel: EBUSY for a short while is expected, so retry for up to BIND_RETRY.
        let started = std::time::Instant::now();
        let (tx, rx, rings) = loop {
            // SAFETY: the UMEM outlives the socket: `UmemPool` owns it and the dataplane
            // drops its ports before its pool.
            match unsafe { Socket::new(config, pool.umem(), &name, queue) } {
                Ok(rings) => break rings,
                Err(e) if os_error(&e) == Some(libc::EBUSY) && started.elapsed() < BIND_RETRY => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(source) => return Err(XskError::Socket { iface: iface.to_string(), queue, source }),
            }
        };
        let (fill, comp) = rings.ok_or(XskError::NoRings)?;
        let fd = rx.fd().as_raw_fd();
        Ok(XskPort {
            iface: iface.to_string(),
            queue,
            _socket_fd: fd,
            tx,
            rx,
            fill,
            comp,
            tx_outstanding: 0,
            scratch: vec![FrameDesc::default(); batch.clamp(TxBatch::CAPACITY, 4096)],
        })
    }

    pub fn fd(&self) -> RawFd {
        self.rx.fd().as_raw_fd()
    }

    pub fn tx_outstanding(&self) -> u32 {
        self.tx_outstanding
    }

    /// Gives frames from the pool to the kernel for receiving, keeping `reserve` frames
    /// back for frames the switch builds itself.
    pub fn refill(&mut self, pool: &mut UmemPool, reserve: usize) {
        // In scratch-sized steps until the ring is full: a ring topped up by one step per
        // turn holds only what the last few turns gave it, and a burst that arrives while
        // the process is off the CPU finds it empty.
        loop {
            let spare = pool.free_count().saturating_sub(reserve);
            let want = (self.fill.nb_free(self.scratch.len() as u32) as usize).min(spare).min(self.scratch.len());
            if want == 0 {
                return;
            }
            for slot in self.scratch.iter_mut().take(want) {
                let id = pool.alloc().expect("counted above");
                *slot = pool.fill_desc(id);
            }
            // SAFETY: the frames are ours (just taken from the pool) and belong to this UMEM.
            // Space was checked with nb_free, and produce is all-or-nothing.
            let n = unsafe { self.fill.produce(&self.scratch[..want]) };
            if n == 0 {
                for d in &self.scratch[..want] {
                    let id = pool.id_of(d);
                    pool.free(id);
                }
                return;
            }
        }
    }

    /// Takes received frames off the rx ring, calling `on_frame` for each; returns how many.
    pub fn receive(
        &mut self,
        pool: &mut UmemPool,
        max: usize,
        mut on_frame: impl FnMut(&mut UmemPool, FrameId),
    ) -> usize {
        let max = max.min(self.scratch.len());
        // SAFETY: descriptors from the rx ring point into our UMEM.
        let n = unsafe { self.rx.consume(&mut self.scratch[..max]) };
        for i in 0..n {
            let id = pool.received(&self.scratch[i]);
            on_frame(pool, id);
        }
        n
    }

    /// Returns completed tx frames to the pool; returns how many.
    pub fn reclaim(&mut self, pool: &mut UmemPool) -> usize {
        let mut total = 0;
        loop {
            let cap = self.scratch.len();
            // SAFETY: completion descriptors point into our UMEM.
            let n = unsafe { self.comp.consume(&mut self.scratch[..cap]) };
            for d in &self.scratch[..n] {
                let id = pool.id_of(d);
                pool.free(id);
            }
            self.tx_outstanding = self.tx_outstanding.saturating_sub(n as u32);
            total += n;
            if n < cap {
                return total;
            }
        }
    }

    /// Room on the tx ring.
    pub fn tx_room(&mut self, want: usize) -> usize {
        self.tx.nb_free(want as u32) as usize
    }

    /// Puts frames on the tx ring (all of them: callers stay within `tx_room`).
    /// Returns false, giving the frames back to the pool, if the ring refused them.
    pub fn send(&mut self, pool: &mut UmemPool, frames: impl Iterator<Item = FrameId> + Clone) -> bool {
        let mut n = 0;
        for id in frames.clone() {
            if n == self.scratch.len() {
                break;
            }
            self.scratch[n] = pool.tx_desc(id);
            n += 1;
        }
        if n == 0 {
            return true;
        }
        // SAFETY: each descriptor names a frame we own, with its length; space was checked.
        let produced = unsafe { self.tx.produce(&self.scratch[..n]) };
        if produced == 0 {
            for id in frames.take(n) {
                pool.free(id);
            }
            return false;
        }
        self.tx_outstanding += produced as u32;
        true
    }

    /// Makes the kernel transmit what is on the tx ring. In copy mode nothing moves
    /// without this, so callers kick whenever frames are outstanding.
    pub fn kick(&self) -> std::io::Result<()> {
        if self.tx_outstanding > 0 {
            self.tx.wakeup()?;
        }
        Ok(())
    }

    /// Whether the kernel wants a poll/recvmsg to look at the fill ring again.
    pub fn fill_needs_wakeup(&self) -> bool {
        self.fill.needs_wakeup()
    }

    /// How the socket bound, as the kernel reports it (XDP_OPTIONS).
    pub fn bind_mode(&self) -> Option<BindMode> {
        let mut opts = libc::xdp_options { flags: 0 };
        let mut len = std::mem::size_of::<libc::xdp_options>() as libc::socklen_t;
        // SAFETY: getsockopt into a properly sized struct on our socket.
        let rc = unsafe {
            libc::getsockopt(
                self.fd(),
                libc::SOL_XDP,
                libc::XDP_OPTIONS,
                &mut opts as *mut libc::xdp_options as *mut libc::c_void,
                &mut len,
            )
        };
        (rc == 0).then_some(if opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0 {
            BindMode::ZeroCopy
        } else {
            BindMode::Copy
        })
    }

    pub fn statistics(&self) -> Option<xsk_rs::socket::XdpStatistics> {
        self.rx.fd().xdp_statistics().ok()
    }
}
