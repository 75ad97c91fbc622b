use super::*;
use crate::config::{BufferProfile, Config, PauseMode, Scheduler};
use crate::ether::tests::udp_frame;
use crate::pfc::ControlFrame;
use crate::priorities::Priorities;
use crate::stats::{TagCounters, TaggerStats};
use crate::tagging::TagTable;

pub(crate) type VecPool = crate::heap_pool::HeapPool;

const POOL: u32 = 4096;

pub(crate) struct Rig {
    pub(crate) sw: Switch,
    pub(crate) pool: VecPool,
    pub(crate) now: Time,
    batch: TxBatch,
}

pub(crate) fn mac(n: u64) -> MacAddr {
    MacAddr::local(n)
}

impl Rig {
    pub(crate) fn new(config: Config) -> Rig {
        let now = Time::from_millis(1000);
        Rig { sw: Switch::new(&config, None, POOL, now), pool: VecPool::new(POOL), now, batch: TxBatch::new() }
    }

    /// A switch applying the Tagger table in `text` (see [`crate::tagging::tests::TABLE`]).
    pub(crate) fn tagged(mut config: Config, text: &str) -> Rig {
        config.name = "sw1".into();
        let tables = crate::tagging::tests::tables(text);
        let table = TagTable::apply(&mut config, &tables, "sw1.toml", false).unwrap();
        let now = Time::from_millis(1000);
        Rig { sw: Switch::new(&config, Some(table), POOL, now), pool: VecPool::new(POOL), now, batch: TxBatch::new() }
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

    pub(crate) fn rx(&mut self, port: PortId, bytes: &[u8]) {
        let id = self.pool.put(bytes).expect("the test pool has room");
        self.sw.receive(self.now, &mut self.pool, port, id);
    }

    /// Everything `port` sends now, as bytes; frees the frames like the dataplane would.
    pub(crate) fn tx(&mut self, port: PortId) -> Vec<Vec<u8>> {
        self.tx_limited(port, TxBatch::CAPACITY)
    }

    pub(crate) fn tx_limited(&mut self, port: PortId, limit: usize) -> Vec<Vec<u8>> {
        self.batch.reset(limit);
        self.sw.transmit(self.now, &mut self.pool, port, &mut self.batch);
        let out: Vec<Vec<u8>> = self.batch.frames().iter().map(|f| self.pool.bytes(f.id).to_vec()).collect();
        for f in self.batch.frames().to_vec() {
            self.pool.free(f.id);
        }
        out
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

#[test]
fn learns_floods_and_then_switches_unicast() {
    let mut r = Rig::new(Rig::ports(3));
    let a_to_b = data(1, 2, 0, 100);
    r.rx(0, &a_to_b);
    assert_eq!(r.tx(1), vec![a_to_b.clone()], "unknown unicast floods");
    assert_eq!(r.tx(2), vec![a_to_b.clone()]);
    assert!(r.tx(0).is_empty(), "never back out of the ingress port");

    let b_to_a = data(2, 1, 0, 100);
    r.rx(1, &b_to_a);
    assert_eq!(r.tx(0), vec![b_to_a]);
    assert!(r.tx(2).is_empty(), "known unicast does not reach the third port");

    r.rx(0, &a_to_b);
    assert_eq!(r.tx(1), vec![a_to_b]);
    assert!(r.tx(2).is_empty());
    assert_eq!(r.pool.free_count(), POOL as usize, "every frame is back in the pool");
    let s = r.stats();
    assert_eq!((s.ports[0].counters.rx_frames, s.ports[1].counters.tx_frames), (2, 2));
    assert_eq!(s.fdb_entries, 2);
}

#[test]
fn broadcast_floods_and_tags_pass_untouched() {
    let mut r = Rig::new(Rig::ports(3));
    let tagged = udp_frame(mac(1), MacAddr::BROADCAST, 0, Some((42, 5)), b"hello");
    r.rx(2, &tagged);
    assert_eq!(r.tx(0), vec![tagged.clone()]);
    assert_eq!(r.tx(1), vec![tagged]);
    assert_eq!(r.stats().ports[2].priorities[5].counters.rx_frames, 1, "classified by PCP");
}

#[test]
fn flooding_can_be_disabled_per_port() {
    let mut c = Rig::ports(3);
    c.ports[2].flood = false;
    let mut r = Rig::new(c);
    r.rx(0, &data(1, 2, 0, 64));
    assert_eq!(r.tx(1).len(), 1);
    assert!(r.tx(2).is_empty());
}

#[test]
fn destination_on_the_ingress_port_is_filtered() {
    let mut r = Rig::new(Rig::ports(2));
    r.rx(0, &data(1, 9, 0, 64));
    r.tx(1);
    r.rx(0, &data(2, 1, 0, 64));
    assert!(r.tx(0).is_empty() && r.tx(1).is_empty());
    assert_eq!(r.stats().ports[0].counters.drops.filtered, 1);
}

#[test]
fn bad_frames_are_counted_and_do_not_stop_forwarding() {
    let mut c = Rig::ports(2);
    c.ports[0].max_frame = 1000;
    let mut r = Rig::new(c);
    r.rx(0, &[0u8; 10]);
    r.rx(0, &data(1, 2, 0, 1001));
    let mut lldp = data(1, 2, 0, 64);
    lldp[..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 0x0e]);
    r.rx(0, &lldp);
    let mut bad_src = data(1, 2, 0, 64);
    bad_src[6] = 0x01;
    r.rx(0, &bad_src);
    let mut unknown = data(1, 2, 0, 64);
    unknown[12..14].copy_from_slice(&[0x12, 0x34]);
    r.rx(0, &unknown);
    r.rx(0, &data(1, 2, 0, 1000));
    assert_eq!(r.tx(1), vec![unknown, data(1, 2, 0, 1000)]);
    let d = r.stats().ports[0].counters.drops;
    assert_eq!((d.runt, d.oversize, d.link_local, d.bad_source), (1, 1, 1, 1));
    assert_eq!(r.pool.free_count(), POOL as usize);
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
    c.buffer.lossy_queue_bytes = 12_000;
    if !lossless {
        c.pfc.lossless = Some(vec![4]);
    }
    let mut r = Rig::new(c);
    // Teach the switch where host 2 is.
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    (r, data(1, 2, 3, 1000))
}

#[test]
fn each_lossless_priority_pauses_at_its_own_profile() {
    let mut c = Rig::ports(2);
    c.buffer.xoff_bytes = Some(10_000);
    c.buffer.headroom_bytes = 5_000;
    // Priority 4 pauses at 3000 B and may take 20 000 B after its pause.
    c.buffer.priority.insert(
        "4".into(),
        BufferProfile { xoff_bytes: Some(3_000), headroom_bytes: Some(20_000), ..Default::default() },
    );
    c.buffer.xon_offset_bytes = Some(1_000);
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    let (p3, p4) = (data(1, 2, 3, 1000), data(1, 2, 4, 1000));
    for _ in 0..4 {
        r.rx(0, &p4);
        r.rx(0, &p3);
    }
    let sent = r.tx(0);
    assert_eq!(sent.len(), 1, "priority 4 passed its 3000 B; priority 3 is below its 10 000 B");
    assert_eq!(pfc_of(&sent[0]).enabled, Priorities::only(4));
    for _ in 0..15 {
        r.rx(0, &p4);
    }
    let s = r.stats();
    let (g3, g4) = (&s.ports[0].priorities[3], &s.ports[0].priorities[4]);
    assert_eq!(
        (g4.counters.lossless_drops, g4.headroom_bytes),
        (0, 16_000),
        "its headroom holds what priority 3's could not"
    );
    assert!(!g3.xoff);
    assert_eq!((g3.xoff_threshold, g3.xon_threshold, g3.headroom_size), (10_000, 9_000, 5_000));
    assert_eq!((g4.xoff_threshold, g4.xon_threshold, g4.headroom_size), (3_000, 2_000, 20_000));
    assert_eq!(s.ports[0].priorities[0].xoff_threshold, 0, "a lossy priority has no profile");
}

#[test]
fn lossless_queue_pauses_upstream_and_resumes_at_xon() {
    let (mut r, frame) = congested(true);
    for _ in 0..10 {
        r.rx(0, &frame);
    }
    assert!(r.tx(0).is_empty(), "below XOFF: no pause");
    r.rx(0, &frame);
    let sent = r.tx(0);
    assert_eq!(sent.len(), 1);
    let pause = pfc_of(&sent[0]);
    assert_eq!((pause.enabled, pause.quanta[3]), (Priorities::only(3), 65535));
    assert_eq!(&sent[0][6..12], &[0x02, 0xee, 0, 0, 0, 0], "sent from the port's own MAC");
    // Frames in flight after XOFF land in headroom; beyond it they are dropped.
    for _ in 0..5 {
        r.rx(0, &frame);
    }
    let s = r.stats();
    let g = &s.ports[0].priorities[3];
    assert!(g.xoff);
    assert_eq!((g.headroom_bytes, g.counters.lossless_drops), (5_000, 1));
    assert_eq!(s.ports[0].counters.drops.lossless, 1);

    // Drain the egress port.
    let mut delivered = 0;
    let mut resumes = 0;
    for _ in 0..100 {
        delivered += r.tx(1).len();
        for f in r.tx(0) {
            let p = pfc_of(&f);
            if p.quanta[3] == 0 {
                resumes += 1;
            }
        }
        r.advance(Duration::from_micros(10));
    }
    assert_eq!(delivered, 15);
    assert_eq!(resumes, 1);
    let s = r.stats();
    let c = s.ports[0].priorities[3].counters;
    assert_eq!((c.xoff_sent, c.xon_sent), (1, 1));
    assert_eq!(s.ports[0].counters.mac_control.pfc_sent, 2);
    assert_eq!(s.ports[0].counters.tx_frames, 1, "PFC frames are not data tx");
}

#[test]
fn pause_frames_never_come_from_a_zero_source() {
    let (_, frame) = congested(true);
    let mut c = Rig::ports(2);
    c.ports[0].mac = Some(MacAddr::ZERO);
    c.buffer.xoff_bytes = Some(2_000);
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    for _ in 0..3 {
        r.rx(0, &frame);
    }
    let sent = r.tx(0);
    assert_eq!(sent.len(), 1);
    assert_ne!(&sent[0][6..12], &[0u8; 6]);
}

#[test]
fn pause_is_refreshed_while_above_xon() {
    let (mut r, frame) = congested(true);
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    assert_eq!(r.tx(0).len(), 1);
    // Default refresh: half of 65535 quanta at 10G = 1.678 ms.
    r.advance(Duration::from_micros(1600));
    assert!(r.tx(0).is_empty());
    assert!(r.sw.next_wakeup(r.now) <= r.now + Duration::from_micros(78));
    r.advance(Duration::from_micros(80));
    let again = r.tx(0);
    assert_eq!(again.len(), 1);
    assert_eq!(pfc_of(&again[0]).quanta[3], 65535);
}

#[test]
fn lossy_priority_drops_and_never_pauses() {
    let (mut r, frame) = congested(false);
    for _ in 0..20 {
        r.rx(0, &frame);
    }
    assert!(r.tx(0).is_empty(), "no PFC for a lossy priority");
    let s = r.stats();
    assert_eq!(s.ports[0].priorities[3].counters.lossy_drops, 8);
    assert_eq!(s.ports[0].counters.mac_control.pfc_sent, 0);
}

fn pfc_frame(enabled: Priorities, quanta: u16) -> Vec<u8> {
    let mut b = vec![0u8; 60];
    pfc::encode(&mut b, mac(2), &MacControl::Pfc(Pfc::pause(enabled, quanta)));
    b
}

#[test]
fn received_pfc_pauses_one_priority_for_its_quanta() {
    let mut c = Rig::ports(2);
    c.ports[1].speed = Some(Speed::gbps(40));
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r.rx(1, &pfc_frame(Priorities::only(3), 65535));
    r.rx(0, &data(1, 2, 3, 200));
    r.rx(0, &data(1, 2, 0, 200));
    let out = r.tx(1);
    assert_eq!(out.len(), 1, "priority 0 flows while 3 is paused");
    assert_eq!(r.sw.next_wakeup(r.now), r.now + Duration::from_nanos(838_848));
    r.advance(Duration::from_nanos(838_847));
    assert!(r.tx(1).is_empty());
    r.advance(Duration::from_nanos(1));
    assert_eq!(r.tx(1).len(), 1, "resumes when the quanta expire");
    let s = r.stats();
    assert_eq!(s.ports[1].priorities[3].paused_us, 838);
    assert_eq!(s.ports[1].priorities[3].counters.xoff_received, 1);
    assert_eq!(s.ports[1].counters.rx_frames, 1, "PFC frames are not data rx");
    assert_eq!(s.ports[1].counters.drops.total(), 0);
}

#[test]
fn zero_quanta_resumes_at_once_and_newer_frames_replace_the_timer() {
    let mut r = Rig::new(Rig::ports(2));
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r.rx(1, &pfc_frame(Priorities::only(4), 65535));
    r.rx(0, &data(1, 2, 4, 200));
    assert!(r.tx(1).is_empty());
    r.advance(Duration::from_micros(5));
    r.rx(1, &pfc_frame(Priorities::only(4), 0));
    assert_eq!(r.tx(1).len(), 1);
    assert_eq!(r.stats().ports[1].priorities[4].counters.xon_received, 1);
}

#[test]
fn invalid_and_lossy_pfc_is_counted_and_ignored() {
    let mut r = Rig::new(Rig::ports(2));
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    let mut reserved = pfc_frame(Priorities::only(3), 100);
    reserved[16] = 0x80;
    r.rx(1, &reserved);
    r.rx(1, &pfc_frame(Priorities::NONE, 100));
    r.rx(1, &pfc_frame(Priorities::only(3), 100)[..20]);
    r.rx(1, &pfc_frame(Priorities::only(1), 65535));
    let mut zero_src = pfc_frame(Priorities::only(3), 65535);
    zero_src[6..12].fill(0);
    r.rx(1, &zero_src);
    r.rx(0, &data(1, 2, 0, 200));
    r.rx(0, &data(1, 2, 3, 200));
    assert_eq!(r.tx(1).len(), 1, "priority 1 is lossy: not paused; 3 is paused by the zero-source frame");
    let c = r.stats().ports[1].counters.mac_control;
    assert_eq!((c.reserved_bits, c.no_class_enabled, c.truncated), (1, 1, 1));
    assert_eq!((c.lossy_class_ignored, c.zero_source, c.received), (1, 1, 5));
    assert_eq!(r.stats().ports[1].counters.drops.total(), 0);
}

#[test]
fn global_pause_applies_only_in_global_mode() {
    let pause = {
        let mut b = vec![0u8; 60];
        pfc::encode(&mut b, mac(2), &MacControl::Pause { quanta: 65535 });
        b
    };
    let mut r = Rig::new(Rig::ports(2));
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r.rx(1, &pause);
    r.rx(0, &data(1, 2, 0, 200));
    assert_eq!(r.tx(1).len(), 1, "PFC mode ignores 802.3x");
    assert_eq!(r.stats().ports[1].counters.mac_control.pause_ignored, 1);

    let mut c = Rig::ports(2);
    c.ports[1].pause_mode = PauseMode::GlobalPause;
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r.rx(1, &pause);
    r.rx(0, &data(1, 2, 0, 200));
    r.rx(1, &pfc_frame(Priorities::only(3), 1));
    assert!(r.tx(1).is_empty(), "the whole port is paused");
    assert_eq!(r.stats().ports[1].counters.mac_control.pfc_ignored, 1);
}

#[test]
fn global_pause_mode_sends_802_3x() {
    let mut c = Rig::ports(2);
    c.ports[0].pause_mode = PauseMode::GlobalPause;
    c.buffer.xoff_bytes = Some(2_000);
    c.buffer.xon_offset_bytes = Some(1_000);
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    for _ in 0..3 {
        r.rx(0, &data(1, 2, 3, 1000));
    }
    let sent = r.tx(0);
    assert_eq!(sent.len(), 1);
    assert_eq!(pfc::decode(&sent[0], MacAddr::ZERO).unwrap().body, MacControl::Pause { quanta: 65535 });
}

/// A switch whose port 1 (station 2) runs at 100 Mb/s: 1024 wire bytes, a 1000-byte
/// frame, take 81.92 µs there.
fn slow_port_rig() -> Rig {
    let mut c = Rig::ports(2);
    c.ports[1].speed = Some(Speed::mbps(100));
    c.buffer.lossy_queue_bytes = 1 << 20;
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

#[test]
fn shaper_paces_egress_at_the_port_speed() {
    let mut r = slow_port_rig();
    for _ in 0..200 {
        r.rx(0, &data(1, 2, 0, 1000));
    }
    // 10 ms carry 122 frames (+ burst).
    let sent = sent_by_slow_port(&mut r, 1000, Duration::from_micros(10));
    assert!((122..=123).contains(&sent), "{sent}");
}

#[test]
fn a_port_looked_at_once_per_long_turn_still_carries_its_line_rate() {
    // A loop turn forwarding large frames lasts hundreds of µs, far longer than the
    // shaper's burst; the time between two turns must not be lost to the wire.
    let mut r = slow_port_rig();
    for _ in 0..200 {
        r.rx(0, &data(1, 2, 0, 1000));
    }
    let sent = sent_by_slow_port(&mut r, 20, Duration::from_micros(500));
    // The last look is at 9.5 ms: 116 frames, plus the burst. (Only the burst per turn
    // would be 20.)
    assert!((116..=118).contains(&sent), "{sent}");
}

#[test]
fn a_paused_spell_is_not_made_up_afterwards() {
    let mut r = slow_port_rig();
    // Priority 3 paused for 1000 quanta (5.12 ms at 100 Mb/s), with frames waiting.
    r.rx(1, &pfc_frame(Priorities::only(3), 1000));
    for _ in 0..50 {
        r.rx(0, &data(1, 2, 3, 1000));
    }
    assert_eq!(sent_by_slow_port(&mut r, 10, Duration::from_micros(100)), 0);
    // Once the pause is over, the first turn sends the burst's worth, not the paused
    // time's (1 ms of catch-up would be 12 frames).
    r.advance(Duration::from_millis(5));
    assert_eq!(r.tx(1).len(), 1);
}

#[test]
fn drr_shares_by_weight_and_strict_goes_first() {
    let mut c = Rig::ports(2);
    c.pfc.lossless = Some(vec![]);
    c.classify.dscp = [("1", 1), ("2", 2), ("5", 5)].iter().map(|(d, p)| (d.to_string(), *p)).collect();
    c.ports[1].scheduler = Scheduler::Drr { weights: [1, 1, 3, 1, 1, 0, 1, 1] };
    c.buffer.lossy_queue_bytes = 1 << 20;
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    for _ in 0..200 {
        r.rx(0, &data(1, 2, 1, 1000));
        r.rx(0, &data(1, 2, 2, 1000));
    }
    r.rx(0, &data(1, 2, 5, 1000));
    let mut order = Vec::new();
    while order.len() < 161 {
        for f in r.tx(1) {
            order.push(f[15] >> 2);
        }
        r.advance(Duration::from_micros(50));
    }
    assert_eq!(order[0], 5, "weight 0 is strict");
    let twos = order[1..161].iter().filter(|&&d| d == 2).count();
    assert!((115..=125).contains(&twos), "3:1 share, got {twos} of 160");
}

#[test]
fn upstream_response_is_the_longest_frames_kept_arriving_after_xoff() {
    let (mut r, frame) = congested(true);
    let upstream = |r: &Rig| r.stats().ports[0].priorities[3].upstream_response_max_us;
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    let xoff_at = r.now;
    assert_eq!(upstream(&r), 0.0, "just crossed");
    // The partner keeps sending for 40 µs (the last frame dropped beyond headroom still counts).
    for us in [10, 25, 40] {
        r.now = xoff_at + Duration::from_micros(us);
        r.rx(0, &frame);
    }
    // A frame of another priority does not move it.
    r.now = xoff_at + Duration::from_micros(90);
    r.rx(0, &data(1, 2, 0, 1000));
    assert!(r.stats().ports[0].priorities[3].xoff);
    assert_eq!(upstream(&r), 40.0);
    // Drained to XON, then a second episode with a quicker partner: the longest stays.
    while r.stats().ports[0].priorities[3].xoff {
        r.tx(1);
        r.tx(0);
        r.advance(Duration::from_micros(10));
    }
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    assert!(r.stats().ports[0].priorities[3].xoff);
    r.advance(Duration::from_micros(5));
    r.rx(0, &frame);
    assert_eq!(upstream(&r), 40.0);
}

#[test]
fn reaction_time_is_recorded_for_the_xoff_frame() {
    let (mut r, frame) = congested(true);
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    let (now, mut batch) = (r.now, TxBatch::new());
    r.sw.transmit(now, &mut r.pool, 0, &mut batch);
    let f = batch.frames()[0];
    assert_eq!(f.xoff_trigger, Some(now));
    r.sw.record_pause_sent(now, now + Duration::from_micros(7));
    assert_eq!(r.stats().pfc_reaction.count, 1);
    assert_eq!(r.stats().pfc_reaction.p50_us, 7.0);
}

// --- Blocked ports, the slowpath and DCFIT ---

use crate::checking::CheckingMessage;
use crate::config::DeadlockResolution;
use crate::slowpath::{Slowpath, ToSlowpath};

impl Rig {
    /// Held frames the switch handed to the slowpath since the last call, and other events.
    fn outbox(&mut self) -> (Vec<crate::slowpath::HeldFrame>, Vec<ToSlowpath>) {
        let mut held = Vec::new();
        let mut other = Vec::new();
        for ev in self.sw.drain_outbox() {
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

#[test]
fn blocked_port_sends_frames_to_the_slowpath_and_unblocking_releases_them_in_order() {
    let (mut r, _) = congested_between_switches();
    r.sw.set_blocked(1, true);
    for n in 0..60 {
        r.rx(0, &numbered(1, 2, 3, n));
    }
    let (held, _) = r.outbox();
    assert_eq!(held.len(), 60);
    assert!(r.tx(1).is_empty(), "nothing leaves a blocked port");
    // Held frames still count against their ingress: the switch paused its upstream.
    let s = r.stats();
    assert!(s.ports[0].priorities[3].xoff);
    assert_eq!(s.ports[1].held_by_slowpath, 60);
    assert!(s.ports[1].blocked);
    assert_eq!(r.sw.traffic_map_row(0), 0b10, "the pair (p0, p1) is marked");
    let sent = r.tx(0);
    assert_eq!(pfc_of(&sent[0]).quanta[3], 65535);

    // The slowpath holds them while the port is blocked, and gives everything back once
    // it is unblocked.
    let mut slow = Slowpath::new("sw", vec!["p0".into(), "p1".into()], 64);
    for h in held {
        slow.handle_event(ToSlowpath::Held(h));
    }
    assert!(slow.release(|e| r.sw.stopped(r.now, e)).is_empty());
    r.sw.set_blocked(1, false);
    let (_, events) = r.outbox();
    assert_eq!(events, vec![ToSlowpath::Unblocked { port: 1 }]);
    for ev in events {
        slow.handle_event(ev);
    }
    assert!(slow.wants_release());
    let out = slow.release(|e| r.sw.stopped(r.now, e)).to_vec();
    for rel in out {
        r.sw.reinject(r.now, &mut r.pool, rel);
    }
    let mut got = Vec::new();
    for _ in 0..20 {
        got.extend(r.tx(1).into_iter().map(|f| f[199]));
        r.advance(Duration::from_micros(50));
    }
    assert_eq!(got, (0..60).collect::<Vec<u8>>(), "every held frame, in order, once");
    assert_eq!(r.sw.traffic_map_row(0), 0, "the last frame of the pair cleared the map");
    assert!(!r.stats().ports[0].priorities[3].xoff, "the upstream was resumed");
}

#[test]
fn paused_takes_precedence_over_blocked_but_never_lets_a_frame_overtake() {
    let mut r = Rig::new(Rig::switch_ports(2));
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r.sw.set_blocked(1, true);
    // Priority 3 paused at p1: queued as usual, not handed to the slowpath.
    r.rx(1, &pfc_frame(Priorities::only(3), 65535));
    r.rx(0, &numbered(1, 2, 3, 1));
    assert!(r.outbox().0.is_empty());
    // Priority 4 is not paused: the slowpath takes it.
    r.rx(0, &numbered(1, 2, 4, 2));
    assert_eq!(r.outbox().0.len(), 1);
    // Priority 4 gets paused while the slowpath still holds frame 2: frame 3 must wait
    // behind it at the slowpath rather than jump the queue.
    r.rx(1, &pfc_frame(Priorities::only(4), 65535));
    r.rx(0, &numbered(1, 2, 4, 3));
    let (held, _) = r.outbox();
    assert_eq!(held.len(), 1, "queued behind the held frame of its (egress, priority)");
}

#[test]
fn a_foreign_message_is_passed_upstream_by_the_ports_whose_paused_traffic_waits_behind_it() {
    let (mut r, frame) = congested_between_switches();
    r.rx(1, &pfc_with(Priorities::only(3), 65535, None));
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    assert_eq!(pfc_of(&r.tx(0)[0]).checking, None, "caused downstream, and no message there yet");
    r.outbox();
    // A sender that names no priorities: the message follows those its pause stops.
    let theirs = CheckingMessage { origin_switch: 4242, origin_port: 1, seq: 7, hops: 0, prios: Priorities::NONE };
    r.rx(1, &pfc_with(Priorities::only(3), 65535, Some(theirs)));
    let passed = CheckingMessage { hops: 1, prios: Priorities::only(3), ..theirs };
    assert_eq!(r.outbox().1, vec![ToSlowpath::CheckForwarded { from: 1, to: 0, msg: passed }]);
    assert_eq!(r.stats().ports[1].checks.received, 1);
    r.advance(Duration::from_micros(1700));
    assert_eq!(pfc_of(&r.tx(0)[0]).checking, Some(passed), "in p0's next pause");
    // A resume clears what p1 stored: the next pause caused there has nothing to forward.
    r.rx(1, &pfc_with(Priorities::only(3), 0, None));
    r.rx(1, &pfc_with(Priorities::only(3), 65535, None));
    r.advance(Duration::from_micros(1700));
    assert_eq!(pfc_of(&r.tx(0)[0]).checking, None);
}

#[test]
fn a_message_about_another_priority_is_not_passed_on() {
    let (mut r, frame) = congested_between_switches();
    r.rx(1, &pfc_with(Priorities::only(3), 65535, None));
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    r.outbox();
    // p0's traffic waits in queue 3 at p1; this message follows priority 4's pauses.
    let theirs = CheckingMessage { origin_switch: 4242, origin_port: 1, seq: 7, hops: 0, prios: Priorities::only(4) };
    r.rx(1, &pfc_with(Priorities::only(3) | Priorities::only(4), 65535, Some(theirs)));
    assert!(r.outbox().1.is_empty());
    r.advance(Duration::from_micros(1700));
    assert_eq!(pfc_of(&r.tx(0)[0]).checking, None);
}

fn my_id(r: &Rig) -> u32 {
    r.stats().switch_id
}

#[test]
fn a_local_cause_originates_and_a_downstream_cause_forwards() {
    // Congestion at p1's line rate: a local cause, so the pause to p0 originates a message.
    let (mut r, frame) = congested_between_switches();
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    let sent = r.tx(0);
    let m = pfc_of(&sent[0]).checking.expect("a checking message");
    assert_eq!((m.origin_switch, m.origin_port, m.hops, m.prios), (my_id(&r), 0, 0, Priorities::only(3)));
    // Each pause frame originates afresh.
    r.advance(Duration::from_micros(1700));
    let again = pfc_of(&r.tx(0)[0]).checking.unwrap();
    assert_eq!(again.seq, m.seq + 1);

    // Now p1 is paused by its downstream, which sent its own message: p0's pause forwards it.
    let (mut r, frame) = congested_between_switches();
    let theirs = CheckingMessage { origin_switch: 77, origin_port: 5, seq: 1, hops: 2, prios: Priorities::only(3) };
    r.rx(1, &pfc_with(Priorities::only(3), 65535, Some(theirs)));
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    let fwd = pfc_of(&r.tx(0)[0]).checking.unwrap();
    assert_eq!(fwd, CheckingMessage { hops: 3, ..theirs });
    let c = r.stats().ports[0].checks;
    assert_eq!((c.forwarded, c.originated), (1, 0));
}

/// p0's next pause carries a fresh message (newer than `own`) though its cause is
/// downstream, and when that comes back with nothing moved since, it is the deadlock.
fn a_fresh_message_goes_round_and_finds_the_deadlock(r: &mut Rig, own: CheckingMessage) {
    r.advance(Duration::from_millis(2));
    let fresh = pfc_of(&r.tx(0)[0]).checking.expect("a fresh message");
    assert_eq!((fresh.origin_switch, fresh.origin_port, fresh.hops), (my_id(r), 0, 0));
    assert!(fresh.seq > own.seq);
    r.rx(1, &pfc_with(Priorities::only(3), 65535, Some(CheckingMessage { hops: 2, ..fresh })));
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
    r.rx(1, &pfc_with(Priorities::only(3), 65535, None));
    for _ in 0..11 {
        r.rx(0, &data(1, 2, 3, 1000));
    }
    r.tx(0);
    r.outbox();
    // The pause just sent to p0 originated no message (its cause is downstream), so make
    // one as the switch would have when the chain started: seq 1 in p0's XOFF episode.
    r.sw.note_originated(0, 1, Priorities::only(3));
    let own = CheckingMessage { origin_switch: my_id(&r), origin_port: 0, seq: 1, hops: 2, prios: Priorities::only(3) };
    (r, own)
}

#[test]
fn an_own_message_from_a_broken_chain_is_stale_not_a_deadlock() {
    let (mut r, own) = deadlocked(DeadlockResolution::Report);
    // p0 stops pausing its upstream: drain p1's queue.
    r.rx(1, &pfc_with(Priorities::only(3), 0, None));
    for _ in 0..10 {
        r.tx(1);
        r.advance(Duration::from_micros(20));
    }
    assert!(!r.stats().ports[0].priorities[3].xoff);
    r.rx(1, &pfc_with(Priorities::only(3), 65535, Some(own)));
    assert!(r.outbox().1.is_empty(), "no deadlock event");
    let c = r.stats().ports[1].checks;
    assert_eq!((c.own_returned, c.stale_returns), (1, 1));
    assert_eq!(r.stats().deadlocks_detected, 0);
}

#[test]
fn an_own_message_from_a_broken_chain_makes_a_port_that_pauses_again_look_again() {
    // Found on a fat-tree whose bounce routes deadlocked: the messages originated while
    // the cycle was still congestion came back stale, and with no local cause left only
    // they went round; the deadlock was never reported.
    let (mut r, own) = deadlocked(DeadlockResolution::Report);
    r.rx(1, &pfc_with(Priorities::only(3), 0, None));
    for _ in 0..10 {
        r.tx(1);
        r.advance(Duration::from_micros(20));
    }
    assert!(!r.stats().ports[0].priorities[3].xoff, "the chain broke");
    // Paused again downstream; traffic from p0 piles up and p0 pauses again, its cause
    // downstream (so its pause carries no message of its own).
    r.rx(1, &pfc_with(Priorities::only(3), 65535, None));
    for _ in 0..11 {
        r.rx(0, &data(1, 2, 3, 1000));
    }
    let first = pfc_of(&r.tx(0)[0]).checking;
    assert!(first.is_none(), "{first:?}");
    // The old message comes round: stale, but p0 looks again.
    r.rx(1, &pfc_with(Priorities::only(3), 65535, Some(own)));
    assert_eq!(r.stats().ports[1].checks.stale_returns, 1);
    a_fresh_message_goes_round_and_finds_the_deadlock(&mut r, own);
}

#[test]
fn an_own_message_coming_back_is_a_deadlock_once_per_cycle() {
    let (mut r, own) = deadlocked(DeadlockResolution::Report);
    r.rx(1, &pfc_with(Priorities::only(3), 65535, Some(own)));
    let (_, events) = r.outbox();
    let ToSlowpath::Deadlock(ev) = &events[0] else { panic!("{events:?}") };
    assert_eq!((ev.origin_port, ev.return_port, ev.path_length, ev.resolved), (0, 1, 3, false));
    assert_eq!(r.stats().deadlocks_detected, 1);
    // It keeps coming back while the cycle lasts: confirmations, not new deadlocks.
    r.advance(Duration::from_millis(2));
    r.rx(1, &pfc_with(Priorities::only(3), 65535, Some(own)));
    assert!(matches!(r.outbox().1[0], ToSlowpath::Confirmed { id: 1, .. }));
    // Own messages are not stored, so never forwarded: the next pause originates anew.
    r.advance(Duration::from_millis(2));
    let m = pfc_of(&r.tx(0)[0]).checking.unwrap();
    assert_eq!((m.origin_switch, m.hops), (my_id(&r), 0));
    assert_eq!(r.stats().ports[1].queues_total(), 11, "report only: nothing dropped");
}

#[test]
fn a_host_cannot_forge_a_deadlock_and_is_sent_no_checking_message() {
    // The same stage as a real deadlock, but both ports face hosts: one of them sends
    // back the very message the switch would have sent (id, port, sequence).
    let (mut r, forged) = deadlocked_on(Rig::ports(2), DeadlockResolution::Drop);
    r.rx(1, &pfc_with(Priorities::only(3), 65535, Some(forged)));
    let s = r.stats();
    assert_eq!(s.deadlocks_detected, 0);
    assert_eq!(s.ports[1].checks.from_host_ignored, 1);
    assert_eq!(s.ports[1].checks.received, 0);
    assert_eq!(s.ports[1].queues_total(), 11, "nothing dropped");
    assert!(s.ports[1].priorities[3].egress_paused, "the pause itself is obeyed");
    assert!(r.outbox().1.is_empty());
    // Pauses towards a host never carry a message.
    r.advance(Duration::from_millis(2));
    let pause = pfc_of(&r.tx(0)[0]);
    assert!(pause.quanta[3] > 0 && pause.checking.is_none(), "{pause:?}");
    assert_eq!(r.stats().ports[0].checks.originated, 0);
}

#[test]
fn an_own_message_sent_for_another_group_closes_no_cycle() {
    let (mut r, own) = deadlocked(DeadlockResolution::Report);
    // Sent when p0 paused priority 4; back through the pauses of priority 3, whose traffic
    // from p0 does wait at p1: two chains, not one cycle.
    r.sw.note_originated(0, 2, Priorities::only(4));
    r.rx(1, &pfc_with(Priorities::only(3), 65535, Some(CheckingMessage { seq: 2, ..own })));
    let s = r.stats();
    assert_eq!((s.deadlocks_detected, s.ports[1].checks.stale_returns), (0, 1));
    // A message this port never sent (or sent too long ago to remember) proves nothing.
    r.rx(1, &pfc_with(Priorities::only(3), 65535, Some(CheckingMessage { seq: 99, ..own })));
    assert_eq!(r.stats().ports[1].checks.stale_returns, 2);
    r.rx(1, &pfc_with(Priorities::only(3), 65535, Some(own)));
    assert_eq!(r.stats().deadlocks_detected, 1);
}

#[test]
fn an_own_message_back_while_the_paused_traffic_still_moves_is_congestion_and_the_switch_looks_again() {
    let (mut r, own) = deadlocked(DeadlockResolution::Report);
    // p1's partner lets one frame through and pauses again: p0 still pauses its upstream,
    // but its traffic moved after the message left.
    r.rx(1, &pfc_with(Priorities::only(3), 0, None));
    r.advance(Duration::from_micros(1));
    assert_eq!(r.tx_limited(1, 1).len(), 1);
    r.rx(1, &pfc_with(Priorities::only(3), 65535, None));
    assert!(r.stats().ports[0].priorities[3].xoff);
    r.rx(1, &pfc_with(Priorities::only(3), 65535, Some(own)));
    assert!(r.outbox().1.is_empty(), "no deadlock event");
    let c = r.stats().ports[1].checks;
    assert_eq!((c.own_returned, c.stale_returns, c.draining_returns), (1, 0, 1));
    a_fresh_message_goes_round_and_finds_the_deadlock(&mut r, own);
}

#[test]
fn drop_resolution_empties_the_stopped_queue_and_resumes_the_upstream() {
    let (mut r, own) = deadlocked(DeadlockResolution::Drop);
    r.rx(1, &pfc_with(Priorities::only(3), 65535, Some(own)));
    let (_, events) = r.outbox();
    let ToSlowpath::Deadlock(ev) = &events[0] else { panic!("{events:?}") };
    assert!(ev.resolved);
    let to_p0 = r.tx(1);
    assert!(to_p0.is_empty(), "nothing was sent: the paused queue was dropped");
    let s = r.stats();
    assert_eq!(s.ports[1].counters.drops.watchdog, 11);
    assert!(s.ports[1].watchdog_active);
    assert!(!s.ports[0].priorities[3].xoff, "p0's group drained");
    let resume = r.tx(0);
    assert_eq!(pfc_of(&resume[0]).quanta[3], 0, "the upstream is resumed");
    // Frames arriving while the watchdog runs are dropped too; afterwards, normal again.
    r.rx(0, &data(1, 2, 3, 1000));
    assert_eq!(r.stats().ports[1].counters.drops.watchdog, 12);
    r.advance(Duration::from_millis(60));
    r.rx(1, &pfc_with(Priorities::only(3), 0, None));
    r.rx(0, &data(1, 2, 3, 1000));
    assert_eq!(r.tx(1).len(), 1);
    assert!(!r.stats().ports[1].watchdog_active);
}

#[test]
fn static_fdb_entries_are_used_and_never_learned_over() {
    let mut c = Rig::switch_ports(3);
    c.fdb_entries.push(crate::config::StaticFdbEntry { mac: mac(2), port: "p2".into() });
    let mut r = Rig::new(c);
    r.rx(0, &data(1, 2, 0, 64));
    assert!(r.tx(1).is_empty(), "not flooded: the static entry says p2");
    assert_eq!(r.tx(2).len(), 1);
    // A frame from mac 2 on p1 does not move it.
    r.rx(1, &data(2, 1, 0, 64));
    r.tx(0);
    r.rx(0, &data(1, 2, 0, 64));
    assert_eq!(r.tx(2).len(), 1);
}

#[test]
fn drop_resolution_also_empties_what_the_slowpath_holds() {
    let (mut r, own) = deadlocked(DeadlockResolution::Drop);
    // Blocked, then paused downstream: these frames wait at the slowpath.
    r.sw.set_blocked(1, true);
    r.rx(1, &pfc_with(Priorities::only(3), 0, None));
    for _ in 0..3 {
        r.rx(0, &data(1, 2, 3, 1000));
    }
    let (held, _) = r.outbox();
    assert_eq!(held.len(), 3);
    assert_eq!(r.sw.stopped(r.now, 1), Priorities::ALL, "blocked: the slowpath keeps them");
    r.sw.set_blocked(1, false);
    r.rx(1, &pfc_with(Priorities::only(3), 65535, None));
    assert_eq!(r.sw.stopped(r.now, 1), Priorities::only(3), "paused: the slowpath keeps them");
    r.rx(1, &pfc_with(Priorities::only(3), 65535, Some(own)));
    assert_eq!(r.sw.stopped(r.now, 1), Priorities::NONE, "being dropped: the slowpath may give them back");
    let mut slow = Slowpath::new("sw", vec!["p0".into(), "p1".into()], 8);
    for h in held {
        slow.handle_event(ToSlowpath::Held(h));
    }
    let out = slow.release(|e| r.sw.stopped(r.now, e)).to_vec();
    for rel in out {
        r.sw.reinject(r.now, &mut r.pool, rel);
    }
    // The 11 frames queued before the block are emptied when p1 next transmits.
    assert!(r.tx(1).is_empty());
    assert_eq!(r.stats().ports[1].counters.drops.watchdog, 3 + 11);
    assert_eq!(r.stats().ports[1].held_by_slowpath, 0);
    assert_eq!(r.sw.traffic_map_row(0), 0, "nothing of (p0, p1) waits any more");
}

mod tagger {
    use super::*;
    use crate::ether::{parse_header, IpAt};
    use crate::tagging::tests::TABLE;

    /// The table's switch with host 2 learned on port 2 (index 1) and host 3 on port 3.
    fn rig() -> Rig {
        let mut r = Rig::tagged(Rig::switch_ports(3), TABLE);
        r.rx(1, &data(2, 99, 0, 64));
        r.rx(2, &data(3, 99, 0, 64));
        for p in 0..3 {
            r.tx(p);
        }
        r
    }

    fn checksum_ok(f: &[u8], at: IpAt) -> bool {
        let h = etherparse::Ipv4HeaderSlice::from_slice(&f[usize::from(at.offset)..]).unwrap().to_header();
        h.header_checksum == h.calc_header_checksum()
    }

    fn tags(r: &Rig) -> TaggerStats {
        r.stats().tagger.expect("the switch reports its table")
    }

    fn row(r: &Rig, port: &str, tag: Option<u8>) -> TagCounters {
        tags(r).tags.iter().find(|t| t.port == port && t.tag == tag).map(|t| t.counters).unwrap_or_default()
    }

    #[test]
    fn a_tagged_frame_is_charged_to_its_tags_priority_and_leaves_with_the_rewritten_tag() {
        let mut r = rig();
        r.rx(0, &data(1, 2, 2, 200));
        let out = r.tx(1);
        assert_eq!(out.len(), 1);
        let h = parse_header(&out[0]).unwrap();
        assert_eq!(h.dscp, Some(1), "rewritten by (ingress 1, tag 2, egress 2) → 1");
        assert!(checksum_ok(&out[0], h.ip.unwrap()));
        let s = r.stats();
        assert_eq!(s.ports[0].priorities[4].counters.rx_frames, 1, "charged to tag 2's priority at ingress");
        assert_eq!(s.ports[1].priorities[3].counters.tx_frames, 1, "queued under tag 1's priority at egress");
        let c = row(&r, "p0", Some(2));
        assert_eq!((c.classified, c.rewritten, c.to_default()), (1, 1, 0));
        // A rule that keeps the tag leaves the frame as it was.
        let original = data(1, 3, 2, 200);
        r.rx(0, &original);
        assert_eq!(r.tx(2), vec![original]);
        assert_eq!(row(&r, "p0", Some(2)).rewritten, 1);
        assert_eq!(s.tagger.as_ref().map(|t| (t.rules, t.lossless.clone())), Some((5, vec![3, 4])));
    }

    #[test]
    fn the_egress_queue_obeys_pauses_of_the_new_tags_priority_only() {
        let mut r = rig();
        r.rx(1, &pfc_frame(Priorities::only(4), 65535));
        r.rx(0, &data(1, 2, 2, 200));
        assert_eq!(r.tx(1).len(), 1, "a pause of the old tag's priority does not stop it");
        r.rx(1, &pfc_frame(Priorities::only(3), 65535));
        r.rx(0, &data(1, 2, 2, 200));
        assert!(r.tx(1).is_empty(), "a pause of the new tag's priority does");
        r.rx(1, &pfc_frame(Priorities::only(3), 0));
        assert_eq!(r.tx(1).len(), 1);
    }

    #[test]
    fn the_ingress_group_of_the_arriving_tag_pauses_the_upstream() {
        // The frames wait in priority 3's queue, paused; they are charged to priority 4.
        let (mut r, _) = congested_toward_a_pause(Priorities::only(3));
        let sent = r.tx(0);
        assert_eq!(sent.len(), 1);
        assert_eq!(pfc_of(&sent[0]).enabled, Priorities::only(4), "the upstream sent tag 2: its priority is paused");
    }

    #[test]
    fn a_tag_without_an_ingress_rule_goes_lossy_with_the_default_tag() {
        let mut r = rig();
        let lossy_sent = r.stats().ports[1].priorities[0].counters.tx_frames;
        r.rx(0, &data(1, 2, 5, 200));
        let out = r.tx(1);
        let h = parse_header(&out[0]).unwrap();
        assert_eq!(h.dscp, Some(0));
        assert!(checksum_ok(&out[0], h.ip.unwrap()));
        let s = r.stats();
        assert_eq!(s.ports[0].priorities[0].counters.rx_frames, 1);
        assert_eq!(s.ports[1].priorities[0].counters.tx_frames, lossy_sent + 1);
        assert_eq!(row(&r, "p0", Some(5)).default_ingress, 1);
        // Tag 1 has a rule on port 2, not on port 1.
        r.rx(0, &data(1, 2, 1, 200));
        assert_eq!(parse_header(&r.tx(1)[0]).unwrap().dscp, Some(0));
        assert_eq!(row(&r, "p0", Some(1)).default_ingress, 1);
    }

    #[test]
    fn a_lossless_frame_on_a_hop_without_a_rewrite_rule_never_stays_lossless() {
        let mut r = rig();
        r.rx(0, &data(1, 9, 0, 64));
        for p in 0..3 {
            r.tx(p);
        }
        // Port 2's tag 1 has a rule to port 3 only: to port 1 it falls to the default.
        r.rx(1, &data(2, 1, 1, 200));
        let waiting = r.stats();
        let group = |prio: usize| waiting.ports[1].priorities[prio].ingress_bytes;
        assert_eq!((group(3), group(0)), (0, 200), "charged to the lossy default, not to tag 1's priority");
        let lossy_sent = waiting.ports[0].priorities[0].counters.tx_frames;
        let out = r.tx(0);
        assert_eq!(parse_header(&out[0]).unwrap().dscp, Some(0));
        assert_eq!(r.stats().ports[0].priorities[0].counters.tx_frames, lossy_sent + 1, "and queued as lossy");
        let c = row(&r, "p1", Some(1));
        assert_eq!((c.classified, c.default_egress, c.rewritten), (1, 1, 0));
    }

    #[test]
    fn flooded_copies_each_carry_their_own_egress_tag() {
        let mut r = Rig::tagged(Rig::switch_ports(3), TABLE);
        r.rx(0, &data(1, 7, 2, 200));
        let (to2, to3) = (r.tx(1), r.tx(2));
        assert_eq!(parse_header(&to2[0]).unwrap().dscp, Some(1));
        assert_eq!(parse_header(&to3[0]).unwrap().dscp, Some(2));
        assert_eq!(r.pool.free_count(), POOL as usize);
    }

    #[test]
    fn a_vlan_tagged_frame_gets_the_egress_priority_in_its_pcp() {
        let mut r = rig();
        let f = udp_frame(mac(1), mac(2), 2, Some((100, 0)), &[0; 100]);
        r.rx(0, &f);
        let out = r.tx(1);
        let h = parse_header(&out[0]).unwrap();
        assert_eq!((h.pcp, h.dscp), (Some(3), Some(1)));
        assert!(checksum_ok(&out[0], h.ip.unwrap()));
        assert_eq!(u16::from_be_bytes([out[0][14], out[0][15]]) & 0x0fff, 100, "VLAN id kept");
        // Off the table: the default priority.
        r.rx(0, &udp_frame(mac(1), mac(2), 9, Some((100, 4)), &[0; 100]));
        let h = parse_header(&r.tx(1)[0]).unwrap();
        assert_eq!((h.pcp, h.dscp), (Some(0), Some(0)));
    }

    #[test]
    fn ipv6_frames_are_tagged_in_the_traffic_class() {
        let mut r = rig();
        let mut f = Vec::new();
        let ip = etherparse::Ipv6Header {
            traffic_class: 2 << 2 | 2,
            next_header: etherparse::IpNumber::UDP,
            hop_limit: 64,
            ..Default::default()
        };
        etherparse::PacketBuilder::ethernet2(mac(1).0, mac(2).0)
            .ip(etherparse::IpHeaders::Ipv6(ip, Default::default()))
            .udp(1, 2)
            .write(&mut f, &[0; 100])
            .unwrap();
        r.rx(0, &f);
        let out = r.tx(1);
        let v6 = etherparse::Ipv6HeaderSlice::from_slice(&out[0][14..]).unwrap();
        assert_eq!(v6.traffic_class(), 1 << 2 | 2, "tag 1, ECN kept");
    }

    /// Port 1 (index 0) congested with tag-2 frames (priority 4) that leave port 2 with
    /// tag 1 (priority 3), while port 2's partner pauses `paused` with its own message.
    fn congested_toward_a_pause(paused: Priorities) -> (Rig, CheckingMessage) {
        let mut c = Rig::switch_ports(3);
        c.buffer.xoff_bytes = Some(2_000);
        c.buffer.xon_offset_bytes = Some(1_000);
        let mut r = Rig::tagged(c, TABLE);
        r.rx(1, &data(2, 99, 0, 64));
        r.tx(0);
        r.tx(2);
        let theirs = CheckingMessage { origin_switch: 77, origin_port: 5, seq: 1, hops: 2, prios: paused };
        r.rx(1, &pfc_with(paused, 65535, Some(theirs)));
        for _ in 0..3 {
            r.rx(0, &data(1, 2, 2, 1000));
        }
        (r, theirs)
    }

    #[test]
    fn dcfit_follows_a_pause_only_through_the_queue_the_traffic_waits_in() {
        // Paused on the arriving tag's priority, which these frames no longer use at
        // port 2: the congestion at port 1 has a local cause, and its pause originates.
        let (mut r, _) = congested_toward_a_pause(Priorities::only(4));
        let m = pfc_of(&r.tx(0)[0]).checking.expect("a checking message");
        assert_eq!((m.origin_switch, m.hops), (my_id(&r), 0));
        let waiting = |r: &Rig| r.sw.groups_waiting_in(0, r.sw.xoff(0), 1, r.sw.paused(r.now, 1));
        assert_eq!(waiting(&r), Priorities::NONE);
        // Paused on the new tag's priority, the one they wait in: the pause is passed on.
        let (mut r, theirs) = congested_toward_a_pause(Priorities::only(3));
        assert_eq!(
            pfc_of(&r.tx(0)[0]).checking,
            Some(CheckingMessage { hops: 3, prios: Priorities::only(4), ..theirs })
        );
        assert_eq!(waiting(&r), Priorities::only(4), "group 4 waits in the paused queue 3");
    }

    #[test]
    fn an_own_message_back_through_another_prioritys_pauses_is_no_deadlock() {
        let (mut r, _) = congested_toward_a_pause(Priorities::only(4));
        let mine = pfc_of(&r.tx(0)[0]).checking.expect("originated");
        assert_eq!(mine.prios, Priorities::only(4), "it follows the pause of tag 2's priority");
        // Back, following priority 4's pauses, on port 2: port 1's frames wait in queue 3.
        r.rx(1, &pfc_with(Priorities::only(4), 65535, Some(CheckingMessage { hops: 3, ..mine })));
        let s = r.stats();
        assert_eq!((s.deadlocks_detected, s.ports[1].checks.stale_returns), (0, 1));
        // Back following priority 3's pauses, the queue they wait in: a cycle of buffers.
        r.rx(
            1,
            &pfc_with(
                Priorities::only(3),
                65535,
                Some(CheckingMessage { hops: 3, prios: Priorities::only(3), ..mine }),
            ),
        );
        assert_eq!(r.stats().deadlocks_detected, 1);
    }

    /// The middle switch of a ring under a Tagger table, seen from its ccw port (index 1):
    /// tag 2 (priority 4) goes on round the ring through cw (index 2), tag 1 (priority 3,
    /// demoted upstream) ends at the host (index 0).
    fn ring_middle() -> String {
        crate::tagging::tests::table_with(
            r#"
            [[ingress]]
            port = 2
            tag = 2
            priority = 4
            [[ingress]]
            port = 2
            tag = 1
            priority = 3
            [[rewrite]]
            ingress = 2
            tag = 2
            egress = 3
            new_tag = 2
            [[rewrite]]
            ingress = 2
            tag = 1
            egress = 1
            new_tag = 1
            "#,
        )
    }

    #[test]
    fn a_message_leaves_for_one_group_so_a_return_along_another_groups_chain_is_no_deadlock() {
        let mut c = Rig::switch_ports(3);
        c.buffer.xoff_bytes = Some(2_000);
        c.buffer.xon_offset_bytes = Some(1_000);
        let mut r = Rig::tagged(c, &ring_middle());
        // The host's station behind port 0, the next switch's behind port 2.
        r.rx(0, &data(10, 99, 0, 64));
        r.rx(2, &data(20, 99, 0, 64));
        for p in 0..3 {
            r.tx(p);
        }
        // Both of ccw's groups cross XOFF at once, each congested locally: one pause
        // frame stops both, and the message it carries is for one of them.
        for _ in 0..3 {
            r.rx(1, &data(1, 20, 2, 1000));
            r.rx(1, &data(1, 10, 1, 1000));
        }
        let first = pfc_of(&r.tx(1)[0]);
        assert_eq!(first.enabled, Priorities::only(3) | Priorities::only(4), "one frame pauses both groups");
        let mine = first.checking.expect("a local cause originates");
        assert_eq!(mine.prios, Priorities::only(3), "for one group: priority 3's traffic, which waits at the host");
        // It comes back at cw following priority 4's pauses: that is group 4's chain (the
        // ring demotes it to 3 two hops on), not the one group 3 waits behind. No cycle.
        r.rx(
            2,
            &pfc_with(
                Priorities::only(4),
                65535,
                Some(CheckingMessage { hops: 2, prios: Priorities::only(4), ..mine }),
            ),
        );
        let s = r.stats();
        assert_eq!((s.deadlocks_detected, s.ports[2].checks.stale_returns), (0, 1));
        // Group 4's own message, back along the same pauses, closes a cycle of buffers.
        let mut for4 = None;
        for _ in 0..4 {
            r.advance(Duration::from_millis(2));
            let sent = r.tx(1).iter().filter_map(|f| pfc::decode(f, MacAddr::ZERO).ok()).find_map(|f| match f.body {
                MacControl::Pfc(p) => p.checking,
                _ => None,
            });
            if let Some(m) = sent.filter(|m| m.origin_switch == my_id(&r) && m.prios == Priorities::only(4)) {
                for4 = Some(m);
                break;
            }
        }
        let for4 = for4.expect("group 4 gets its turn");
        r.rx(2, &pfc_with(Priorities::only(4), 65535, Some(CheckingMessage { hops: 2, ..for4 })));
        assert_eq!(r.stats().deadlocks_detected, 1);
    }

    #[test]
    fn frames_without_an_ip_header_take_the_default_priority() {
        let mut r = rig();
        let mut arp = data(1, 2, 0, 64);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        r.rx(0, &arp);
        assert_eq!(r.tx(1), vec![arp], "passed on unchanged");
        assert_eq!(row(&r, "p0", None).default_ingress, 1);
        assert_eq!(r.stats().ports[0].priorities[0].counters.rx_frames, 1);
    }
}

mod pfcwd {
    use super::*;
    use crate::pfcwd::{WatchdogAction, WatchdogEvent, WatchdogOverride};

    const MS: Duration = Duration::from_millis(1);

    fn rig(action: WatchdogAction) -> Rig {
        let mut c = Rig::switch_ports(2);
        c.pfcwd.action = action;
        Rig::new(c)
    }

    /// Five frames wait on p1 while its partner refreshes a pause on priority 3 every 2 ms
    /// until `until` after the first pause; returns when the pauses began.
    fn storm(r: &mut Rig, until: Duration) -> Time {
        r.rx(1, &pfc_with(Priorities::only(3), 65535, None));
        let start = r.now;
        for _ in 0..5 {
            r.rx(0, &data(1, 2, 3, 1000));
        }
        assert!(r.tx(1).is_empty(), "paused");
        while r.now + 2 * MS <= start + until {
            r.advance(2 * MS);
            r.rx(1, &pfc_with(Priorities::only(3), 65535, None));
        }
        start
    }

    fn watch(r: &Rig) -> crate::stats::WatchdogStats {
        *r.stats().ports[1].pfcwd.iter().find(|w| w.priority == 3).unwrap()
    }

    #[test]
    fn a_partner_keeping_a_priority_paused_with_frames_waiting_is_cut_off_at_the_detection_time() {
        let mut r = rig(WatchdogAction::Drop);
        let start = storm(&mut r, 198 * MS);
        // The detection deadline is part of the port's next wakeup.
        assert_eq!(r.sw.port_wakeup(r.now, 1), Some(start + 200 * MS));
        assert!(r.tx(1).is_empty());
        assert!(!watch(&r).active);
        r.advance(2 * MS);
        r.rx(1, &pfc_with(Priorities::only(3), 65535, None));
        assert!(r.tx(1).is_empty(), "dropped, not sent");
        let w = watch(&r);
        assert!(w.active);
        assert_eq!(
            (w.counters.storms_detected, w.counters.dropped_frames, w.counters.last_detection_us),
            (1, 5, 200_000)
        );
        assert_eq!(r.stats().ports[1].counters.drops.watchdog, 5);
        assert!(matches!(
            r.sw.poll_watchdog_event(),
            Some(WatchdogEvent::StormDetected { port: 1, prio: 3, stalled_since, action: WatchdogAction::Drop, .. })
                if stalled_since == start
        ));
        // Frames arriving for the stormed queue are dropped too; the ingress is not held.
        r.rx(0, &data(1, 2, 3, 1000));
        assert_eq!(watch(&r).counters.dropped_frames, 6);
        assert_eq!(r.stats().ports[0].priorities[3].ingress_bytes, 0);
        // Restored 200 ms after the last pause; then frames go out again.
        let last_pause = r.now;
        r.advance(199 * MS);
        assert_eq!(r.sw.port_wakeup(r.now, 1), Some(last_pause + 200 * MS));
        r.tx(1);
        assert!(watch(&r).active);
        r.advance(MS);
        r.tx(1);
        let w = watch(&r);
        assert!(!w.active && w.counters.restored == 1, "{w:?}");
        assert!(matches!(r.sw.poll_watchdog_event(), Some(WatchdogEvent::Restored { prio: 3, .. })));
        r.rx(0, &data(1, 2, 3, 1000));
        assert_eq!(r.tx(1).len(), 1);
    }

    #[test]
    fn with_forward_the_stormed_priority_is_sent_despite_the_pauses() {
        let mut r = rig(WatchdogAction::Forward);
        storm(&mut r, 200 * MS);
        r.rx(1, &pfc_with(Priorities::only(3), 65535, None));
        assert_eq!(r.tx(1).len(), 5, "the waiting frames go out");
        let w = watch(&r);
        assert!(w.active && w.counters.dropped_frames == 0, "{w:?}");
        assert_eq!(r.stats().ports[1].counters.drops.watchdog, 0);
    }

    #[test]
    fn with_alert_or_off_nothing_is_dropped_or_sent_and_off_counts_nothing() {
        for (action, detected) in [(WatchdogAction::Alert, 1), (WatchdogAction::Off, 0)] {
            let mut r = rig(action);
            storm(&mut r, 300 * MS);
            assert!(r.tx(1).is_empty(), "{action:?}: still paused");
            assert_eq!(watch(&r).counters.storms_detected, detected, "{action:?}");
            assert_eq!(r.stats().ports[1].queues_total(), 5, "{action:?}: nothing dropped");
        }
    }

    #[test]
    fn a_partner_that_resumes_in_time_is_congested_not_stormed() {
        let mut r = rig(WatchdogAction::Drop);
        // Paused 9 ms in every 10 for a second, with frames always waiting.
        for _ in 0..100 {
            r.rx(1, &pfc_with(Priorities::only(3), 65535, None));
            for _ in 0..5 {
                r.rx(0, &data(1, 2, 3, 1000));
            }
            r.advance(9 * MS);
            r.tx(1);
            r.rx(1, &pfc_with(Priorities::only(3), 0, None));
            r.tx_limited(1, 2);
            r.advance(MS);
        }
        assert_eq!(watch(&r).counters.storms_detected, 0);
        assert!(r.sw.poll_watchdog_event().is_none());
    }

    #[test]
    fn a_ports_override_turns_its_watchdog_off_and_lossy_priorities_are_never_watched() {
        let mut c = Rig::ports(2);
        c.ports[1].pfcwd = Some(WatchdogOverride { action: Some(WatchdogAction::Off), ..WatchdogOverride::default() });
        let mut r = Rig::new(c);
        storm(&mut r, 300 * MS);
        r.tx(1);
        assert_eq!(watch(&r).counters.storms_detected, 0);
        assert_eq!(watch(&r).action, WatchdogAction::Off);
        // Only lossless priorities have a watchdog.
        let prios: Vec<u8> = r.stats().ports[0].pfcwd.iter().map(|w| w.priority).collect();
        assert_eq!(prios, [3, 4]);
    }
}

// --- Frame slots: caps that keep the pool from running dry ---

#[test]
fn many_small_lossy_frames_stop_at_the_port_frame_cap_and_leave_the_pool_to_others() {
    let mut c = Rig::ports(3);
    c.buffer.lossy_port_frames = Some(100);
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 9, 0, 64));
    r.rx(2, &data(3, 9, 0, 64));
    r.tx(0);
    r.tx(2);
    r.tx(1);
    // Port 1's partner stops priority 0 for good: 64-byte frames pile up far below
    // any byte limit.
    r.rx(1, &pfc_with(Priorities::only(0), 65535, None));
    for _ in 0..300 {
        r.rx(0, &data(1, 2, 0, 64));
    }
    let s = r.stats();
    assert_eq!(s.ports[1].priorities[0].egress_queue_frames, 100, "the cap, not the bytes, stopped them");
    assert_eq!(s.ports[0].counters.drops.frame_cap, 200);
    assert_eq!(s.ports[0].priorities[0].counters.lossy_drops, 200);
    assert_eq!(r.pool.free_count(), POOL as usize - 100, "only the capped frames are held");
    // The other ports still forward.
    r.rx(0, &data(1, 3, 0, 64));
    assert_eq!(r.tx(2).len(), 1);
}

#[test]
fn frames_for_a_port_blocked_for_ever_stop_at_the_slowpath_cap_and_release_their_buffer() {
    let mut c = Rig::ports(2);
    c.buffer.slowpath_frames = Some(50);
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 9, 0, 64));
    r.tx(0);
    r.sw.set_blocked(1, true);
    for _ in 0..80 {
        r.rx(0, &data(1, 2, 0, 64));
    }
    let (held, _) = r.outbox();
    assert_eq!(held.len(), 50);
    let s = r.stats();
    assert_eq!(s.ports[0].counters.drops.frame_cap, 30);
    assert_eq!(s.ports[1].held_by_slowpath, 50);
    assert_eq!(s.ports[0].priorities[0].ingress_bytes, 50 * 64, "the dropped frames' buffer is released");
    assert_eq!(r.pool.free_count(), POOL as usize - 50);
}

#[test]
fn a_held_frame_the_slowpath_refused_gives_back_its_slot_its_charge_and_its_mark() {
    let (mut r, _) = congested(true);
    r.sw.set_blocked(1, true);
    let free_before = r.pool.free_count();
    for n in 0..60 {
        r.rx(0, &numbered(1, 2, 3, n));
    }
    assert!(r.stats().ports[0].priorities[3].xoff, "the held frames paused the upstream");
    assert_eq!(r.sw.traffic_map_row(0), 0b10);
    let (held, _) = r.outbox();
    // The channel to the slowpath was full: every event comes back to the engine.
    for h in held {
        r.sw.slowpath_refused(&mut r.pool, ToSlowpath::Held(h));
    }
    assert_eq!(r.pool.free_count(), free_before, "no frame leaked");
    let s = r.stats();
    assert_eq!(s.ports[0].counters.drops.slowpath_refused, 60);
    assert_eq!(s.ports[0].priorities[3].ingress_bytes, 0, "no buffer stays charged");
    assert!(!s.ports[0].priorities[3].xoff, "and the upstream is resumed");
    assert_eq!(s.ports[1].held_by_slowpath, 0);
    assert_eq!(r.sw.traffic_map_row(0), 0, "no pair stays marked");
    r.sw.set_blocked(1, false);
    r.outbox();
    r.rx(0, &numbered(1, 2, 3, 99));
    let sent: Vec<u8> = r.tx(1).iter().map(|f| f[199]).collect();
    assert_eq!(sent, vec![99], "nothing stale is left in front of new frames");
}

#[test]
fn flood_copies_leave_the_pause_reserve_in_the_pool() {
    let mut r = Rig::new(Rig::ports(4));
    let mut taken = Vec::new();
    while r.pool.free_count() > crate::switch::PAUSE_RESERVE + 2 {
        taken.push(r.pool.alloc().unwrap());
    }
    // The frame received takes one: with PAUSE_RESERVE + 1 free, one copy may be made, not two.
    r.rx(0, &data(1, 9, 0, 64));
    assert_eq!(r.pool.free_count(), crate::switch::PAUSE_RESERVE, "the copies stopped at the reserve");
    assert_eq!(r.stats().ports[0].counters.drops.no_buffer, 1);
    for id in taken {
        r.pool.free(id);
    }
}

#[test]
fn a_full_fdb_and_unknown_unicast_floods_are_counted() {
    let mut c = Rig::ports(3);
    c.fdb.max_entries = 2;
    let mut r = Rig::new(c);
    for src in 1..=4 {
        r.rx(0, &data(src, 99, 0, 64));
    }
    r.rx(0, &udp_frame(mac(1), MacAddr::BROADCAST, 0, None, b"hello"));
    for p in 1..3 {
        assert_eq!(r.tx(p).len(), 5, "everything still floods");
    }
    let s = r.stats();
    assert_eq!(s.fdb_entries, 2);
    assert_eq!(s.ports[0].counters.fdb_full, 2, "sources 3 and 4 were not learned");
    assert_eq!(s.ports[0].counters.unknown_unicast_flooded, 4, "the broadcast is not unknown unicast");
}

// --- Links that go down, and interfaces that go away ---

#[test]
fn a_port_whose_link_goes_down_forgets_its_stations_drops_its_queues_and_resumes_its_senders() {
    let (mut r, frame) = congested(true);
    r.rx(1, &pfc_with(Priorities::only(3), 65535, None));
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    assert!(r.stats().ports[0].priorities[3].xoff, "p1 is paused and p0's traffic waits behind it");
    r.tx(0);
    let queued = r.stats().ports[1].queues_total();
    r.sw.set_link(&mut r.pool, 1, false);
    let s = r.stats();
    assert!(!s.ports[1].link_up);
    assert_eq!(s.ports[1].counters.link_downs, 1);
    assert_eq!(s.ports[1].counters.drops.link_down, queued);
    assert_eq!(s.ports[1].queues_total(), 0);
    assert_eq!(s.fdb_entries, 1, "host 2 was learned on p1 and is forgotten, host 1 stays");
    assert!(r.sw.fdb().rows(r.now).iter().all(|row| row.port != 1));
    assert_eq!(s.ports[0].priorities[3].ingress_bytes, 0);
    assert!(!s.ports[0].priorities[3].xoff, "p0's sender is resumed");
    assert_eq!(pfc_of(&r.tx(0)[0]).quanta[3], 0);
    assert_eq!(r.pool.free_count(), POOL as usize);
    // While it is down nothing is queued for it or sent on it, and the loop has no
    // reason to wake for it.
    r.rx(0, &frame);
    r.rx(0, &data(1, 77, 0, 64));
    assert!(r.tx(1).is_empty());
    assert_eq!(r.sw.port_wakeup(r.now, 1), None);
    let s = r.stats();
    assert_eq!(s.ports[0].counters.drops.filtered, 2, "unknown now, and nowhere else to flood");
    assert_eq!(s.ports[1].counters.drops.link_down, queued);
    // Up again: it carries traffic again (and relearns).
    r.sw.set_link(&mut r.pool, 1, true);
    r.rx(1, &data(2, 99, 0, 64));
    r.rx(0, &frame);
    assert_eq!(r.tx(1).len(), 1);
    assert_eq!(r.stats().ports[1].counters.link_downs, 1);
}

#[test]
fn frames_the_slowpath_gives_back_for_a_port_that_went_down_are_dropped_not_sent() {
    let (mut r, _) = congested(true);
    r.sw.set_blocked(1, true);
    for n in 0..5 {
        r.rx(0, &numbered(1, 2, 3, n));
    }
    let (held, _) = r.outbox();
    r.sw.set_link(&mut r.pool, 1, false);
    r.sw.set_blocked(1, false);
    let mut slow = Slowpath::new("sw", vec!["p0".into(), "p1".into()], 64);
    for h in held {
        slow.handle_event(ToSlowpath::Held(h));
    }
    for rel in slow.release(|_| Priorities::NONE).to_vec() {
        r.sw.reinject(r.now, &mut r.pool, rel);
    }
    assert_eq!(r.stats().ports[1].counters.drops.link_down, 5);
    assert_eq!(r.sw.traffic_map_row(0), 0);
    assert_eq!(r.pool.free_count(), POOL as usize);
}
