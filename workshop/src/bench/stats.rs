//! Summaries of repeated runs (median, min, max: performance.md C.1 asks for the median of 5
//! measured runs after 1 warm-up) and latency histograms.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// The measured runs of one figure, in the order they ran.
#[derive(Debug, Clone, Default)]
pub struct Runs(pub Vec<f64>);

impl Runs {
    pub fn push(&mut self, value: f64) {
        self.0.push(value);
    }

    fn sorted(&self) -> Vec<f64> {
        let mut sorted = self.0.clone();
        sorted.sort_by(f64::total_cmp);
        sorted
    }

    /// The median; the mean of the middle two for an even count. NaN with no runs.
    pub fn median(&self) -> f64 {
        let s = self.sorted();
        match s.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => s[n / 2],
            n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
        }
    }

    pub fn min(&self) -> f64 {
        self.sorted().first().copied().unwrap_or(f64::NAN)
    }

    pub fn max(&self) -> f64 {
        self.sorted().last().copied().unwrap_or(f64::NAN)
    }

    /// `runs`, `median`, `min`, `max`, rounded for reading.
    pub fn to_json(&self) -> Value {
        json!({
            "runs": self.0.iter().map(|v| sig(*v)).collect::<Vec<_>>(),
            "median": sig(self.median()),
            "min": sig(self.min()),
            "max": sig(self.max()),
        })
    }
}

/// Four significant digits: enough to compare runs, without float noise in the JSON. Non-finite
/// values become null, which JSON can carry.
pub fn sig(x: f64) -> Value {
    if !x.is_finite() {
        return Value::Null;
    }
    if x == 0.0 {
        return json!(0.0);
    }
    let digits = 3 - x.abs().log10().floor() as i32;
    let scale = 10f64.powi(digits);
    json!((x * scale).round() / scale)
}

/// A latency histogram in nanoseconds, 3 significant digits, up to a minute.
pub struct Latency(Histogram<u64>);

impl Latency {
    pub fn new() -> Self {
        Self(Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("static bounds are valid"))
    }

    /// Values beyond a minute are clamped into the top bucket rather than lost.
    pub fn record(&mut self, d: Duration) {
        let ns = (d.as_nanos().min(u128::from(u64::MAX)) as u64).max(1);
        self.0.saturating_record(ns);
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The quantile in microseconds.
    pub fn quantile_us(&self, q: f64) -> f64 {
        self.0.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn max_us(&self) -> f64 {
        self.0.max() as f64 / 1000.0
    }

    /// p50, p99, p99.9 and max, in µs.
    pub fn to_json(&self) -> Value {
        json!({
            "p50_us": sig(self.quantile_us(0.5)),
            "p99_us": sig(self.quantile_us(0.99)),
            "p99_9_us": sig(self.quantile_us(0.999)),
            "max_us": sig(self.max_us()),
            "count": self.count(),
        })
    }
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(Runs(vec![3.0, 1.0, 2.0]).median(), 2.0);
        assert_eq!(Runs(vec![4.0, 1.0, 2.0, 3.0]).median(), 2.5);
        assert!(Runs::default().median().is_nan());
        let r = Runs(vec![5.0, 1.0, 9.0]);
        assert_eq!((r.min(), r.max()), (1.0, 9.0));
    }

    #[test]
    fn figures_keep_four_significant_digits() {
        assert_eq!(sig(1234.5678), json!(1235.0));
        assert_eq!(sig(0.012345), json!(0.01235));
        assert_eq!(sig(0.0), json!(0.0));
        assert_eq!(sig(f64::NAN), Value::Null);
        assert_eq!(sig(f64::INFINITY), Value::Null);
    }

    #[test]
    fn latency_quantiles_come_out_in_microseconds() {
        let mut l = Latency::new();
        for us in 1..=1000u64 {
            l.record(Duration::from_micros(us));
        }
        l.record(Duration::from_secs(3600));
        assert_eq!(l.count(), 1001);
        let p50 = l.quantile_us(0.5);
        assert!((499.0..=502.0).contains(&p50), "{p50}");
        assert!(l.max_us() >= 59_000_000.0);
    }
}
