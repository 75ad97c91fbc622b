//! The plain-text tables pfcswitch, pfctools and the simulator print: a header row, a
//! left-aligned first column and right-aligned figures, each column as wide as its
//! widest cell. Its own crate so that a tool can print a table without depending on the
//! AF_XDP shell; with it, how the three binaries stop when the reader of their output
//! goes away ([`quiet_on_closed_stdout`]).
//!
//! Kept by hand rather than built on `tabled` or `comfy-table`: SONiC's layout (Python
//! `tabulate`'s `simple`) draws its rule under each column's text with two-space gaps and
//! makes each column at least two wider than its header. Tried with `tabled` 0.22 (empty
//! style, a horizontal line under the header, padding trimmed at the table's edges), the
//! rule came out as one unbroken line through the gaps and blank rows as lines of spaces;
//! matching tabulate would need this crate's own width computation on top of the crate's,
//! so the dependency would add code instead of removing it.

use std::fmt::Write;

/// Left-aligned first column, right-aligned numbers, widths from the content.
#[derive(Clone, Debug)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new<S: ToString>(headers: &[S]) -> Table {
        Table { rows: vec![headers.iter().map(|h| h.to_string()).collect()] }
    }

    /// Adds a row: one cell per header.
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.rows[0].len(), "row and header have different column counts");
        self.rows.push(cells);
    }

    /// Adds an empty row: a blank line between groups of rows.
    pub fn blank_row(&mut self) {
        self.rows.push(Vec::new());
    }

    /// Whether the table has no row beyond its header.
    pub fn is_empty(&self) -> bool {
        self.rows.len() <= 1
    }

    /// The table as text, one line per row, trailing spaces trimmed.
    pub fn render(&self) -> String {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..cols)
            .map(|c| self.rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                if c == 0 {
                    let _ = write!(line, "{cell:<w$}", w = widths[c]);
                } else {
                    let _ = write!(line, "  {cell:>w$}", w = widths[c]);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// The table as SONiC's show commands print theirs (Python's `tabulate`, format
    /// `simple`, every column right-aligned): each column two wider than its header at
    /// least, a rule of dashes under the header, two spaces between columns. An engineer
    /// who compares it with a SONiC switch's output sees the same layout.
    pub fn render_simple(&self) -> String {
        let cols = self.rows[0].len();
        let widths: Vec<usize> = (0..cols)
            .map(|c| {
                let cells = self.rows[1..].iter().filter_map(|r| r.get(c)).map(|s| s.chars().count());
                cells.max().unwrap_or(0).max(self.rows[0][c].chars().count() + 2)
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells.iter().zip(&widths).map(|(cell, &w)| format!("{cell:>w$}")).collect();
            padded.join("  ").trim_end().to_string() + "\n"
        };
        let mut out = line(&self.rows[0]);
        out += &(widths.iter().map(|&w| "-".repeat(w)).collect::<Vec<_>>().join("  ") + "\n");
        for row in &self.rows[1..] {
            out += &line(row);
        }
        out
    }
}

/// Makes a closed standard output (the reader of a pipe went away, as in `pfcsim --json |
/// head`) end the program quietly, as `cat` or `grep` end, instead of with a panic
/// and a backtrace. `print!` panics when writing to stdout fails; the hook knows that panic
/// by std's message ("failed printing to stdout") with a broken pipe, and exits with 141
/// (128 + SIGPIPE), the status a program that signal ended has. Every other panic reports as
/// before. SIGPIPE itself stays ignored (Rust's default), so that a control socket closed
/// under a write is an error to report, not a silent death.
pub fn quiet_on_closed_stdout() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            end_on_closed_stdout();
        }
        report(info);
    }));
}

/// Ends the program as SIGPIPE would have: status 141 (128 + SIGPIPE), quietly.
fn end_on_closed_stdout() -> ! {
    std::process::exit(141)
}

/// Writes to standard output through a buffer, as `print!` does but without a string of
/// it all first (a k=16 fat-tree's JSON report is 77 MB, which as one string was the
/// simulator's peak memory). A closed standard output ends the program quietly with 141,
/// as [`quiet_on_closed_stdout`] makes `print!` do; any other failure is returned.
pub fn to_stdout(write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match write(&mut out).and_then(|()| std::io::Write::flush(&mut out)) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => end_on_closed_stdout(),
        done => done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simple_layout_is_tabulates_right_aligned_columns_under_a_rule() {
        let mut t = Table::new(&["Port Rx", "PFC3"]);
        t.row(vec!["Ethernet0".into(), "1,234,567".into()]);
        t.blank_row();
        t.row(vec!["p1".into(), "0".into()]);
        assert_eq!(
            t.render_simple(),
            "  Port Rx       PFC3\n---------  ---------\nEthernet0  1,234,567\n\n       p1          0\n"
        );
    }
}
