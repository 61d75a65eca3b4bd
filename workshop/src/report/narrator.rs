//! Narration for a participant running a lab alone, or a trainer in front of a room.
//!
//! A lab is told in phases: a title, what is about to happen and what to predict, then the
//! evidence (tables, log lines), and at the end a summary (what happened, why, what an engineer
//! can do) and the verdict. Everything goes to stderr so that stdout carries only the `--json`
//! document; colour only when stderr is a terminal (and `NO_COLOR` is not set).
//!
//! Narration is best effort: a closed or broken stderr must not change a lab's verdict, so write
//! errors are ignored here rather than turned into lab errors.

use std::borrow::Cow;
use std::io::{BufRead, IsTerminal, Write};

use anstyle::{AnsiColor, Style};

use super::{LabReport, Table};

/// The opening of a phase.
#[derive(Debug, Clone, Copy)]
pub struct Phase<'a> {
    pub title: &'a str,
    /// What is about to happen.
    pub about: &'a str,
    /// What the participant should predict before reading the evidence.
    pub predict: &'a str,
}

/// The closing of a lab.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub happened: Vec<String>,
    pub why: Vec<String>,
    pub what_to_do: Vec<String>,
}

/// Where narration goes, and how it looks there.
struct Sink {
    out: Box<dyn Write + Send>,
    colour: bool,
    /// Progress bars redraw in place, which only makes sense on a terminal.
    terminal: bool,
}

/// Tells a lab's story; silent under `--check`.
pub struct Narrator {
    sink: Option<Sink>,
    step: bool,
    phases: usize,
}

const TITLE: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Cyan)));
const PREDICT: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Yellow)));
const HEADER: Style = Style::new().bold();
const DIM: Style = Style::new().dimmed();
const GOOD: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)));
const BAD: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)));

impl Narrator {
    /// No narration at all (`--check`, tests). `--step` has nothing to pace then, so it is off.
    pub fn quiet() -> Self {
        Narrator {
            sink: None,
            step: false,
            phases: 0,
        }
    }

    /// Narration on stderr; `step` waits for Enter on stdin between phases.
    pub fn stderr(step: bool) -> Self {
        let stderr = std::io::stderr();
        let terminal = stderr.is_terminal();
        // https://no-color.org: any non-empty NO_COLOR turns colour off.
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Narrator {
            sink: Some(Sink {
                out: Box::new(stderr),
                colour: terminal && !no_color,
                terminal,
            }),
            step,
            phases: 0,
        }
    }

    /// Narration into any writer (tests read it back); never pauses, never draws progress.
    pub fn to_writer(out: Box<dyn Write + Send>, colour: bool) -> Self {
        Narrator {
            sink: Some(Sink {
                out,
                colour,
                terminal: false,
            }),
            step: false,
            phases: 0,
        }
    }

    pub fn is_quiet(&self) -> bool {
        self.sink.is_none()
    }

    /// The lab's name and the phenomenon it expects, before the first phase.
    pub fn intro(&mut self, lab: &str, expected: &str) {
        let title = self.paint(TITLE, &format!("workshop {lab}"));
        let label = self.paint(HEADER, "Expected: ");
        self.write(&format!("{title}\n{label}{expected}\n"));
    }

    /// Opens a phase: pauses first under `--step` (except before the first one), then the title,
    /// what is about to happen, and what to predict.
    pub fn phase(&mut self, phase: Phase<'_>) {
        if self.sink.is_none() {
            return;
        }
        if self.step && self.phases > 0 {
            self.pause();
        }
        self.phases += 1;
        let title = self.paint(TITLE, &format!("── {}. {} ", self.phases, phase.title));
        let predict = self.paint(PREDICT, "Predict: ");
        self.write(&format!(
            "\n{title}\n{}\n{predict}{}\n",
            indent(phase.about),
            phase.predict
        ));
    }

    /// A paragraph of explanation.
    pub fn say(&mut self, text: &str) {
        let text = indent(text);
        self.write(&format!("{text}\n"));
    }

    /// Log lines or other raw evidence, set off from the prose.
    pub fn evidence(&mut self, lines: &[String]) {
        let body: String = lines
            .iter()
            .map(|line| format!("    {}\n", self.paint(DIM, line)))
            .collect();
        self.write(&body);
    }

    /// A table of evidence.
    pub fn table(&mut self, table: &Table) {
        let (header, body) = table.lines();
        let mut text = format!("    {}\n", self.paint(HEADER, &header));
        for line in body {
            text.push_str(&format!("    {line}\n"));
        }
        self.write(&text);
    }

    /// A progress bar for a long phase, drawn only on a terminal.
    pub fn progress(&self, len: u64, message: &'static str) -> Progress {
        match &self.sink {
            Some(sink) if sink.terminal => {
                let bar = indicatif::ProgressBar::with_draw_target(
                    Some(len),
                    indicatif::ProgressDrawTarget::stderr(),
                );
                if let Ok(style) =
                    indicatif::ProgressStyle::with_template("    {msg:24} [{bar:30}] {pos}/{len}")
                {
                    bar.set_style(style.progress_chars("=> "));
                }
                bar.set_message(message);
                Progress(Some(bar))
            }
            _ => Progress(None),
        }
    }

