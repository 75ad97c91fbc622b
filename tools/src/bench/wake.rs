//! The machine's own floor under a loop that sleeps: how long a thread asleep in `ppoll`
//! on one CPU takes to run again after a thread on another CPU wakes it, and how long a
//! thread that spins instead takes to see the same signal.
//!
//! pfcswitch's loop sleeps in `ppoll` on its sockets when idle (`dataplane.busy_poll_us`
//! after its last frame), and a frame that finds it asleep wakes it through the same
//! path into the scheduler as the eventfd here: if its CPU went idle meanwhile, the CPU
//! must be woken first, and on a VM whose idle vCPUs halt that waits for the host to run
//! the vCPU again. No setting of the switch makes that shorter; only not sleeping does
//! (OVS's PMD thread, `busy_poll_us = 1000000`). `bench ping` prints these figures
//! beside its round trips, measured alone, before each round's devices.
//!
//! Built from the switch's own primitives (`sys::Waker`, `sys::wait_readable`,
//! `sys::pin_to_cpu`), so the sleep measured is the loop's sleep.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use pfcswitch::core::histogram::Percentiles;
use pfcswitch::sys;

use crate::traffic::latency::Latency;

/// The longest a sleeper is waited for before its wake is counted as lost: far beyond
/// any wake seen here, and it bounds a run on a machine that stops a thread for long.
const WAKE_TIMEOUT: Duration = Duration::from_secs(1);

/// Wakes measured on one machine: from the waker's signal to the woken thread running,
/// per way of waiting (as every latency here: an HDR histogram's three significant digits).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WakeFigures {
    /// The CPU the waker ran on, and the CPU the woken thread ran on.
    pub waker_cpu: usize,
    pub woken_cpu: usize,
    /// The woken thread asleep in `ppoll` on an eventfd, as the switch's loop sleeps.
    pub asleep: Percentiles,
    /// The woken thread spinning on a shared counter, as a polling loop waits.
    pub spinning: Percentiles,
    /// Wakes not seen within a second (a sleeper's, then a spinner's).
    pub lost: u64,
}

impl WakeFigures {
    /// The figures in a sentence, for beneath a table.
    pub fn line(&self) -> String {
        format!(
            "This machine: a thread asleep in ppoll on CPU {} ran again p50 / p90 / p99 {:.0} / {:.0} / {:.0} µs \
             after a thread on CPU {} woke it, a spinning one saw the signal in {:.0} / {:.0} / {:.0} µs ({} wakes each{}). \
             A frame that finds the switch's loop asleep on an idle CPU pays the first.",
            self.woken_cpu,
            self.asleep.p50_us,
            self.asleep.p90_us,
            self.asleep.p99_us,
            self.waker_cpu,
            self.spinning.p50_us,
            self.spinning.p90_us,
            self.spinning.p99_us,
            self.asleep.count,
            if self.lost > 0 { format!(", {} lost", self.lost) } else { String::new() },
        )
    }
}

/// Wakes gathered over several runs, turned into figures once.
#[derive(Debug, Default)]
pub struct Samples {
    cpus: Option<(usize, usize)>,
    asleep: Latency,
    spinning: Latency,
    lost: u64,
}

impl Samples {
    /// Measures `count` wakes of each kind, `interval` apart (so that the woken thread's
    /// CPU has gone idle, as an idle switch's has between frames), on the first two CPUs
    /// this process may use. Nothing is measured on a machine with one.
    pub fn measure(&mut self, count: u32, interval: Duration) -> Result<()> {
        let cpus = sys::allowed_cpus().context("the CPUs this process may use")?;
        let [waker, woken, ..] = cpus[..] else { return Ok(()) };
        self.cpus = Some((waker, woken));
        for (wait, into) in [(Wait::Asleep, &mut self.asleep), (Wait::Spinning, &mut self.spinning)] {
            let (seen, lost) = wakes(count, interval, waker, woken, wait)?;
            seen.into_iter().for_each(|d| into.record(d));
            self.lost += lost;
        }
        Ok(())
    }

