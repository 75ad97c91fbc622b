//! The engine's receive path under arbitrary input: frames of any bytes on any port,
//! interleaved with transmit turns, time passing, ports blocked and unblocked, links
//! going down and up, and a slowpath that sometimes cannot take what is handed to it.
//! Frames larger than a pool buffer come in several, split as a driver may split them.
//! The script's first bytes pick the switch: pause modes per port (PFC, 802.3x, off),
//! strict or DRR scheduling with weights, a static or dynamic XOFF, a per-priority
//! profile, and a Tagger table whose rules come from the bytes.
//!
//! A forwarding oracle watches every data frame the script made (each carries a number):
//! no frame leaves through the port it came in on, no port sends a frame twice, and the
//! frames of one (ingress, egress, class) leave in the order they came. Afterwards
//! everything is let go, and every buffer must be back in the pool and every buffer byte
//! released.

use std::collections::HashMap;
use std::time::Duration;

use pfcswitch_core::checking::CheckingMessage;
use pfcswitch_core::config::{
    BufferProfile, Config, DeadlockResolution, Multipath, PauseMode, PortRole, Scheduler, StaticFdbGroup,
};
use pfcswitch_core::heap_pool::HeapPool as Pool;
use pfcswitch_core::loopback::Loopback;
use pfcswitch_core::mac::MacAddr;
use pfcswitch_core::pfc::{self, MacControl, Pfc};
use pfcswitch_core::ports::PortId;
use pfcswitch_core::priorities::Priorities;
use pfcswitch_core::slowpath::Slowpath;
use pfcswitch_core::speed::Speed;
use pfcswitch_core::switch::{FramePool, Switch, TxBatch};
use pfcswitch_core::tagging::TagTable;
use pfcswitch_core::time::Time;
use pfcswitch_core::{PortTimer, Priority};

const PORTS: usize = 4;
const FRAMES: u32 = 512;
/// Bytes a pool buffer holds: larger frames take several, as AF_XDP multi-buffer frames
/// do, so every path a frame takes also sees frames in several buffers.
const BUFFER: usize = 512;
/// Operations taken from one input at most.
const MAX_OPS: usize = 4096;

/// Reads the fuzzer's bytes as a script.
struct Script<'a> {
    data: &'a [u8],
}

impl Script<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.data.split_first()?;
        self.data = rest;
        Some(b)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes([self.byte()?, self.byte()?]))
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let (taken, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        taken
    }
}

/// A small switch with everything on that a frame can reach: two host and two switch
/// ports, small buffers and frame caps (so XOFF, drops and caps all happen), DCFIT with
/// the drop resolution, and a quick PFC watchdog; then what `variant` picks.
fn config(variant: &[u8]) -> Config {
    let mut c = Config::for_interfaces(&["h0", "h1", "s2", "s3"]);
    for (i, p) in c.ports.iter_mut().enumerate() {
        p.mac = Some(MacAddr([0x02, 0xee, 0, 0, 0, i as u8]));
        p.speed = Some(if i == 1 { Speed::gbps(1) } else { Speed::gbps(10) });
        if i >= 2 {
            p.role = PortRole::Switch;
        }
    }
    c.buffer.xoff_bytes = Some(8_000);
    c.buffer.xon_offset_bytes = Some(3_000);
    c.buffer.headroom_bytes = 6_000;
    c.buffer.lossy_queue_bytes = Some(20_000);
    c.buffer.lossy_port_frames = Some(48);
    c.buffer.slowpath_frames = Some(64);
    c.dcfit.resolution = DeadlockResolution::Drop;
    c.dcfit.drop_ms = 5;
    c.pfcwd.detection_ms = 20;
    c.pfcwd.restoration_ms = 20;
    c.fdb.max_entries = 8;
    let v = |i: usize| variant.get(i).copied().unwrap_or(0);
    for (i, p) in c.ports.iter_mut().enumerate() {
        p.pause_mode = match (v(0) >> (2 * i)) & 3 {
            1 => PauseMode::GlobalPause,
            2 => PauseMode::Off,
            _ => PauseMode::Pfc,
        };
        if v(1) & (1 << i) != 0 {
            // Weights from the bytes; 0 keeps a queue strict.
            p.scheduler = Scheduler::Drr { weights: std::array::from_fn(|q| u32::from(v(2 + q) % 5) * 100) };
        }
    }
    if v(1) & 0x10 != 0 {
        c.buffer.xoff_bytes = None;
        c.buffer.xoff_alpha = Some(f64::from(v(10) % 8 + 1) / 8.0);
    }
    if v(1) & 0x20 != 0 {
        let xoff = 2_000 + u64::from(v(11)) * 20;
        let profile = BufferProfile {
            xoff_bytes: Some(xoff),
            xon_offset_bytes: Some(xoff / 4),
            headroom_bytes: Some(3_000 + u64::from(v(12)) * 20),
            ..BufferProfile::default()
        };
        c.buffer.priority.insert(Priority::new(4), profile);
    }
    if v(1) & 0x40 != 0 {
        c.buffer.lossless_frames = Some(u32::from(v(13)) + 8);
    }
    if v(14) & 1 != 0 {
        // Station 5 behind both switch ports: a multipath entry, by flow, by queue or by
        // flowlet (of a gap of up to 63 µs).
        c.fdb_groups
            .push(StaticFdbGroup { mac: MacAddr([0x02, 0, 0, 0, 0, 5]), ports: vec!["s2".into(), "s3".into()] });
        c.fdb.multipath =
            [Multipath::Hash, Multipath::Adaptive, Multipath::Flowlet, Multipath::Flowlet][usize::from(v(14) >> 1 & 3)];
        c.fdb.flowlet_gap_us = u64::from(v(14) >> 2);
    }
    c.validate().expect("the fuzz configuration is valid");
    c
}

