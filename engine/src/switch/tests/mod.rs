use crate::priorities::names::*;
use std::time::Duration;

use crate::checking::CheckingMessage;
use crate::config::BufferProfile;
use crate::config::{Config, DeadlockResolution, PauseMode, Scheduler};
use crate::ether::tests::udp_frame;
use crate::mac::MacAddr;
use crate::pfc::ControlFrame;
use crate::pfc::{self, MacControl, Pfc};
use crate::pool::PoolSize;
use crate::ports::{PortId, PortSet};
use crate::priorities::Priorities;
use crate::slowpath::Slowpath;
use crate::slowpath::ToSlowpath;
use crate::speed::Speed;
use crate::stats::{SwitchStats, TagCounters, TaggerStats};
use crate::tagging::TagTable;
use crate::time::Time;

use super::*;

mod admission;
mod deadlock;
mod ecn;
mod egress;
mod flow_control;
mod forwarding;
mod jumbo;
mod links;
mod tagger;
mod timers;
mod watchdog;

pub(crate) type VecPool = crate::heap_pool::HeapPool;

const POOL: u32 = 4096;

pub(crate) struct Rig {
    pub(crate) sw: Switch,
    pub(crate) pool: VecPool,
    pub(crate) now: Time,
    batch: TxBatch,
    /// The rings [`Switch::poll`] turns over; no slowpath: its events wait for
    /// [`Rig::outbox`].
    rings: crate::loopback::Loopback,
}

pub(crate) fn mac(n: u64) -> MacAddr {
    MacAddr::local(n)
}

impl Rig {
    pub(crate) fn new(config: Config) -> Rig {
        Rig::new_at(config, Time::from_millis(1000))
    }

    /// A switch whose clock starts at `now`.
    pub(crate) fn new_at(config: Config, now: Time) -> Rig {
        let sw = Switch::new(&config, None, PoolSize::without_rings(POOL), now);
        Rig::around(sw, config.ports.len(), now)
    }

    fn around(sw: Switch, ports: usize, now: Time) -> Rig {
        let rings = crate::loopback::Loopback::new(ports, None, None);
        Rig { sw, pool: VecPool::new(POOL), now, batch: TxBatch::new(), rings }
    }

    /// A switch whose pool's buffers hold `buffer` bytes: larger frames take several,
    /// as AF_XDP multi-buffer frames do.
    pub(crate) fn with_buffer_size(config: Config, buffer: usize) -> Rig {
        let mut r = Rig::new(config);
        r.pool = VecPool::with_buffer_size(POOL, buffer);
        r
    }

    /// A switch applying the Tagger table in `text` (see [`crate::tagging::tests::TABLE`]).
    pub(crate) fn tagged(mut config: Config, text: &str) -> Rig {
        config.name = "sw1".into();
        let tables = crate::tagging::tests::tables(text);
        let table = TagTable::apply(&mut config, &tables, "sw1.toml", false).unwrap();
        let now = Time::from_millis(1000);
        let sw = Switch::new(&config, Some(table), PoolSize::without_rings(POOL), now);
        Rig::around(sw, config.ports.len(), now)
    }

    pub(crate) fn ports(n: usize) -> Config {
        let names: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
        let mut c = Config::for_interfaces(&names);
        for (i, p) in c.ports.iter_mut().enumerate() {
            p.mac = Some(MacAddr([0x02, 0xee, 0, 0, 0, i as u8]));
        }
        c
    }

    /// `n` ports, each facing another switch (DCFIT's checking messages cross them).
    pub(crate) fn switch_ports(n: usize) -> Config {
        let mut c = Rig::ports(n);
        for p in &mut c.ports {
            p.role = crate::config::PortRole::Switch;
        }
        c
    }

    /// `bytes` arrive on port `port` (the tests number ports as the configuration does).
    pub(crate) fn rx(&mut self, port: usize, bytes: &[u8]) {
        let id = self.pool.put(bytes).expect("the test pool has room");
        self.sw.handle_frame(self.now, &mut self.pool, PortId::new(port), id);
    }

    /// [`Rig::rx`] of a frame that arrived `ago` before now: it waited on the rx ring.
    pub(crate) fn rx_late(&mut self, port: usize, bytes: &[u8], ago: Duration) {
        let id = self.pool.put(bytes).expect("the test pool has room");
        self.pool.stamp(id, self.now - ago);
        self.sw.handle_frame(self.now, &mut self.pool, PortId::new(port), id);
    }

    /// Everything `port` sends now, as bytes; frees the frames like the dataplane would.
    pub(crate) fn tx(&mut self, port: usize) -> Vec<Vec<u8>> {
        self.tx_limited(port, TxBatch::CAPACITY)
    }

    /// A turn ([`Switch::poll`]) in which `port` alone transmits, at most `limit` frames.
    pub(crate) fn tx_limited(&mut self, port: usize, limit: usize) -> Vec<Vec<u8>> {
        self.rings.set_room_everywhere(None);
        self.rings.set_room(PortId::new(port), Some(limit));
        self.sw.poll(self.now, &mut self.pool, &mut self.rings, &mut self.batch);
        let mut out = Vec::new();
        for (_, f) in self.rings.take_sent() {
            out.push(self.pool.contents(f.id));
            self.pool.free(f.id);
        }
        out
    }

    /// The watchdog's next event: those a turn took first, then any since.
    pub(crate) fn watchdog_event(&mut self) -> Option<crate::pfcwd::WatchdogEvent> {
        self.rings.next_watchdog().or_else(|| self.sw.poll_watchdog_event())
    }

    pub(crate) fn advance(&mut self, d: Duration) {
        self.now = self.now + d;
    }

