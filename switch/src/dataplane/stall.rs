//! How long the polling loop was kept from polling: a switch process that loses its CPU
//! for 10 ms receives 10 ms of traffic in one burst, too late to pause it in time. And how
//! long it fell behind its rx rings, with how much of that time the machine took. Tests
//! and benches read this to tell the machine's stalls from the switch's faults.

use std::time::Duration;

use crate::core::time::Time;
use crate::stats::{Backlog, Stall, StallStats};

/// Gaps at least this long count as stalls.
pub const STALL: Duration = Duration::from_millis(1);
/// Stalls remembered with their time.
const RECENT: usize = 32;
/// Lossy backlog spells remembered. Only spells that lost frames are kept: a busy
/// machine makes dozens of lossless millisecond spells a second, and when those were
/// kept too they pushed the lossy ones out before a bench could read them.
const BACKLOGS: usize = 64;
/// While the loop keeps up, it reads its CPU clock and the rings' loss counters (system
/// calls) at most this often; a spell starts at the latest reading, so it may take in up
/// to this much time from before, which only makes the machine's share look smaller.
const MARK_EVERY: Duration = Duration::from_micros(500);

/// Measures gaps between polls, not counting sleeps the loop chose: after a sleep, only
/// the time past its deadline counts. (A sleep cut short by an arriving frame whose
/// wake-up came late is not seen.) Of each gap, the part the loop's thread spent
/// runnable but waiting for a CPU is the machine's; the rest is the loop's own (its work,
/// or a system call it blocked in, such as binding a port). That part comes from the
/// thread's run-queue wait, read at a gap's end and otherwise at most every
/// [`MARK_EVERY`]: waits between the last reading and the gap's start count as the gap's,
/// so the machine's share may look up to that much larger.
#[derive(Debug)]
pub struct StallMeter {
    last_poll: Option<Time>,
    sleep_until: Option<Time>,
    /// The latest reading of the thread's run-queue wait: when, and what it said.
    wait_mark: Option<(Time, Duration)>,
    stalls: u64,
    longest_us: u64,
    longest_cpu_wait_us: u64,
    /// A ring of the latest stalls (oldest overwritten).
    recent: [Stall; RECENT],
    next: usize,
}

impl Default for StallMeter {
    fn default() -> StallMeter {
        StallMeter {
            last_poll: None,
            sleep_until: None,
            wait_mark: None,
            stalls: 0,
            longest_us: 0,
            longest_cpu_wait_us: 0,
            recent: [Stall::default(); RECENT],
            next: 0,
        }
    }
}

impl StallMeter {
    /// The loop polls its rings at `now`; `cpu_wait` reads how long the thread has waited
    /// for a CPU so far (a system call, made only at a gap's end and every
    /// [`MARK_EVERY`]).
    pub fn poll(&mut self, now: Time, cpu_wait: impl FnOnce() -> Duration) {
        let gap = self.sleep_until.take().or(self.last_poll).map(|expected| now.saturating_since(expected));
        self.last_poll = Some(now);
        if let Some(gap) = gap.filter(|g| *g >= STALL) {
            let waited = cpu_wait();
            let machine = self.wait_mark.map_or(Duration::ZERO, |(_, was)| waited.saturating_sub(was)).min(gap);
            let (us, cpu_wait_us) = (gap.as_micros() as u64, machine.as_micros() as u64);
            self.stalls += 1;
            self.longest_us = self.longest_us.max(us);
            self.longest_cpu_wait_us = self.longest_cpu_wait_us.max(cpu_wait_us);
            self.recent[self.next % RECENT] = Stall { ended_ns: now.as_nanos(), us, cpu_wait_us };
            self.next += 1;
            self.wait_mark = Some((now, waited));
        } else if self.wait_mark.is_none_or(|(at, _)| now.saturating_since(at) >= MARK_EVERY) {
            self.wait_mark = Some((now, cpu_wait()));
        }
    }

    /// The loop goes to sleep until `deadline` at the latest.
    pub fn sleeping(&mut self, deadline: Time) {
        self.sleep_until = Some(deadline);
    }

    pub fn stats(&self) -> StallStats {
        let kept = self.next.min(RECENT);
        let recent = (self.next - kept..self.next).map(|i| self.recent[i % RECENT]).collect();
        StallStats {
            stalls: self.stalls,
            longest_us: self.longest_us,
            longest_cpu_wait_us: self.longest_cpu_wait_us,
            recent,
            ..StallStats::default()
        }
    }
}

/// What the backlog meter reads from the system at the edges of a spell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// The loop thread's CPU time so far.
    pub cpu: Duration,
    /// Frames the kernel could not hand to the loop so far (a full rx ring, or no frame
    /// to put one in), all ports.
    pub rx_lost: u64,
    /// Frames the loop has taken off the rx rings so far, all ports.
    pub rx_taken: u64,
}

#[derive(Clone, Copy, Debug)]
struct Mark {
    wall: Time,
    read: Reading,
}

