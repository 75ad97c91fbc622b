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

use crate::frame_size::{no_multi_buffer_advice, usable_frame_bytes};
use crate::modes::{ArrivalStamp, BindMode};
use pfcswitch_core::prefetch::{prefetch_addr, prefetch_range_l2, LINE};
use pfcswitch_core::queue::FrameId;
use pfcswitch_core::switch::{FramePool, TxBatch};
use pfcswitch_core::time::Time;

use super::stages::{Stage, StageMeter};

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
    #[error("interface {iface} has MTU {mtu} ({frame}-byte frames): {advice}")]
    FrameTooLarge { iface: String, mtu: u32, frame: u32, advice: String },
    #[error("binding {iface} queue {queue} for frames over several UMEM frames: {source}; {advice}")]
    NoMultiBuffer { iface: String, queue: u32, source: xsk_rs::socket::SocketCreateError, advice: String },
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

/// The stamp the XDP classifier writes in front of each frame (struct rx_meta in the C
/// code): a word that says it is one, a reserved word, the arrival time.
const STAMP_LEN: usize = 16;
const _: () = assert!(ArrivalStamp::InFrame.bytes_in_frame() as usize == STAMP_LEN);

/// How the pool reads the arrival stamps of the frames its sockets receive: where the
/// classifier puts them ([`ArrivalStamp`]) and the word that begins each one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StampReading {
    pub stamp: ArrivalStamp,
    pub magic: u32,
}

impl StampReading {
    /// Bytes a stamp adds to a received frame in the UMEM (pushed in front of it).
    pub fn overhead(self) -> u32 {
        self.stamp.bytes_in_frame()
    }
}

/// The descriptor option that says more buffers of the same frame follow (XDP_PKT_CONTD).
const PKT_CONTD: u32 = 1;

/// No buffer: the end of a frame's chain.
const NIL: u32 = u32::MAX;

/// The UMEM as a pool of buffers: which are free, each buffer's current descriptor, and
/// how the buffers of a frame larger than one (AF_XDP multi-buffer) are chained. A
/// frame's id is its first buffer's.
pub struct UmemPool {
    umem: Umem,
    frame_size: usize,
    /// A descriptor per buffer as the UMEM handed them out (address of the data area).
    pristine: Vec<FrameDesc>,
    /// Each buffer's descriptor as of now: its received or written length.
    current: Vec<FrameDesc>,
    /// The next buffer of the same frame (NIL: the last).
    next: Vec<u32>,
    /// A frame's length over all its buffers, and how many it takes (at its first buffer).
    frame_len: Vec<u32>,
    buffers: Vec<u8>,
    /// Per frame (at its first buffer), when it arrived and since when it is where it is
    /// (side by side: one cache line per frame).
    stamps: Vec<Stamps>,
    /// What those transitions recorded.
    stages: StageMeter,
    free: Vec<FrameId>,
    /// Which socket's rings each buffer is on (a fill or tx ring, or the rx or completion
    /// ring the kernel moved it to), [`NO_SOCKET`] while it is free or the switch's: when
    /// a socket is closed for good, what it held comes back ([`UmemPool::reclaim_lent`]).
    lent_to: Vec<SocketId>,
    next_socket: SocketId,
    /// Where the classifier puts arrival stamps.
    reading: StampReading,
    /// Frames that came without the stamp the classifier should have put (a driver with
    /// no metadata area): their arrival is the loop's clock.
    unstamped: u64,
}

/// What the pool remembers of a frame's time (0: unknown).
#[derive(Clone, Copy, Debug, Default)]
struct Stamps {
    /// When it arrived, per the XDP program (what [`FramePool::arrival`] reads).
    arrival_ns: u64,
    /// When it entered the stage it is in: its arrival while on the rx ring, when the
    /// loop took it while in the engine, when it was put on a tx ring until the kernel
    /// completes it. Each transition records the stage that ended ([`StageMeter`]).
    since_ns: u64,
}

/// A socket's number in the pool's ledger of lent buffers.
pub type SocketId = u16;

/// A port's share of the pool for binding its sockets: the UMEM and a number per socket
/// in the ledger of lent buffers ([`UmemPool::bind_on`]).
#[derive(Debug)]
pub struct BindOn {
    pub umem: Umem,
    /// One per socket to bind, queue 0 first.
    pub ids: Vec<SocketId>,
}

