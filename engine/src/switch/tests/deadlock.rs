//! Blocked ports, the slowpath hand-off and DCFIT.

use super::*;

#[test]
fn blocked_port_sends_frames_to_the_slowpath_and_unblocking_releases_them_in_order() {
    let (mut r, _) = congested_between_switches();
    r.sw.set_blocked(PortId::new(1), true);
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
    assert_eq!(r.sw.traffic_map_row(PortId::new(0)), PortSet::only(PortId::new(1)), "the pair (p0, p1) is marked");
    let sent = r.tx(0);
    assert_eq!(pfc_of(&sent[0]).quanta[3], 65535);

    // The slowpath holds them while the port is blocked, and gives everything back once
    // it is unblocked.
    let mut slow = Slowpath::new("sw", vec!["p0".into(), "p1".into()], 64);
    for h in held {
        slow.handle_event(ToSlowpath::Held(h));
    }
    assert!(slow.poll_released(r.now, |e| r.sw.stopped(r.now, e)).is_empty());
    let look = slow.poll_timeout().expect("frames held: a look is due");
    slow.handle_timeout(look);
    assert!(slow.poll_released(look, |e| r.sw.stopped(r.now, e)).is_empty(), "looked at: still blocked");
    r.sw.set_blocked(PortId::new(1), false);
    let (_, events) = r.outbox();
    assert_eq!(events, vec![ToSlowpath::Unblocked { port: PortId::new(1) }]);
    for ev in events {
        slow.handle_event(ev);
    }
    let out = slow.poll_released(r.now, |e| r.sw.stopped(r.now, e)).to_vec();
    assert_eq!(out.len(), 60, "the unblock releases at once, with no look due");
    r.sw.handle_released(r.now, &mut r.pool, out);
    let mut got = Vec::new();
    for _ in 0..20 {
        got.extend(r.tx(1).into_iter().map(|f| f[199]));
        r.advance(Duration::from_micros(50));
    }
    assert_eq!(got, (0..60).collect::<Vec<u8>>(), "every held frame, in order, once");
    assert_eq!(r.sw.traffic_map_row(PortId::new(0)), PortSet::EMPTY, "the last frame of the pair cleared the map");
    assert!(!r.stats().ports[0].priorities[3].xoff, "the upstream was resumed");
}

#[test]
fn paused_takes_precedence_over_blocked_but_never_lets_a_frame_overtake() {
    let mut r = Rig::new(Rig::switch_ports(2));
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r.sw.set_blocked(PortId::new(1), true);
    // Priority 3 paused at p1: queued as usual, not handed to the slowpath.
    r.rx(1, &pfc_frame(Priorities::only(P3), 65535));
    r.rx(0, &numbered(1, 2, 3, 1));
    assert!(r.outbox().0.is_empty());
    // Priority 4 is not paused: the slowpath takes it.
    r.rx(0, &numbered(1, 2, 4, 2));
    assert_eq!(r.outbox().0.len(), 1);
    // Priority 4 gets paused while the slowpath still holds frame 2: frame 3 must wait
    // behind it at the slowpath rather than jump the queue.
    r.rx(1, &pfc_frame(Priorities::only(P4), 65535));
    r.rx(0, &numbered(1, 2, 4, 3));
    let (held, _) = r.outbox();
    assert_eq!(held.len(), 1, "queued behind the held frame of its (egress, priority)");
}

#[test]
fn a_foreign_message_is_passed_upstream_by_the_ports_whose_paused_traffic_waits_behind_it() {
    let (mut r, frame) = congested_between_switches();
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, None));
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    assert_eq!(pfc_of(&r.tx(0)[0]).checking, None, "caused downstream, and no message there yet");
    r.outbox();
    // A sender that names no priorities: the message follows those its pause stops.
    let theirs = CheckingMessage { origin_switch: 4242, origin_port: 1, seq: 7, hops: 0, prios: Priorities::NONE };
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, Some(theirs)));
    let passed = CheckingMessage { hops: 1, prios: Priorities::only(P3), ..theirs };
    assert_eq!(
        r.outbox().1,
        vec![ToSlowpath::CheckForwarded { from: PortId::new(1), to: PortId::new(0), msg: passed }]
    );
    assert_eq!(r.stats().ports[1].checks.received, 1);
    r.advance(Duration::from_micros(1700));
    assert_eq!(pfc_of(&r.tx(0)[0]).checking, Some(passed), "in p0's next pause");
    // A resume clears what p1 stored: the next pause caused there has nothing to forward.
    r.rx(1, &pfc_with(Priorities::only(P3), 0, None));
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, None));
    r.advance(Duration::from_micros(1700));
    assert_eq!(pfc_of(&r.tx(0)[0]).checking, None);
}

