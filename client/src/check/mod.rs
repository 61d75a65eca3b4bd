//! Per-key order: an ordering checker for labs and tests, and [`check_order`], which reads a
//! topic and reports every record that a consumer could see ahead of an earlier one of its key.
//!
//! Feed the [`OrderingChecker`] what producers wrote ([`OrderingChecker::written`], from the
//! acknowledgements: where each version of each key landed), the partition layouts they routed
//! by ([`OrderingChecker::layout`], in the order they came into force), and what consumers handed
//! on ([`OrderingChecker::arrived`]). A version that arrives while a lower version of its key
//! has not is a [`Violation`]: it names the key, where the early version was read, where the
//! overtaken version was written, and the layout change that sent the two to different
//! partitions.
//!
//! ```
//! use client::check::{OrderingChecker, Position};
//! let mut checker = OrderingChecker::new();
//! checker.layout("orders", 12);
//! checker.written("order-8842", 1, Position::new("orders", 4, 113));
//! checker.layout("orders", 24);
//! let violation = checker
//!     .arrived("order-8842", 7, Position::new("orders", 16, 0))
//!     .expect("version 7 before version 1");
//! assert_eq!(violation.expected_version, 1);
//! let change = violation.change.as_ref().unwrap();
//! assert_eq!((change.partition_before, change.partition_after), (4, 16));
//! assert_eq!(
//!     violation.to_string(),
//!     "order-8842: version 7 read from orders-16@0 before version 1, written to orders-4@113; \
//!      orders went from 12 to 24 partitions, which moved order-8842 from partition 4 to 16"
//! );
//! assert!(checker.arrived("order-8842", 1, Position::new("orders", 4, 113)).is_none());
//! ```
//!
//! Versions are 1, 2, 3, ... by default; [`Numbering::Increasing`] takes any increasing numbers
//! (a sequence number, a timestamp) and judges an arrival against what it was told was written.

mod topic;

pub use topic::{check_order, OrderReport, ReadRange, SeqSource, StartAt};

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;

use protocol::partitioner::partition_for_key;
use serde::Serialize;

/// Where a record sits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Position {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

impl Position {
    pub fn new(topic: impl Into<String>, partition: i32, offset: i64) -> Self {
        Position {
            topic: topic.into(),
            partition,
            offset,
        }
    }
}

impl fmt::Display for Position {
    /// `orders-4@113`: Kafka's `topic-partition` name, then the offset.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}@{}", self.topic, self.partition, self.offset)
    }
}

/// A topic and its partition count: what keyed producers route by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Layout {
    pub topic: String,
    pub partitions: i32,
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} with {} partitions", self.topic, self.partitions)
    }
}

/// The change of layout that sent a key somewhere else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayoutChange {
    pub from: Layout,
    pub to: Layout,
    /// The key's partition under `from`, by Kafka's partitioner.
    pub partition_before: i32,
    /// The key's partition under `to`.
    pub partition_after: i32,
}

impl fmt::Display for LayoutChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.from.topic == self.to.topic {
            write!(
                f,
                "{} went from {} to {} partitions",
                self.from.topic, self.from.partitions, self.to.partitions
            )
        } else {
            write!(f, "routing moved from {} to {}", self.from, self.to)
        }
    }
}

/// How a version broke its key's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// It came while a lower version, still to come, had not: `expected_version`.
    Early,
    /// It came after a higher version had (`expected_version`, the highest so far), and was not
    /// one still awaited: the key went back ([`Numbering::Increasing`] only).
    WentBack,
}

/// A version that arrived before a lower version of the same key, or after a higher one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub kind: ViolationKind,
    pub key: String,
    /// The version that arrived early, and where it was read.
    pub arrived_version: i64,
    pub arrived_at: Position,
    /// Early: the lowest version of the key that had not arrived yet. Went back: the highest
    /// version that had.
    pub expected_version: i64,
    /// Where that version was written, if the checker was told.
    pub expected_at: Option<Position>,
    /// The layout change that put the two versions in different partitions, when one explains it.
    pub change: Option<LayoutChange>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind == ViolationKind::WentBack {
            write!(
                f,
                "{}: version {} read from {} after version {}",
                self.key, self.arrived_version, self.arrived_at, self.expected_version
            )?;
            if let Some(at) = &self.expected_at {
                write!(f, " at {at}")?;
            }
            return Ok(());
        }
        write!(
            f,
            "{}: version {} read from {} before version {}",
            self.key, self.arrived_version, self.arrived_at, self.expected_version
        )?;
        if let Some(at) = &self.expected_at {
            write!(f, ", written to {at}")?;
        }
        if let Some(change) = &self.change {
            write!(
                f,
                "; {change}, which moved {} from partition {} to {}",
                self.key, change.partition_before, change.partition_after
            )?;
        }
        Ok(())
    }
}

