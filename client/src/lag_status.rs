//! A Burrow-style status per partition and per group, judged from a window of lag observations
//! (`client groups lag --watch`), with the rule that decided it.
//!
//! Burrow (linkedin/Burrow, `core/internal/evaluator/caching.go`) judges each partition from the
//! consumer's last N commits, each with the lag it had; only the current lag being above zero can
//! make a partition anything but OK. A watcher outside the group sees no commits, only what
//! OffsetFetch and ListOffsets say at each look, so these rules use the committed offset and the
//! log end at each observation instead. In order, the first that applies decides:
//!
//! | rule | status | Burrow's counterpart |
//! |---|---|---|
//! | the lag now is 0, or unknown (nothing committed) | OK | "current lag zero: never in error" |
//! | the lag was 0 at some observation of the window | OK | rule 1 |
//! | fewer than N observations yet | OK (window filling) | `minimum-complete` |
//! | the committed offset did not move in the window, nor did the log end | STOP | rule 3 (no commits for longer than the window) |
//! | the committed offset did not move in the window, the log end did | STALL | rule 4 (offsets not moving, lag > 0) |
//! | the committed offset moved, and the lag never went down from one observation to the next | WARN | rule 5 (lag not decreasing) |
//! | otherwise | OK (lag going down) | |
//!
//! Burrow's STALL needs commits that repeat one offset, which a watcher cannot tell from no
//! commits at all; here STALL is a stuck committed offset while records keep coming (the consumer
//! is behind and not getting anywhere) and STOP is a partition where nothing moves at all (the
//! consumer is gone, and so are the producers), as the issue that asked for this defines them. A
//! committed offset that goes back (a reset) is movement; Burrow's REWIND is not reported. A
//! group's status is its worst partition's, in the order OK < WARN < STALL < STOP.
//!
//! ```
//! use std::time::Duration;
//! use client::lag_status::{LagWindow, Observation, Status};
//! let mut window = LagWindow::new(3);
//! for (second, committed, log_end) in [(0, 10, 50), (1, 10, 60), (2, 10, 70)] {
//!     window.observe(Observation {
//!         at: Duration::from_secs(second),
//!         committed: Some(committed),
//!         log_end: Some(log_end),
//!     });
//! }
//! let judged = window.evaluate();
//! assert_eq!(judged.status, Status::Stall);
//! assert_eq!(
//!     judged.rule,
//!     "committed offset stuck at 10 for 2.0 s while the log end went 50 -> 70 (lag 40 -> 60)"
//! );
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

/// The default window: Burrow's `intervals`.
pub const DEFAULT_WINDOW: usize = 10;

/// One look at a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// When, on any monotonic clock.
    pub at: Duration,
    /// The group's committed offset; `None` when it committed nothing.
    pub committed: Option<i64>,
    /// `None` when the log end could not be read.
    pub log_end: Option<i64>,
}

impl Observation {
    pub fn lag(&self) -> Option<i64> {
        Some(self.log_end?.saturating_sub(self.committed?))
    }
}

/// Ordered from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Ok,
    Warn,
    Stall,
    Stop,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Ok => "OK",
            Status::Warn => "WARN",
            Status::Stall => "STALL",
            Status::Stop => "STOP",
        })
    }
}

/// A status and the rule that gave it, in words with the figures that fired it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Judgement {
    pub status: Status,
    pub rule: String,
}

impl Judgement {
    fn new(status: Status, rule: impl Into<String>) -> Self {
        Self {
            status,
            rule: rule.into(),
        }
    }
}

/// The last `size` observations of one partition.
#[derive(Debug, Clone)]
pub struct LagWindow {
    size: usize,
    observations: VecDeque<Observation>,
}

impl LagWindow {
    /// A window of `size` observations (at least 2: movement needs two looks).
    pub fn new(size: usize) -> Self {
        let size = size.max(2);
        Self {
            size,
            observations: VecDeque::with_capacity(size),
        }
    }

