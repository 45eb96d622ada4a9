//! Left-aligned text tables: columns padded to their widest cell; a header
//! in bold and cells styled by `style` only when colour is on (widths count
//! what shows, not the escape codes).

use crate::style::{self, width};

/// A table: a header row and data rows, printed with columns padded to their widest cell.
#[derive(Debug, Default)]
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub(crate) fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells print empty.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether no row was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, each line indented by `indent` and ending in a newline.
    pub(crate) fn render(&self, indent: &str) -> String {
        let n = self.header.len();
        let clean = |s: &str| s.replace(['\n', '\r', '\t'], " ");
        let mut widths: Vec<usize> = self.header.iter().map(|h| width(h)).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(n) {
                widths[i] = widths[i].max(width(&clean(cell)));
            }
        }
        let mut out = String::new();
        let mut line = |cells: &[String], head: bool| {
            let mut text = String::from(indent);
            for (i, column) in widths.iter().enumerate() {
                let cell = clean(cells.get(i).map(String::as_str).unwrap_or(""));
                let shown = width(&cell);
                if head {
                    text.push_str(&style::header(&cell));
                } else {
                    text.push_str(&cell);
                }
                if i + 1 < n {
                    let pad = column - shown + 2;
                    text.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(&self.header, true);
        for row in &self.rows {
            line(row, false);
        }
        out
    }
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
}