/// What has arrived of one key.
#[derive(Debug)]
enum KeyState {
    /// Everything below `next` has arrived, and the versions in `ahead`.
    Consecutive { next: i64, ahead: BTreeSet<i64> },
    /// Versions written and not arrived yet, every version that arrived, and the highest.
    Increasing {
        pending: BTreeSet<i64>,
        arrived: HashSet<i64>,
        highest: Option<i64>,
    },
}

impl KeyState {
    fn new(numbering: Numbering) -> Self {
        match numbering {
            // Every key's first version is 1.
            Numbering::Consecutive => KeyState::Consecutive {
                next: 1,
                ahead: BTreeSet::new(),
            },
            Numbering::Increasing => KeyState::Increasing {
                pending: BTreeSet::new(),
                arrived: HashSet::new(),
                highest: None,
            },
        }
    }
}

/// How versions are numbered, which decides what "a lower version has not arrived" means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Numbering {
    /// 1, 2, 3, ... per key (the lab's order events): a version is early while any lower one
    /// has not arrived, whether or not the checker was told where it was written.
    #[default]
    Consecutive,
    /// Any increasing numbers (a sequence field, a timestamp), gaps allowed: a version is early
    /// while a lower version the checker was told was [written](OrderingChecker::written) has
    /// not arrived, and a version below the highest that arrived goes back unless it is one of
    /// those still awaited (which its early successor already reported). Only a repeat of the
    /// highest is a duplicate.
    Increasing,
}

/// What a version's arrival was.
enum Arrival {
    InOrder,
    Duplicate,
    /// Ahead of this lower version.
    Early(i64),
    /// Below this version, which arrived before.
    WentBack(i64),
}

/// Checks that, per key, versions arrive in order.
#[derive(Debug, Default)]
pub struct OrderingChecker {
    numbering: Numbering,
    keys: HashMap<String, KeyState>,
    written: HashMap<(String, i64), Position>,
    layouts: Vec<Layout>,
    violations: Vec<Violation>,
    duplicates: u64,
    arrivals: u64,
}

impl OrderingChecker {
    /// A checker of versions numbered 1, 2, 3, ... per key ([`Numbering::Consecutive`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// A checker of versions numbered as `numbering` says.
    pub fn with_numbering(numbering: Numbering) -> Self {
        Self {
            numbering,
            ..Self::default()
        }
    }

    /// Producers route by this layout from now on. A repeat of the current layout, or a count
    /// below 1 (no partitioner can use it), is ignored.
    pub fn layout(&mut self, topic: &str, partitions: i32) {
        let layout = Layout {
            topic: topic.to_string(),
            partitions,
        };
        if partitions >= 1 && self.layouts.last() != Some(&layout) {
            self.layouts.push(layout);
        }
    }

    /// The layouts recorded, oldest first.
    pub fn layouts(&self) -> &[Layout] {
        &self.layouts
    }

    /// A producer's acknowledgement: `version` of `key` was written at `at`.
    pub fn written(&mut self, key: &str, version: i64, at: Position) {
        if self
            .written
            .insert((key.to_string(), version), at)
            .is_some()
        {
            return;
        }
        let numbering = self.numbering;
        let state = self
            .keys
            .entry(key.to_string())
            .or_insert_with(|| KeyState::new(numbering));
        if let KeyState::Increasing {
            pending, arrived, ..
        } = state
        {
            if !arrived.contains(&version) {
                pending.insert(version);
            }
        }
    }

    /// A consumer handed on `version` of `key`, read at `at`. Returns the violation when the
    /// version came before a lower one (or, numbered [`Numbering::Increasing`], after a higher
    /// one). A version that arrives a second time is counted as a duplicate (at-least-once
    /// delivery), not as an ordering violation, unless it goes back.
    pub fn arrived(&mut self, key: &str, version: i64, at: Position) -> Option<&Violation> {
        self.arrivals += 1;
        let numbering = self.numbering;
        let state = self
            .keys
            .entry(key.to_string())
            .or_insert_with(|| KeyState::new(numbering));
        let (kind, expected_version) = match arrive(state, version) {
            Arrival::InOrder => return None,
            Arrival::Duplicate => {
                self.duplicates += 1;
                return None;
            }
            Arrival::Early(expected) => (ViolationKind::Early, expected),
            Arrival::WentBack(highest) => (ViolationKind::WentBack, highest),
        };
        let expected_at = self
            .written
            .get(&(key.to_string(), expected_version))
            .cloned();
        let change = expected_at
            .as_ref()
            .and_then(|before| self.explain(key, before, &at));
        self.violations.push(Violation {
            kind,
            key: key.to_string(),
            arrived_version: version,
            arrived_at: at,
            expected_version,
            expected_at,
            change,
        });
        self.violations.last()
    }

