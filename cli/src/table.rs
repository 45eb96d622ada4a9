//! Left-aligned text tables: columns padded to their widest cell; a header
//! in bold and a cell painted by `style` only when colour is on (widths count
//! what shows, not the escape codes). Every cell is shown on one line with
//! its control characters made visible (`leasehold_core::visible`), so a cell
//! can hold text from anywhere: only the table's own paint reaches the terminal.

use anstyle::Style;

use crate::style::{self, width};

/// A table: a header row and data rows, printed with columns padded to their widest cell.
#[derive(Debug, Default)]
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// The painted cells of each row: their columns and styles.
    paint: Vec<Vec<(usize, Style)>>,
}

impl Table {
    /// A table with these column names.
    pub(crate) fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
            paint: Vec::new(),
        }
    }

    /// Adds a row; missing cells print empty.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.iter().map(|c| one_line(c)).collect());
        self.paint.push(Vec::new());
    }

    /// Adds a row whose cells in the columns of `paint` are painted in their
    /// styles (when colour is on).
    pub(crate) fn painted_row(&mut self, cells: Vec<String>, paint: &[(usize, Style)]) {
        self.row(cells);
        if let Some(last) = self.paint.last_mut() {
            last.extend_from_slice(paint);
        }
    }

    /// Whether no row was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, each line indented by `indent` and ending in a newline.
    pub(crate) fn render(&self, indent: &str) -> String {
        let n = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| width(h)).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(n) {
                widths[i] = widths[i].max(width(cell));
            }
        }
        let mut out = String::new();
        let mut line = |cells: &[String], paint: &[(usize, Style)]| {
            let mut text = String::from(indent);
            for (i, column) in widths.iter().enumerate() {
                let cell = cells.get(i).map(String::as_str).unwrap_or("");
                match paint.iter().find(|(c, _)| *c == i) {
                    Some((_, style)) => text.push_str(&style::paint(*style, cell)),
                    None => text.push_str(cell),
                }
                if i + 1 < n {
                    let pad = column - width(cell) + 2;
                    text.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        let header: Vec<String> = self.header.iter().map(|h| style::header(h)).collect();
        line(&header, &[]);
        for (row, paint) in self.rows.iter().zip(&self.paint) {
            line(row, paint);
        }
        out
    }
}

/// A cell on one line: newlines and tabs as spaces, every other control
/// character shown visibly.
fn one_line(cell: &str) -> String {
    leasehold_core::visible(&cell.replace(['\n', '\t'], " ")).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_aligned() {
        let mut t = Table::new(&["ID", "STATE"]);
        t.row(vec!["a".into(), "QUEUED".into()]);
        t.row(vec!["long-id".into(), "RUNNING".into()]);
        assert_eq!(
            t.render(""),
            "ID       STATE\na        QUEUED\nlong-id  RUNNING\n"
        );
    }

    #[test]
    fn a_cell_cannot_drive_the_terminal() {
        let mut t = Table::new(&["WHY", "N"]);
        t.row(vec!["\x1b[2Jboom\r\nnext\u{9b}".into(), "1".into()]);
        assert_eq!(
            t.render(""),
            "WHY                     N\n\\x1b[2Jboom\\r next\\x9b  1\n"
        );
    }
}
