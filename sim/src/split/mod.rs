//! A fabric split over ranks, each running its own nodes' events: conservative
//! synchronization in windows of the lookahead, the frames that cross ranks exchanged at
//! each window's end, and the report gathered from the ranks' parts.
//!
//! Why the result is the one-rank run's, byte for byte: an event's order among those due
//! at the same nanosecond is its key (the node that scheduled it and the how-manieth of
//! that node's it is), which a rank computes from its own nodes alone, never from when a
//! frame from another rank arrived. And a frame a node sends at `t` arrives at
//! `t + wire time + propagation` at the earliest: at least the lookahead later, so a
//! window's events never wait for a frame sent in that same window.
//!
//! The ranks meet through an [`Exchange`]: threads of one process ([`Threads`]), or
//! the ranks of an MPI job (behind the `mpi` feature).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pfcswitch_core::pfc::MIN_FRAME_LEN;
use pfcswitch_core::time::Time;

use crate::fabric::{Fabric, Owner};
use crate::ids::FabricPort;

#[cfg(feature = "mpi")]
pub mod mpi;

/// Which rank runs each node. Hosts go with the switch they attach to. Switches go in
/// groups: a fat-tree's pods (what stays connected once the switches with no host
/// within two hops, its core, are set aside), else each switch alone; the heaviest
/// group first to the lightest rank (a switch weighs one and its hosts one each), then
/// the set-aside switches the same way. A split by pods cuts only the links to the
/// core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    pub ranks: usize,
    pub switch_rank: Vec<u16>,
    pub host_rank: Vec<u16>,
}

impl Partition {
    /// `fabric` over `ranks` ranks (at least 1, at most 65 535).
    pub fn new(fabric: &Fabric, ranks: usize) -> Partition {
        let ranks = ranks.clamp(1, usize::from(u16::MAX));
        let n = fabric.switches.len();
        let peer_switch = |p: FabricPort| match fabric.ports[fabric.ports[p].peer].owner {
            Owner::Switch(sw, _) => Some(sw.index()),
            Owner::Host(_) => None,
        };
        let neighbours: Vec<Vec<usize>> =
            (0..n).map(|sw| fabric.switches[sw].ports.iter().filter_map(|&p| peer_switch(p)).collect()).collect();
        let hosts: Vec<usize> =
            (0..n).map(|sw| fabric.switches[sw].ports.iter().filter(|&&p| peer_switch(p).is_none()).count()).collect();
        // Within two hops of a host: a host's own switch, or one next to such a switch.
        let near = |sw: usize| hosts[sw] > 0 || neighbours[sw].iter().any(|&o| hosts[o] > 0);
        let mut group = vec![usize::MAX; n];
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for first in (0..n).filter(|&sw| near(sw)) {
            if group[first] != usize::MAX {
                continue;
            }
            let g = groups.len();
            let mut members = vec![first];
            group[first] = g;
            let mut k = 0;
            while k < members.len() {
                for &o in &neighbours[members[k]] {
                    if near(o) && group[o] == usize::MAX {
                        group[o] = g;
                        members.push(o);
                    }
                }
                k += 1;
            }
            groups.push(members);
        }
        // One group is the whole fabric (a ring, a line): each switch goes alone.
        if groups.len() < ranks {
            groups = (0..n).filter(|&sw| near(sw)).map(|sw| vec![sw]).collect();
        }
        let weight = |members: &[usize]| members.iter().map(|&sw| 1 + hosts[sw]).sum::<usize>();
        let mut load = vec![0usize; ranks];
        let mut switch_rank = vec![0u16; n];
        let mut place = |members: &[usize], load: &mut Vec<usize>| {
            let r = (0..ranks).min_by_key(|&r| (load[r], r)).expect("at least one rank");
            load[r] += weight(members);
            for &sw in members {
                switch_rank[sw] = r as u16;
            }
        };
        // Heaviest first, ties by the first switch, so every rank draws the same.
        groups.sort_by_key(|g| (std::cmp::Reverse(weight(g)), g[0]));
        for g in &groups {
            place(g, &mut load);
        }
        for sw in (0..n).filter(|&sw| !near(sw)) {
            place(&[sw], &mut load);
        }
        let host_rank = fabric
            .hosts
            .iter()
            .map(|h| match fabric.ports[fabric.ports[h.port].peer].owner {
                Owner::Switch(sw, _) => switch_rank[sw],
                Owner::Host(_) => 0,
            })
            .collect();
        Partition { ranks, switch_rank, host_rank }
    }