/// Bytes of the script that pick the switch (see [`config`] and [`tagger`]).
const VARIANT: usize = 16;

/// A Tagger table for the four ports from the bytes, when `variant` asks for one, applied
/// to `config` as `pfcswitch run` applies one: hosts stamp tag 1, ingress rules give tags
/// 1 and 2 priorities 3 and 4, and rewrites per (ingress, tag, egress) move frames between
/// them.
fn tagger(variant: &[u8], config: &mut Config) -> Option<TagTable> {
    let v = |i: usize| variant.get(i).copied().unwrap_or(0);
    if v(1) & 0x80 == 0 {
        return None;
    }
    let mut text = String::from(
        "switch = \"fuzz\"\nalgorithm = \"greedy\"\nlossless_tags = 2\ninitial_tag = 1\npriorities = [3, 4]\n\
         [default]\ntag = 0\npriority = 0\n",
    );
    for port in 0..PORTS {
        for tag in 1..=2u8 {
            if v(14) & (1 << (port * 2 + usize::from(tag) - 1)) != 0 {
                // Tagger numbers ports from 1.
                text += &format!("[[ingress]]\nport = {}\ntag = {tag}\npriority = {}\n", port + 1, 2 + tag);
            }
        }
    }
    let mut ruled = std::collections::HashSet::new();
    for (k, &b) in variant[VARIANT.min(variant.len())..].iter().take(8).enumerate() {
        let (ingress, egress) = (k % PORTS, usize::from(b) % PORTS);
        let (tag, new_tag) = (1 + (b >> 4 & 1), 1 + (b >> 5 & 1));
        if ingress != egress && ruled.insert((ingress, tag, egress)) {
            text += &format!(
                "[[rewrite]]\ningress = {}\ntag = {tag}\negress = {}\nnew_tag = {new_tag}\n",
                ingress + 1,
                egress + 1
            );
        }
    }
    let tables = tagger::system::parse_table("fuzz", &text, false).ok()?;
    TagTable::apply(config, &tables, "fuzz", true).ok()
}

/// The end of every data frame the script makes: a mark, then the frame's number.
const MARK: [u8; 2] = [0xfe, 0xed];

/// What the oracle knows of the data frames the script made.
#[derive(Default)]
struct Oracle {
    /// Number → (ingress port, class byte).
    sent: Vec<(usize, u8)>,
    /// (frame number, egress port) pairs seen.
    left: std::collections::HashSet<(u32, usize)>,
    /// (ingress, egress, class) → the last number that left.
    last: HashMap<(usize, usize, u8), u32>,
}

impl Oracle {
    /// Marks `frame` with the next number, made for `ingress` with `class`.
    fn mark(&mut self, frame: &mut [u8], ingress: usize, class: u8) {
        let n = self.sent.len() as u32;
        let at = frame.len() - 6;
        frame[at..at + 2].copy_from_slice(&MARK);
        frame[at + 2..].copy_from_slice(&n.to_be_bytes());
        self.sent.push((ingress, class));
    }

    /// A frame left `egress`: checks it against the rules.
    fn left(&mut self, frame: &[u8], egress: usize) {
        let Some(tail) = frame.len().checked_sub(6).map(|at| &frame[at..]) else { return };
        if tail[..2] != MARK {
            return;
        }
        let n = u32::from_be_bytes([tail[2], tail[3], tail[4], tail[5]]);
        let Some(&(ingress, class)) = self.sent.get(n as usize) else { return };
        assert_ne!(ingress, egress, "frame {n} left through the port it came in on");
        assert!(self.left.insert((n, egress)), "frame {n} left port {egress} twice");
        if let Some(before) = self.last.insert((ingress, egress, class), n) {
            assert!(before < n, "frame {n} overtook frame {before} from port {ingress} to {egress}, class {class:#x}");
        }
    }
}

