//! A port's timer table: what `poll_port_timeout` reports and `handle_port_timeout` runs.

use crate::pfcwd::WatchdogAction;

use super::*;

const MS: Duration = Duration::from_millis(1);

fn table(r: &Rig, port: usize) -> PortTimers {
    r.sw.port_timers(r.now, PortId::new(port))
}

#[test]
fn a_port_paused_with_frames_waiting_has_its_pauses_end_and_the_watchdogs_judgement_in_its_table() {
    let mut c = Rig::switch_ports(2);
    c.pfcwd.action = WatchdogAction::Drop;
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r.rx(1, &pfc_frame(Priorities::only(P3), 65535));
    let paused_at = r.now;
    for _ in 0..3 {
        r.rx(0, &data(1, 2, 3, 1000));
    }
    assert!(r.tx(1).is_empty(), "paused");
    let t = table(&r, 1);
    // 65535 quanta of 512 bit times at 10G.
    let pause_end = paused_at + Duration::from_nanos(3_355_392);
    assert_eq!(t.get(PortTimer::PauseExpiry), Some(pause_end));
    assert_eq!(t.get(PortTimer::Watchdog), Some(paused_at + 200 * MS), "the default detection time");
    for idle in [PortTimer::Shaper, PortTimer::DropWindow, PortTimer::ControlOwed] {
        assert_eq!(t.get(idle), None, "{idle:?}");
    }
    assert_eq!(t.next(), Some(pause_end));
    assert_eq!(r.sw.poll_port_timeout(r.now, PortId::new(1)), t.next(), "the timeout is the table's earliest entry");
    assert_eq!(t.due(r.now).count(), 0);
    // Once the pause ran out, the frames are free to go: the shaper's entry replaces it.
    r.advance(4 * MS);
    let t = table(&r, 1);
    assert_eq!(t.get(PortTimer::PauseExpiry), None);
    assert_eq!(t.get(PortTimer::Watchdog), None, "nothing paused: nothing to judge");
    assert!(t.get(PortTimer::Shaper).is_some_and(|at| at <= r.now));
    assert_eq!(t.due(r.now).collect::<Vec<_>>(), [PortTimer::Shaper]);
    assert_eq!(r.tx(1).len(), 3);
    assert_eq!(table(&r, 1), PortTimers::default(), "nothing queued, nothing owed");
}

#[test]
fn a_storm_cut_off_by_the_watchdog_empties_the_queue_its_drop_window_owes_in_the_same_call() {
    let mut c = Rig::switch_ports(2);
    c.pfcwd.action = WatchdogAction::Drop;
    c.pfcwd.detection_ms = 10;
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    let start = r.now;
    r.rx(1, &pfc_frame(Priorities::only(P3), 65535));
    for _ in 0..3 {
        r.rx(0, &data(1, 2, 3, 1000));
    }
    r.tx(1);
    while r.now < start + 10 * MS {
        r.advance(MS);
        r.rx(1, &pfc_frame(Priorities::only(P3), 65535));
    }
    assert_eq!(table(&r, 1).due(r.now).collect::<Vec<_>>(), [PortTimer::Watchdog]);
    r.sw.handle_port_timeout(r.now, &mut r.pool, PortId::new(1));
    let t = table(&r, 1);
    assert_eq!(t.get(PortTimer::DropWindow), None, "emptied in the same call");
    assert_eq!(r.sw.queued_frames(), 0);
    assert_eq!(r.stats().ports[1].counters.drops.watchdog, 3);
    // Stormed: the next judgement is the restoration, the default 200 ms after the last
    // pause.
    assert_eq!(t.get(PortTimer::Watchdog), Some(r.now + 200 * MS));
}

#[test]
fn an_ingress_above_xoff_refreshes_its_pause_when_its_entry_falls_due_and_owes_it_until_it_is_sent() {
    let (mut r, frame) = congested(true);
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    assert_eq!(table(&r, 0).get(PortTimer::ControlOwed), Some(r.now), "the first pause is owed at once");
    let sent_at = r.now;
    assert_eq!(r.tx(0).len(), 1);
    // Half of 65535 quanta at 10G.
    let refresh = sent_at + Duration::from_nanos(1_677_696);
    let t = table(&r, 0);
    assert_eq!((t.get(PortTimer::XoffRefresh), t.get(PortTimer::ControlOwed)), (Some(refresh), None));
    r.now = refresh;
    r.sw.handle_port_timeout(r.now, &mut r.pool, PortId::new(0));
    assert_eq!(table(&r, 0).get(PortTimer::ControlOwed), Some(r.now), "the refresh is owed");
    let again = r.tx(0);
    assert_eq!(pfc_of(&again[0]).quanta[3], 65535);
    assert_eq!(table(&r, 0).get(PortTimer::XoffRefresh), Some(refresh + Duration::from_nanos(1_677_696)));
}

#[test]
fn a_port_whose_link_is_down_has_no_timers() {
    let (mut r, frame) = congested(true);
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    assert_ne!(table(&r, 0), PortTimers::default());
    r.sw.set_link(&mut r.pool, PortId::new(0), false);
    assert_eq!(table(&r, 0), PortTimers::default());
    assert_eq!(r.sw.poll_port_timeout(r.now, PortId::new(0)), None);
}