    /// Every violation, in the order they happened.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// How many distinct keys saw at least one violation.
    pub fn keys_out_of_order(&self) -> usize {
        let keys: BTreeSet<&str> = self.violations.iter().map(|v| v.key.as_str()).collect();
        keys.len()
    }

    /// How many distinct keys the checker has seen written or arrive.
    pub fn keys(&self) -> usize {
        self.keys.len()
    }

    /// Versions that arrived more than once.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// Everything handed on, duplicates included.
    pub fn arrivals(&self) -> u64 {
        self.arrivals
    }

    /// Versions written but not yet arrived: after a full drain, none.
    pub fn missing(&self) -> usize {
        self.written
            .keys()
            .filter(|(key, version)| match self.keys.get(key) {
                None => true,
                Some(KeyState::Consecutive { next, ahead }) => {
                    *version >= *next && !ahead.contains(version)
                }
                Some(KeyState::Increasing { pending, .. }) => pending.contains(version),
            })
            .count()
    }

    /// The first layout change under which the key went from `before`'s partition to `after`'s.
    fn explain(&self, key: &str, before: &Position, after: &Position) -> Option<LayoutChange> {
        if before.topic == after.topic && before.partition == after.partition {
            return None;
        }
        let route = |layout: &Layout| partition_for_key(key.as_bytes(), layout.partitions);
        self.layouts.iter().enumerate().find_map(|(i, from)| {
            let partition_before = route(from);
            if from.topic != before.topic || partition_before != before.partition {
                return None;
            }
            self.layouts[i + 1..].iter().find_map(|to| {
                let partition_after = route(to);
                (to.topic == after.topic && partition_after == after.partition).then(|| {
                    LayoutChange {
                        from: from.clone(),
                        to: to.clone(),
                        partition_before,
                        partition_after,
                    }
                })
            })
        })
    }
}

