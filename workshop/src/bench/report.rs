//! What the bench prints, as soon as each figure is measured: one JSON line for machines on
//! stdout, and a table row for people on stderr.
//!
//! Every line has the fields of performance.md C.1: `bench`, `params`, `placement`, the runs
//! with their `median`/`min`/`max`, the `ceiling` (name, value, unit) and `ratio`, the broker's
//! peak RSS and CPU seconds, and the run's environment. `ratio` is always broker figure divided
//! by ceiling: for throughput a fraction of what the raw probe reached (`better: higher`), for
//! times a multiple of the raw time (`better: lower`).

use std::io::Write;

use serde_json::{json, Map, Value};

use super::stats::{sig, Runs};

/// The raw figure a broker figure is compared with.
#[derive(Debug, Clone)]
pub struct Ceiling {
    pub name: String,
    pub value: f64,
    pub unit: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
}

/// A target of performance.md C.3 (the Goal column) and whether the median meets it.
#[derive(Debug, Clone)]
pub struct Goal {
    pub text: String,
    pub met: bool,
}

impl Goal {
    pub fn ratio_at_least(ratio: Option<f64>, min: f64) -> Self {
        Self {
            text: format!("ratio >= {min}"),
            met: ratio.is_some_and(|r| r >= min),
        }
    }

    pub fn at_least(value: f64, min: f64, unit: &str) -> Self {
        Self {
            text: format!(">= {min} {unit}"),
            met: value >= min,
        }
    }

    pub fn at_most(value: f64, max: f64, unit: &str) -> Self {
        Self {
            text: format!("<= {max} {unit}"),
            met: value <= max,
        }
    }

    /// Several conditions that must all hold.
    pub fn all(goals: Vec<Goal>) -> Self {
        Self {
            text: goals
                .iter()
                .map(|g| g.text.as_str())
                .collect::<Vec<_>>()
                .join(" and "),
            met: goals.iter().all(|g| g.met),
        }
    }
}

/// One measured figure.
#[derive(Debug, Clone)]
pub struct Figure {
    pub bench: &'static str,
    /// A short description for the table: `1 KiB records, 1 MiB batches, acks=1`.
    pub label: String,
    pub params: Value,
    pub unit: &'static str,
    pub runs: Runs,
    pub better: Better,
    pub ceiling: Option<Ceiling>,
    /// Further figures of the same case (records/s, percentiles, ...).
    pub extra: Map<String, Value>,
    pub goal: Option<Goal>,
    /// What the broker process cost while this figure was measured (`None` under --bootstrap).
    pub broker: Option<Value>,
}

impl Figure {
    pub fn new(bench: &'static str, label: impl Into<String>, unit: &'static str) -> Self {
        Self {
            bench,
            label: label.into(),
            params: json!({}),
            unit,
            runs: Runs::default(),
            better: Better::Higher,
            ceiling: None,
            extra: Map::new(),
            goal: None,
            broker: None,
        }
    }

    pub fn median(&self) -> f64 {
        self.runs.median()
    }

    pub fn ratio(&self) -> Option<f64> {
        let ceiling = self.ceiling.as_ref()?;
        let ratio = self.median() / ceiling.value;
        ratio.is_finite().then_some(ratio)
    }

    pub fn extra(&mut self, key: &str, value: Value) -> &mut Self {
        self.extra.insert(key.to_string(), value);
        self
    }

    fn to_json(&self, env: &Value) -> Value {
        let mut line = Map::new();
        line.insert("bench".into(), json!(self.bench));
        line.insert("case".into(), json!(self.label));
        line.insert("params".into(), self.params.clone());
        line.insert("placement".into(), env["placement"].clone());
        line.insert("unit".into(), json!(self.unit));
        if let Value::Object(runs) = self.runs.to_json() {
            line.extend(runs);
        }
        line.extend(self.extra.clone());
        line.insert(
            "ceiling".into(),
            match &self.ceiling {
                Some(c) => json!({"name": c.name, "value": sig(c.value), "unit": c.unit}),
                None => Value::Null,
            },
        );
        line.insert("ratio".into(), self.ratio().map_or(Value::Null, sig));
        line.insert(
            "better".into(),
            json!(match self.better {
                Better::Higher => "higher",
                Better::Lower => "lower",
            }),
        );
        line.insert(
            "goal".into(),
            match &self.goal {
                Some(g) => json!({"target": g.text, "met": g.met}),
                None => Value::Null,
            },
        );
        line.insert("broker".into(), self.broker.clone().unwrap_or(Value::Null));
        line.insert("env".into(), env.clone());
        Value::Object(line)
    }
}

