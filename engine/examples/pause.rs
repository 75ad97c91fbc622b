//! A PFC pause obeyed, without a network: the engine holds a paused priority's frames
//! in its queue, lets the other priorities pass, says when the pause ends
//! (`poll_timeout`), and sends the held frames at the first turn (`poll`) after it.
//!
//! Run with `cargo run -p pfcswitch-core --example pause`.

use std::time::Duration;

#[path = "common/frames.rs"]
mod frames;
#[path = "common/wire.rs"]
mod wire;

use frames::udp;
use pfcswitch_core::heap_pool::HeapPool;
use pfcswitch_core::pfc::{self, MacControl, Pfc};
use pfcswitch_core::{Config, MacAddr, PoolSize, Priorities, Priority, Speed, Switch, Time, TxBatch};
use wire::Wire;

const A: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0xa]);
const B: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0xb]);

/// One turn at `now`; the DSCP of each frame `port` sent.
fn sent_on(sw: &mut Switch, pool: &mut HeapPool, wire: &mut Wire, now: Time, port: usize) -> Vec<u8> {
    sw.poll(now, pool, wire, &mut TxBatch::new());
    wire.take_sent().into_iter().filter(|(p, _)| *p == port).map(|(_, bytes)| bytes[15] >> 2).collect()
}

pub fn main() {
    let mut config = Config::for_interfaces(&["p0", "p1"]);
    for p in &mut config.ports {
        p.speed = Some(Speed::gbps(10));
    }
    let start = Time::from_millis(1);
    let mut sw = Switch::new(&config, None, PoolSize::without_rings(256), start);
    let mut pool = HeapPool::new(256);
    let mut wire = Wire::new(2);

    // B speaks first, so the switch knows it is behind port 1; then B's NIC pauses
    // priority 3 for the longest a PFC frame can: 65535 quanta, 3.355 ms at 10G.
    wire.arrive(&mut pool, 1, &udp(B, A, 0, 100));
    assert_eq!(sent_on(&mut sw, &mut pool, &mut wire, start, 0), [0], "flooded to A's port: A is not known yet");
    let mut xoff = vec![0u8; pfc::MIN_FRAME_LEN];
    pfc::encode(&mut xoff, B, &MacControl::Pfc(Pfc::pause(Priorities::only(Priority::new(3)), u16::MAX)));
    wire.arrive(&mut pool, 1, &xoff);
    assert!(sent_on(&mut sw, &mut pool, &mut wire, start, 1).is_empty(), "the pause is taken at this turn");

    // A sends three frames on priority 3 and one on priority 0.
    let now = start + Duration::from_micros(5);
    for dscp in [3, 3, 0, 3] {
        wire.arrive(&mut pool, 0, &udp(A, B, dscp, 100));
    }
    let first = sent_on(&mut sw, &mut pool, &mut wire, now, 1);
    println!("while paused, port 1 sends DSCP {first:?}");
    assert_eq!(first, [0], "priority 0 passes; priority 3 waits in its queue");

    // The engine says when it next has something to do: the pause's end.
    let wake = sw.poll_timeout(now);
    let paused_for = wake.saturating_since(start);
    println!("the pause ends {:.1} µs after it arrived", paused_for.as_secs_f64() * 1e6);
    assert_eq!(paused_for, Speed::gbps(10).quanta_duration(u16::MAX));
    assert!(sent_on(&mut sw, &mut pool, &mut wire, wake - Duration::from_nanos(1), 1).is_empty(), "not a ns early");

    let after = sent_on(&mut sw, &mut pool, &mut wire, wake, 1);
    println!("at its end, port 1 sends DSCP {after:?}");
    assert_eq!(after, [3, 3, 3], "the held frames, in order");
    let p3 = &sw.stats(wake).ports[1].priorities[3];
    println!("port 1, priority 3: {} XOFF received, paused {} µs", p3.counters.xoff_received, p3.paused_us);
}
