//! Plain-text tables for evidence: columns padded to their widest cell, numbers aligned right.

/// How a column's cells line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table of evidence, rendered as aligned text.
#[derive(Debug, Clone)]
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
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, (name, _))| {
                self.rows
                    .iter()
                    .map(|row| row[i].chars().count())
                    .chain([name.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: Vec<&str>| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&self.columns)
                .zip(&widths)
                .map(|((cell, (_, align)), width)| match align {
                    Align::Left => format!("{cell:<width$}"),
                    Align::Right => format!("{cell:>width$}"),
                })
                .collect();
            padded.join("  ").trim_end().to_string()
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
}
