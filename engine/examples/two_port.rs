//! A two-port switch driven by hand, without a network: frames put on its ports' rings,
//! one turn of the engine at a time (`Switch::poll`), time passed in.
//!
//! Station A (on port 0) sends to station B before the switch knows where B is: the
//! frame is flooded. B answers, so the switch learns B on port 1; A's next frame goes to
//! port 1 alone. Run with `cargo run -p pfcswitch-core --example two_port`.

use std::time::Duration;

#[path = "common/frames.rs"]
mod frames;
#[path = "common/wire.rs"]
mod wire;

use frames::udp;
use pfcswitch_core::heap_pool::HeapPool;
use pfcswitch_core::{Config, MacAddr, PoolSize, Switch, Time, TxBatch};
use wire::Wire;

const A: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0xa]);
const B: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0xb]);

/// One turn; what the ports sent, as (port, destination MAC) pairs.
fn turn(
    sw: &mut Switch,
    pool: &mut HeapPool,
    wire: &mut Wire,
    now: Time,
    batch: &mut TxBatch,
) -> Vec<(usize, MacAddr)> {
    sw.poll(now, pool, wire, batch);
    wire.take_sent().into_iter().map(|(port, bytes)| (port, MacAddr(bytes[0..6].try_into().unwrap()))).collect()
}

pub fn main() {
    let config = Config::for_interfaces(&["p0", "p1"]);
    let mut now = Time::from_millis(1);
    let mut sw = Switch::new(&config, None, PoolSize::without_rings(256), now);
    let mut pool = HeapPool::new(256);
    let mut wire = Wire::new(2);
    let mut batch = TxBatch::new();

    // A to B, B unknown: flooded to every other port (here, port 1 only, but as a flood).
    wire.arrive(&mut pool, 0, &udp(A, B, 0, 18));
    let first = turn(&mut sw, &mut pool, &mut wire, now, &mut batch);
    println!("A -> B before B spoke: {first:?}");
    assert_eq!(first, [(1, B)]);

    // B answers from port 1: now the switch knows both.
    now = now + Duration::from_micros(10);
    wire.arrive(&mut pool, 1, &udp(B, A, 0, 18));
    let answer = turn(&mut sw, &mut pool, &mut wire, now, &mut batch);
    println!("B -> A: {answer:?}");
    assert_eq!(answer, [(0, A)]);

    let stats = sw.stats(now);
    let (p0, p1) = (&stats.ports[0].counters, &stats.ports[1].counters);
    println!("port 0: {} in, {} out; port 1: {} in, {} out", p0.rx_frames, p0.tx_frames, p1.rx_frames, p1.tx_frames);
    assert_eq!((p0.rx_frames, p0.tx_frames, p1.rx_frames, p1.tx_frames), (1, 1, 1, 1));
    assert_eq!(pool.free_count(), 256, "every frame came back to the pool");
}