    /// A block of lines redrawn in place as it changes (a live table), drawn only on a
    /// terminal; elsewhere the lab prints the final state with [`Narrator::table`].
    pub fn live(&self) -> Progress {
        match &self.sink {
            Some(sink) if sink.terminal => {
                let bar = indicatif::ProgressBar::with_draw_target(
                    None,
                    indicatif::ProgressDrawTarget::stderr(),
                );
                if let Ok(style) = indicatif::ProgressStyle::with_template("{msg}") {
                    bar.set_style(style);
                }
                Progress(Some(bar))
            }
            _ => Progress(None),
        }
    }

    /// Whether [`Narrator::live`] draws anything: a lab can skip building what nobody sees.
    pub fn is_live(&self) -> bool {
        self.sink.as_ref().is_some_and(|sink| sink.terminal)
    }

    /// The closing summary: what happened, why, what an engineer can do.
    pub fn summary(&mut self, summary: &Summary) {
        if self.sink.is_none() {
            return;
        }
        if self.step {
            self.pause();
        }
        let mut text = format!("\n{}\n", self.paint(TITLE, "── Summary "));
        for (heading, items) in [
            ("What happened", &summary.happened),
            ("Why", &summary.why),
            ("What an engineer can do", &summary.what_to_do),
        ] {
            text.push_str(&format!("  {}\n", self.paint(HEADER, heading)));
            for item in items {
                text.push_str(&bullet(item));
            }
        }
        self.write(&text);
    }

    /// The checks the verdict rests on, then the verdict line: whether the expected phenomenon
    /// appeared, and the exit code it gives.
    pub fn verdict(&mut self, report: &LabReport, checks: &[String]) {
        let mut text = format!("\n  {}\n", self.paint(HEADER, "Checks"));
        for check in checks {
            text.push_str(&bullet(check));
        }
        let line = if report.shown {
            self.paint(GOOD, "SHOWN")
        } else {
            self.paint(BAD, "NOT SHOWN")
        };
        text.push_str(&format!(
            "\nVerdict: {line}: {} (exit code {})\n",
            report.expected,
            report.exit_code()
        ));
        self.write(&text);
    }

    fn pause(&mut self) {
        let prompt = self.paint(DIM, "  (press Enter for the next phase)");
        self.write(&prompt);
        // End of input (stdin closed or not a terminal with nothing to read) just continues.
        let _ = std::io::stdin().lock().read_line(&mut String::new());
    }

    fn paint(&self, style: Style, text: &str) -> String {
        match &self.sink {
            Some(sink) if sink.colour => {
                format!("{}{text}{}", style.render(), style.render_reset())
            }
            _ => text.to_string(),
        }
    }

    fn write(&mut self, text: &str) {
        if let Some(sink) = &mut self.sink {
            let _ = sink.out.write_all(text.as_bytes());
            let _ = sink.out.flush();
        }
    }
}

/// A progress bar, or nothing when narration is quiet or not on a terminal.
pub struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    pub fn set_message(&self, message: impl Into<Cow<'static, str>>) {
        if let Some(bar) = &self.0 {
            bar.set_message(message);
        }
    }

    pub fn inc(&self) {
        if let Some(bar) = &self.0 {
            bar.inc(1);
        }
    }

    pub fn inc_by(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(n);
        }
    }

    /// Removes the bar, leaving the screen as it was before it.
    pub fn finish(self) {
        if let Some(bar) = self.0 {
            bar.finish_and_clear();
        }
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|line| format!("  {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn bullet(text: &str) -> String {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let mark = if i == 0 { "  - " } else { "    " };
        out.push_str(&format!("{mark}{line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer the test keeps a handle on.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    fn tell(n: &mut Narrator) {
        n.intro("demo", "something happens");
        n.phase(Phase {
            title: "first",
            about: "what happens\nnext",
            predict: "how much?",
        });
        let mut table = Table::new(&[("a", super::super::Align::Left)]);
        table.row(["x"]);
        n.table(&table);
        n.evidence(&["ERROR it broke".to_string()]);
        n.phase(Phase {
            title: "second",
            about: "more",
            predict: "and now?",
        });
        n.summary(&Summary {
            happened: vec!["it broke".into()],
            why: vec!["because".into()],
            what_to_do: vec!["fix it\nproperly".into()],
        });
        let report = LabReport {
            lab: "demo",
            expected: "something happens".into(),
            shown: false,
            figures: serde_json::Value::Null,
        };
        n.verdict(&report, &["it did not happen".to_string()]);
    }

    #[test]
    fn plain_narration_has_phases_and_no_escape_codes() {
        let out = Captured::default();
        let mut n = Narrator::to_writer(Box::new(out.clone()), false);
        tell(&mut n);
        let text = out.text();
        assert!(!text.contains('\x1b'));
        for expected in [
            "workshop demo",
            "Expected: something happens",
            "── 1. first",
            "  what happens\n  next",
            "Predict: how much?",
            "    ERROR it broke",
            "── 2. second",
            "What an engineer can do",
            "  - fix it\n    properly",
            "  - it did not happen",
            "Verdict: NOT SHOWN: something happens (exit code 1)",
        ] {
            assert!(
                text.contains(expected),
                "{expected:?} missing from:\n{text}"
            );
        }
    }

    #[test]
    fn colour_wraps_titles_in_escape_codes() {
        let out = Captured::default();
        let mut n = Narrator::to_writer(Box::new(out.clone()), true);
        tell(&mut n);
        assert!(out.text().contains("\x1b["));
    }

    #[test]
    fn quiet_narration_says_nothing() {
        let mut n = Narrator::quiet();
        assert!(n.is_quiet());
        tell(&mut n);
        n.progress(3, "work").finish();
        assert!(!n.is_live());
        n.live().finish();
    }
}
