//! Progress of long work (the RFC 2544 bench, the headroom sweep, the deadlock lab, soak
//! runs, large simulations) on stderr: a bar with what is being done, how far it is and
//! an estimate of the time left (the `indicatif` crate). Only on a terminal: piped into a
//! file or a test, and with `--json`, nothing is drawn, and lines the work prints go to
//! stderr as they would without a bar.

use std::borrow::Cow;
use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar, or nothing where one must not be drawn.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar over `total` steps of `unit` (shown after the counts: "trials", "µs
    /// simulated"); none when `json` output was asked for or stderr is not a terminal.
    pub fn new(total: u64, unit: &str, json: bool) -> Progress {
        if json || !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let template =
            format!("{{msg:30}} [{{bar:30}}] {{human_pos}}/{{human_len}} {unit}, {{elapsed}} (about {{eta}} left)");
        let style = ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar());
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
            .with_style(style.progress_chars("=> "));
        Progress { bar: Some(bar) }
    }

    /// A bar that is never drawn (for work run inside another's bar, or in tests).
    pub fn hidden() -> Progress {
        Progress { bar: None }
    }

    /// What is being done now.
    pub fn message(&self, what: impl Into<Cow<'static, str>>) {
        if let Some(b) = &self.bar {
            b.set_message(what);
        }
    }

    /// `n` more steps done.
    pub fn inc(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    /// `done` steps done in all.
    pub fn set(&self, done: u64) {
        if let Some(b) = &self.bar {
            b.set_position(done);
        }
    }

    /// A line on stderr, above the bar if there is one.
    pub fn println(&self, line: impl AsRef<str>) {
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{}", line.as_ref()),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