/// Not on any socket's rings.
const NO_SOCKET: SocketId = 0;

impl std::fmt::Debug for UmemPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UmemPool").field("frames", &self.pristine.len()).field("free", &self.free.len()).finish()
    }
}

impl UmemPool {
    /// A pool of `frames` buffers of `frame_size` bytes, for sockets with rings of
    /// `ring_size`, whose frames carry arrival stamps as `reading` says.
    pub fn new(frames: u32, frame_size: u32, ring_size: u32, reading: StampReading) -> Result<UmemPool, XskError> {
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
            next: vec![NIL; frames as usize],
            frame_len: vec![0; frames as usize],
            buffers: vec![1; frames as usize],
            stamps: vec![Stamps::default(); frames as usize],
            stages: StageMeter::default(),
            free: (0..frames).rev().map(FrameId).collect(),
            pristine: descs,
            lent_to: vec![NO_SOCKET; frames as usize],
            next_socket: NO_SOCKET + 1,
            reading,
            unstamped: 0,
        })
    }

    /// How the pool reads arrival stamps.
    pub fn stamp_reading(&self) -> StampReading {
        self.reading
    }

    /// Frames that came without the arrival stamp the classifier was built to put.
    pub fn unstamped(&self) -> u64 {
        self.unstamped
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

    /// What binding `sockets` new sockets needs of the pool, taken on the loop's thread
    /// so that the binding, which may block for tens of milliseconds, can run on another.
    pub fn bind_on(&mut self, sockets: u32) -> BindOn {
        BindOn { umem: self.umem.clone(), ids: (0..sockets.max(1)).map(|_| self.new_socket_id()).collect() }
    }

    /// A number for a new socket's entries in the ledger of lent buffers.
    fn new_socket_id(&mut self) -> SocketId {
        let id = self.next_socket;
        // 65535 sockets over a switch's life: a port re-bound that often reuses numbers,
        // which is harmless once the earlier socket of that number is closed.
        self.next_socket = self.next_socket.checked_add(1).unwrap_or(NO_SOCKET + 1);
        id
    }

    /// Buffer `id` goes onto a ring of socket `socket`.
    fn lend(&mut self, id: FrameId, socket: SocketId) {
        self.lent_to[id.0 as usize] = socket;
    }

    /// Gives back to the free list every buffer still lent to `socket`, which must be
    /// closed (or unbound from a vanished interface: the kernel no longer touches its
    /// rings); returns how many.
    pub fn reclaim_lent(&mut self, socket: SocketId) -> usize {
        let mut n = 0;
        for b in 0..self.lent_to.len() {
            if self.lent_to[b] == socket {
                self.free_buffer(FrameId(b as u32));
                n += 1;
            }
        }
        n
    }

    /// Records the first (or only) buffer of a frame the rx ring handed us: its
    /// descriptor carries address and length, the metadata in front of it the arrival time.
    pub fn received(&mut self, desc: &FrameDesc) -> FrameId {
        let id = self.id_of(desc);
        let i = id.0 as usize;
        self.lent_to[i] = NO_SOCKET;
        self.current[i] = *desc;
        self.next[i] = NIL;
        self.buffers[i] = 1;
        let arrived = self.take_arrival(i);
        // After the stamp: an in-frame stamp is no longer part of the frame.
        self.frame_len[i] = self.current[i].lengths().data() as u32;
        self.stamps[i] = Stamps { arrival_ns: arrived, since_ns: arrived };
        id
    }

    /// Records a further buffer of frame `head`, whose last buffer so far is `tail`;
    /// returns the new buffer (the frame's new tail).
    pub fn received_more(&mut self, head: FrameId, tail: FrameId, desc: &FrameDesc) -> FrameId {
        let id = self.id_of(desc);
        self.lent_to[id.0 as usize] = NO_SOCKET;
        self.current[id.0 as usize] = *desc;
        self.next[id.0 as usize] = NIL;
        self.stamps[id.0 as usize] = Stamps::default();
        self.next[tail.0 as usize] = id.0;
        let h = head.0 as usize;
        self.frame_len[h] += desc.lengths().data() as u32;
        self.buffers[h] = self.buffers[h].saturating_add(1);
        id
    }

    /// The buffers of frame `id`, first to last.
    pub fn chain(&self, id: FrameId) -> impl Iterator<Item = FrameId> + '_ {
        std::iter::successors(Some(id), |b| {
            let n = self.next[b.0 as usize];
            (n != NIL).then_some(FrameId(n))
        })
    }

    /// A frame holding `bytes`, in as many buffers as it needs (a tool's jumbo test
    /// frame), if they are all free.
    pub fn put(&mut self, bytes: &[u8]) -> Option<FrameId> {
        let usable = self.bytes_capacity();
        let n = bytes.len().div_ceil(usable).max(1);
        if self.free.len() < n || n > usize::from(u8::MAX) {
            return None;
        }
        let mut head: Option<FrameId> = None;
        let mut tail = FrameId(NIL);
        for piece in bytes.chunks(usable) {
            let id = self.free.pop().expect("counted above");
            self.write(id, piece.len()).copy_from_slice(piece);
            match head {
                None => head = Some(id),
                Some(h) => {
                    self.next[tail.0 as usize] = id.0;
                    self.frame_len[h.0 as usize] += piece.len() as u32;
                    self.buffers[h.0 as usize] += 1;
                }
            }
            tail = id;
        }
        head
    }

    /// Gives one buffer back (a completed transmit returns its buffers one by one).
    pub fn free_buffer(&mut self, id: FrameId) {
        debug_assert!(self.free.len() < self.pristine.len(), "more frees than buffers");
        self.next[id.0 as usize] = NIL;
        self.lent_to[id.0 as usize] = NO_SOCKET;
        // A free buffer is in no stage: whatever takes it next starts its clock.
        self.stamps[id.0 as usize].since_ns = 0;
        self.free.push(id);
    }

    /// Asks the cache for what [`UmemPool::received`] and the engine read first of a frame
    /// the rx ring handed us: the arrival stamp in front of it (which `received` clears)
    /// and its first bytes; and for the rest of the buffer, further out. The kernel wrote
    /// it all, on whichever CPU ran the sender's transmit; fetched one frame at a time,
    /// the first line's wait was an eighth of the switch's CPU.
    pub fn prefetch_received(&self, desc: &FrameDesc) {
        // SAFETY: the descriptor came off our rx ring, so it points into our UMEM.
        let data = unsafe { self.umem.data(desc) }.contents().as_ptr();
        prefetch_addr(data.wrapping_sub(STAMP_LEN));
        prefetch_addr(data);
        // The rest goes to this core's L2: the kernel copies the whole frame out of the
        // UMEM when it transmits it, in our `sendto`, and found it in the sender's cache.
        prefetch_range_l2(data.wrapping_add(LINE), desc.lengths().data().saturating_sub(LINE));
    }

    /// Reads buffer `i`'s arrival stamp (0: none), where the classifier put it: in the
    /// metadata area (cleared after, so that a later frame without one cannot inherit
    /// it), or in front of the frame, which then moves up over it (the descriptor's
    /// address cannot move: xsk-rs keeps it, and the kernel takes it back as it is).
    fn take_arrival(&mut self, i: usize) -> u64 {
        let StampReading { stamp, magic } = self.reading;
        let ns = match stamp {
            ArrivalStamp::RxClock => return 0,
            ArrivalStamp::Metadata => {
                let desc = &self.current[i];
                let chunk_start = desc.addr() / self.frame_size * self.frame_size;
                if desc.addr() < chunk_start + STAMP_LEN {
                    0
                } else {
                    // SAFETY: the frame is ours (just taken off the rx ring); the 16 bytes
                    // before its data lie in the same UMEM chunk (checked above), inside
                    // the mapping.
                    unsafe {
                        let data = self.umem.data(desc).contents().as_ptr();
                        let meta = data.sub(STAMP_LEN) as *mut u8;
                        if std::ptr::read_unaligned(meta as *const [u8; 4]) != magic.to_ne_bytes() {
                            0
                        } else {
                            std::ptr::write_unaligned(meta as *mut [u8; 4], [0; 4]);
                            u64::from_ne_bytes(std::ptr::read_unaligned(meta.add(8) as *const [u8; 8]))
                        }
                    }
                }
            }
            ArrivalStamp::InFrame => {
                // SAFETY: the frame is ours (just taken off the rx ring).
                let mut data = unsafe { self.umem.data_mut(&mut self.current[i]) };
                let len = data.contents().len();
                let bytes = data.contents_mut();
                if len < STAMP_LEN || bytes[..4] != magic.to_ne_bytes() {
                    0
                } else {
                    let ns = u64::from_ne_bytes(bytes[8..16].try_into().expect("8 bytes"));
                    bytes.copy_within(STAMP_LEN.., 0);
                    data.cursor().set_pos(len - STAMP_LEN);
                    ns
                }
            }
        };
        if ns == 0 {
            self.unstamped += 1;
        }
        ns
    }

    /// Puts the descriptors of frame `id` on `out` (one per buffer, each but the last
    /// marked as continued); returns how many, or none if they do not all fit.
    pub fn tx_descs(&self, id: FrameId, out: &mut [FrameDesc]) -> usize {
        let n = usize::from(self.buffers[id.0 as usize]);
        if n > out.len() {
            return 0;
        }
        for (k, (b, slot)) in self.chain(id).zip(out.iter_mut()).enumerate() {
            *slot = self.current[b.0 as usize];
            slot.set_options(if k + 1 < n { PKT_CONTD } else { 0 });
        }
        n
    }

    /// The loop takes frame `id` off an rx ring at `now`, to hand it to the engine:
    /// records how long it waited on the ring. The arrival stamp, which the engine reads,
    /// stays.
    pub fn taken(&mut self, id: FrameId, now: Time) {
        let stamp = &mut self.stamps[id.0 as usize];
        self.stages.left(Stage::RxRing, stamp.since_ns, now.as_nanos());
        stamp.since_ns = now.as_nanos();
    }

    /// Frame `id` goes onto a tx ring at `now`: records how long the engine held it.
    fn entering_tx_ring(&mut self, id: FrameId, now: Time) {
        let stamp = &mut self.stamps[id.0 as usize];
        self.stages.left(Stage::Engine, stamp.since_ns, now.as_nanos());
        stamp.since_ns = now.as_nanos();
    }

    /// The kernel completed buffer `id` at `now`: records how long its frame was on the
    /// tx ring (at its first buffer; the others carry no stamp).
    fn completed(&mut self, id: FrameId, now: Time) {
        self.stages.left(Stage::TxRing, self.stamps[id.0 as usize].since_ns, now.as_nanos());
        self.free_buffer(id);
    }

    /// Where forwarded frames waited, stage by stage.
    pub fn stages(&self) -> &StageMeter {
        &self.stages
    }

    /// Starts the stage figures again (`ctl clear`).
    pub fn clear_stages(&mut self) {
        self.stages.clear();
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
        let mut b = id.0;
        while b != NIL {
            let next = self.next[b as usize];
            self.free_buffer(FrameId(b));
            b = next;
        }
    }

    fn len(&self, id: FrameId) -> usize {
        self.frame_len[id.0 as usize] as usize
    }

    fn buffers(&self, id: FrameId) -> u32 {
        u32::from(self.buffers[id.0 as usize])
    }

    fn bytes(&self, id: FrameId) -> &[u8] {
        // SAFETY: the frame is owned by userspace (not on a fill or tx ring) whenever the
        // caller holds its id, so the kernel does not write it concurrently.
        unsafe { self.umem.data(&self.current[id.0 as usize]) }.contents()
    }

    fn write(&mut self, id: FrameId, len: usize) -> &mut [u8] {
        let i = id.0 as usize;
        self.current[i] = self.pristine[i];
        self.stamps[i] = Stamps::default();
        self.next[i] = NIL;
        self.frame_len[i] = len as u32;
        self.buffers[i] = 1;
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
        match self.stamps[id.0 as usize].arrival_ns {
            0 => None,
            ns => Some(Time::from_nanos(ns)),
        }
    }

    fn duplicate(&mut self, from: FrameId) -> Option<FrameId> {
        let n = self.buffers[from.0 as usize];
        if self.free.len() < usize::from(n) {
            return None;
        }
        let head = self.free.pop()?;
        let (h, mut tail) = (head.0 as usize, head);
        self.next[h] = NIL;
        self.frame_len[h] = self.frame_len[from.0 as usize];
        self.buffers[h] = n;
        self.stamps[h] = Stamps::default();
        let mut src = from.0;
        let mut to = head;
        loop {
            let src_desc = self.current[src as usize];
            // SAFETY: both buffers are owned by userspace and distinct.
            let data = unsafe { self.umem.data(&src_desc) };
            let len = data.contents().len();
            let t = to.0 as usize;
            self.current[t] = self.pristine[t];
            // SAFETY: as above.
            let mut dst = unsafe { self.umem.data_mut(&mut self.current[t]) };
            dst.cursor().set_pos(len);
            dst.contents_mut().copy_from_slice(data.contents());
            src = self.next[src as usize];
            if src == NIL {
                return Some(head);
            }
            to = self.free.pop().expect("counted above");
            self.next[to.0 as usize] = NIL;
            self.next[tail.0 as usize] = to.0;
            tail = to;
        }
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
    /// Buffers on the tx ring not yet returned by the completion ring.
    tx_outstanding: u32,
    /// Its number in the pool's ledger of the buffers on its rings.
    socket_id: SocketId,
    /// How it bound, as the kernel said right after binding (fixed for its life).
    bind_mode: Option<BindMode>,
    scratch: Vec<FrameDesc>,
    /// A multi-buffer frame whose last buffer has not come off the rx ring yet: its
    /// first buffer and its last so far.
    partial: Option<(FrameId, FrameId)>,
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
    /// offers it and copies otherwise. Frames of up to `buffers_per_frame` buffers are
    /// received and sent whole: above one, the socket binds for multi-buffer (XDP_USE_SG).
    pub fn bind(
        (umem, socket_id): (&Umem, SocketId),
        iface: &str,
        queue: u32,
        ring_size: u32,
        batch: usize,
        mode: Option<BindMode>,
        buffers_per_frame: usize,
    ) -> Result<XskPort, XskError> {
        let geometry = |e: &dyn std::fmt::Display| XskError::Geometry(e.to_string());
        let sg = if buffers_per_frame > 1 { BindFlags::XDP_USE_SG } else { BindFlags::empty() };
        let flags = BindFlags::XDP_USE_NEED_WAKEUP
            | sg
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
            // SAFETY: the UMEM outlives the socket: the socket keeps a handle on it (its
            // memory is reference-counted), and the dataplane drops its ports before its pool.
            match unsafe { Socket::new(config, umem, &name, queue) } {
                Ok(rings) => break rings,
                Err(e) if os_error(&e) == Some(libc::EBUSY) && started.elapsed() < BIND_RETRY => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(source) if !sg.is_empty() && matches!(os_error(&source), Some(libc::EOPNOTSUPP | libc::EINVAL)) => {
                    let advice = no_multi_buffer_advice().replace("IF", iface);
                    return Err(XskError::NoMultiBuffer { iface: iface.to_string(), queue, source, advice });
                }
                Err(source) => return Err(XskError::Socket { iface: iface.to_string(), queue, source }),
            }
        };
        let (fill, comp) = rings.ok_or(XskError::NoRings)?;
        let fd = rx.fd().as_raw_fd();
        let mut port = XskPort {
            iface: iface.to_string(),
            queue,
            _socket_fd: fd,
            tx,
            rx,
            fill,
            comp,
            tx_outstanding: 0,
            socket_id,
            bind_mode: None,
            scratch: vec![FrameDesc::default(); batch.clamp(TxBatch::CAPACITY, 4096) * buffers_per_frame.max(1)],
            partial: None,
        };
        port.bind_mode = port.query_bind_mode();
        Ok(port)
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
                pool.lend(id, self.socket_id);
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

    /// Takes up to `max` buffers off the rx ring, calling `on_frame` for each whole
    /// frame; returns the buffers and the frames taken. A multi-buffer frame whose last
    /// buffer is not on the ring yet waits for the next call.
    pub fn receive(
        &mut self,
        pool: &mut UmemPool,
        max: usize,
        mut on_frame: impl FnMut(&mut UmemPool, FrameId),
    ) -> (usize, usize) {
        let max = max.min(self.scratch.len());
        // SAFETY: descriptors from the rx ring point into our UMEM.
        let n = unsafe { self.rx.consume(&mut self.scratch[..max]) };
        for desc in &self.scratch[..n] {
            pool.prefetch_received(desc);
        }
        let mut frames = 0;
        for i in 0..n {
            let desc = &self.scratch[i];
            let (head, tail) = match self.partial.take() {
                None => {
                    let id = pool.received(desc);
                    (id, id)
                }
                Some((head, tail)) => (head, pool.received_more(head, tail, desc)),
            };
            if desc.options() & PKT_CONTD != 0 {
                self.partial = Some((head, tail));
            } else {
                on_frame(pool, head);
                frames += 1;
            }
        }
        (n, frames)
    }

    /// Returns completed tx frames to the pool; returns how many.
    pub fn reclaim(&mut self, pool: &mut UmemPool, now: Time) -> usize {
        let mut total = 0;
        loop {
            let cap = self.scratch.len();
            // SAFETY: completion descriptors point into our UMEM.
            let n = unsafe { self.comp.consume(&mut self.scratch[..cap]) };
            for d in &self.scratch[..n] {
                let id = pool.id_of(d);
                pool.completed(id, now);
            }
            self.tx_outstanding = self.tx_outstanding.saturating_sub(n as u32);
            total += n;
            if n < cap {
                return total;
            }
        }
    }

    /// Room on the tx ring, in descriptors (a multi-buffer frame takes one per buffer).
    pub fn tx_room(&mut self, want: usize) -> usize {
        self.tx.nb_free(want as u32) as usize
    }

    /// Puts frames on the tx ring, every buffer of each (all of them: callers stay within
    /// `tx_room`). Returns false, giving the frames back to the pool, if the ring or the
    /// scratch space refused them: a frame is never sent in part.
    pub fn send(&mut self, pool: &mut UmemPool, now: Time, frames: impl Iterator<Item = FrameId> + Clone) -> bool {
        let mut n = 0;
        let mut taken = 0;
        for id in frames.clone() {
            let k = pool.tx_descs(id, &mut self.scratch[n..]);
            if k == 0 {
                break;
            }
            n += k;
            taken += 1;
        }
        // SAFETY: each descriptor names a buffer we own, with its length; space was checked.
        let produced = if n == 0 { 0 } else { unsafe { self.tx.produce(&self.scratch[..n]) } };
        self.tx_outstanding += produced as u32;
        for d in &self.scratch[..produced] {
            let b = pool.id_of(d);
            pool.lend(b, self.socket_id);
        }
        // produce is all or nothing.
        let sent = if produced == n { taken } else { 0 };
        for id in frames.clone().take(sent) {
            pool.entering_tx_ring(id, now);
        }
        let mut refused = false;
        for id in frames.skip(sent) {
            pool.free(id);
            refused = true;
        }
        !refused
    }

    /// Closes the socket for good (its interface is gone or was replaced): the frames on
    /// its rx ring, and a frame it had in part, are dropped; every buffer on its rings
    /// comes back to the pool. Returns the whole frames dropped.
    pub fn close(mut self, pool: &mut UmemPool) -> usize {
        let mut dropped = 0;
        loop {
            let (buffers, frames) = self.receive(pool, usize::MAX, |pool, id| pool.free(id));
            dropped += frames;
            if buffers == 0 {
                break;
            }
        }
        if let Some((head, _)) = self.partial.take() {
            pool.free(head);
        }
        self.reclaim(pool, crate::sys::now());
        let socket = self.socket_id;
        // The socket's rings are unmapped and its descriptor closed here; from now on the
        // kernel touches none of the buffers still lent to it.
        drop(self);
        pool.reclaim_lent(socket);
        dropped
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

    /// How the socket bound (asked once, after binding: the stats that show it are
    /// composed on the forwarding thread).
    pub fn bind_mode(&self) -> Option<BindMode> {
        self.bind_mode
    }

    /// How the socket bound, as the kernel reports it (XDP_OPTIONS).
    fn query_bind_mode(&self) -> Option<BindMode> {
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