    /// Adds an observation, dropping the oldest once the window is full.
    pub fn observe(&mut self, observation: Observation) {
        if self.observations.len() == self.size {
            self.observations.pop_front();
        }
        self.observations.push_back(observation);
    }

    /// The status by the rules of the module docs.
    pub fn evaluate(&self) -> Judgement {
        let Some(last) = self.observations.back() else {
            return Judgement::new(Status::Ok, "not observed yet");
        };
        match last.lag() {
            None => return Judgement::new(Status::Ok, "nothing committed"),
            Some(lag) if lag <= 0 => return Judgement::new(Status::Ok, "lag 0"),
            Some(_) => {}
        }
        if self.observations.iter().any(|o| o.lag() == Some(0)) {
            return Judgement::new(Status::Ok, "lag was 0 within the window");
        }
        if self.observations.len() < self.size {
            return Judgement::new(
                Status::Ok,
                format!(
                    "window filling ({} of {} observations)",
                    self.observations.len(),
                    self.size
                ),
            );
        }
        let first = self.observations[0];
        let span = last.at.saturating_sub(first.at);
        // Tenths: a watch looks about once a second, so more digits only say how late a look was.
        let seconds = format!("{:.1}", span.as_secs_f64());
        let moved = |value: fn(&Observation) -> Option<i64>| {
            self.observations
                .iter()
                .zip(self.observations.iter().skip(1))
                .any(|(a, b)| value(a) != value(b))
        };
        let show = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        let (lag_then, lag_now) = (show(first.lag()), show(last.lag()));
        if !moved(|o| o.committed) {
            let committed = show(last.committed);
            if !moved(|o| o.log_end) {
                return Judgement::new(
                    Status::Stop,
                    format!(
                        "no commit and no new record for {seconds} s: committed offset {committed}, \
                         lag {lag_now}"
                    ),
                );
            }
            return Judgement::new(
                Status::Stall,
                format!(
                    "committed offset stuck at {committed} for {seconds} s while the log end went \
                     {} -> {} (lag {lag_then} -> {lag_now})",
                    show(first.log_end),
                    show(last.log_end)
                ),
            );
        }
        let lags: Vec<Option<i64>> = self.observations.iter().map(Observation::lag).collect();
        let never_down = lags
            .iter()
            .flatten()
            .zip(lags.iter().flatten().skip(1))
            .all(|(a, b)| b >= a);
        if never_down {
            return Judgement::new(
                Status::Warn,
                format!(
                    "commits moved {} -> {} but the lag never went down in {seconds} s \
                     (lag {lag_then} -> {lag_now})",
                    show(first.committed),
                    show(last.committed)
                ),
            );
        }
        Judgement::new(
            Status::Ok,
            format!("lag going down ({lag_then} -> {lag_now})"),
        )
    }
}

