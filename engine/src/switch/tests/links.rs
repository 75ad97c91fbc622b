//! Links that go down, and interfaces that go away.

use super::*;

#[test]
fn a_port_whose_link_goes_down_forgets_its_stations_drops_its_queues_and_resumes_its_senders() {
    let (mut r, frame) = congested(true);
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, None));
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    assert!(r.stats().ports[0].priorities[3].xoff, "p1 is paused and p0's traffic waits behind it");
    r.tx(0);
    let queued = r.stats().ports[1].queues_total();
    r.sw.set_link(&mut r.pool, PortId::new(1), false);
    let s = r.stats();
    assert!(!s.ports[1].link_up);
    assert_eq!(s.ports[1].counters.link_downs, 1);
    assert_eq!(s.ports[1].counters.drops.link_down, queued);
    assert_eq!(s.ports[1].queues_total(), 0);
    assert_eq!(s.fdb_entries, 1, "host 2 was learned on p1 and is forgotten, host 1 stays");
    assert!(r.sw.fdb().rows(r.now).iter().all(|row| row.port != PortId::new(1)));
    assert_eq!(s.ports[0].priorities[3].ingress_bytes, 0);
    assert!(!s.ports[0].priorities[3].xoff, "p0's sender is resumed");
    assert_eq!(pfc_of(&r.tx(0)[0]).quanta[3], 0);
    assert_eq!(r.pool.free_count(), POOL as usize);
    // While it is down nothing is queued for it or sent on it, and the loop has no
    // reason to wake for it.
    r.rx(0, &frame);
    r.rx(0, &data(1, 77, 0, 64));
    assert!(r.tx(1).is_empty());
    assert_eq!(r.sw.poll_port_timeout(r.now, PortId::new(1)), None);
    let s = r.stats();
    assert_eq!(s.ports[0].counters.drops.filtered, 2, "unknown now, and nowhere else to flood");
    assert_eq!(s.ports[1].counters.drops.link_down, queued);
    // Up again: it carries traffic again (and relearns).
    r.sw.set_link(&mut r.pool, PortId::new(1), true);
    r.rx(1, &data(2, 99, 0, 64));
    r.rx(0, &frame);
    assert_eq!(r.tx(1).len(), 1);
    assert_eq!(r.stats().ports[1].counters.link_downs, 1);
}

#[test]
fn frames_the_slowpath_gives_back_for_a_port_that_went_down_are_dropped_not_sent() {
    let (mut r, _) = congested(true);
    r.sw.set_blocked(PortId::new(1), true);
    for n in 0..5 {
        r.rx(0, &numbered(1, 2, 3, n));
    }
    let (held, _) = r.outbox();
    r.sw.set_link(&mut r.pool, PortId::new(1), false);
    r.sw.set_blocked(PortId::new(1), false);
    let mut slow = Slowpath::new("sw", vec!["p0".into(), "p1".into()], 64);
    for h in held {
        slow.handle_event(ToSlowpath::Held(h));
    }
    for ev in r.outbox().1 {
        slow.handle_event(ev);
    }
    r.sw.handle_released(r.now, &mut r.pool, slow.poll_released(r.now, |_| Priorities::NONE).to_vec());
    assert_eq!(r.stats().ports[1].counters.drops.link_down, 5);
    assert_eq!(r.sw.traffic_map_row(PortId::new(0)), PortSet::EMPTY);
    assert_eq!(r.pool.free_count(), POOL as usize);
}
