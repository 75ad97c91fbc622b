//! `pfcswitch ctl watch`: the switch's rates, refreshed in place like `top` when the
//! output is a terminal (q or Ctrl-C quits, and the terminal is left as it was found),
//! and a table per interval, one after the other, when it is not (a file, a pipe, a test).
//! `--json` writes one line per interval.

use std::io::{IsTerminal, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::control::{client, ControlError};
use crate::stats::Stats;
use crate::views::Rates;

/// How often `ctl watch` looks for a key or a signal while it waits for the next refresh.
const POLL: Duration = Duration::from_millis(50);

/// What the loop writes each interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Redraw the screen in place.
    Screen,
    /// A table per interval, appended.
    Lines,
    /// A JSON object per line.
    Json,
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error("writing the view: {0}")]
    Io(#[from] std::io::Error),
    #[error("encoding the view: {0}")]
    Json(#[from] serde_json::Error),
}

/// Stdin in non-canonical mode without echo, so that a `q` arrives at once and is not
/// printed; the mode it had is put back when this is dropped (also on an error).
struct Keys {
    saved: Option<libc::termios>,
}

impl Keys {
    fn new() -> Keys {
        if !std::io::stdin().is_terminal() {
            return Keys { saved: None };
        }
        // SAFETY: a zeroed termios is a valid buffer for tcgetattr to fill.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd 0 is stdin, a terminal; `t` is a valid termios.
        if unsafe { libc::tcgetattr(0, &mut t) } != 0 {
            return Keys { saved: None };
        }
        let saved = t;
        t.c_lflag &= !(libc::ICANON | libc::ECHO);
        t.c_cc[libc::VMIN] = 0;
        t.c_cc[libc::VTIME] = 0;
        // SAFETY: as above; `t` is the terminal's own settings with two flags changed.
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &t) };
        Keys { saved: Some(saved) }
    }

    /// Whether `q` (or `Q`) was typed since the last look.
    fn quit_typed(&self) -> bool {
        if self.saved.is_none() {
            return false;
        }
        let mut buf = [0u8; 16];
        match std::io::stdin().read(&mut buf) {
            Ok(n) => buf[..n].iter().any(|&b| b == b'q' || b == b'Q'),
            Err(_) => false,
        }
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            // SAFETY: restores the settings tcgetattr gave for the same descriptor.
            unsafe { libc::tcsetattr(0, libc::TCSANOW, saved) };
        }
    }
}

/// The output a user gets: the screen on a terminal, lines elsewhere, JSON if asked.
pub fn output_for(json: bool) -> Output {
    if json {
        Output::Json
    } else if std::io::stdout().is_terminal() {
        Output::Screen
    } else {
        Output::Lines
    }
}

/// Shows the rates of the switch at `socket` every `interval` until `count` views were
/// shown (if given), q is typed, or SIGINT or SIGTERM comes.
pub fn run(socket: &Path, interval: Duration, count: Option<u64>, output: Output) -> Result<(), WatchError> {
    let quit = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registering can only fail for a signal that cannot be caught; these can.
        let _ = signal_hook::flag::register(signal, quit.clone());
    }
    let keys = if output == Output::Screen { Some(Keys::new()) } else { None };
    let mut out = std::io::stdout().lock();
    if output == Output::Screen {
        // The alternate screen, cursor hidden: the shell's screen comes back afterwards.
        write!(out, "\x1b[?1049h\x1b[?25l")?;
    }
    let result = watch_loop(socket, interval, count, output, &quit, keys.as_ref(), &mut out);
    if output == Output::Screen {
        write!(out, "\x1b[?25h\x1b[?1049l")?;
        out.flush()?;
    }
    result
}

fn watch_loop(
    socket: &Path,
    interval: Duration,
    count: Option<u64>,
    output: Output,
    quit: &AtomicBool,
    keys: Option<&Keys>,
    out: &mut impl Write,
) -> Result<(), WatchError> {
    let mut then: Stats = client::stats(socket)?;
    let mut shown = 0;
    while count.is_none_or(|c| shown < c) {
        let due = Instant::now() + interval;
        while Instant::now() < due {
            if quit.load(Ordering::Relaxed) || keys.is_some_and(Keys::quit_typed) {
                return Ok(());
            }
            std::thread::sleep(POLL.min(due.saturating_duration_since(Instant::now())));
        }
        let now = client::stats(socket)?;
        if let Some(rates) = Rates::between(&then, &now) {
            match output {
                Output::Screen => {
                    let table = rates.render(&now.name);
                    write!(out, "\x1b[H\x1b[2J{table}\nq or Ctrl-C quits\n")?;
                }
                Output::Lines => writeln!(out, "{}", rates.render(&now.name))?,
                Output::Json => writeln!(out, "{}", serde_json::to_string(&rates)?)?,
            }
            out.flush()?;
            shown += 1;
        }
        then = now;
    }
    Ok(())
}
