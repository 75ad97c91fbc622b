//! The plain-text tables pfcswitch, pfctools and the simulator print: a header row, a
//! left-aligned first column and right-aligned figures, each column as wide as its
//! widest cell. Its own crate so that a tool can print a table without depending on the
//! AF_XDP shell.

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
}