    pub fn figures(self) -> Option<WakeFigures> {
        let (waker_cpu, woken_cpu) = self.cpus?;
        Some(WakeFigures {
            waker_cpu,
            woken_cpu,
            asleep: self.asleep.percentiles(),
            spinning: self.spinning.percentiles(),
            lost: self.lost,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Wait {
    Asleep,
    Spinning,
}

/// What the two threads share: the waker's stamp (ns of `sys::now`) and a count of wakes
/// sent; the woken thread's count of wakes it saw.
#[derive(Default)]
struct Shared {
    stamp_ns: AtomicU64,
    sent: AtomicU64,
    seen: AtomicU64,
}

/// `count` wakes, each `interval` after the previous one was seen (or given up on). How
/// long each wake seen took, and how many were not seen in time. Both ends run on
/// threads of their own, pinned, so that the caller's CPUs stay as they were.
fn wakes(
    count: u32,
    interval: Duration,
    waker_cpu: usize,
    woken_cpu: usize,
    wait: Wait,
) -> Result<(Vec<Duration>, u64)> {
    let shared = Arc::new(Shared::default());
    let signal = Arc::new(sys::Waker::new().context("an eventfd")?);
    let woken = {
        let (shared, signal) = (Arc::clone(&shared), Arc::clone(&signal));
        std::thread::Builder::new()
            .name("woken".into())
            .spawn(move || woken_thread(woken_cpu, wait, count, &shared, &signal))?
    };
    let waker = std::thread::Builder::new()
        .name("waker".into())
        .spawn(move || waker_thread(waker_cpu, wait, count, interval, &shared, &signal))?;
    let lost = waker.join().map_err(|_| anyhow::anyhow!("the waking thread panicked"))??;
    let seen = woken.join().map_err(|_| anyhow::anyhow!("the woken thread panicked"))??;
    Ok((seen, lost))
}

fn waker_thread(
    cpu: usize,
    wait: Wait,
    count: u32,
    interval: Duration,
    shared: &Shared,
    signal: &sys::Waker,
) -> Result<u64> {
    let pinned = sys::pin_to_cpu(cpu).context("pinning the waking thread");
    let mut lost = 0;
    if pinned.is_ok() {
        sys::tighten_timer_slack();
        for i in 1..=u64::from(count) {
            std::thread::sleep(interval);
            shared.stamp_ns.store(sys::now().as_nanos(), Ordering::Release);
            shared.sent.store(i, Ordering::Release);
            if wait == Wait::Asleep {
                signal.wake();
            }
            let deadline = sys::now() + WAKE_TIMEOUT;
            while shared.seen.load(Ordering::Acquire) < i {
                if sys::now() >= deadline {
                    lost += 1;
                    break;
                }
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
    // The woken thread stops waiting, whatever count it waits for.
    shared.sent.store(u64::MAX, Ordering::Release);
    signal.wake();
    pinned.map(|()| lost)
}

fn woken_thread(cpu: usize, wait: Wait, count: u32, shared: &Shared, signal: &sys::Waker) -> Result<Vec<Duration>> {
    let mut took = Vec::with_capacity(count as usize);
    let pinned = sys::pin_to_cpu(cpu).context("pinning the woken thread");
    if pinned.is_err() {
        // The waker's signals would go unseen, and it would wait WAKE_TIMEOUT for each:
        // every one counts as seen instead, and the error below says why none was.
        shared.seen.store(u64::MAX, Ordering::Release);
    }
    pinned?;
    sys::tighten_timer_slack();
    let mut fds = [sys::pollfd(signal.fd())];
    let mut seen = 0u64;
    while seen < u64::from(count) {
        let sent = shared.sent.load(Ordering::Acquire);
        if sent == u64::MAX {
            break;
        }
        if sent > seen {
            // Stamped first: the eventfd's clearing is not part of the wake.
            let at = sys::now().as_nanos();
            took.push(Duration::from_nanos(at.saturating_sub(shared.stamp_ns.load(Ordering::Acquire))));
            signal.drain();
            seen = sent;
            shared.seen.store(seen, Ordering::Release);
            continue;
        }
        match wait {
            Wait::Asleep => sys::wait_readable(&mut fds, WAKE_TIMEOUT)?,
            Wait::Spinning => std::hint::spin_loop(),
        }
    }
    Ok(took)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wake_is_measured_once_for_a_sleeper_and_a_spinner_on_two_cpus() {
        let mut s = Samples::default();
        s.measure(20, Duration::from_millis(1)).unwrap();
        let Some(f) = s.figures() else {
            // One CPU: nothing to measure across CPUs, and nothing is said.
            assert!(sys::allowed_cpus().unwrap().len() < 2);
            return;
        };
        assert_ne!(f.waker_cpu, f.woken_cpu);
        assert_eq!(f.asleep.count + f.spinning.count + f.lost, 40, "{f:?}");
        for p in [&f.asleep, &f.spinning] {
            assert!(p.p50_us <= p.p90_us && p.p90_us <= p.p99_us && p.p99_us <= p.max_us, "{p:?}");
        }
        assert!(f.line().contains(&format!("asleep in ppoll on CPU {}", f.woken_cpu)), "{}", f.line());
    }

    #[test]
    fn runs_pool_their_wakes_into_one_histogram_per_kind() {
        let mut s = Samples { cpus: Some((0, 1)), ..Samples::default() };
        let us = Duration::from_micros;
        // Two runs' wakes into one histogram per kind.
        [10, 20].into_iter().chain([30, 40]).for_each(|u| s.asleep.record(us(u)));
        (1..=4).for_each(|u| s.spinning.record(us(u)));
        let f = s.figures().unwrap();
        // Three significant digits: each percentile within a thousandth of its sample.
        let near = |got: f64, want: f64| (got - want).abs() <= want / 1000.0;
        assert_eq!((f.asleep.count, f.asleep.max_us), (4, 40.0));
        assert!(near(f.asleep.p50_us, 20.0), "{f:?}");
        assert!(near(f.spinning.p99_us, 4.0), "{f:?}");
    }
}