/// Script bytes that look like a marked frame are unmarked: only the oracle's own marks count.
fn unmark(frame: &mut [u8]) {
    if let Some(at) = frame.len().checked_sub(6) {
        if frame[at..at + 2] == MARK {
            frame[at] ^= 1;
        }
    }
}

/// A frame from a few script bytes: addresses from small sets (so learning, flooding and
/// forwarding all happen), a DSCP or VLAN priority, a length; returned with its class byte.
fn data_frame(s: &mut Script) -> (Vec<u8>, u8) {
    let (dst, src, class, len) = (s.byte().unwrap_or(0), s.byte().unwrap_or(0), s.byte().unwrap_or(0), s.byte());
    let mac = |n: u8| match n % 8 {
        7 => MacAddr::BROADCAST,
        6 => MacAddr([0x01, 0x80, 0xc2, 0, 0, n / 8 % 16]),
        k => MacAddr([0x02, 0, 0, 0, 0, k]),
    };
    let mut f = Vec::with_capacity(1600);
    f.extend_from_slice(&mac(dst).0);
    f.extend_from_slice(&mac(src).0);
    if class & 0x80 != 0 {
        f.extend_from_slice(&[0x81, 0x00, (class & 7) << 5, 1]);
    }
    f.extend_from_slice(&[0x08, 0x00, 0x45, (class & 0x3f) << 2]);
    let len = usize::from(len.unwrap_or(0)) * 6 + 60;
    f.resize(len, 0xab);
    (f, class)
}

fn pfc_frame(s: &mut Script) -> Vec<u8> {
    let enabled = s.byte().unwrap_or(0);
    let quanta = s.u16().unwrap_or(0);
    let mut p = Pfc::pause(Priorities::from_bits(enabled), quanta);
    if s.byte().unwrap_or(0) & 1 == 1 {
        let b = s.bytes(6).to_vec();
        let at = |i: usize| b.get(i).copied().unwrap_or(0);
        p.checking = Some(CheckingMessage {
            origin_switch: u32::from(at(0)),
            origin_port: u16::from(at(1) % 6),
            seq: u32::from(at(2)),
            hops: u16::from(at(3)),
            prios: Priorities::from_bits(at(4)),
        });
    }
    let mut b = vec![0u8; pfc::MIN_FRAME_LEN];
    pfc::encode(&mut b, MacAddr([0x02, 0, 0, 0, 0, 9]), &MacControl::Pfc(p));
    b
}

