//! The output blocks of README.md and of every page under docs/, checked against what their
//! commands print.
//!
//! A fenced block without a language that shows output is preceded by a marker line,
//! `<!-- output of: COMMAND -->`, naming the command that prints it. [`assert_blocks_of`] takes
//! what COMMAND printed (the terminal view, plain, at 100 columns) and requires every non-empty
//! line of each of its blocks to be a line of that output, in order (a block is an excerpt).
//! Values the wall clock decides are masked on both sides (`123 ns`, `(8.3 s on this machine)`,
//! and member ids' UUIDs), and runs of spaces count as one. Blocks are found by `room.rs`, which runs each lab once anyway.

use std::path::{Path, PathBuf};

/// Every output block of the README and the docs: (command, its lines).
pub fn blocks() -> Vec<(String, Vec<String>)> {
    pages().iter().flat_map(|page| blocks_of(page)).collect()
}

/// README.md and every Markdown page under docs/, sorted so failures read the same each run.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut pages = vec![root.join("README.md")];
    let mut folders = vec![root.join("docs")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("docs/ is readable") {
            let path = entry.expect("a docs/ entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages[1..].sort();
    pages
}

/// The output blocks of one page.
fn blocks_of(path: &Path) -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(path).expect("a docs page is readable");
    let name = path.display();
    enum Block {
        /// Code (a fence with a language): not output.
        Code,
        /// Output, with the command its marker names (if any), and its lines so far.
        Output(Option<String>, Vec<String>),
    }
    let mut blocks = Vec::new();
    let mut marker: Option<String> = None;
    let mut open: Option<Block> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        match open.as_mut() {
            Some(_) if trimmed == "```" => {
                if let Some(Block::Output(command, lines)) = open.take() {
                    let command = command.unwrap_or_else(|| {
                        panic!(
                            "{name}: a block that looks like output names no command \
                             (`<!-- output of: COMMAND -->` before it):\n{}",
                            lines.join("\n")
                        )
                    });
                    blocks.push((command, lines));
                }
            }
            Some(Block::Output(_, lines)) => lines.push(line.to_string()),
            Some(Block::Code) => {}
            None => {
                if let Some(language) = trimmed.strip_prefix("```") {
                    open = Some(if language.is_empty() {
                        Block::Output(marker.take(), Vec::new())
                    } else {
                        Block::Code
                    });
                } else if let Some(rest) = trimmed.strip_prefix("<!-- output of:") {
                    marker = Some(rest.trim_end_matches("-->").trim().to_string());
                } else if !trimmed.is_empty() {
                    marker = None;
                }
            }
        }
    }
    assert!(open.is_none(), "{name} ends inside a block");
    blocks
}

/// Masks what the wall clock or the broker decides: the digits of `N ns` and of `(N s on this
/// machine)`, and member ids' UUIDs (a coordinator draws them, as Kafka's does).
pub fn masked(line: &str) -> String {
    let line = &mask_uuids(line);
    let mut out = String::with_capacity(line.len());
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let rest: String = chars[i..].iter().collect();
            if rest.starts_with(" ns") || rest.starts_with(" s on this machine") {
                out.push('#');
            } else {
                out.extend(&chars[start..i]);
            }
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    // Alignment follows the widest cell, which may be a masked one: compare words, not padding.
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `8-4-4-4-12` hex digits become `<uuid>`.
fn mask_uuids(line: &str) -> String {
    let bytes = line.as_bytes();
    let groups = [8, 4, 4, 4, 12];
    let uuid_at = |start: usize| -> Option<usize> {
        let mut i = start;
        for (g, &len) in groups.iter().enumerate() {
            if g > 0 {
                (bytes.get(i) == Some(&b'-')).then_some(())?;
                i += 1;
            }
            let digits = bytes.get(i..i + len)?;
            digits.iter().all(u8::is_ascii_hexdigit).then_some(())?;
            i += len;
        }
        Some(i)
    };
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < bytes.len() {
        match uuid_at(i) {
            Some(end) if i == 0 || !bytes[i - 1].is_ascii_hexdigit() => {
                out.push_str("<uuid>");
                i = end;
            }
            _ => {
                let c = line[i..].chars().next().expect("a char boundary");
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

/// Checks every block of the README and the docs marked as the output of `command` against
/// `output`; returns how many blocks it checked.
pub fn assert_blocks_of(command: &str, output: &str) -> usize {
    let printed: Vec<String> = output.lines().map(masked).collect();
    let mut checked = 0;
    for (_, lines) in blocks().iter().filter(|(c, _)| c == command) {
        let mut at = 0;
        for line in lines.iter().filter(|l| !l.trim().is_empty()) {
            let want = masked(line);
            match printed[at..].iter().position(|p| *p == want) {
                Some(found) => at += found + 1,
                None => panic!(
                    "README.md or docs/: `{command}` does not print this line (or not in this order):\n  \
                     {line}\nwhat it printed:\n{output}"
                ),
            }
        }
        checked += 1;
    }
    checked
}