    pub(crate) fn stats(&self) -> SwitchStats {
        self.sw.stats(self.now)
    }
}

fn data(src: u64, dst: u64, dscp: u8, len: usize) -> Vec<u8> {
    let mut f = udp_frame(mac(src), mac(dst), dscp, None, &[]);
    f.resize(len.max(f.len()), 0xab);
    f
}

fn pfc_of(frame: &[u8]) -> Pfc {
    match pfc::decode(frame, MacAddr::ZERO) {
        Ok(ControlFrame { body: MacControl::Pfc(p), .. }) => p,
        other => panic!("not a PFC frame: {other:?}"),
    }
}

fn congested(lossless: bool) -> (Rig, Vec<u8>) {
    congested_on(Rig::ports(2), lossless)
}

/// As [`congested`], the ports facing other switches.
fn congested_between_switches() -> (Rig, Vec<u8>) {
    congested_on(Rig::switch_ports(2), true)
}

fn congested_on(mut c: Config, lossless: bool) -> (Rig, Vec<u8>) {
    c.buffer.xoff_bytes = Some(10_000);
    c.buffer.xon_offset_bytes = Some(4_000);
    c.buffer.headroom_bytes = 5_000;
    c.buffer.lossy_queue_bytes = Some(12_000);
    if !lossless {
        c.pfc.lossless = Some(vec![P4]);
    }
    let mut r = Rig::new(c);
    // Teach the switch where host 2 is.
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    (r, data(1, 2, 3, 1000))
}

fn pfc_frame(enabled: Priorities, quanta: u16) -> Vec<u8> {
    let mut b = vec![0u8; 60];
    pfc::encode(&mut b, mac(2), &MacControl::Pfc(Pfc::pause(enabled, quanta)));
    b
}

/// A switch whose port 1 (station 2) runs at 100 Mb/s: 1024 wire bytes, a 1000-byte
/// frame, take 81.92 µs there.
fn slow_port_rig() -> Rig {
    let mut c = Rig::ports(2);
    c.ports[1].speed = Some(Speed::mbps(100));
    c.buffer.lossy_queue_bytes = Some(1 << 20);
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r
}

/// Frames port 1 sends when looked at every `turn` for `turns` turns.
fn sent_by_slow_port(r: &mut Rig, turns: usize, turn: Duration) -> usize {
    let mut sent = 0;
    for _ in 0..turns {
        sent += r.tx(1).len();
        r.advance(turn);
    }
    sent
}

impl Rig {
    /// Held frames the switch handed to the slowpath since the last call, and other events.
    fn outbox(&mut self) -> (Vec<crate::slowpath::HeldFrame>, Vec<ToSlowpath>) {
        let mut held = Vec::new();
        let mut other = Vec::new();
        let mut events = self.rings.take_events();
        self.sw.poll_slowpath(&mut self.pool, |ev| {
            events.push(ev);
            Ok(())
        });
        for ev in events {
            match ev {
                ToSlowpath::Held(h) => held.push(h),
                e => other.push(e),
            }
        }
        (held, other)
    }
}

fn numbered(src: u64, dst: u64, dscp: u8, n: u8) -> Vec<u8> {
    let mut f = data(src, dst, dscp, 200);
    f[199] = n;
    f
}

fn pfc_with(enabled: Priorities, quanta: u16, msg: Option<CheckingMessage>) -> Vec<u8> {
    let mut b = vec![0u8; 60];
    let mut p = Pfc::pause(enabled, quanta);
    p.checking = msg;
    pfc::encode(&mut b, mac(2), &MacControl::Pfc(p));
    b
}

fn my_id(r: &Rig) -> u32 {
    r.stats().switch_id
}

/// p0's next pause carries a fresh message (newer than `own`) though its cause is
/// downstream, and when that comes back with nothing moved since, it is the deadlock.
fn a_fresh_message_goes_round_and_finds_the_deadlock(r: &mut Rig, own: CheckingMessage) {
    r.advance(Duration::from_millis(2));
    let fresh = pfc_of(&r.tx(0)[0]).checking.expect("a fresh message");
    assert_eq!((fresh.origin_switch, fresh.origin_port, fresh.hops), (my_id(r), 0, 0));
    assert!(fresh.seq > own.seq);
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, Some(CheckingMessage { hops: 2, ..fresh })));
    assert!(matches!(r.outbox().1[..], [ToSlowpath::Deadlock(_)]));
    assert_eq!(r.stats().deadlocks_detected, 1);
}

fn deadlocked(resolution: DeadlockResolution) -> (Rig, CheckingMessage) {
    deadlocked_on(Rig::switch_ports(2), resolution)
}

fn deadlocked_on(mut c: Config, resolution: DeadlockResolution) -> (Rig, CheckingMessage) {
    c.buffer.xoff_bytes = Some(10_000);
    c.buffer.xon_offset_bytes = Some(4_000);
    c.dcfit.resolution = resolution;
    c.dcfit.drop_ms = 50;
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    // p1 is paused downstream; traffic from p0 piles up behind it and p0 pauses upstream.
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, None));
    for _ in 0..11 {
        r.rx(0, &data(1, 2, 3, 1000));
    }
    r.tx(0);
    r.outbox();
    // The pause just sent to p0 originated no message (its cause is downstream), so make
    // one as the switch would have when the chain started: seq 1 in p0's XOFF episode.
    r.sw.note_originated(PortId::new(0), 1, Priorities::only(P3));
    let own =
        CheckingMessage { origin_switch: my_id(&r), origin_port: 0, seq: 1, hops: 2, prios: Priorities::only(P3) };
    (r, own)
}
