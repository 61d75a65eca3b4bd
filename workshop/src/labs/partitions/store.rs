//! The aggregate store the consumers write to: one aggregate per order, each event applied only
//! on top of the version before it, as an event-sourced service checks optimistic versions.
//!
//! The store cannot see partitions or offsets: it only sees events in the order the consumers
//! hand them over. When that order is wrong it says so the way source 003's service did, and its
//! log lines are the lab's evidence:
//!
//! ```text
//! INFO  applying event order.cancelled  order_id=8842 version=7
//! ERROR aggregate not found: order 8842 (expected version 6, store empty)
//! INFO  applying event order.created    order_id=8842 version=1
//! ```
//!
//! A rejected event is not retried: the service logs it and moves on, which is how a cancelled
//! order ends up not cancelled.

use std::collections::BTreeMap;
use std::fmt;

use super::events::{OrderEvent, LAST_VERSION};

/// A log line's level, printed padded to five columns as source 003's log does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        }
    }
}

/// One line of the store's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// The lab's clock when the line was written (a consumption round).
    pub round: u32,
    pub level: Level,
    pub order_id: u32,
    pub message: String,
}

impl LogLine {
    /// The line as the lab event stream carries it, stamped with its round.
    pub fn event(&self) -> crate::lab::report::LogLine {
        crate::lab::report::LogLine {
            at: Some(format!("round {:>3}", self.round)),
            level: match self.level {
                Level::Info => crate::lab::report::Level::Info,
                Level::Warn => crate::lab::report::Level::Warn,
                Level::Error => crate::lab::report::Level::Error,
            },
            source: None,
            text: self.message.clone(),
        }
    }
}

impl fmt::Display for LogLine {
    /// `INFO  applying event ...`: the level padded to five columns, then the message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:<5} {}", self.level.as_str(), self.message)
    }
}

/// Why an event was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// A later version arrived for an order the store has never seen.
    NotFound { expected: u32 },
    /// The order exists, but not at the version this event builds on (a version was skipped).
    Conflict { current: u32, expected: u32 },
    /// The order is already at this version or past it (a replay, or a version that arrived late).
    Stale { current: u32 },
}

/// Aggregates by order id, and the log of everything applied or refused.
#[derive(Debug, Default)]
pub struct AggregateStore {
    versions: BTreeMap<u32, u32>,
    log: Vec<LogLine>,
    round: u32,
    rejected: u64,
}

impl AggregateStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the clock stamped on the lines that follow.
    pub fn set_round(&mut self, round: u32) {
        self.round = round;
    }

    /// Applies one event if it builds on the stored version, and logs what happened.
    pub fn apply(&mut self, event: OrderEvent) -> Result<(), Rejection> {
        let id = event.order_id;
        self.write(
            Level::Info,
            id,
            format!(
                "applying event {:<16} order_id={id} version={}",
                event.kind(),
                event.version
            ),
        );
        let current = self.versions.get(&id).copied();
        let expected = event.version - 1;
        let outcome = match current {
            None if event.version == 1 => Ok(()),
            None => Err(Rejection::NotFound { expected }),
            Some(cur) if cur >= event.version => Err(Rejection::Stale { current: cur }),
            Some(cur) if cur != expected => Err(Rejection::Conflict {
                current: cur,
                expected,
            }),
            Some(_) => Ok(()),
        };
        match outcome {
            Ok(()) => {
                self.versions.insert(id, event.version);
            }
            Err(rejection) => {
                self.rejected += 1;
                let (level, message) = match rejection {
                    Rejection::NotFound { expected } => (
                        Level::Error,
                        format!("aggregate not found: order {id} (expected version {expected}, store empty)"),
                    ),
                    Rejection::Conflict { current, expected } => (
                        Level::Error,
                        format!("version conflict: order {id} is at version {current} (expected version {expected})"),
                    ),
                    Rejection::Stale { current } => (
                        Level::Warn,
                        format!("stale event: order {id} is already at version {current}, version {} ignored", event.version),
                    ),
                };
                self.write(level, id, message);
            }
        }
        outcome
    }

    /// The stored version of an order, if the store has it.
    pub fn version(&self, order_id: u32) -> Option<u32> {
        self.versions.get(&order_id).copied()
    }

    /// Every line written, in order.
    pub fn log(&self) -> &[LogLine] {
        &self.log
    }

    /// The lines about one order.
    pub fn lines_for(&self, order_id: u32) -> impl Iterator<Item = &LogLine> {
        self.log.iter().filter(move |l| l.order_id == order_id)
    }

    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// Orders of `ids` that did not end at the last version: every event was produced, so each
    /// of these lost at least one to a rejection (an uncancelled order, an order never created).
    pub fn incomplete<'a>(&'a self, ids: impl IntoIterator<Item = u32> + 'a) -> Vec<u32> {
        ids.into_iter()
            .filter(|id| self.version(*id) != Some(LAST_VERSION))
            .collect()
    }

    fn write(&mut self, level: Level, order_id: u32, message: String) {
        // Also through `tracing`, so RUST_LOG=workshop::store=debug shows the service's log as
        // it runs. At debug, whatever the line's own level: the lab shows these lines as its
        // evidence, and the binary's default filter (warnings) would print the errors twice.
        tracing::debug!(target: "workshop::store", level = level.as_str(), "{message}");
        self.log.push(LogLine {
            round: self.round,
            level,
            order_id,
            message,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: u32, v: u32) -> OrderEvent {
        OrderEvent::new(id, v).unwrap()
    }

    #[test]
    fn in_order_every_event_applies() {
        let mut store = AggregateStore::new();
        for v in 1..=LAST_VERSION {
            assert_eq!(store.apply(ev(8842, v)), Ok(()));
        }
        assert_eq!(store.version(8842), Some(7));
        assert_eq!(store.rejected(), 0);
        assert!(store.log().iter().all(|l| l.level == Level::Info));
        assert!(store.incomplete([8842]).is_empty());
    }

    #[test]
    fn cancel_before_create_logs_the_seeds_lines() {
        let mut store = AggregateStore::new();
        store.set_round(3);
        assert_eq!(
            store.apply(ev(8842, 7)),
            Err(Rejection::NotFound { expected: 6 })
        );
        store.set_round(9);
        assert_eq!(store.apply(ev(8842, 1)), Ok(()));
        let lines: Vec<String> = store.log().iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "INFO  applying event order.cancelled  order_id=8842 version=7",
                "ERROR aggregate not found: order 8842 (expected version 6, store empty)",
                "INFO  applying event order.created    order_id=8842 version=1",
            ]
        );
        assert_eq!(store.log()[1].round, 3);
        // The cancellation is lost: the order ends created, not cancelled.
        assert_eq!(store.incomplete([8842]), vec![8842]);
    }

    #[test]
    fn skipped_and_replayed_versions_are_refused() {
        let mut store = AggregateStore::new();
        store.apply(ev(1, 1)).unwrap();
        assert_eq!(
            store.apply(ev(1, 3)),
            Err(Rejection::Conflict {
                current: 1,
                expected: 2
            })
        );
        assert_eq!(store.apply(ev(1, 1)), Err(Rejection::Stale { current: 1 }));
        assert_eq!(store.version(1), Some(1));
        let refused: Vec<String> = store
            .lines_for(1)
            .filter(|l| l.level != Level::Info)
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            refused,
            [
                "ERROR version conflict: order 1 is at version 1 (expected version 2)",
                "WARN  stale event: order 1 is already at version 1, version 1 ignored",
            ]
        );
    }
}