    /// By key node (the world, then switches, then hosts): the rank that runs it.
    pub(crate) fn by_key_node(&self) -> Vec<u16> {
        std::iter::once(0).chain(self.switch_rank.iter().copied()).chain(self.host_rank.iter().copied()).collect()
    }

    /// The rank port `p` belongs to.
    pub fn port_rank(&self, fabric: &Fabric, p: FabricPort) -> usize {
        usize::from(match fabric.ports[p].owner {
            Owner::Switch(sw, _) => self.switch_rank[sw],
            Owner::Host(h) => self.host_rank[h],
        })
    }

    /// The least time from a frame's first bit on a link that crosses ranks to its last
    /// bit at the far end: the shortest frame's time on the wire plus the propagation.
    /// `None` when no link crosses.
    pub fn lookahead(&self, fabric: &Fabric) -> Option<Duration> {
        (0..fabric.ports.len())
            .map(FabricPort::new)
            .filter(|&p| self.port_rank(fabric, p) != self.port_rank(fabric, fabric.ports[p].peer))
            .map(|p| fabric.ports[p].speed.wire_time(MIN_FRAME_LEN) + fabric.ports[p].propagation)
            .min()
    }

    /// Per rank: its switches and hosts, and the links that cross ranks.
    pub fn describe(&self, fabric: &Fabric) -> String {
        let mut out = String::new();
        for r in 0..self.ranks {
            let sws: Vec<&str> = (0..fabric.switches.len())
                .filter(|&s| usize::from(self.switch_rank[s]) == r)
                .map(|s| fabric.switches[s].name.as_str())
                .collect();
            let hosts = self.host_rank.iter().filter(|&&h| usize::from(h) == r).count();
            // A few names say where the cut fell; a k=32 fabric's 640 would drown it.
            let named = match sws.len() {
                0..=8 => sws.join(" "),
                n => format!("{} and {} more", sws[..6].join(" "), n - 6),
            };
            out += &format!("rank {r}: {} switches ({named}), {hosts} hosts\n", sws.len());
        }
        let crossing = (0..fabric.ports.len())
            .map(FabricPort::new)
            .filter(|&p| self.port_rank(fabric, p) != self.port_rank(fabric, fabric.ports[p].peer))
            .count();
        out += &format!("{} of {} link directions cross ranks", crossing, fabric.ports.len());
        if let Some(l) = self.lookahead(fabric) {
            out += &format!("; lookahead {} ns", l.as_nanos());
        }
        out
    }
}

/// What one rank knows of the split: which rank runs each node, and the frames its nodes
/// sent to other ranks' since the last exchange.
pub(crate) struct Split {
    pub rank: usize,
    rank_of: Arc<Vec<u16>>,
    posted: Vec<Vec<u8>>,
    /// When the earliest frame posted since the last exchange arrives, ns.
    earliest_posted: u64,
    /// Frames posted to other ranks in all.
    pub frames_posted: u64,
}

impl Split {
    pub fn shared(rank: usize, rank_of: Arc<Vec<u16>>, ranks: usize) -> Split {
        Split { rank, rank_of, posted: vec![vec![0; STAMP]; ranks], earliest_posted: u64::MAX, frames_posted: 0 }
    }

    /// The rank that runs key node `node` (the world's events run on every rank).
    pub fn rank_of(&self, node: u32) -> usize {
        if node == 0 {
            self.rank
        } else {
            usize::from(self.rank_of[node as usize])
        }
    }

    /// A frame for rank `to`: its arrival `at` (ns) at `port` with the link's `epoch`, its
    /// key, its length, its kept bytes and the size of buffer they were kept in.
    #[allow(clippy::too_many_arguments)]
    pub fn post(&mut self, to: usize, at: u64, key: u64, port: u32, epoch: u32, len: usize, head: &[u8], long: bool) {
        self.earliest_posted = self.earliest_posted.min(at);
        self.frames_posted += 1;
        let out = &mut self.posted[to];
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(&key.to_le_bytes());
        out.extend_from_slice(&port.to_le_bytes());
        out.extend_from_slice(&epoch.to_le_bytes());
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.extend_from_slice(&(head.len() as u16).to_le_bytes());
        out.push(u8::from(long));
        out.extend_from_slice(head);
    }