/// Measures spells in which the loop leaves frames on an rx ring turn after turn: from
/// the last turn that emptied every ring to the next one that does.
#[derive(Debug)]
pub struct BacklogMeter {
    /// The latest reading at a turn that emptied the rings; a spell starts there.
    mark: Option<Mark>,
    /// Where the spell under way started.
    open: Option<Mark>,
    /// A ring of the latest spells (oldest overwritten).
    recent: [Backlog; BACKLOGS],
    next: usize,
}

impl Default for BacklogMeter {
    fn default() -> BacklogMeter {
        BacklogMeter { mark: None, open: None, recent: [Backlog::default(); BACKLOGS], next: 0 }
    }
}

impl BacklogMeter {
    /// The loop finished a turn at `now`; `emptied` when no rx ring was left holding
    /// frames. `read` is called only at a spell's edges and every [`MARK_EVERY`].
    pub fn turn(&mut self, now: Time, emptied: bool, read: impl FnOnce() -> Reading) {
        let here = |read: Reading| Mark { wall: now, read };
        match (emptied, self.open) {
            (true, Some(start)) => {
                let end = here(read());
                self.record(start, end);
                self.open = None;
                self.mark = Some(end);
            }
            (true, None) => {
                if self.mark.is_none_or(|m| now.saturating_since(m.wall) >= MARK_EVERY) {
                    self.mark = Some(here(read()));
                }
            }
            (false, None) => self.open = Some(self.mark.take().unwrap_or_else(|| here(read()))),
            (false, Some(_)) => {}
        }
    }

    /// The loop slept by choice: that time is not the machine's, so the next spell
    /// starts from a fresh reading.
    pub fn slept(&mut self) {
        self.mark = None;
    }

    fn record(&mut self, start: Mark, end: Mark) {
        let lost = end.read.rx_lost.saturating_sub(start.read.rx_lost);
        if lost == 0 {
            return;
        }
        let wall = end.wall.saturating_since(start.wall);
        let on_cpu = end.read.cpu.saturating_sub(start.read.cpu);
        self.recent[self.next % BACKLOGS] = Backlog {
            ended_ns: end.wall.as_nanos(),
            us: wall.as_micros() as u64,
            off_cpu_us: wall.saturating_sub(on_cpu).as_micros() as u64,
            rx_lost: lost,
            rx_taken: end.read.rx_taken.saturating_sub(start.read.rx_taken),
        };
        self.next += 1;
    }

