//! Plain-text tables for evidence: columns padded to their widest cell, numbers aligned right.

use serde::Serialize;

use super::fit::{abbreviate, columns};

/// Columns are never narrowed below this when a table must fit a width.
const MIN_COLUMN: usize = 6;

/// How a column's cells line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Align {
    Left,
    Right,
}

/// A table of evidence, rendered as aligned text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table {
    columns: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(columns: &[(&str, Align)]) -> Self {
        Table {
            columns: columns
                .iter()
                .map(|(name, align)| (name.to_string(), *align))
                .collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; missing cells are blank, extra cells are dropped.
    pub fn row<I, S>(&mut self, cells: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut row: Vec<String> = cells.into_iter().map(Into::into).collect();
        row.resize(self.columns.len(), String::new());
        self.rows.push(row);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The header line and the body lines, without styling, each without trailing spaces.
    pub fn lines(&self) -> (String, Vec<String>) {
        self.lines_within(usize::MAX)
    }

    /// The same, each line at most `width` columns: while the table is wider, its widest column
    /// is narrowed (cells cut with `…`), none below a few columns; a table that still does not
    /// fit has its lines cut.
    pub fn lines_within(&self, width: usize) -> (String, Vec<String>) {
        let mut widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, (name, _))| {
                self.rows
                    .iter()
                    .map(|row| columns(&row[i]))
                    .chain([columns(name)])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let total =
            |widths: &[usize]| widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
        while total(&widths) > width {
            let Some((widest, &w)) = widths.iter().enumerate().max_by_key(|(_, w)| **w) else {
                break;
            };
            if w <= MIN_COLUMN {
                break;
            }
            widths[widest] = (w - (total(&widths) - width)).max(MIN_COLUMN);
        }
        let line = |cells: Vec<&str>| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&self.columns)
                .zip(&widths)
                .map(|((cell, (_, align)), &width)| {
                    let cell = abbreviate(cell, width);
                    match align {
                        Align::Left => format!("{cell:<width$}"),
                        Align::Right => format!("{cell:>width$}"),
                    }
                })
                .collect();
            abbreviate(padded.join("  ").trim_end(), width)
        };
        let header = line(self.columns.iter().map(|(name, _)| name.as_str()).collect());
        let body = self
            .rows
            .iter()
            .map(|row| line(row.iter().map(String::as_str).collect()))
            .collect();
        (header, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align() {
        let mut table = Table::new(&[("scheme", Align::Left), ("moved", Align::Right)]);
        table.row(["mod-n", "80.0 %"]).row(["ring", "20.1 %"]);
        table.row(["jump"]);
        let (header, body) = table.lines();
        assert_eq!(header, "scheme   moved");
        assert_eq!(body, vec!["mod-n   80.0 %", "ring    20.1 %", "jump"]);
    }

    #[test]
    fn a_wide_table_narrows_its_widest_column() {
        let mut table = Table::new(&[("member", Align::Left), ("lag", Align::Right)]);
        table.row(["order-service-consumer-1-0c61e815", "60"]);
        let (header, body) = table.lines_within(20);
        assert_eq!(header, "member           lag");
        assert_eq!(body, ["order-service-…   60"]);
        assert!(columns(&body[0]) <= 20);
    }
}