    /// What goes to each rank at this window's end: the frames posted to it since the
    /// last exchange, after a stamp of when this rank's next event is due (`next_event`,
    /// or a frame it posted if that arrives earlier). The buffers kept their stamp's
    /// room at the front, so nothing is copied.
    pub fn seal(&mut self, next_event: u64) -> Vec<Vec<u8>> {
        let next = next_event.min(std::mem::replace(&mut self.earliest_posted, u64::MAX));
        for out in &mut self.posted {
            out[..STAMP].copy_from_slice(&next.to_le_bytes());
        }
        std::mem::take(&mut self.posted)
    }

    /// Takes back the buffers an exchange returned, emptied, as the next window's: once
    /// they have grown to a window's traffic, windows allocate nothing.
    pub fn recycle(&mut self, mut buffers: Vec<Vec<u8>>) {
        for b in &mut buffers {
            b.clear();
            b.resize(STAMP, 0);
        }
        self.posted = buffers;
    }
}

/// The room at the front of what a rank sends at a window's end, for the time of its
/// next event (ns, little-endian).
const STAMP: usize = 8;

/// What a rank received split into its stamp and its frames.
pub(crate) fn unstamp(bytes: &[u8]) -> (u64, &[u8]) {
    match bytes.split_first_chunk::<STAMP>() {
        Some((next, frames)) => (u64::from_le_bytes(*next), frames),
        None => (u64::MAX, bytes),
    }
}

/// A frame another rank posted, as read back.
pub(crate) struct Posted<'a> {
    pub at: u64,
    pub key: u64,
    pub port: u32,
    pub epoch: u32,
    pub len: usize,
    pub long: bool,
    pub head: &'a [u8],
}

impl<'a> Posted<'a> {
    const FIXED: usize = 8 + 8 + 4 + 4 + 4 + 2 + 1;

    /// The frames in `bytes`, as [`Split::post`] wrote them (the ranks run the same
    /// binary; a short or torn record ends the list).
    pub fn read(mut bytes: &'a [u8]) -> impl Iterator<Item = Posted<'a>> {
        std::iter::from_fn(move || {
            if bytes.len() < Self::FIXED {
                return None;
            }
            let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
            let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
            let head_len = usize::from(u16::from_le_bytes([bytes[28], bytes[29]]));
            if bytes.len() < Self::FIXED + head_len {
                return None;
            }
            let p = Posted {
                at: u64_at(0),
                key: u64_at(8),
                port: u32_at(16),
                epoch: u32_at(20),
                len: u32_at(24) as usize,
                long: bytes[30] != 0,
                head: &bytes[Self::FIXED..Self::FIXED + head_len],
            };
            bytes = &bytes[Self::FIXED + head_len..];
            Some(p)
        })
    }
}

/// What one rank of a split run did, for the bench: not part of the report.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct RankStats {
    pub rank: usize,
    pub switches: usize,
    pub hosts: usize,
    /// Events it ran (the world's, which every rank runs, counted on rank 0 only).
    pub events: u64,
    /// Frames its nodes sent to another rank's.
    pub frames_posted: u64,
    /// Windows it ran, and the wall time it spent in the exchanges that end them.
    pub windows: u64,
    pub exchange_s: f64,
    /// Wall time from its start to its report, and its process's peak resident set.
    pub wall_s: f64,
    pub peak_rss_mib: Option<f64>,
}

/// How ranks meet at a window's end.
pub trait Exchange {
    fn rank(&self) -> usize;
    fn ranks(&self) -> usize;
    /// Gives rank `r` the bytes `out[r]`; returns what every rank gave this one, by rank.
    fn all_to_all(&mut self, out: Vec<Vec<u8>>) -> Vec<Vec<u8>>;
}

/// Ranks as threads of one process.
pub struct Threads {
    rank: usize,
    shared: Arc<ThreadsShared>,
}

struct ThreadsShared {
    ranks: usize,
    barrier: WindowBarrier,
    /// `mail[to][from]`.
    mail: Vec<Mutex<Vec<Vec<u8>>>>,
}

impl Threads {
    /// One endpoint per rank.
    pub fn new(ranks: usize) -> Vec<Threads> {
        let shared = Arc::new(ThreadsShared {
            ranks,
            barrier: WindowBarrier::new(ranks),
            mail: (0..ranks).map(|_| Mutex::new(vec![Vec::new(); ranks])).collect(),
        });
        (0..ranks).map(|rank| Threads { rank, shared: shared.clone() }).collect()
    }
}

