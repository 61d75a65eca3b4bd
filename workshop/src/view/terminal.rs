//! The terminal view: the lab event stream as text for people, within a width.
//!
//! Prose is wrapped, tables narrowed, lag tables shortened for a room (see [`lag_lines`]), log
//! lines wrapped onto at most two lines and abbreviated. Colour only when asked (a terminal
//! without `NO_COLOR`); progress bars and live tables only on a terminal, and always taken off
//! the screen before anything else is written. Under `--step`, a pause before a phase clears a
//! terminal's screen, so each phase starts at the top.
//!
//! Narration is best effort: a closed or broken output must not change a lab's verdict, so
//! write errors are ignored here rather than turned into lab errors.

use std::io::{IsTerminal, Write};

use anstyle::{AnsiColor, Color, Style};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::lab::report::{
    abbreviate, lag_lines, wrap, Align, Check, Event, Level, LogLine, Pause, Subscriber, Table,
    Violation,
};

/// The width when the terminal is not wider and `--width` is not given: a projector's.
pub const DEFAULT_WIDTH: usize = 100;
/// Lines a log line may take before it is abbreviated.
const LOG_LINES: usize = 2;
/// Evidence is indented under the prose.
const INDENT: &str = "    ";

const TITLE: Style = Style::new()
    .bold()
    .fg_color(Some(Color::Ansi(AnsiColor::Cyan)));
const PREDICT: Style = Style::new()
    .bold()
    .fg_color(Some(Color::Ansi(AnsiColor::Yellow)));
const HEADER: Style = Style::new().bold();
const DIM: Style = Style::new().dimmed();
const WARN: Style = Style::new().fg_color(Some(Color::Ansi(AnsiColor::Yellow)));
const GOOD: Style = Style::new()
    .bold()
    .fg_color(Some(Color::Ansi(AnsiColor::Green)));
const BAD: Style = Style::new()
    .bold()
    .fg_color(Some(Color::Ansi(AnsiColor::Red)));

/// Where the terminal view writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// How the terminal view looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalOptions {
    /// Columns no line goes past.
    pub width: usize,
    pub colour: bool,
    /// A terminal: progress bars, live tables, cleared screens, prompts erased once answered.
    pub tty: bool,
    /// Every partition of a lag table, no run collapsed.
    pub all_partitions: bool,
}

impl TerminalOptions {
    /// Plain text at `width`, as written to a file or a pipe.
    pub fn plain(width: usize) -> Self {
        TerminalOptions {
            width,
            colour: false,
            tty: false,
            all_partitions: false,
        }
    }

    /// For `stream`: a terminal's colour (unless `NO_COLOR`), and `width`, or the terminal's
    /// own when it is wider than the default.
    pub fn for_stream(stream: Stream, width: Option<usize>, all_partitions: bool) -> Self {
        let term = match stream {
            Stream::Stdout => console::Term::stdout(),
            Stream::Stderr => console::Term::stderr(),
        };
        let tty = match stream {
            Stream::Stdout => std::io::stdout().is_terminal(),
            Stream::Stderr => std::io::stderr().is_terminal(),
        };
        // https://no-color.org: any non-empty NO_COLOR turns colour off.
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let own = term
            .size_checked()
            .filter(|_| tty)
            .map(|(_, columns)| usize::from(columns));
        TerminalOptions {
            width: width.unwrap_or_else(|| own.unwrap_or(0).max(DEFAULT_WIDTH)),
            colour: tty && !no_color,
            tty,
            all_partitions,
        }
    }
}

/// The terminal view.
pub struct Terminal {
    out: Box<dyn Write + Send>,
    options: TerminalOptions,
    /// Where progress bars draw (a terminal stream), if anywhere.
    bars: Option<Stream>,
    /// The progress bar or live table on screen, by its id.
    bar: Option<(u64, ProgressBar)>,
    /// A prompt is on the current line of a terminal, to be erased when the lab goes on.
    prompt: bool,
    /// The last pause was before the next screen: clear the terminal first.
    next_screen: bool,
    checks_begun: bool,
}

