//! Left-aligned columns, two spaces apart, as Kafka's tools print tables.

use std::io::{self, Write};

pub fn write(out: &mut impl Write, header: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |out: &mut dyn Write, cells: &mut dyn Iterator<Item = &str>| -> io::Result<()> {
        let mut text = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            text.push_str(&format!("{cell:<w$}"));
        }
        writeln!(out, "{}", text.trim_end())
    };
    line(out, &mut header.iter().copied())?;
    for row in rows {
        line(out, &mut row.iter().map(String::as_str))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_line_up() {
        let mut out = Vec::new();
        super::write(
            &mut out,
            &["KEY", "PARTITION"],
            &[
                vec!["order-8842".into(), "4".into()],
                vec!["a".into(), "11".into()],
            ],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "KEY         PARTITION\norder-8842  4\na           11\n"
        );
    }
}