impl Exchange for Threads {
    fn rank(&self) -> usize {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.shared.ranks
    }

    fn all_to_all(&mut self, out: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        for (to, bytes) in out.into_iter().enumerate() {
            self.shared.mail[to].lock().expect("a rank panicked")[self.rank] = bytes;
        }
        self.shared.barrier.wait();
        let got = std::mem::replace(
            &mut *self.shared.mail[self.rank].lock().expect("a rank panicked"),
            vec![Vec::new(); self.shared.ranks],
        );
        // Nobody writes the next window's mail before everyone has read this one's.
        self.shared.barrier.wait();
        got
    }
}

/// Where the ranks meet at a window's end: it spins a while, yields a few times, then
/// sleeps on a futex until the last rank arrives. A split run meets at every window's end,
/// hundreds of thousands of times a run, and a barrier that always sleeps costs a wake-up
/// each time (23 µs a window measured on a k=4 fat-tree, twenty times the window's work),
/// so a rank first spins for about as long as a window's work takes. The yields serve ranks
/// that share a core (more ranks than cores, or two split runs at once): the rank waited
/// for runs at once. Then it sleeps: beside other work (a `yes`, a build) a rank that only
/// yielded handed its CPU to that work for a whole time slice each window, where a sleeping
/// one frees its CPU for the rank it waits for and is woken as soon as that rank arrives.
/// The split test, measured: 16 s quiet and over four minutes beside `yes` when it only
/// yielded; 50 s quiet and 38 s beside `yes` when it slept without yielding; 15 s and 46 s
/// with 20 yields between.
struct WindowBarrier {
    ranks: u32,
    /// Spins before the yields: none when there are more ranks than cores.
    spins: u32,
    arrived: AtomicU32,
    /// Counts completed waits; the futex word the sleepers wait on.
    generation: AtomicU32,
    /// Ranks asleep or about to be: the last arrival makes the wake-up call only then.
    sleepers: AtomicU32,
}

/// Yields after the spin, before the barrier sleeps.
const YIELDS: u32 = 20;

impl WindowBarrier {
    fn new(ranks: usize) -> WindowBarrier {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let spins = if ranks <= cores { 4000 } else { 0 };
        WindowBarrier {
            ranks: u32::try_from(ranks).expect("ranks fit in u32"),
            spins,
            arrived: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
        }
    }

    fn wait(&self) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.ranks {
            self.arrived.store(0, Ordering::Relaxed);
            // SeqCst with the sleepers' count: either this sees a sleeper and wakes it,
            // or that sleeper sees the new generation and does not sleep.
            self.generation.fetch_add(1, Ordering::SeqCst);
            if self.sleepers.load(Ordering::SeqCst) > 0 {
                atomic_wait::wake_all(&self.generation);
            }
            return;
        }
        for _ in 0..self.spins {
            if self.generation.load(Ordering::Acquire) != generation {
                return;
            }
            std::hint::spin_loop();
        }
        for _ in 0..YIELDS {
            if self.generation.load(Ordering::Acquire) != generation {
                return;
            }
            std::thread::yield_now();
        }
        while self.generation.load(Ordering::Acquire) == generation {
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            // The futex sleeps only while the word still holds this generation, so a
            // wake-up between the check and the sleep is not lost.
            if self.generation.load(Ordering::SeqCst) == generation {
                atomic_wait::wait(&self.generation, generation);
            }
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// How the ranks of a split run advance: windows of at most the lookahead, each starting
/// at the earliest event any rank has then (so a quiet stretch costs one exchange, not
/// one per lookahead). Each rank tells the others, with the frames it posts, when its
/// next event is due; every rank works out the same next window from that.
pub(crate) struct Windows {
    end: u64,
    step: u64,
}

impl Windows {
    pub fn new(end: Time, lookahead: Option<Duration>) -> Windows {
        let step = lookahead.map_or(u64::MAX, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)).max(1);
        Windows { end: end.as_nanos(), step }
    }

    /// The last time (inclusive) of the window starting at `from`.
    pub fn last(&self, from: u64) -> u64 {
        from.saturating_add(self.step - 1).min(self.end)
    }

    /// Where the next window starts, given the earliest event of every rank; `None` once
    /// nothing is due by the end.
    pub fn next(&self, after: u64, earliest: u64) -> Option<u64> {
        (after < self.end && earliest <= self.end).then(|| earliest.max(after + 1))
    }
}