#[test]
fn a_message_about_another_priority_is_not_passed_on() {
    let (mut r, frame) = congested_between_switches();
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, None));
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    r.outbox();
    // p0's traffic waits in queue 3 at p1; this message follows priority 4's pauses.
    let theirs = CheckingMessage { origin_switch: 4242, origin_port: 1, seq: 7, hops: 0, prios: Priorities::only(P4) };
    r.rx(1, &pfc_with(Priorities::only(P3) | Priorities::only(P4), 65535, Some(theirs)));
    assert!(r.outbox().1.is_empty());
    r.advance(Duration::from_micros(1700));
    assert_eq!(pfc_of(&r.tx(0)[0]).checking, None);
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
    assert_eq!((m.origin_switch, m.origin_port, m.hops, m.prios), (my_id(&r), 0, 0, Priorities::only(P3)));
    // Each pause frame originates afresh.
    r.advance(Duration::from_micros(1700));
    let again = pfc_of(&r.tx(0)[0]).checking.unwrap();
    assert_eq!(again.seq, m.seq + 1);

    // Now p1 is paused by its downstream, which sent its own message: p0's pause forwards it.
    let (mut r, frame) = congested_between_switches();
    let theirs = CheckingMessage { origin_switch: 77, origin_port: 5, seq: 1, hops: 2, prios: Priorities::only(P3) };
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, Some(theirs)));
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    let fwd = pfc_of(&r.tx(0)[0]).checking.unwrap();
    assert_eq!(fwd, CheckingMessage { hops: 3, ..theirs });
    let c = r.stats().ports[0].checks;
    assert_eq!((c.forwarded, c.originated), (1, 0));
}

#[test]
fn an_own_message_from_a_broken_chain_is_stale_not_a_deadlock() {
    let (mut r, own) = deadlocked(DeadlockResolution::Report);
    // p0 stops pausing its upstream: drain p1's queue.
    r.rx(1, &pfc_with(Priorities::only(P3), 0, None));
    for _ in 0..10 {
        r.tx(1);
        r.advance(Duration::from_micros(20));
    }
    assert!(!r.stats().ports[0].priorities[3].xoff);
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, Some(own)));
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
    r.rx(1, &pfc_with(Priorities::only(P3), 0, None));
    for _ in 0..10 {
        r.tx(1);
        r.advance(Duration::from_micros(20));
    }
    assert!(!r.stats().ports[0].priorities[3].xoff, "the chain broke");
    // Paused again downstream; traffic from p0 piles up and p0 pauses again, its cause
    // downstream (so its pause carries no message of its own).
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, None));
    for _ in 0..11 {
        r.rx(0, &data(1, 2, 3, 1000));
    }
    let first = pfc_of(&r.tx(0)[0]).checking;
    assert!(first.is_none(), "{first:?}");
    // The old message comes round: stale, but p0 looks again.
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, Some(own)));
    assert_eq!(r.stats().ports[1].checks.stale_returns, 1);
    a_fresh_message_goes_round_and_finds_the_deadlock(&mut r, own);
}

