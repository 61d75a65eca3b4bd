//! What a lab tells, and to whom.
//!
//! - For people: the lab event stream. A lab tells its story through a [`Narrator`], which emits
//!   [`Event`]s (phases, questions and answers, tables, per-partition lag, log lines,
//!   violations, checks, the verdict) to its views, waiting at a [`Gate`] under `--step`. The
//!   [`Terminal`] view renders them within a width; a [`Recorder`] keeps them.
//! - For machines: the [`LabReport`], one JSON object, and the verdict as the exit code.

mod checks;
mod events;
mod fit;
mod gate;
mod lag;
mod narrator;
mod panel;
mod table;

use serde::Serialize;

use super::LabError;
pub use checks::Checks;
pub use events::{Check, Event, Level, LogLine, Pause, Recorder, Subscriber, Violation};
pub use fit::{abbreviate, columns, wrap};
pub use gate::Gate;
pub use lag::{lag_lines, max_and_average, LagRow};
pub use narrator::{Live, Narrator, Phase, Progress, Summary, Tail};
pub use panel::{Bar, Figure, Panel};
pub use table::{Align, Table};

/// The end of a lab: what it expected, whether it appeared, and every figure it measured.
///
/// Serialised, this is the `--json` document:
/// `{"lab": NAME, "expected": "one sentence", "shown": true|false, "figures": {...},
/// "measured": {...}}`.
///
/// `figures` holds only what the seed and the flags decide: two runs with the same seed give the
/// same `figures`, on any machine. `measured` holds what the wall clock decides (durations, per
/// lookup costs): it varies from run to run and is never part of a verdict.
#[derive(Debug, Clone, Serialize)]
pub struct LabReport {
    pub lab: &'static str,
    /// The phenomenon the lab exists to show, in one sentence.
    pub expected: String,
    /// Whether it appeared. A lab that "passes" without its phenomenon is broken, so this is
    /// computed from the figures, never assumed.
    pub shown: bool,
    pub figures: serde_json::Value,
    /// Wall-clock durations and timings: they vary from run to run (`{}` when a lab has none).
    pub measured: serde_json::Value,
    /// Phases the cluster could not run (it lacks an API they need), and why; the verdict
    /// covers the others. Left out of the JSON when every phase ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedPhase>,
}

/// A phase that could not run on the lab's cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedPhase {
    /// The phase's title.
    pub phase: String,
    /// `this cluster does not offer CreatePartitions`.
    pub reason: String,
}

impl LabReport {
    /// The report of lab `lab`, with its `figures` encoded as the JSON document's figures.
    pub fn new(
        lab: &'static str,
        expected: String,
        shown: bool,
        figures: &impl Serialize,
    ) -> Result<Self, LabError> {
        let figures = serde_json::to_value(figures)
            .map_err(|e| LabError::Internal(format!("cannot encode the figures: {e}")))?;
        Ok(LabReport {
            lab,
            expected,
            shown,
            figures,
            measured: serde_json::json!({}),
            skipped: Vec::new(),
        })
    }

    /// The report with `measured` (wall-clock timings, which vary from run to run) beside its
    /// figures.
    pub fn with_measured(mut self, measured: &impl Serialize) -> Result<Self, LabError> {
        self.measured = serde_json::to_value(measured)
            .map_err(|e| LabError::Internal(format!("cannot encode the timings: {e}")))?;
        Ok(self)
    }

    /// The same, with the phases that did not run (the verdict, `shown`, already leaves their
    /// checks out).
    pub fn skipping(mut self, skipped: Vec<SkippedPhase>) -> Self {
        self.skipped = skipped;
        self
    }

    /// The exit code of the verdict: 0 when the phenomenon appeared, 1 when it did not.
    pub fn exit_code(&self) -> u8 {
        if self.shown {
            0
        } else {
            1
        }
    }

    /// The report as one line of JSON.
    pub fn to_json(&self) -> String {
        // Serialising plain data into a string cannot fail: no maps with non-string keys, no I/O.
        serde_json::to_string(self).expect("a lab report serialises")
    }
}

/// Rounds a measured fraction for reports, so the JSON shows figures rather than float noise.
pub fn round(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// A fraction as a percentage for narration: `0.2` is `20.0 %`.
pub fn percent(fraction: f64) -> String {
    format!("{:.1} %", fraction * 100.0)
}

/// A bar of `width` cells for `value` on a scale from 0 to `max`, for tables of per-partition
/// figures; any value above zero gets at least a sliver, so "small" and "none" look different.
pub fn bar(value: u64, max: u64, width: usize) -> String {
    if max == 0 || value == 0 {
        return String::new();
    }
    let cells = (u128::from(value.min(max)) * width as u128 / u128::from(max)) as usize;
    if cells == 0 {
        "\u{258f}".to_string()
    } else {
        "\u{2588}".repeat(cells)
    }
}

/// A count with thousands separators for narration: `1234567` is `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count and its noun for narration, singular for one: `1 event`, `1,234 events`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_has_the_five_fields_and_nothing_else() {
        let report = LabReport::new(
            "demo",
            "something happens".into(),
            false,
            &serde_json::json!({"n": 3}),
        )
        .unwrap()
        .with_measured(&serde_json::json!({"seconds": 1.5}))
        .unwrap();
        let value: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"lab": "demo", "expected": "something happens", "shown": false,
                "figures": {"n": 3}, "measured": {"seconds": 1.5}})
        );
        let untimed = LabReport::new("demo", "x".into(), true, &serde_json::json!({})).unwrap();
        assert_eq!(untimed.measured, serde_json::json!({}));
        assert_eq!(report.exit_code(), 1);
        assert!(!report.to_json().contains('\n'));
        let skipping = report.skipping(vec![SkippedPhase {
            phase: "grow".into(),
            reason: "this cluster does not offer CreatePartitions".into(),
        }]);
        let value: serde_json::Value = serde_json::from_str(&skipping.to_json()).unwrap();
        assert_eq!(
            value["skipped"],
            serde_json::json!([{"phase": "grow", "reason": "this cluster does not offer CreatePartitions"}])
        );
    }

    #[test]
    fn rounding_and_percent() {
        assert_eq!(round(0.123456789, 4), 0.1235);
        assert_eq!(percent(0.2), "20.0 %");
        assert_eq!(percent(10.0 / 11.0), "90.9 %");
        assert_eq!(bar(0, 10, 10), "");
        assert_eq!(bar(5, 0, 10), "");
        assert_eq!(bar(5, 10, 10).chars().count(), 5);
        assert_eq!(bar(20, 10, 10).chars().count(), 10);
        assert_eq!(bar(1, 1_000_000, 10), "\u{258f}");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(count(1, "event", "events"), "1 event");
        assert_eq!(count(0, "event", "events"), "0 events");
        assert_eq!(count(12_345, "key", "keys"), "12,345 keys");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(7), "7");
        assert_eq!(thousands(200_000), "200,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