impl Terminal {
    /// The view on stdout or stderr.
    pub fn on(stream: Stream, options: TerminalOptions) -> Self {
        let out: Box<dyn Write + Send> = match stream {
            Stream::Stdout => Box::new(std::io::stdout()),
            Stream::Stderr => Box::new(std::io::stderr()),
        };
        let bars = options.tty.then_some(stream);
        let mut view = Terminal::new(out, options);
        view.bars = bars;
        view
    }

    /// The view into any writer; no progress bars.
    pub fn new(out: Box<dyn Write + Send>, options: TerminalOptions) -> Self {
        Terminal {
            out,
            options,
            bars: None,
            bar: None,
            prompt: false,
            next_screen: false,
            checks_begun: false,
        }
    }

    /// `events` as the view writes them (tests, and the README's examples).
    pub fn render(events: &[Event], options: TerminalOptions) -> String {
        let shared = Shared::default();
        let mut view = Terminal::new(Box::new(shared.clone()), options);
        for event in events {
            view.event(event);
        }
        drop(view);
        let bytes = shared.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn text(&self, event: &Event) -> String {
        let width = self.options.width;
        let mut lines: Vec<String> = Vec::new();
        match event {
            Event::Intro { lab, expected } => {
                lines.push(self.paint(TITLE, &format!("workshop {lab}")));
                lines.extend(self.labelled("Expected: ", expected, HEADER));
            }
            Event::Phase {
                number,
                title,
                about,
            } => {
                lines.push(String::new());
                let title = abbreviate(&format!("── {number}. {title} "), width);
                lines.push(self.paint(TITLE, &title));
                lines.extend(wrap(about, "  ", "  ", width));
            }
            Event::Question { text, .. } => lines.extend(self.labelled("Predict: ", text, PREDICT)),
            Event::Skipped { reason, .. } => {
                lines.extend(self.labelled("Skipped: ", &format!("{reason}."), BAD));
            }
            Event::Waiting { pause } => {
                let prompt = match pause {
                    Pause::Answer => "  (press Enter for the answer)",
                    Pause::Next => "  (press Enter for the next screen)",
                };
                let prompt = self.paint(DIM, prompt);
                // On a terminal the prompt stays on its line, erased when the lab goes on.
                return if self.options.tty {
                    prompt
                } else {
                    format!("{prompt}\n")
                };
            }
            Event::Text { text } => lines.extend(wrap(text, "  ", "  ", width)),
            Event::Table { table } => lines.extend(self.table(table)),
            Event::Lag { rows } => {
                let room = width.saturating_sub(INDENT.len());
                let (header, body) = lag_lines(rows, room, self.options.all_partitions);
                lines.extend(self.evidence(header, body));
            }
            Event::Log { lines: log } => {
                for line in log {
                    lines.extend(self.log_line(line));
                }
            }
            Event::Violations { total, shown } => {
                lines.extend(self.table(&violations(shown)));
                if *total > shown.len() {
                    lines.push(format!("{INDENT}(the first {} of {total})", shown.len()));
                }
            }
            Event::Summary {
                happened,
                why,
                what_to_do,
            } => {
                lines.push(String::new());
                lines.push(self.paint(TITLE, "── Summary "));
                for (heading, items) in [
                    ("What happened", happened),
                    ("Why", why),
                    ("What an engineer can do", what_to_do),
                ] {
                    lines.push(format!("  {}", self.paint(HEADER, heading)));
                    for item in items {
                        lines.extend(wrap(item, "  - ", "    ", width));
                    }
                }
            }
            Event::Check { check } => lines.extend(self.check(check)),
            Event::Verdict {
                shown,
                expected,
                exit_code,
                failed,
                skipped,
            } => {
                lines.push(String::new());
                let (word, style) = if *shown {
                    ("SHOWN", GOOD)
                } else {
                    ("NOT SHOWN", BAD)
                };
                let mut line = format!("Verdict: {word} (exit code {exit_code})");
                if !failed.is_empty() {
                    line.push_str(&format!(", failed: {}", failed.join("; ")));
                }
                if !skipped.is_empty() {
                    line.push_str(&format!(
                        ", for the phases that ran (skipped: {})",
                        skipped.join("; ")
                    ));
                }
                line.push_str(&format!(". Expected: {expected}"));
                let mut wrapped = wrap(&line, "", "  ", width);
                if self.options.colour {
                    wrapped[0] = wrapped[0].replacen(word, &self.paint(style, word), 1);
                }
                lines.extend(wrapped);
            }
            Event::Answer { .. }
            | Event::Progress { .. }
            | Event::Live { .. }
            | Event::Tail { .. }
            | Event::Panel { .. }
            | Event::Done { .. } => return String::new(),
        }
        let mut text = lines.join("\n");
        text.push('\n');
        text
    }

    /// `label` then `text`, wrapped, with the label styled.
    fn labelled(&self, label: &str, text: &str, style: Style) -> Vec<String> {
        let mut lines = wrap(&format!("{label}{text}"), "", "  ", self.options.width);
        if let Some(first) = lines.first_mut() {
            if let Some(rest) = first.strip_prefix(label) {
                *first = format!("{}{rest}", self.paint(style, label.trim_end()) + " ");
            }
        }
        lines
    }

    fn table(&self, table: &Table) -> Vec<String> {
        let room = self.options.width.saturating_sub(INDENT.len());
        let (header, body) = table.lines_within(room);
        self.evidence(header, body)
    }

    fn evidence(&self, header: String, body: Vec<String>) -> Vec<String> {
        let mut lines = Vec::with_capacity(body.len() + 1);
        if !header.trim().is_empty() {
            lines.push(format!("{INDENT}{}", self.paint(HEADER, &header)));
        }
        lines.extend(body.into_iter().map(|line| format!("{INDENT}{line}")));
        lines
    }

    /// `at LEVEL [source] text`, the text wrapped under itself onto at most two lines.
    fn log_line(&self, line: &LogLine) -> Vec<String> {
        let mut head = String::from(INDENT);
        if let Some(at) = &line.at {
            head.push_str(at);
            head.push(' ');
        }
        head.push_str(line.level.label());
        head.push(' ');
        if let Some(source) = &line.source {
            head.push_str(&format!("[{source}] "));
        }
        let width = self.options.width;
        let hang = " ".repeat(head.chars().count().min(width / 2));
        let mut lines = wrap(&line.text, &head, &hang, width);
        if lines.len() > LOG_LINES {
            lines.truncate(LOG_LINES);
            let last = &mut lines[LOG_LINES - 1];
            *last = abbreviate(&format!("{last} …"), width);
        }
        let style = match line.level {
            Level::Error => BAD,
            Level::Warn => WARN,
            Level::Info | Level::Note => DIM,
        };
        lines.into_iter().map(|l| self.paint(style, &l)).collect()
    }

    fn check(&self, check: &Check) -> Vec<String> {
        let (mark, style) = match (check.skipped, check.ok) {
            (true, _) => ("skipped:", DIM),
            (false, true) => ("ok:", GOOD),
            (false, false) => ("NOT:", BAD),
        };
        let first = format!("  - {mark} ");
        let mut lines = wrap(&check.detail, &first, "    ", self.options.width);
        if self.options.colour {
            lines[0] = lines[0].replacen(mark, &self.paint(style, mark), 1);
        }
        lines
    }

    fn paint(&self, style: Style, text: &str) -> String {
        if self.options.colour {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_string()
        }
    }

    fn write(&mut self, text: &str) {
        let mut text = text.to_string();
        if self.prompt {
            text.insert_str(0, "\r\x1b[2K");
            self.prompt = false;
        }
        let out = &mut self.out;
        let mut put = || {
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        };
        match &self.bar {
            Some((_, bar)) => bar.suspend(put),
            None => put(),
        }
    }

    /// A bar (or live table) with this id, made on first sight with `style`.
    fn bar(&mut self, id: u64, len: Option<u64>, style: &str) -> Option<&ProgressBar> {
        let stream = self.bars?;
        if self.bar.as_ref().is_some_and(|(current, _)| *current != id) {
            self.finish_bar();
        }
        if self.bar.is_none() {
            let target = match stream {
                Stream::Stdout => ProgressDrawTarget::stdout(),
                Stream::Stderr => ProgressDrawTarget::stderr(),
            };
            let bar = ProgressBar::with_draw_target(len, target);
            if let Ok(style) = ProgressStyle::with_template(style) {
                bar.set_style(style.progress_chars("=> "));
            }
            self.bar = Some((id, bar));
        }
        self.bar.as_ref().map(|(_, bar)| bar)
    }

    fn finish_bar(&mut self) {
        if let Some((_, bar)) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Subscriber for Terminal {
    fn event(&mut self, event: &Event) {
        match event {
            Event::Progress {
                id,
                label,
                done,
                total,
            } => {
                let template = "    {msg:30} [{bar:30}] {pos}/{len}";
                if let Some(bar) = self.bar(*id, Some(*total), template) {
                    bar.set_message(abbreviate(label, 30));
                    bar.set_position(*done);
                }
                return;
            }
            Event::Live { id, label, rows } => {
                let room = self.options.width.saturating_sub(INDENT.len());
                let (header, body) = lag_lines(rows, room, self.options.all_partitions);
                let mut text = vec![format!("{INDENT}{}", abbreviate(label, room))];
                text.extend(self.evidence(header, body));
                if let Some(bar) = self.bar(*id, None, "{msg}") {
                    bar.set_message(text.join("\n"));
                }
                return;
            }
            Event::Done { id } => {
                if self.bar.as_ref().is_some_and(|(current, _)| current == id) {
                    self.finish_bar();
                }
                return;
            }
            // The lab's tables and prose already tell a panel's figures, within the width.
            Event::Panel { .. } => return,
            _ => {}
        }
        let new_screen = matches!(event, Event::Phase { .. } | Event::Summary { .. })
            || (matches!(event, Event::Check { .. }) && !self.checks_begun);
        let cleared = new_screen && self.next_screen && self.options.tty;
        let mut text = String::new();
        if cleared {
            text.push_str("\x1b[2J\x1b[H");
            self.prompt = false;
        }
        if let Event::Check { .. } = event {
            if !self.checks_begun {
                self.checks_begun = true;
                text.push_str(&format!("\n  {}\n", self.paint(HEADER, "Checks")));
            }
        }
        text.push_str(&self.text(event));
        // A cleared screen starts at its top line: no blank line above the title.
        if cleared {
            text = text.replacen("\x1b[H\n", "\x1b[H", 1);
        }
        self.write(&text);
        self.next_screen = matches!(event, Event::Waiting { pause: Pause::Next });
        if matches!(event, Event::Waiting { .. }) && self.options.tty {
            self.prompt = true;
        }
    }

    fn live(&self) -> bool {
        self.bars.is_some()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.finish_bar();
    }
}

/// Violations as a table: when, which key, what arrived, what it overtook, why.
fn violations(shown: &[Violation]) -> Table {
    let mut table = Table::new(&[
        ("WHEN", Align::Left),
        ("KEY", Align::Left),
        ("ARRIVED", Align::Left),
        ("BEFORE", Align::Left),
        ("BECAUSE", Align::Left),
    ]);
    for v in shown {
        table.row([
            v.at.clone(),
            v.key.clone(),
            v.found.clone(),
            v.expected.clone(),
            v.cause.clone(),
        ]);
    }
    table
}

/// A writer the render keeps a handle on.
#[derive(Clone, Default)]
struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut bytes) = self.0.lock() {
            bytes.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn story() -> Vec<Event> {
        let mut table = Table::new(&[("scheme", Align::Left), ("moved", Align::Right)]);
        table.row(["mod-n", "80.1 %"]);
        vec![
            Event::Intro {
                lab: "demo".into(),
                expected: "something happens".into(),
            },
            Event::Phase {
                number: 1,
                title: "first".into(),
                about: "what happens next, told at some length so that it has to wrap at forty"
                    .into(),
            },
            Event::Question {
                phase: 1,
                text: "how much?".into(),
            },
            Event::Waiting {
                pause: Pause::Answer,
            },
            Event::Answer { phase: 1 },
            Event::Table { table },
            Event::Log {
                lines: vec![LogLine {
                    at: Some("round  25".into()),
                    level: Level::Error,
                    source: None,
                    text: "aggregate not found: order 8842 (expected version 6, store empty), \
                           and then a great deal more that cannot fit"
                        .into(),
                }],
            },
            Event::Phase {
                number: 2,
                title: "grow".into(),
                about: String::new(),
            },
            Event::Skipped {
                phase: 2,
                reason: "this cluster does not offer CreatePartitions".into(),
            },
            Event::Check {
                check: Check {
                    name: "it happened".into(),
                    ok: false,
                    detail: "0 times".into(),
                    skipped: false,
                },
            },
            Event::Check {
                check: Check {
                    name: "it grew".into(),
                    ok: false,
                    detail: "this cluster does not offer CreatePartitions".into(),
                    skipped: true,
                },
            },
            Event::Verdict {
                shown: false,
                expected: "something happens".into(),
                exit_code: 1,
                failed: vec!["it happened".into()],
                skipped: vec!["it grew".into()],
            },
        ]
    }

    #[test]
    fn plain_text_fits_the_width_and_has_no_escape_codes() {
        let text = Terminal::render(&story(), TerminalOptions::plain(40));
        assert!(!text.contains('\x1b'), "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 40), "{text}");
        for expected in [
            "workshop demo\nExpected: something happens\n",
            "── 1. first",
            "Predict: how much?\n  (press Enter for the answer)\n",
            "    scheme   moved\n    mod-n   80.1 %\n",
            "    round  25 ERROR aggregate not found:",
            "  - NOT: 0 times",
            "── 2. grow",
            "Skipped: this cluster does not offer\n  CreatePartitions.\n",
            "  - skipped: this cluster does not offer\n    CreatePartitions",
            "Verdict: NOT SHOWN (exit code 1),\n  failed: it happened, for the phases\n  that ran (skipped: it grew).",
        ] {
            assert!(
                text.contains(expected),
                "{expected:?} missing from:\n{text}"
            );
        }
        assert!(
            text.contains("    round  25 ERROR aggregate not found:\n                    order 8842 (expecte…\n"),
            "the long log line takes two lines and is abbreviated:\n{text}"
        );
    }

    #[test]
    fn colour_wraps_titles_and_marks_in_escape_codes() {
        let mut options = TerminalOptions::plain(100);
        options.colour = true;
        let text = Terminal::render(&story(), options);
        assert!(text.contains("\x1b["));
        assert!(
            !text.contains("\x1b[2J"),
            "no screen cleared off a terminal"
        );
    }

    #[test]
    fn a_terminal_clears_the_screen_before_the_next_phase() {
        let mut options = TerminalOptions::plain(100);
        options.tty = true;
        let events = [
            Event::Waiting { pause: Pause::Next },
            Event::Phase {
                number: 2,
                title: "second".into(),
                about: String::new(),
            },
        ];
        let text = Terminal::render(&events, options);
        assert!(text.contains("\x1b[2J\x1b[H── 2. second"), "{text:?}");
    }
}