/// The group's status: the worst of its partitions' (the first such on ties), with the name
/// of the partition that gave it; OK with no partitions.
pub fn group_status<'a, N: fmt::Display + 'a>(
    partitions: impl IntoIterator<Item = (N, &'a Judgement)>,
) -> Judgement {
    let mut worst: Option<(N, &Judgement)> = None;
    for (name, judged) in partitions {
        if worst.as_ref().is_none_or(|(_, w)| judged.status > w.status) {
            worst = Some((name, judged));
        }
    }
    match worst {
        Some((name, judged)) if judged.status > Status::Ok => {
            Judgement::new(judged.status, format!("{name}: {}", judged.rule))
        }
        _ => Judgement::new(Status::Ok, "every partition OK"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window of `size` filled with `(committed, log end)` one second apart.
    fn window(size: usize, history: &[(Option<i64>, i64)]) -> LagWindow {
        let mut w = LagWindow::new(size);
        for (i, &(committed, log_end)) in history.iter().enumerate() {
            w.observe(Observation {
                at: Duration::from_secs(i as u64),
                committed,
                log_end: Some(log_end),
            });
        }
        w
    }

    fn judged(size: usize, history: &[(i64, i64)]) -> Judgement {
        let history: Vec<(Option<i64>, i64)> = history.iter().map(|&(c, e)| (Some(c), e)).collect();
        window(size, &history).evaluate()
    }

    #[test]
    fn ok_when_caught_up_now_or_within_the_window_or_nothing_is_committed() {
        assert_eq!(
            judged(3, &[(10, 50), (20, 50), (50, 50)]),
            Judgement::new(Status::Ok, "lag 0")
        );
        assert_eq!(
            judged(3, &[(50, 50), (50, 60), (50, 70)]),
            Judgement::new(Status::Ok, "lag was 0 within the window")
        );
        assert_eq!(
            window(3, &[(None, 5), (None, 9), (None, 12)]).evaluate(),
            Judgement::new(Status::Ok, "nothing committed")
        );
        assert_eq!(
            LagWindow::new(3).evaluate(),
            Judgement::new(Status::Ok, "not observed yet")
        );
    }

    #[test]
    fn nothing_but_ok_until_the_window_is_full() {
        assert_eq!(
            judged(4, &[(10, 50), (10, 60), (10, 70)]),
            Judgement::new(Status::Ok, "window filling (3 of 4 observations)")
        );
    }

    #[test]
    fn stall_when_the_committed_offset_is_stuck_while_records_arrive() {
        assert_eq!(
            judged(3, &[(10, 50), (10, 60), (10, 70)]),
            Judgement::new(
                Status::Stall,
                "committed offset stuck at 10 for 2.0 s while the log end went 50 -> 70 (lag 40 -> 60)"
            )
        );
    }

    #[test]
    fn stop_when_nothing_moves_for_the_whole_window() {
        assert_eq!(
            judged(3, &[(10, 50), (10, 50), (10, 50)]),
            Judgement::new(
                Status::Stop,
                "no commit and no new record for 2.0 s: committed offset 10, lag 40"
            )
        );
        // One commit inside the window is enough to not be stopped.
        assert_ne!(
            judged(3, &[(9, 50), (10, 50), (10, 50)]).status,
            Status::Stop
        );
    }

    #[test]
    fn warn_when_commits_move_but_the_lag_never_goes_down() {
        assert_eq!(
            judged(4, &[(10, 50), (20, 61), (30, 71), (35, 76)]),
            Judgement::new(
                Status::Warn,
                "commits moved 10 -> 35 but the lag never went down in 3.0 s (lag 40 -> 41)"
            )
        );
        // A steady lag counts as not going down, as in Burrow.
        assert_eq!(
            judged(3, &[(10, 50), (20, 60), (30, 70)]).status,
            Status::Warn
        );
        // Once it goes down anywhere in the window, the consumer is catching up.
        assert_eq!(
            judged(3, &[(10, 50), (30, 60), (40, 75)]),
            Judgement::new(Status::Ok, "lag going down (40 -> 35)")
        );
    }

    #[test]
    fn the_window_slides_so_an_old_commit_ages_out() {
        let mut w = window(3, &[(Some(5), 50), (Some(10), 50)]);
        for i in 2..5 {
            w.observe(Observation {
                at: Duration::from_secs(i),
                committed: Some(10),
                log_end: Some(50),
            });
        }
        assert_eq!(w.evaluate().status, Status::Stop);
    }

    #[test]
    fn the_group_takes_its_worst_partition() {
        let ok = Judgement::new(Status::Ok, "lag 0");
        let warn = Judgement::new(Status::Warn, "slow");
        let stall = Judgement::new(Status::Stall, "stuck");
        assert_eq!(
            group_status([("t-0", &ok), ("t-1", &stall), ("t-2", &warn)]),
            Judgement::new(Status::Stall, "t-1: stuck")
        );
        assert_eq!(
            group_status([("t-0", &ok)]),
            Judgement::new(Status::Ok, "every partition OK")
        );
        assert_eq!(
            group_status(Vec::<(&str, &Judgement)>::new()).status,
            Status::Ok
        );
    }
}
