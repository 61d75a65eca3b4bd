//! The narrator: how a lab tells its story, as a stream of [`Event`]s to its views.
//!
//! A lab is told in phases: a title and what is about to happen, a question for the room, then
//! (after [`Narrator::answer`]) the evidence; at the end a summary, the checks and the verdict.
//! The narrator only emits; views render (the terminal, a recording, a browser). Under
//! `--step` it waits at its [`Gate`] after each question and before each phase, so every view
//! shows the question before its answer, whoever releases the gate.
//!
//! Views are called on the emitting thread, one at a time; progress may be reported from any
//! thread (the views are behind a lock).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::checks::Checks;
use super::events::{Event, LogLine, Pause, Subscriber, Violation};
use super::gate::Gate;
use super::{LabReport, LagRow, Panel, Table};
use crate::lab::watch::Watch;

/// The opening of a phase.
#[derive(Debug, Clone, Copy)]
pub struct Phase<'a> {
    pub title: &'a str,
    /// What is about to happen.
    pub about: &'a str,
    /// What the room should predict before the evidence.
    pub predict: &'a str,
}

/// The closing of a lab.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub happened: Vec<String>,
    pub why: Vec<String>,
    pub what_to_do: Vec<String>,
}

/// The views, shared with progress handles that may report from other threads.
#[derive(Default)]
struct Hub {
    views: Mutex<Vec<Box<dyn Subscriber>>>,
    next_id: AtomicU64,
}

impl Hub {
    fn views(&self) -> MutexGuard<'_, Vec<Box<dyn Subscriber>>> {
        self.views.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn emit(&self, event: Event) {
        for view in self.views().iter_mut() {
            view.event(&event);
        }
    }
}

/// Tells a lab's story to whoever subscribed; with no views it tells nobody (`--check`).
#[derive(Default)]
pub struct Narrator {
    hub: Arc<Hub>,
    gate: Option<Gate>,
    /// The phase being told, from 1; 0 before the first.
    phase: usize,
    /// What the lab's clusters hold, for views that read the broker themselves.
    watch: Watch,
    /// Its title, which names it when it is too slow.
    title: String,
}

impl Narrator {
    /// No views, no gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a view; it sees the events from now on.
    pub fn subscribe(&mut self, view: Box<dyn Subscriber>) {
        self.hub.views().push(view);
    }

    /// Waits at `gate` after each question and before each phase (`--step`).
    pub fn pace(&mut self, gate: Gate) {
        self.gate = Some(gate);
    }

    /// The gate the narrator waits at, for whoever else may release it.
    pub fn gate(&self) -> Option<&Gate> {
        self.gate.as_ref()
    }

    /// The brokers, topics and groups of this lab run, as its clusters report them (see
    /// [`crate::lab::watch`]).
    pub fn watch(&self) -> Watch {
        self.watch.clone()
    }

    /// The lab's name and the phenomenon it expects, before the first phase.
    pub fn intro(&mut self, lab: &str, expected: &str) {
        self.emit(Event::Intro {
            lab: lab.into(),
            expected: expected.into(),
        });
    }

    /// Opens a phase (waiting first, except before the first) and asks its question.
    pub fn phase(&mut self, phase: Phase<'_>) {
        if self.phase > 0 {
            self.pause(Pause::Next);
        }
        self.phase += 1;
        self.title = phase.title.into();
        self.watch.enter(self.phase);
        self.emit(Event::Phase {
            number: self.phase,
            title: phase.title.into(),
            about: phase.about.into(),
        });
        self.emit(Event::Question {
            phase: self.phase,
            text: phase.predict.into(),
        });
    }

    /// The deadline of the phase just opened, for `work` (see [`crate::lab::deadline`]): every lab
    /// names a phase that is too slow the same way, `phase 2 (The same, with idempotence)`.
    pub fn deadline(&self, work: crate::lab::deadline::Work) -> crate::lab::deadline::Deadline {
        crate::lab::deadline::Deadline::start(
            format!("phase {} ({})", self.phase, self.title),
            work,
        )
    }

    /// Runs one step of the phase just opened under its deadline for `work`, with a progress
    /// bar of `total` units called `label`, which goes when the step ends: before its evidence.
    pub async fn step<T>(
        &self,
        work: crate::lab::deadline::Work,
        total: u64,
        label: &str,
        step: impl AsyncFnOnce(&Progress) -> Result<T, crate::lab::LabError>,
    ) -> Result<T, crate::lab::LabError> {
        let deadline = self.deadline(work);
        let progress = self.progress(total, label);
        deadline.run(&progress, step(&progress)).await
    }