/// Writes each figure as it arrives: its JSON line to stdout, its table row to stderr.
pub struct Reporter {
    env: Value,
    lines: usize,
    goals_met: usize,
    goals_missed: usize,
    header_printed: bool,
}

impl Reporter {
    pub fn new(env: Value) -> Self {
        Self {
            env,
            lines: 0,
            goals_met: 0,
            goals_missed: 0,
            header_printed: false,
        }
    }

    /// Lines written, goals met, goals missed.
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.lines, self.goals_met, self.goals_missed)
    }

    fn line(&mut self, line: &Value) {
        let mut out = std::io::stdout().lock();
        // A closed stdout (`| head`) is not the bench's failure; the table still shows.
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        self.lines += 1;
    }

    pub fn emit(&mut self, figure: &Figure) {
        self.line(&figure.to_json(&self.env));
        match &figure.goal {
            Some(g) if g.met => self.goals_met += 1,
            Some(_) => self.goals_missed += 1,
            None => {}
        }
        let ceiling = figure.ceiling.as_ref().map_or("-".to_string(), |c| {
            format!("{} {}", short(c.value), c.unit)
        });
        let ratio = figure.ratio().map_or("-".to_string(), |r| {
            if figure.better == Better::Higher {
                format!("{:.0} %", r * 100.0)
            } else {
                format!("{r:.2}x")
            }
        });
        let goal = figure.goal.as_ref().map_or(String::new(), |g| {
            format!("{} {}", if g.met { "met" } else { "MISSED" }, g.text)
        });
        let median = format!("{} {}", short(figure.median()), figure.unit);
        let spread = format!("{}..{}", short(figure.runs.min()), short(figure.runs.max()));
        self.row(&[
            figure.bench,
            &figure.label,
            &median,
            &spread,
            &ceiling,
            &ratio,
            &goal,
        ]);
    }

    /// A case that could not run here (e.g. `startup` against `--bootstrap`): a JSON line that
    /// says so, so that a reader of the lines sees it was not forgotten.
    pub fn skipped(&mut self, bench: &'static str, why: &str) {
        let line = json!({"bench": bench, "skipped": why, "ratio": Value::Null, "env": self.env});
        self.line(&line);
        self.row(&[bench, &format!("skipped: {why}"), "", "", "", "", ""]);
    }

    fn row(&mut self, cells: &[&str; 7]) {
        let mut err = std::io::stderr().lock();
        if !self.header_printed {
            self.header_printed = true;
            let _ = writeln!(
                err,
                "{:<10} {:<46} {:>16} {:>17} {:>15} {:>8}  goal",
                "bench", "case", "median", "min..max", "ceiling", "ratio"
            );
        }
        let _ = writeln!(
            err,
            "{:<10} {:<46} {:>16} {:>17} {:>15} {:>8}  {}",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6]
        );
    }
}

/// A figure for the table: 3 significant digits, no exponent.
fn short(x: f64) -> String {
    if !x.is_finite() {
        return "-".to_string();
    }
    let a = x.abs();
    if a >= 100.0 || a == 0.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_carries_the_c1_fields_and_its_ratio() {
        let mut f = Figure::new("produce", "1 KiB records", "MiB/s");
        f.runs = Runs(vec![100.0, 300.0, 200.0]);
        f.ceiling = Some(Ceiling {
            name: "raw sink".into(),
            value: 400.0,
            unit: "MiB/s",
        });
        f.goal = Some(Goal::ratio_at_least(f.ratio(), 0.4));
        let line = f.to_json(&json!({"placement": "split"}));
        assert_eq!(line["bench"], "produce");
        assert_eq!(line["median"], json!(200.0));
        assert_eq!(line["ratio"], json!(0.5));
        assert_eq!(line["placement"], "split");
        assert_eq!(line["goal"]["met"], json!(true));
        assert_eq!(line["runs"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn without_a_ceiling_the_ratio_is_null() {
        let mut f = Figure::new("lag", "x", "ms");
        f.runs = Runs(vec![1.0]);
        let line = f.to_json(&json!({}));
        assert_eq!(line["ratio"], Value::Null);
        assert_eq!(line["ceiling"], Value::Null);
    }

    #[test]
    fn goals_combine() {
        let g = Goal::all(vec![
            Goal::at_most(5.0, 10.0, "ms"),
            Goal::at_least(1.0, 2.0, "x"),
        ]);
        assert!(!g.met);
        assert_eq!(g.text, "<= 10 ms and >= 2 x");
    }

    #[test]
    fn short_figures() {
        assert_eq!(short(1234.4), "1234");
        assert_eq!(short(12.34), "12.3");
        assert_eq!(short(1.234), "1.23");
        assert_eq!(short(0.01234), "0.012");
        assert_eq!(short(f64::NAN), "-");
    }
}
