//! The lab event stream: what a lab tells, as data.
//!
//! A lab emits [`Event`]s through its [`super::Narrator`]; views render them: the terminal
//! ([`crate::view::terminal::Terminal`]), a recording for tests ([`Recorder`]), a browser. Events carry what was
//! measured, never formatting: a lag table is its rows, not its text, so each view decides what
//! fits its screen. Every event serialises (serde) for views in another process.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::Serialize;

use super::lag::LagRow;
use super::panel::Panel;
use super::table::Table;

/// One thing a lab tells, in the order it tells it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The lab's name and the phenomenon it expects, before the first phase.
    Intro { lab: String, expected: String },
    /// A phase begins; phases are numbered from 1.
    Phase {
        number: usize,
        title: String,
        /// What is about to happen.
        about: String,
    },
    /// What the room should predict before the answer comes.
    Question { phase: usize, text: String },
    /// The phase cannot run on this cluster (it lacks an API the phase needs): why. It asks
    /// no question, and its checks are skipped, neither passed nor failed.
    Skipped { phase: usize, reason: String },
    /// The lab waits at its gate (`--step`) until something releases it.
    Waiting { pause: Pause },
    /// The answer to the phase's question begins: what follows, up to the next phase, is it.
    Answer { phase: usize },
    /// A paragraph; `\n` breaks a line, views wrap the rest to their width.
    Text { text: String },
    /// A table of evidence.
    Table { table: Table },
    /// A consumer group's lag per partition, in kafka-consumer-groups.sh's terms.
    Lag { rows: Vec<LagRow> },
    /// Log lines of the system under test (a store, a group member), in order.
    Log { lines: Vec<LogLine> },
    /// Violations the lab found, the first of them in detail.
    Violations { total: usize, shown: Vec<Violation> },
    /// A long step's progress; `total` is known in advance.
    Progress {
        id: u64,
        label: String,
        done: u64,
        total: u64,
    },
    /// The phase's key figures so far, for views with room to show them large (the terminal
    /// leaves them to the lab's tables and prose).
    Panel { panel: Panel },
    /// A lag table redrawn while the lab runs (the final state follows as a [`Event::Lag`]).
    Live {
        id: u64,
        label: String,
        rows: Vec<LagRow>,
    },
    /// A progress bar or live table is finished.
    Done { id: u64 },
    /// Log lines of the system under test as they are written, and the violations found among
    /// them, for views that follow a live log; the lab still shows its evidence as [`Event::Log`]
    /// and [`Event::Violations`].
    Tail {
        lines: Vec<LogLine>,
        violations: Vec<Violation>,
    },
    /// The closing summary: what happened, why, what an engineer can do.
    Summary {
        happened: Vec<String>,
        why: Vec<String>,
        what_to_do: Vec<String>,
    },
    /// One of the checks the verdict rests on.
    Check { check: Check },
    /// Whether the expected phenomenon appeared, the exit code, the checks that failed, and
    /// those skipped (the verdict covers the phases that ran).
    Verdict {
        shown: bool,
        expected: String,
        exit_code: u8,
        failed: Vec<String>,
        skipped: Vec<String>,
    },
}

/// Where the lab waits under `--step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pause {
    /// After a question, before its answer.
    Answer,
    /// Before the next phase (or the summary, or the checks).
    Next,
}

/// How serious a log line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Info,
    Warn,
    Error,
    /// The lab's own marker in a log (`billing-3 stops for 40 s`), not a line of the system.
    Note,
}

impl Level {
    /// Padded to five columns, as logs print it; a note is a rule.
    pub fn label(self) -> &'static str {
        match self {
            Level::Info => "INFO ",
            Level::Warn => "WARN ",
            Level::Error => "ERROR",
            Level::Note => "-----",
        }
    }
}

/// One log line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogLine {
    /// When, on the lab's clock (`round 25`, `00:00:56,000`).
    pub at: Option<String>,
    pub level: Level,
    /// Who wrote it (`billing-3`), when the log has several writers.
    pub source: Option<String>,
    pub text: String,
}

/// One violation of what must hold, named so a room can find it in the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// When, on the lab's clock.
    pub at: String,
    pub key: String,
    /// What arrived, and where it was read.
    pub found: String,
    /// What should have come first, and where it was.
    pub expected: String,
    /// What put the two apart.
    pub cause: String,
}

impl Violation {
    /// An ordering checker's violation as the event stream carries it, found at `at` on the
    /// lab's clock.
    pub fn of_order(violation: &client::check::Violation, at: String) -> Self {
        let v = violation;
        Violation {
            at,
            key: v.key.clone(),
            found: format!("v{} at {}", v.arrived_version, v.arrived_at),
            expected: match &v.expected_at {
                Some(at) => format!("v{} at {at}", v.expected_version),
                None => format!("v{}", v.expected_version),
            },
            cause: v.change.as_ref().map_or("-".to_string(), |c| {
                format!(
                    "{} -> {} partitions ({} -> {})",
                    c.from.partitions, c.to.partitions, c.partition_before, c.partition_after
                )
            }),
        }
    }
}

/// A check of the verdict: a short name (the verdict line lists the failed ones), whether it
/// held, and what was measured; or, when its phase could not run, why (`skipped`, and `ok` is
/// false but means nothing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    pub skipped: bool,
}

/// A view of the stream. It is called on the lab's thread, in order, one event at a time; a
/// view in another task forwards what it needs (a channel, a broadcast) and returns at once.
pub trait Subscriber: Send {
    fn event(&mut self, event: &Event);

    /// Whether this view shows [`Event::Live`] updates: labs skip measuring them for nobody.
    fn live(&self) -> bool {
        false
    }
}

/// A view that keeps every event, readable from any thread while the lab runs.
#[derive(Debug, Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<Event>>>);

impl Recorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<Event> {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Event>> {
        // A panicking view must not silence the others: the events are still whole.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Subscriber for Recorder {
    fn event(&mut self, event: &Event) {
        self.lock().push(event.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialise_with_their_kind() {
        let event = Event::Question {
            phase: 1,
            text: "how many?".into(),
        };
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            serde_json::json!({"event": "question", "phase": 1, "text": "how many?"})
        );
        let waiting = Event::Waiting {
            pause: Pause::Answer,
        };
        assert_eq!(
            serde_json::to_string(&waiting).unwrap(),
            r#"{"event":"waiting","pause":"answer"}"#
        );
    }

    #[test]
    fn a_recorder_is_read_from_another_thread() {
        let recorder = Recorder::new();
        let mut view = recorder.clone();
        std::thread::spawn(move || {
            view.event(&Event::Text {
                text: "hello".into(),
            })
        })
        .join()
        .unwrap();
        assert_eq!(recorder.events().len(), 1);
    }
}
