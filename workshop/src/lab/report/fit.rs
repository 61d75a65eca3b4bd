//! Fitting text into a width: prose wrapped at word boundaries, long lines abbreviated.
//!
//! Every character the labs print takes one column (ASCII, box drawing, block elements, `€`),
//! so a string's width is its number of characters.

/// Columns `text` takes.
pub fn columns(text: &str) -> usize {
    text.chars().count()
}

/// `text` cut to `width` columns, ending in `…` when something was cut.
pub fn abbreviate(text: &str, width: usize) -> String {
    if columns(text) <= width {
        return text.to_string();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Wraps `text` into lines of at most `width` columns: the first line starts with `first`, the
/// others with `rest`. `\n` is a hard break; a line's own leading spaces are kept, and a line
/// that is a list item (`- `) continues under its text.
pub fn wrap(text: &str, first: &str, rest: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let lead = if i == 0 { first } else { rest };
        let body = line.trim_start_matches(' ');
        let own = &line[..line.len() - body.len()];
        let hang = if body.starts_with("- ") { "  " } else { "" };
        let start = format!("{lead}{own}");
        let next = format!("{rest}{own}{hang}");
        fill(body, &start, &next, width, &mut out);
    }
    out
}

/// Units that stay on the line of the number before them (`20 %`, `40 s`, `15.0 KiB`).
const UNITS: [&str; 8] = ["%", "s", "ms", "ns", "B", "KiB", "MiB", "x"];

/// The words of `body`, a unit glued to the number before it.
fn words(body: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in body.split_whitespace() {
        let unit = UNITS.contains(&word.trim_end_matches([',', '.', ';', ':', ')']));
        match words.last_mut() {
            Some(last) if unit && last.ends_with(|c: char| c.is_ascii_digit()) => {
                last.push(' ');
                last.push_str(word);
            }
            _ => words.push(word.to_string()),
        }
    }
    words
}

/// Greedy fill of `body`'s words; a word longer than a line is split. A body that fits is kept
/// as it is, its spacing included (log lines align their fields with runs of spaces).
fn fill(body: &str, start: &str, next: &str, width: usize, out: &mut Vec<String>) {
    if columns(start) + columns(body) <= width {
        out.push(format!("{start}{body}").trim_end().to_string());
        return;
    }
    let mut line = start.to_string();
    let mut empty = true;
    for word in words(body) {
        let mut word = word.as_str();
        loop {
            if !empty {
                if columns(&line) + 1 + columns(word) <= width {
                    line.push(' ');
                    line.push_str(word);
                    break;
                }
                out.push(std::mem::replace(&mut line, next.to_string()));
                empty = true;
            }
            // At least one column, so even a prefix as wide as the line makes progress.
            let room = width.saturating_sub(columns(&line)).max(1);
            if columns(word) <= room {
                line.push_str(word);
                empty = false;
                break;
            }
            let cut = word
                .char_indices()
                .nth(room)
                .map_or(word.len(), |(at, _)| at);
            line.push_str(&word[..cut]);
            word = &word[cut..];
            out.push(std::mem::replace(&mut line, next.to_string()));
        }
    }
    out.push(line.trim_end().to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_wraps_at_words_within_the_width() {
        let lines = wrap(
            "one two three four five six seven eight nine ten",
            "  ",
            "  ",
            20,
        );
        assert_eq!(
            lines,
            [
                "  one two three four",
                "  five six seven",
                "  eight nine ten"
            ]
        );
        assert!(lines.iter().all(|l| columns(l) <= 20));
    }

    #[test]
    fn hard_breaks_list_items_and_first_line_prefixes() {
        let lines = wrap(
            "Predict: which one?\n- a long item that wraps",
            "",
            "  ",
            16,
        );
        assert_eq!(
            lines,
            [
                "Predict: which",
                "  one?",
                "  - a long item",
                "    that wraps"
            ]
        );
        assert_eq!(wrap("", "  ", "  ", 10), [""]);
    }

    #[test]
    fn a_line_that_fits_keeps_its_spacing() {
        assert_eq!(
            wrap("order.created    order_id=1", "  ", "  ", 40),
            ["  order.created    order_id=1"]
        );
    }

    #[test]
    fn a_unit_stays_with_its_number() {
        assert_eq!(
            wrap("it moved about 20 %, once", "", "  ", 17),
            ["it moved about", "  20 %, once"]
        );
    }

    #[test]
    fn a_word_wider_than_the_line_is_split() {
        let lines = wrap("x abcdefghijklmnop", "", "", 8);
        assert_eq!(lines, ["x", "abcdefgh", "ijklmnop"]);
        assert!(lines.iter().all(|l| columns(l) <= 8));
    }

    #[test]
    fn abbreviations_end_in_an_ellipsis() {
        assert_eq!(abbreviate("short", 10), "short");
        assert_eq!(abbreviate("0123456789abc", 10), "012345678…");
        assert_eq!(columns(&abbreviate("€€€€€€€€€€€€", 5)), 5);
    }
}