    /// Opens a phase that cannot run on this cluster, and says why; it asks no question.
    pub fn skip(&mut self, phase: Phase<'_>, reason: &str) {
        if self.phase > 0 {
            self.pause(Pause::Next);
        }
        self.phase += 1;
        self.watch.enter(self.phase);
        self.emit(Event::Phase {
            number: self.phase,
            title: phase.title.into(),
            about: phase.about.into(),
        });
        self.emit(Event::Skipped {
            phase: self.phase,
            reason: reason.into(),
        });
    }

    /// The answer to the phase's question begins: under `--step`, once the gate lets it.
    pub fn answer(&mut self) {
        self.pause(Pause::Answer);
        self.emit(Event::Answer { phase: self.phase });
    }

    /// A paragraph: `\n` breaks a line, views wrap the rest.
    pub fn say(&mut self, text: &str) {
        self.emit(Event::Text { text: text.into() });
    }

    pub fn table(&mut self, table: &Table) {
        self.emit(Event::Table {
            table: table.clone(),
        });
    }

    /// A group's lag per partition.
    pub fn lag(&mut self, rows: &[LagRow]) {
        self.emit(Event::Lag {
            rows: rows.to_vec(),
        });
    }

    pub fn log(&mut self, lines: Vec<LogLine>) {
        self.emit(Event::Log { lines });
    }

    /// The phase's key figures as measured so far, large, for views with room for them.
    pub fn panel(&mut self, panel: Panel) {
        self.emit(Event::Panel { panel });
    }

    /// The violations found: `shown` in detail, of `total`.
    pub fn violations(&mut self, total: usize, shown: Vec<Violation>) {
        self.emit(Event::Violations { total, shown });
    }

    /// A progress bar for a long step of `total` units.
    pub fn progress(&self, total: u64, label: impl Into<String>) -> Progress {
        let progress = Progress {
            hub: self.hub.clone(),
            id: self.hub.next_id.fetch_add(1, Ordering::Relaxed),
            label: Mutex::new(label.into()),
            done: AtomicU64::new(0),
            total,
        };
        progress.report();
        progress
    }

    /// A lag table redrawn as the lab runs.
    pub fn live(&self) -> Live {
        Live {
            hub: self.hub.clone(),
            id: self.hub.next_id.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// A live log: lines as the system under test writes them, for live views only.
    pub fn tail(&self) -> Tail {
        Tail {
            hub: self.hub.clone(),
            live: self.is_live(),
        }
    }

    /// Whether any view shows live updates: a lab can skip measuring what nobody sees.
    pub fn is_live(&self) -> bool {
        self.hub.views().iter().any(|view| view.live())
    }

    /// The closing summary, on a screen of its own under `--step`.
    pub fn summary(&mut self, summary: &Summary) {
        self.pause(Pause::Next);
        self.emit(Event::Summary {
            happened: summary.happened.clone(),
            why: summary.why.clone(),
            what_to_do: summary.what_to_do.clone(),
        });
    }

    /// The checks the verdict rests on, then the verdict: whether the expected phenomenon
    /// appeared, the exit code, and which checks failed.
    pub fn verdict(&mut self, report: &LabReport, checks: &Checks) {
        self.pause(Pause::Next);
        for check in checks.iter() {
            self.emit(Event::Check {
                check: check.clone(),
            });
        }
        self.emit(Event::Verdict {
            shown: report.shown,
            expected: report.expected.clone(),
            exit_code: report.exit_code(),
            failed: checks.failed().map(str::to_string).collect(),
            skipped: checks.skipped().map(str::to_string).collect(),
        });
    }

    fn pause(&mut self, pause: Pause) {
        if let Some(gate) = self.gate.clone() {
            self.emit(Event::Waiting { pause });
            gate.wait();
        }
    }

    fn emit(&self, event: Event) {
        self.hub.emit(event);
    }
}

/// A long step's progress, reported to the views as it advances; finished when dropped.
pub struct Progress {
    hub: Arc<Hub>,
    id: u64,
    label: Mutex<String>,
    done: AtomicU64,
    total: u64,
}

impl Progress {
    pub fn set_message(&self, label: impl Into<String>) {
        *self.label.lock().unwrap_or_else(PoisonError::into_inner) = label.into();
        self.report();
    }

    pub fn inc(&self) {
        self.inc_by(1);
    }

    pub fn inc_by(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
        self.report();
    }

    /// Takes the bar off the screen.
    pub fn finish(self) {}

    /// Where the step is, for an error line: `sending payments, 15 of 200 done`.
    pub fn status(&self) -> String {
        let label = self
            .label
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let done = self.done.load(Ordering::Relaxed);
        format!("{label}, {done} of {} done", self.total)
    }

    fn report(&self) {
        let label = self
            .label
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.hub.emit(Event::Progress {
            id: self.id,
            label,
            done: self.done.load(Ordering::Relaxed),
            total: self.total,
        });
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.hub.emit(Event::Done { id: self.id });
    }
}

/// A lag table redrawn as the lab runs; finished when dropped.
pub struct Live {
    hub: Arc<Hub>,
    id: u64,
}

impl Live {
    /// The table's current state, under a line saying where the run is.
    pub fn show(&self, label: impl Into<String>, rows: &[LagRow]) {
        self.hub.emit(Event::Live {
            id: self.id,
            label: label.into(),
            rows: rows.to_vec(),
        });
    }

    /// Takes the table off the screen (the lab shows the final state as evidence).
    pub fn finish(self) {}
}

/// A live log ([`Narrator::tail`]); cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct Tail {
    hub: Arc<Hub>,
    /// Whether a live view was subscribed when the tail was made: without one, nothing is sent.
    live: bool,
}

impl Tail {
    /// Whether anybody follows: a lab can skip converting lines for nobody.
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// Lines just written, and the violations among them.
    pub fn push(&self, lines: Vec<LogLine>, violations: Vec<Violation>) {
        if self.live && !(lines.is_empty() && violations.is_empty()) {
            self.hub.emit(Event::Tail { lines, violations });
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.hub.emit(Event::Done { id: self.id });
    }
}

#[cfg(test)]
mod tests {
    use super::super::events::Recorder;
    use super::*;