/// Runs one script; panics if the engine lost a frame or freed one twice.
pub fn run(data: &[u8]) {
    let variant = &data[..data.len().min(VARIANT + 8)];
    let mut config = config(variant);
    let tags = tagger(variant, &mut config);
    let mut now = Time::from_millis(1000);
    let mut sw = Switch::new(&config, tags, pfcswitch_core::PoolSize::without_rings(FRAMES), now);
    let mut oracle = Oracle::default();
    let slow = Slowpath::new("fuzz", sw.port_names(), FRAMES as usize);
    // Every operation ends with a turn (`Switch::poll`): frames put on a ring are
    // received then, and only the port an operation transmits on has room.
    let mut rings = Loopback::new(PORTS, None, Some(slow));
    let mut pool = Pool::with_buffer_size(FRAMES, BUFFER);
    let mut batch = TxBatch::new();
    let mut s = Script { data };
    for _ in 0..MAX_OPS {
        let Some(op) = s.byte() else { break };
        let port = usize::from(op >> 4) % PORTS;
        rings.set_room_everywhere(None);
        match op % 8 {
            0 => {
                // Handed in as it arrives, outside a turn, on a port up or down.
                let len = usize::from(s.byte().unwrap_or(0)) * 8;
                let mut raw = s.bytes(len).to_vec();
                unmark(&mut raw);
                if let Some(id) = pool.put(&raw) {
                    sw.handle_frame(now, &mut pool, PortId::new(port), id);
                }
            }
            1 => {
                let (mut f, class) = data_frame(&mut s);
                oracle.mark(&mut f, port, class);
                if let Some(id) = pool.put(&f) {
                    rings.receive_on(PortId::new(port), id);
                }
            }
            2 => {
                // A driver may split a frame anywhere after its first buffer's headers.
                let (mut f, class) = data_frame(&mut s);
                oracle.mark(&mut f, port, class);
                let mut pieces: Vec<&[u8]> = Vec::new();
                let mut rest = &f[..];
                while !rest.is_empty() {
                    let min = if pieces.is_empty() { 64 } else { 1 };
                    let take = (usize::from(s.byte().unwrap_or(255)) * 4).clamp(min, BUFFER).min(rest.len());
                    let (piece, tail) = rest.split_at(take);
                    pieces.push(piece);
                    rest = tail;
                }
                if let Some(id) = pool.put_pieces(&pieces) {
                    rings.receive_on(PortId::new(port), id);
                }
            }
            3 => {
                let f = pfc_frame(&mut s);
                if let Some(id) = pool.put(&f) {
                    rings.receive_on(PortId::new(port), id);
                }
            }
            4 => rings.set_room(PortId::new(port), Some(usize::from(s.byte().unwrap_or(1)) % 64 + 1)),
            5 => {
                now = now + Duration::from_micros(u64::from(s.u16().unwrap_or(0)));
                sw.handle_timeout(now, &mut pool);
                timers_ran(&sw, now);
            }
            6 => {
                let blocked = sw.is_blocked(PortId::new(port));
                sw.set_blocked(PortId::new(port), !blocked);
            }
            _ => {
                let b = s.byte().unwrap_or(0);
                rings.refuse_held(b & 1 == 1);
                if b & 2 != 0 {
                    let up = sw.link_up(PortId::new(port));
                    sw.set_link(&mut pool, PortId::new(port), !up);
                }
            }
        }
        turn(&mut sw, &mut rings, &mut pool, &mut batch, &mut oracle, now);
    }
    // Let everything go: unblocked ports with their links up, time for every pause and
    // drop window to end.
    for port in 0..PORTS {
        sw.set_blocked(PortId::new(port), false);
        sw.set_link(&mut pool, PortId::new(port), true);
    }
    rings.refuse_held(false);
    rings.set_room_everywhere(Some(TxBatch::CAPACITY));
    let held = |rings: &Loopback| rings.slowpath().map_or(0, Slowpath::held);
    for _ in 0..2000 {
        turn(&mut sw, &mut rings, &mut pool, &mut batch, &mut oracle, now);
        if sw.queued_frames() == 0 && held(&rings) == 0 {
            break;
        }
        now = now + Duration::from_millis(5);
    }
    let stats = sw.stats(now);
    assert_eq!((sw.queued_frames(), held(&rings)), (0, 0), "frames stuck after everything was let go");
    assert_eq!(pool.free_count(), pool.capacity(), "frames leaked");
    assert_eq!(stats.shared_buffer_used, 0, "buffer still charged with every frame gone");
    for p in &stats.ports {
        for q in &p.priorities {
            assert_eq!(q.ingress_bytes, 0, "{} prio {}: bytes still charged", p.name, q.priority);
        }
    }
}

/// After [`Switch::handle_timeout`], what its timers owed is done: no drop window owes
/// frames, and a refresh that fell due is a pause owed to the partner (it leaves with
/// the port's next transmit).
fn timers_ran(sw: &Switch, now: Time) {
    for port in PortId::all(PORTS) {
        let table = sw.port_timers(now, port);
        assert_eq!(table.get(PortTimer::DropWindow), None, "port {port}: queued frames a drop window owes");
        if table.get(PortTimer::XoffRefresh).is_some_and(|at| at <= now) {
            assert_eq!(table.get(PortTimer::ControlOwed), Some(now), "port {port}: a refresh fell due, no pause owed");
        }
    }
}

/// One turn ([`Switch::poll`]); what the ports sent is shown to the oracle, and the
/// frames go back to the pool as the wire took them.
fn turn(sw: &mut Switch, rings: &mut Loopback, pool: &mut Pool, batch: &mut TxBatch, oracle: &mut Oracle, now: Time) {
    sw.poll(now, pool, rings, batch);
    for (port, f) in rings.take_sent() {
        assert_eq!(pool.len(f.id), f.len as usize, "a frame's length is what the batch says");
        oracle.left(&pool.contents(f.id), port.index());
        pool.free(f.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bytes_pick_pause_modes_schedulers_thresholds_and_a_tagger_table() {
        let seed =
            std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus/engine_rx/tagger_drr_global")).unwrap();
        let variant = &seed[..VARIANT + 8];
        let mut c = config(variant);
        let modes: Vec<PauseMode> = c.ports.iter().map(|p| p.pause_mode).collect();
        assert_eq!(modes, [PauseMode::GlobalPause, PauseMode::Pfc, PauseMode::GlobalPause, PauseMode::Pfc]);
        assert!(c.ports.iter().all(|p| matches!(p.scheduler, Scheduler::Drr { .. })));
        assert!(c.buffer.xoff_alpha.is_some() && c.buffer.priority.get(Priority::new(4)).is_some());
        assert_eq!(c.buffer.lossless_frames, Some(38));
        let t = tagger(variant, &mut c).expect("a table from these bytes compiles");
        assert_eq!(t.ingress(PortId::new(0), 1), Some(Priority::new(3)), "the first port's tag 1 is priority 3");
        assert_eq!(c.pfc.lossless.as_deref(), Some(&[Priority::new(3), Priority::new(4)][..]));
    }
}