#[test]
fn an_own_message_coming_back_is_a_deadlock_once_per_cycle() {
    let (mut r, own) = deadlocked(DeadlockResolution::Report);
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, Some(own)));
    let (_, events) = r.outbox();
    let ToSlowpath::Deadlock(ev) = &events[0] else { panic!("{events:?}") };
    assert_eq!((ev.origin_port, ev.return_port, ev.path_length, ev.resolved), (0, 1, 3, false));
    assert_eq!(r.stats().deadlocks_detected, 1);
    // It keeps coming back while the cycle lasts: confirmations, not new deadlocks.
    r.advance(Duration::from_millis(2));
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, Some(own)));
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
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, Some(forged)));
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
    r.sw.note_originated(PortId::new(0), 2, Priorities::only(P4));
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, Some(CheckingMessage { seq: 2, ..own })));
    let s = r.stats();
    assert_eq!((s.deadlocks_detected, s.ports[1].checks.stale_returns), (0, 1));
    // A message this port never sent (or sent too long ago to remember) proves nothing.
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, Some(CheckingMessage { seq: 99, ..own })));
    assert_eq!(r.stats().ports[1].checks.stale_returns, 2);
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, Some(own)));
    assert_eq!(r.stats().deadlocks_detected, 1);
}

#[test]
fn an_own_message_back_while_the_paused_traffic_still_moves_is_congestion_and_the_switch_looks_again() {
    let (mut r, own) = deadlocked(DeadlockResolution::Report);
    // p1's partner lets one frame through and pauses again: p0 still pauses its upstream,
    // but its traffic moved after the message left.
    r.rx(1, &pfc_with(Priorities::only(P3), 0, None));
    r.advance(Duration::from_micros(1));
    assert_eq!(r.tx_limited(1, 1).len(), 1);
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, None));
    assert!(r.stats().ports[0].priorities[3].xoff);
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, Some(own)));
    assert!(r.outbox().1.is_empty(), "no deadlock event");
    let c = r.stats().ports[1].checks;
    assert_eq!((c.own_returned, c.stale_returns, c.draining_returns), (1, 0, 1));
    a_fresh_message_goes_round_and_finds_the_deadlock(&mut r, own);
}

#[test]
fn drop_resolution_empties_the_stopped_queue_and_resumes_the_upstream() {
    let (mut r, own) = deadlocked(DeadlockResolution::Drop);
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, Some(own)));
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
    r.rx(1, &pfc_with(Priorities::only(P3), 0, None));
    r.rx(0, &data(1, 2, 3, 1000));
    assert_eq!(r.tx(1).len(), 1);
    assert!(!r.stats().ports[1].watchdog_active);
}

#[test]
fn drop_resolution_also_empties_what_the_slowpath_holds() {
    let (mut r, own) = deadlocked(DeadlockResolution::Drop);
    // Blocked, then paused downstream: these frames wait at the slowpath.
    r.sw.set_blocked(PortId::new(1), true);
    r.rx(1, &pfc_with(Priorities::only(P3), 0, None));
    for _ in 0..3 {
        r.rx(0, &data(1, 2, 3, 1000));
    }
    let (held, _) = r.outbox();
    assert_eq!(held.len(), 3);
    assert_eq!(r.sw.stopped(r.now, PortId::new(1)), Priorities::ALL, "blocked: the slowpath keeps them");
    r.sw.set_blocked(PortId::new(1), false);
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, None));
    assert_eq!(r.sw.stopped(r.now, PortId::new(1)), Priorities::only(P3), "paused: the slowpath keeps them");
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, Some(own)));
    assert_eq!(r.sw.stopped(r.now, PortId::new(1)), Priorities::NONE, "being dropped: the slowpath may give them back");
    let mut slow = Slowpath::new("sw", vec!["p0".into(), "p1".into()], 8);
    for h in held {
        slow.handle_event(ToSlowpath::Held(h));
    }
    // No event says so: the slowpath's next look finds them free to go.
    slow.poll_released(r.now, |e| r.sw.stopped(r.now, e));
    let look = slow.poll_timeout().expect("frames held: a look is due");
    slow.handle_timeout(look);
    let out = slow.poll_released(look, |e| r.sw.stopped(r.now, e)).to_vec();
    r.sw.handle_released(r.now, &mut r.pool, out);
    // The 11 frames queued before the block are emptied when p1 next transmits.
    assert!(r.tx(1).is_empty());
    assert_eq!(r.stats().ports[1].counters.drops.watchdog, 3 + 11);
    assert_eq!(r.stats().ports[1].held_by_slowpath, 0);
    assert_eq!(r.sw.traffic_map_row(PortId::new(0)), PortSet::EMPTY, "nothing of (p0, p1) waits any more");
}