    fn tell(n: &mut Narrator) {
        n.intro("demo", "something happens");
        n.phase(Phase {
            title: "first",
            about: "what happens",
            predict: "how much?",
        });
        n.progress(3, "work").inc();
        n.answer();
        n.say("this much");
        n.phase(Phase {
            title: "second",
            about: "more",
            predict: "and now?",
        });
        n.answer();
        n.summary(&Summary::default());
        let mut checks = Checks::new();
        checks.check("it happened", false, "0 times");
        let report = LabReport {
            lab: "demo",
            expected: "something happens".into(),
            shown: checks.shown(),
            figures: serde_json::Value::Null,
            measured: serde_json::Value::Null,
            skipped: Vec::new(),
        };
        n.verdict(&report, &checks);
    }

    fn kinds(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .map(|e| {
                serde_json::to_value(e).unwrap()["event"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn the_stream_has_each_question_before_its_answer() {
        let recorder = Recorder::new();
        let mut n = Narrator::new();
        n.subscribe(Box::new(recorder.clone()));
        tell(&mut n);
        assert_eq!(
            kinds(&recorder.events()),
            [
                "intro", "phase", "question", "progress", "progress", "done", "answer", "text",
                "phase", "question", "answer", "summary", "check", "verdict"
            ]
        );
        let Some(Event::Verdict { failed, .. }) = recorder.events().last().cloned() else {
            panic!("no verdict last");
        };
        assert_eq!(failed, ["it happened"]);
    }

    #[test]
    fn under_step_the_narrator_waits_at_each_pause() {
        let recorder = Recorder::new();
        let mut n = Narrator::new();
        n.subscribe(Box::new(recorder.clone()));
        n.pace(Gate::opened());
        tell(&mut n);
        let waits = recorder
            .events()
            .iter()
            .filter_map(|e| match e {
                Event::Waiting { pause } => Some(*pause),
                _ => None,
            })
            .collect::<Vec<_>>();
        // Each answer; the second phase, the summary and the checks.
        assert_eq!(
            waits,
            [
                Pause::Answer,
                Pause::Next,
                Pause::Answer,
                Pause::Next,
                Pause::Next
            ]
        );
    }

    #[test]
    fn the_gate_holds_the_answer_until_released() {
        let recorder = Recorder::new();
        let gate = Gate::new();
        let lab = {
            let (recorder, gate) = (recorder.clone(), gate.clone());
            std::thread::spawn(move || {
                let mut n = Narrator::new();
                n.subscribe(Box::new(recorder));
                n.pace(gate);
                n.phase(Phase {
                    title: "t",
                    about: "a",
                    predict: "p?",
                });
                n.answer();
                n.say("the answer");
            })
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !recorder
            .events()
            .iter()
            .any(|e| matches!(e, Event::Waiting { .. }))
        {
            assert!(std::time::Instant::now() < deadline, "never waited");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!recorder
            .events()
            .iter()
            .any(|e| matches!(e, Event::Answer { .. })));
        gate.release();
        lab.join().unwrap();
        assert!(matches!(recorder.events().last(), Some(Event::Text { .. })));
    }
}
