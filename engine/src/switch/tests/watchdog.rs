//! The PFC watchdog.

use crate::pfcwd::{WatchdogAction, WatchdogEvent, WatchdogOverride};

use super::*;

const MS: Duration = Duration::from_millis(1);

fn rig(action: WatchdogAction) -> Rig {
    let mut c = Rig::switch_ports(2);
    c.pfcwd.action = action;
    Rig::new(c)
}

/// Five frames wait on p1 while its partner refreshes a pause on priority 3 every 2 ms
/// until `until` after the first pause; returns when the pauses began.
fn storm(r: &mut Rig, until: Duration) -> Time {
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, None));
    let start = r.now;
    for _ in 0..5 {
        r.rx(0, &data(1, 2, 3, 1000));
    }
    assert!(r.tx(1).is_empty(), "paused");
    while r.now + 2 * MS <= start + until {
        r.advance(2 * MS);
        r.rx(1, &pfc_with(Priorities::only(P3), 65535, None));
    }
    start
}

fn watch(r: &Rig) -> crate::stats::WatchdogStats {
    *r.stats().ports[1].pfcwd.iter().find(|w| w.priority == P3).unwrap()
}

#[test]
fn a_partner_keeping_a_priority_paused_with_frames_waiting_is_cut_off_at_the_detection_time() {
    let mut r = rig(WatchdogAction::Drop);
    let start = storm(&mut r, 198 * MS);
    // The detection deadline is part of the port's next wakeup.
    assert_eq!(r.sw.poll_port_timeout(r.now, PortId::new(1)), Some(start + 200 * MS));
    assert!(r.tx(1).is_empty());
    assert!(!watch(&r).active);
    r.advance(2 * MS);
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, None));
    assert!(r.tx(1).is_empty(), "dropped, not sent");
    let w = watch(&r);
    assert!(w.active);
    assert_eq!((w.counters.storms_detected, w.counters.dropped_frames, w.counters.last_detection_us), (1, 5, 200_000));
    assert_eq!(r.stats().ports[1].counters.drops.watchdog, 5);
    assert!(matches!(
        r.watchdog_event(),
        Some(WatchdogEvent::StormDetected { port, prio: P3, stalled_since, action: WatchdogAction::Drop, .. })
            if port == PortId::new(1) && stalled_since == start
    ));
    // Frames arriving for the stormed queue are dropped too; the ingress is not held.
    r.rx(0, &data(1, 2, 3, 1000));
    assert_eq!(watch(&r).counters.dropped_frames, 6);
    assert_eq!(r.stats().ports[0].priorities[3].ingress_bytes, 0);
    // Restored 200 ms after the last pause; then frames go out again.
    let last_pause = r.now;
    r.advance(199 * MS);
    assert_eq!(r.sw.poll_port_timeout(r.now, PortId::new(1)), Some(last_pause + 200 * MS));
    r.tx(1);
    assert!(watch(&r).active);
    r.advance(MS);
    r.tx(1);
    let w = watch(&r);
    assert!(!w.active && w.counters.restored == 1, "{w:?}");
    assert!(matches!(r.watchdog_event(), Some(WatchdogEvent::Restored { prio: P3, .. })));
    r.rx(0, &data(1, 2, 3, 1000));
    assert_eq!(r.tx(1).len(), 1);
}

#[test]
fn with_forward_the_stormed_priority_is_sent_despite_the_pauses() {
    let mut r = rig(WatchdogAction::Forward);
    storm(&mut r, 200 * MS);
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, None));
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
        r.rx(1, &pfc_with(Priorities::only(P3), 65535, None));
        for _ in 0..5 {
            r.rx(0, &data(1, 2, 3, 1000));
        }
        r.advance(9 * MS);
        r.tx(1);
        r.rx(1, &pfc_with(Priorities::only(P3), 0, None));
        r.tx_limited(1, 2);
        r.advance(MS);
    }
    assert_eq!(watch(&r).counters.storms_detected, 0);
    assert!(r.watchdog_event().is_none());
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
    let prios: Vec<Priority> = r.stats().ports[0].pfcwd.iter().map(|w| w.priority).collect();
    assert_eq!(prios, [P3, P4]);
}

#[test]
fn an_802_3x_pause_held_on_a_global_pause_port_with_frames_waiting_is_a_storm_on_every_waiting_priority() {
    let pause = {
        let mut b = vec![0u8; 60];
        pfc::encode(&mut b, mac(2), &MacControl::Pause { quanta: 65535 });
        b
    };
    let mut c = Rig::ports(2);
    c.ports[1].pause_mode = PauseMode::GlobalPause;
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 9, 0, 64));
    r.tx(0);
    r.rx(1, &pause);
    let start = r.now;
    // Lossy priority 0 and lossless 3 wait; a PAUSE holds them all.
    for dscp in [0, 3] {
        r.rx(0, &data(1, 2, dscp, 1000));
    }
    assert!(r.tx(1).is_empty());
    while r.now + 2 * MS < start + 200 * MS {
        r.advance(2 * MS);
        r.rx(1, &pause);
    }
    assert_eq!(
        r.sw.poll_port_timeout(r.now, PortId::new(1)),
        Some(start + 200 * MS),
        "the deadline is in the port's wakeup"
    );
    r.advance(start + 200 * MS - r.now);
    assert!(r.tx(1).is_empty(), "dropped, not sent");
    let s = r.stats();
    let watched: Vec<(Priority, u64)> =
        s.ports[1].pfcwd.iter().map(|w| (w.priority, w.counters.storms_detected)).collect();
    assert_eq!(watched, [(P0, 1), (P1, 0), (P2, 0), (P3, 1), (P4, 0), (P5, 0), (P6, 0), (P7, 0)]);
    assert_eq!(s.ports[1].counters.drops.watchdog, 2);
    // Restored 200 ms after the last PAUSE; then frames go out again.
    r.advance(200 * MS);
    r.tx(1);
    assert!(r.stats().ports[1].pfcwd.iter().all(|w| !w.active));
    r.rx(0, &data(1, 2, 0, 1000));
    assert_eq!(r.tx(1).len(), 1);
}
