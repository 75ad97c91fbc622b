//! Runs the machine spoiled, repeated after a pause that grows.

use super::*;

/// The wait before the first repeat of a run the machine spoiled ([`retry_pause`]).
pub const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// How long to wait before repeat `n` (1 for the first) of a run the machine spoiled:
/// `first`, doubled at each repeat up to eight times `first`. A busy host disturbs in
/// spells of seconds (DEVELOPERS.md), and runs repeated back to back fall in the same
/// spell: on 2026-11-27 all five attempts of a headroom test, made one after another,
/// were disturbed, and the same test passed at its first attempt ten minutes later.
pub fn retry_pause(first: Duration, n: u32) -> Duration {
    first * (1 << n.saturating_sub(1).min(3))
}

/// Runs `trial` until `disturbed` says the machine did not spoil the run, at most
/// `retries` times more, waiting [`retry_pause`] from `pause` before each; each spoiled
/// run goes to `set_aside`. The last run is kept even when it, too, was disturbed: a host
/// that disturbs every attempt shows in the result.
pub fn undisturbed<T>(
    retries: usize,
    pause: Duration,
    disturbed: impl Fn(&T) -> bool,
    mut set_aside: impl FnMut(T),
    mut trial: impl FnMut() -> Result<T>,
) -> Result<T> {
    let mut repeats = 0;
    loop {
        let r = trial()?;
        if !disturbed(&r) || repeats as usize == retries {
            return Ok(r);
        }
        set_aside(r);
        repeats += 1;
        std::thread::sleep(retry_pause(pause, repeats));
    }
}