/// Takes one arrival into its key's state.
fn arrive(state: &mut KeyState, version: i64) -> Arrival {
    match state {
        KeyState::Consecutive { next, ahead } => {
            if version < *next || ahead.contains(&version) {
                return Arrival::Duplicate;
            }
            if version == *next {
                *next += 1;
                while ahead.remove(next) {
                    *next += 1;
                }
                return Arrival::InOrder;
            }
            ahead.insert(version);
            Arrival::Early(*next)
        }
        KeyState::Increasing {
            pending,
            arrived,
            highest,
        } => {
            let awaited = pending.remove(&version);
            let top = *highest;
            arrived.insert(version);
            match top {
                Some(top) if version < top && !awaited => return Arrival::WentBack(top),
                Some(top) if version == top => return Arrival::Duplicate,
                _ => {}
            }
            *highest = Some(top.map_or(version, |top| top.max(version)));
            match pending.first() {
                Some(&lowest) if lowest < version => Arrival::Early(lowest),
                _ => Arrival::InOrder,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(topic: &str, partition: i32, offset: i64) -> Position {
        Position::new(topic, partition, offset)
    }

    #[test]
    fn in_order_arrivals_are_fine_across_keys_and_partitions() {
        let mut c = OrderingChecker::new();
        for v in 1..=7 {
            assert!(c.arrived("a", v, at("t", 0, v)).is_none());
            assert!(c.arrived("b", v, at("t", 1, v)).is_none());
        }
        assert!(c.violations().is_empty());
        assert_eq!((c.arrivals(), c.duplicates()), (14, 0));
    }

    #[test]
    fn a_version_ahead_of_its_predecessor_is_one_violation_and_the_rest_catches_up() {
        let mut c = OrderingChecker::new();
        c.layout("orders", 12);
        for v in 1..=6 {
            c.written("order-8842", v, at("orders", 4, 100 + v));
        }
        c.layout("orders", 24);
        c.written("order-8842", 7, at("orders", 16, 0));
        let v = c
            .arrived("order-8842", 7, at("orders", 16, 0))
            .unwrap()
            .clone();
        assert_eq!((v.arrived_version, v.expected_version), (7, 1));
        assert_eq!(v.expected_at, Some(at("orders", 4, 101)));
        let change = v.change.clone().unwrap();
        assert_eq!((change.from.partitions, change.to.partitions), (12, 24));
        assert_eq!(
            v.to_string(),
            "order-8842: version 7 read from orders-16@0 before version 1, written to orders-4@101; \
             orders went from 12 to 24 partitions, which moved order-8842 from partition 4 to 16"
        );
        // The overtaken versions then arrive in order: no further violation for this key.
        for v in 1..=6 {
            assert!(c
                .arrived("order-8842", v, at("orders", 4, 100 + v))
                .is_none());
        }
        assert_eq!((c.violations().len(), c.keys_out_of_order()), (1, 1));
        assert_eq!(c.missing(), 0);
        // Version 7 again is a duplicate, not a violation.
        assert!(c.arrived("order-8842", 7, at("orders", 16, 0)).is_none());
        assert_eq!(c.duplicates(), 1);
    }

    #[test]
    fn increasing_numbers_may_have_gaps_and_only_written_ones_are_waited_for() {
        let mut c = OrderingChecker::with_numbering(Numbering::Increasing);
        for (version, offset) in [(10, 0), (20, 1), (35, 2)] {
            c.written("k", version, at("t", 0, offset));
        }
        assert!(c.arrived("k", 10, at("t", 0, 0)).is_none());
        let v = c.arrived("k", 35, at("t", 0, 2)).unwrap().clone();
        assert_eq!((v.arrived_version, v.expected_version), (35, 20));
        assert_eq!(v.expected_at, Some(at("t", 0, 1)));
        // 20, overtaken, is what 35's violation reported: no second one for it.
        assert!(c.arrived("k", 20, at("t", 0, 1)).is_none());
        // 35 again repeats the highest: a duplicate. 20 again goes back below 35.
        assert!(c.arrived("k", 35, at("t", 0, 2)).is_none());
        let back = c.arrived("k", 20, at("t", 0, 3)).unwrap();
        assert_eq!(
            (back.kind, back.expected_version),
            (ViolationKind::WentBack, 35)
        );
        assert_eq!(
            (c.violations().len(), c.duplicates(), c.missing()),
            (2, 1, 0)
        );
        // Nothing written is waited for: a version of a key never written is in order.
        assert!(c.arrived("other", 7, at("t", 1, 0)).is_none());
        assert_eq!(c.keys(), 2);
    }

    #[test]
    fn an_increasing_version_below_the_highest_goes_back_and_a_repeat_of_it_is_a_duplicate() {
        let mut c = OrderingChecker::with_numbering(Numbering::Increasing);
        for (offset, version) in [1, 2, 2, 3, 1].into_iter().enumerate() {
            c.written("a", version, at("t", 0, offset as i64));
        }
        let found: Vec<String> = [1, 2, 2, 3, 1]
            .into_iter()
            .enumerate()
            .filter_map(|(offset, v)| {
                c.arrived("a", v, at("t", 0, offset as i64))
                    .map(ToString::to_string)
            })
            .collect();
        assert_eq!(
            found,
            ["a: version 1 read from t-0@4 after version 3 at t-0@3"]
        );
        assert_eq!(c.violations()[0].kind, ViolationKind::WentBack);
        assert_eq!(c.duplicates(), 1);
    }

    #[test]
    fn a_topic_switch_is_a_layout_change_too() {
        let mut c = OrderingChecker::new();
        c.layout("orders", 12);
        c.written("order-8842", 1, at("orders", 4, 9));
        c.layout("orders-v2", 24);
        let v = c.arrived("order-8842", 2, at("orders-v2", 16, 0)).unwrap();
        assert_eq!(
            v.change.as_ref().map(ToString::to_string).as_deref(),
            Some("routing moved from orders with 12 partitions to orders-v2 with 24 partitions")
        );
    }

    #[test]
    fn without_a_matching_layout_or_a_written_position_nothing_is_blamed() {
        let mut c = OrderingChecker::new();
        c.layout("orders", 0);
        assert!(
            c.layouts().is_empty(),
            "no partitioner routes over zero partitions"
        );
        let v = c.arrived("k", 3, at("orders", 1, 0)).unwrap();
        assert_eq!((v.expected_at.clone(), v.change.clone()), (None, None));
        c.written("k", 1, at("orders", 1, 5));
        // Same partition: a layout change cannot be the cause.
        let v = c.arrived("k", 2, at("orders", 1, 6)).unwrap();
        assert!(v.change.is_none());
        assert_eq!(c.missing(), 1);
    }
}