    /// The latest spells, oldest first.
    pub fn recent(&self) -> Vec<Backlog> {
        let kept = self.next.min(BACKLOGS);
        (self.next - kept..self.next).map(|i| self.recent[i % BACKLOGS]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(us: u64) -> Time {
        Time::from_micros(us)
    }

    /// A thread's run-queue wait that reads `us` µs.
    fn waited(us: u64) -> impl FnOnce() -> Duration {
        move || Duration::from_micros(us)
    }

    #[test]
    fn gaps_between_polls_count_and_chosen_sleeps_do_not() {
        let mut m = StallMeter::default();
        m.poll(at(0), waited(0));
        m.poll(at(20), waited(0));
        m.poll(at(3_020), waited(2_000)); // preempted for 2 ms of a 3 ms gap
        m.sleeping(at(50_000));
        m.poll(at(40_000), waited(2_000)); // woken early by a frame
        m.sleeping(at(90_000));
        m.poll(at(91_500), waited(3_500)); // woke, then waited 1.5 ms for a CPU
        m.poll(at(91_600), waited(3_500));
        let s = m.stats();
        assert_eq!((s.stalls, s.longest_us, s.longest_cpu_wait_us), (2, 3_000, 2_000));
        let stall = |ended_us: u64, us, cpu_wait_us| Stall { ended_ns: ended_us * 1000, us, cpu_wait_us };
        assert_eq!(s.recent, vec![stall(3_020, 3_000, 2_000), stall(91_500, 1_500, 1_500)]);
        assert_eq!(s.longest_since(4_000_000), Some(stall(91_500, 1_500, 1_500)));
    }

    #[test]
    fn a_gap_the_loop_spent_working_or_blocked_is_its_own_and_one_waiting_for_a_cpu_the_machines() {
        let mut m = StallMeter::default();
        m.poll(at(0), waited(0));
        // 40 ms binding a port, running or blocked in the kernel: no wait for a CPU.
        m.poll(at(40_000), waited(0));
        m.poll(at(40_010), waited(0));
        // 20 ms of which it waited 19 ms for a CPU.
        m.poll(at(60_010), waited(19_000));
        let s = m.stats();
        assert_eq!((s.longest_us, s.longest_cpu_wait_us), (40_000, 19_000));
        assert_eq!(s.recent.iter().map(|x| x.cpu_wait_us).collect::<Vec<_>>(), [0, 19_000]);
    }

    #[test]
    fn the_wait_is_read_at_gaps_and_otherwise_at_most_every_mark_interval() {
        let mut m = StallMeter::default();
        let reads = std::cell::Cell::new(0);
        let counted = || {
            reads.set(reads.get() + 1);
            Duration::ZERO
        };
        // 10 ms of polls every 10 µs: a reading per MARK_EVERY.
        for t in (0..10_000).step_by(10) {
            m.poll(at(t), counted);
        }
        let marks = 10_000 / MARK_EVERY.as_micros() as u64;
        assert_eq!(reads.get(), marks);
        m.poll(at(12_000), counted);
        assert_eq!((reads.get(), m.stats().stalls), (marks + 1, 1));
    }

    #[test]
    fn only_the_latest_stalls_are_kept() {
        let mut m = StallMeter::default();
        for i in 0..(RECENT as u64 + 5) {
            m.poll(at(i * 10_000), waited(0));
        }
        let s = m.stats();
        assert_eq!(s.stalls, RECENT as u64 + 4);
        assert_eq!(s.recent.len(), RECENT);
        assert_eq!(s.recent.last().unwrap().ended_ns, (RECENT as u64 + 4) * 10_000_000);
        assert!(s.recent.windows(2).all(|w| w[0].ended_ns < w[1].ended_ns), "oldest first");
    }

    fn reading(cpu_us: u64, rx_lost: u64) -> Reading {
        Reading { cpu: Duration::from_micros(cpu_us), rx_lost, rx_taken: cpu_us / 2 }
    }

    #[test]
    fn a_backlog_spell_counts_the_cpu_time_the_machine_took_and_the_frames_lost_in_it() {
        let mut m = BacklogMeter::default();
        m.turn(at(0), true, || reading(0, 5));
        // Behind from 100 µs on; on a CPU for 3 ms of the next 10 ms; 40 frames lost.
        m.turn(at(100), false, || unreachable!("no reading inside a spell"));
        m.turn(at(6_000), false, || unreachable!());
        m.turn(at(10_000), true, || reading(3_000, 45));
        let spell = Backlog { ended_ns: 10_000_000, us: 10_000, off_cpu_us: 7_000, rx_lost: 40, rx_taken: 1_500 };
        assert_eq!(m.recent(), vec![spell]);
        assert_eq!(spell.arrived(), 1_540);
        assert_eq!(spell.on_cpu_rate_fps(), Some(500_000.0), "1500 frames in the 3 ms on a CPU");
    }

    /// The loop falls behind at `from_us` and empties its rings again at `to_us`, where
    /// it reads `end`.
    fn behind(m: &mut BacklogMeter, from_us: u64, to_us: u64, end: Reading) {
        m.turn(at(from_us), false, || unreachable!("no reading inside a spell"));
        m.turn(at(to_us), true, || end);
    }

    #[test]
    fn spells_without_loss_are_not_kept_however_long_and_lossy_ones_are() {
        let mut m = BacklogMeter::default();
        m.turn(at(0), true, || reading(0, 0));
        behind(&mut m, 50, 8_000, reading(2_000, 0));
        assert!(m.recent().is_empty(), "8 ms behind and nothing lost");
        behind(&mut m, 8_100, 8_400, reading(2_200, 2));
        assert_eq!(m.recent().len(), 1);
        assert_eq!(m.recent()[0].rx_lost, 2);
    }

    #[test]
    fn a_lossy_spell_outlives_any_number_of_lossless_ones_after_it() {
        let mut m = BacklogMeter::default();
        m.turn(at(0), true, || reading(0, 0));
        behind(&mut m, 10, 30_000, reading(10_000, 700));
        for i in 1..=(2 * BACKLOGS as u64) {
            let t = 30_000 + i * 5_000;
            behind(&mut m, t, t + 2_000, reading(10_000 + i * 1_000, 700));
        }
        let lossy: Vec<u64> = m.recent().iter().map(|b| b.rx_lost).collect();
        assert_eq!(lossy, vec![700]);
    }

    #[test]
    fn a_chosen_sleep_before_a_spell_is_not_counted_as_the_machines() {
        let mut m = BacklogMeter::default();
        m.turn(at(0), true, || reading(0, 0));
        m.slept();
        // Woken at 5 ms by frames: the spell starts from a reading taken then.
        m.turn(at(5_000), false, || reading(100, 0));
        m.turn(at(7_000), true, || reading(2_100, 3));
        assert_eq!(m.recent()[0].us, 2_000);
        assert_eq!(m.recent()[0].off_cpu_us, 0);
    }

    #[test]
    fn readings_while_keeping_up_are_rationed() {
        let mut m = BacklogMeter::default();
        let mut reads = 0;
        for t in (0..10_000).step_by(10) {
            m.turn(at(t), true, || {
                reads += 1;
                reading(t, 0)
            });
        }
        assert_eq!(reads, 20, "one reading per 500 µs over 10 ms");
    }
}
