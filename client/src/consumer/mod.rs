//! The consumer in assign mode: the caller says which partitions to read ([`Consumer::assign`],
//! which a group layer can call again after each rebalance), where to start ([`Consumer::seek`]
//! or the auto offset reset policy), and pulls with [`Consumer::poll`]. Positions are kept per
//! partition and advance by whole batches; records are decoded only when iterated.

pub mod committed;
pub mod fetch;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use tokio::task::JoinSet;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::offsets::{list_offsets, OffsetSpec};
use crate::record::PartitionRecords;
use crate::retry::RetryPolicy;
use fetch::{FetchLimits, Outcome};

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Where to start when no position is known, or the position fell outside the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffsetReset {
    Earliest,
    /// Kafka's default: only records produced from now on.
    #[default]
    Latest,
    /// Fail with [`Error::NoOffset`].
    None,
}

/// A place to move a partition's position to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeekTo {
    Beginning,
    End,
    Offset(i64),
    /// This many records before the end (kcat's `-o -N`).
    FromEnd(i64),
    /// The first record at or after these epoch milliseconds, else the end (kcat's `s@T`).
    Timestamp(i64),
}

impl FromStr for SeekTo {
    type Err = String;

    /// `beginning`, `end`, `N`, `-N` or `s@MILLIS`, as kcat's `-o`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!("bad offset '{s}': use beginning, end, N, -N (N before the end) or s@MILLIS")
        };
        match s {
            "beginning" | "earliest" | "start" => Ok(Self::Beginning),
            "end" | "latest" => Ok(Self::End),
            _ => {
                if let Some(ts) = s.strip_prefix("s@") {
                    return ts.parse().map(Self::Timestamp).map_err(|_| bad());
                }
                match s.parse::<i64>().map_err(|_| bad())? {
                    n if n < 0 => Ok(Self::FromEnd(-n)),
                    n => Ok(Self::Offset(n)),
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// How long the broker may hold a fetch waiting for `min_bytes`.
    pub max_wait: Duration,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    pub auto_offset_reset: OffsetReset,
    pub retry: RetryPolicy,
    /// Kafka's `check.crcs`: verify each fetched batch's CRC-32C before handing out records.
    pub check_crcs: bool,
    /// Kafka's `isolation.level=read_committed`: only records of committed transactions (and
    /// of no transaction), up to the last stable offset. Kafka's default is read_uncommitted.
    pub read_committed: bool,
}

impl Default for ConsumerConfig {
    /// Kafka's consumer defaults.
    fn default() -> Self {
        Self {
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            max_bytes: 50 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
            auto_offset_reset: OffsetReset::Latest,
            retry: RetryPolicy::default(),
            check_crcs: true,
            read_committed: false,
        }
    }
}

#[derive(Debug, Default, Clone)]
struct PartitionState {
    /// The next offset to fetch; `None` until resolved.
    position: Option<i64>,
    /// A seek not yet turned into an offset.
    pending: Option<SeekTo>,
    high_watermark: Option<i64>,
    /// The last stable offset as of the last fetch (below it no transaction is open).
    last_stable: Option<i64>,
    log_start: Option<i64>,
}

pub struct Consumer {
    client: Client,
    config: ConsumerConfig,
    partitions: BTreeMap<TopicPartition, PartitionState>,
    /// Consecutive polls that failed transiently, for the backoff.
    failures: u32,
}

impl Consumer {
    /// The consumer fetches over connections of its own (see [`Client::with_own_connections`]),
    /// so its long polls never hold up a producer sharing `client`.
    pub fn new(client: Client, config: ConsumerConfig) -> Self {
        Self {
            client: client.with_own_connections(),
            config,
            partitions: BTreeMap::new(),
            failures: 0,
        }
    }

    /// Reads exactly these partitions from now on. Partitions kept from the previous
    /// assignment keep their positions; new ones start per seek or reset policy.
    pub fn assign(&mut self, partitions: impl IntoIterator<Item = TopicPartition>) {
        let mut next = BTreeMap::new();
        for tp in partitions {
            let state = self.partitions.remove(&tp).unwrap_or_default();
            next.insert(tp, state);
        }
        self.partitions = next;
    }

    pub fn assignment(&self) -> impl Iterator<Item = &TopicPartition> {
        self.partitions.keys()
    }

    /// Moves a partition's position; the offset is looked up on the next poll.
    pub fn seek(&mut self, tp: &TopicPartition, to: SeekTo) -> Result<()> {
        let state = self
            .partitions
            .get_mut(tp)
            .ok_or_else(|| Error::InvalidArgument(format!("{tp} is not assigned")))?;
        match to {
            SeekTo::Offset(n) if n >= 0 => {
                state.position = Some(n);
                state.pending = None;
            }
            SeekTo::Offset(n) => return Err(Error::InvalidArgument(format!("offset {n}"))),
            other => state.pending = Some(other),
        }
        Ok(())
    }

    /// Applies `seek(to)` to every assigned partition.
    pub fn seek_all(&mut self, to: SeekTo) -> Result<()> {
        let all: Vec<TopicPartition> = self.partitions.keys().cloned().collect();
        all.iter().try_for_each(|tp| self.seek(tp, to))
    }

    /// The next offset to be fetched, once known.
    pub fn position(&self, tp: &TopicPartition) -> Option<i64> {
        let state = self.partitions.get(tp)?;
        state.pending.is_none().then_some(state.position).flatten()
    }

    /// Every assigned partition and its position (what a group layer commits).
    pub fn positions(&self) -> Vec<(TopicPartition, Option<i64>)> {
        self.partitions
            .keys()
            .map(|tp| (tp.clone(), self.position(tp)))
            .collect()
    }

    /// The log end offset as of the last fetch.
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        self.partitions.get(tp)?.high_watermark
    }

    /// The log start offset as of the last fetch.
    pub fn log_start(&self, tp: &TopicPartition) -> Option<i64> {
        self.partitions.get(tp)?.log_start
    }

    /// The last stable offset as of the last fetch: where read_committed stops while a
    /// transaction is open.
    pub fn last_stable(&self, tp: &TopicPartition) -> Option<i64> {
        self.partitions.get(tp)?.last_stable
    }

    /// True when every assigned partition has been read up to its end: the high watermark, or
    /// with read_committed the last stable offset (what lies beyond may still be aborted).
    pub fn at_end(&self) -> bool {
        let read_committed = self.config.read_committed;
        self.partitions.values().all(|s| {
            let end = if read_committed {
                s.last_stable
            } else {
                s.high_watermark
            };
            s.pending.is_none() && matches!((s.position, end), (Some(p), Some(end)) if p >= end)
        })
    }

    /// Fetches once from every leader (waiting up to `max_wait` for data) and returns what
    /// came, advancing positions past it. Transient failures are retried with backoff inside.
    /// Cancel-safe: a poll dropped before it returns has moved no position.
    pub async fn poll(&mut self) -> Result<Vec<PartitionRecords>> {
        loop {
            match self.poll_once().await {
                Ok(records) => {
                    self.failures = 0;
                    return Ok(records);
                }
                Err(e) if e.is_retriable() => {
                    self.failures += 1;
                    let Some(delay) = self.config.retry.delay(self.failures) else {
                        self.failures = 0;
                        return Err(e);
                    };
                    tracing::debug!(%e, ?delay, "poll failed, retrying");
                    tokio::time::sleep(delay).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn poll_once(&mut self) -> Result<Vec<PartitionRecords>> {
        if self.partitions.is_empty() {
            tokio::time::sleep(self.config.max_wait).await;
            return Ok(Vec::new());
        }
        self.resolve_positions().await?;
        let mut by_leader: BTreeMap<i32, Vec<(TopicPartition, i64)>> = BTreeMap::new();
        let mut transient: Option<Error> = None;
        for (tp, state) in &self.partitions {
            let Some(position) = state.position else {
                continue;
            };
            match self.client.leader(&tp.topic, tp.partition, false).await {
                Ok(leader) => by_leader
                    .entry(leader)
                    .or_default()
                    .push((tp.clone(), position)),
                Err(e) if e.is_retriable() => transient = Some(e),
                Err(e) => return Err(e),
            }
        }
        let limits = FetchLimits {
            max_wait: self.config.max_wait,
            min_bytes: self.config.min_bytes,
            max_bytes: self.config.max_bytes,
            partition_max_bytes: self.config.partition_max_bytes,
            read_committed: self.config.read_committed,
        };
        let timeout = self.client.config().request_timeout + self.config.max_wait;
        let check_crcs = self.config.check_crcs;
        let mut fetches = JoinSet::new();
        for (leader, asks) in by_leader {
            let client = self.client.clone();
            fetches.spawn(async move {
                let conn = client.broker(leader).await?;
                let resp = conn
                    .call_with_timeout(|_| fetch::request(&asks, limits), timeout)
                    .await?;
                Ok::<_, Error>(fetch::outcomes(resp, &asks, check_crcs))
            });
        }
        // Every answer is collected before any is applied: dropping this future at an await
        // (the group consumer does when its group starts rebalancing) loses no record, since
        // positions only move below, where nothing awaits.
        let mut answers = Vec::new();
        while let Some(joined) = fetches.join_next().await {
            let fetched = match joined {
                Ok(fetched) => fetched,
                // A bug in our own code, not a broker's answer: keep its panic.
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // Cancelled: the runtime is shutting down.
                Err(_) => continue,
            };
            match fetched {
                Ok(outcomes) => answers.push(outcomes),
                Err(e) if e.is_retriable() => transient = Some(e),
                Err(e) => return Err(e),
            }
        }
        let answered = !answers.is_empty();
        let mut out = Vec::new();
        for (tp, outcome) in answers.into_iter().flatten() {
            if let Some(records) = self.apply(tp, outcome)? {
                out.push(records);
            }
        }
        match transient {
            // Nothing came back at all: let `poll` back off and retry.
            Some(e) if !answered => Err(e),
            Some(e) => {
                tracing::debug!(%e, "some partitions were not fetched this round");
                Ok(out)
            }
            None => Ok(out),
        }
    }

    /// Takes one partition's outcome into its state; returns the records, if any.
    fn apply(&mut self, tp: TopicPartition, outcome: Outcome) -> Result<Option<PartitionRecords>> {
        let reset = self.config.auto_offset_reset;
        let Some(state) = self.partitions.get_mut(&tp) else {
            return Ok(None);
        };
        let position = match state.position {
            Some(p) if state.pending.is_none() => p,
            // Re-seeked while the fetch was out: its data is for the old position.
            _ => return Ok(None),
        };
        match outcome {
            Outcome::Data {
                batches,
                high_watermark,
                last_stable,
                log_start,
                aborted,
            } => {
                state.high_watermark = Some(high_watermark);
                state.last_stable = Some(last_stable).filter(|o| *o >= 0);
                state.log_start = Some(log_start).filter(|o| *o >= 0);
                let batches: Vec<_> = batches
                    .into_iter()
                    .filter(|b| b.last_offset() >= position)
                    .collect();
                // Past everything fetched, the batches of aborted transactions too.
                let Some(next) = batches.last().map(|b| b.last_offset().saturating_add(1)) else {
                    return Ok(None);
                };
                let batches = committed::without_aborted(batches, &aborted);
                state.position = Some(next);
                if batches.is_empty() {
                    return Ok(None);
                }
                Ok(Some(PartitionRecords {
                    topic: tp.topic,
                    partition: tp.partition,
                    high_watermark,
                    from_offset: position,
                    batches,
                }))
            }
            Outcome::OutOfRange => {
                let to = reset_target(reset).ok_or_else(|| Error::NoOffset {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                })?;
                tracing::info!(%tp, position, ?to, "offset out of range, resetting");
                state.pending = Some(to);
                Ok(None)
            }
            Outcome::Retry(e) => {
                tracing::debug!(%tp, %e, "partition not fetched, refreshing metadata");
                self.client.invalidate(&tp.topic);
                Ok(None)
            }
            Outcome::Fatal(e) => Err(e),
        }
    }

    /// Turns pending seeks, and partitions without a position, into offsets.
    async fn resolve_positions(&mut self) -> Result<()> {
        let reset = self.config.auto_offset_reset;
        let mut by_topic: BTreeMap<String, Vec<(i32, SeekTo)>> = BTreeMap::new();
        for (tp, state) in &mut self.partitions {
            let to = match (state.pending, state.position) {
                (Some(to), _) => to,
                (None, Some(_)) => continue,
                (None, None) => reset_target(reset).ok_or_else(|| Error::NoOffset {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                })?,
            };
            by_topic
                .entry(tp.topic.clone())
                .or_default()
                .push((tp.partition, to));
        }
        for (topic, seeks) in by_topic {
            let offsets = self.lookup(&topic, &seeks).await?;
            for ((partition, _), offset) in seeks.iter().zip(offsets) {
                let tp = TopicPartition::new(topic.clone(), *partition);
                if let Some(state) = self.partitions.get_mut(&tp) {
                    state.position = Some(offset);
                    state.pending = None;
                }
            }
        }
        Ok(())
    }

    /// The offset each seek means. Kafka takes each partition once per ListOffsets request, so
    /// there is one lookup per kind of offset needed (log start, log end, by time).
    async fn lookup(&self, topic: &str, seeks: &[(i32, SeekTo)]) -> Result<Vec<i64>> {
        let needs_start = |to: SeekTo| matches!(to, SeekTo::Beginning | SeekTo::FromEnd(_));
        let needs_end =
            |to: SeekTo| matches!(to, SeekTo::End | SeekTo::FromEnd(_) | SeekTo::Timestamp(_));
        let pick = |wanted: &dyn Fn(SeekTo) -> Option<OffsetSpec>| -> Vec<(i32, OffsetSpec)> {
            seeks
                .iter()
                .filter_map(|&(p, to)| wanted(to).map(|spec| (p, spec)))
                .collect()
        };
        let starts = pick(&|to| needs_start(to).then_some(OffsetSpec::Earliest));
        let ends = pick(&|to| needs_end(to).then_some(OffsetSpec::Latest));
        let times = pick(&|to| match to {
            SeekTo::Timestamp(t) => Some(OffsetSpec::Timestamp(t)),
            _ => None,
        });
        let mut found: HashMap<(i32, OffsetSpec), i64> = HashMap::new();
        for asks in [starts, ends, times] {
            if asks.is_empty() {
                continue;
            }
            let offsets = list_offsets(&self.client, topic, &asks).await?;
            found.extend(asks.into_iter().zip(offsets.iter().map(|o| o.offset)));
        }
        let get = |p: i32, spec: OffsetSpec| found.get(&(p, spec)).copied().unwrap_or(0);
        Ok(seeks
            .iter()
            .map(|&(p, to)| match to {
                SeekTo::Beginning => get(p, OffsetSpec::Earliest),
                SeekTo::End => get(p, OffsetSpec::Latest),
                SeekTo::Offset(n) => n,
                // No record at or after the time: start at the end, as Kafka's consumer does.
                SeekTo::Timestamp(t) => match get(p, OffsetSpec::Timestamp(t)) {
                    -1 => get(p, OffsetSpec::Latest),
                    o => o,
                },
                SeekTo::FromEnd(n) => {
                    let (start, end) = (get(p, OffsetSpec::Earliest), get(p, OffsetSpec::Latest));
                    end.saturating_sub(n).max(start)
                }
            })
            .collect())
    }
}

fn reset_target(reset: OffsetReset) -> Option<SeekTo> {
    match reset {
        OffsetReset::Earliest => Some(SeekTo::Beginning),
        OffsetReset::Latest => Some(SeekTo::End),
        OffsetReset::None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_specs_parse_like_kcat() {
        assert_eq!("beginning".parse(), Ok(SeekTo::Beginning));
        assert_eq!("end".parse(), Ok(SeekTo::End));
        assert_eq!("42".parse(), Ok(SeekTo::Offset(42)));
        assert_eq!("-10".parse(), Ok(SeekTo::FromEnd(10)));
        assert_eq!(
            "s@1700000000000".parse(),
            Ok(SeekTo::Timestamp(1_700_000_000_000))
        );
        assert!("soon".parse::<SeekTo>().is_err());
        assert!("s@x".parse::<SeekTo>().is_err());
    }

    #[test]
    fn topic_partitions_print_like_kafka() {
        assert_eq!(TopicPartition::new("orders", 3).to_string(), "orders-3");
    }

    fn consumer(reset: OffsetReset) -> Consumer {
        let client = Client::unconnected(crate::ClientConfig::new("127.0.0.1:9"));
        let config = ConsumerConfig {
            auto_offset_reset: reset,
            ..ConsumerConfig::default()
        };
        Consumer::new(client, config)
    }

    fn data(base: i64, count: usize, hw: i64) -> Outcome {
        Outcome::Data {
            batches: crate::record::fetched::test_batches("t", 0, base, count),
            high_watermark: hw,
            last_stable: hw,
            log_start: 0,
            aborted: Vec::new(),
        }
    }

    #[test]
    fn reassigning_keeps_positions_of_kept_partitions() {
        let mut c = consumer(OffsetReset::Latest);
        let (a, b, d) = (
            TopicPartition::new("t", 0),
            TopicPartition::new("t", 1),
            TopicPartition::new("t", 2),
        );
        c.assign([a.clone(), b.clone()]);
        c.seek(&a, SeekTo::Offset(5)).unwrap();
        c.seek(&b, SeekTo::Offset(7)).unwrap();
        c.assign([b.clone(), d.clone()]);
        assert_eq!(c.positions(), vec![(b.clone(), Some(7)), (d.clone(), None)]);
        assert!(c.seek(&a, SeekTo::End).is_err(), "no longer assigned");
        c.seek(&b, SeekTo::End).unwrap();
        assert_eq!(c.position(&b), None, "to be looked up on the next poll");
        assert!(c.seek(&d, SeekTo::Offset(-3)).is_err());
    }

    #[test]
    fn fetched_data_advances_the_position_past_whole_batches() {
        let mut c = consumer(OffsetReset::Latest);
        let tp = TopicPartition::new("t", 0);
        c.assign([tp.clone()]);
        c.seek(&tp, SeekTo::Offset(3)).unwrap();
        assert!(!c.at_end(), "the end is unknown before a fetch");
        // The broker sends the batch holding offset 3, starting at 0.
        let got = c.apply(tp.clone(), data(0, 5, 5)).unwrap().unwrap();
        let offsets: Vec<i64> = got.records().map(|r| r.unwrap().offset).collect();
        assert_eq!(offsets, vec![3, 4]);
        assert_eq!(c.position(&tp), Some(5));
        assert!(c.at_end());
        // A batch wholly before the position is dropped without moving anything.
        assert!(c.apply(tp.clone(), data(0, 5, 5)).unwrap().is_none());
        assert_eq!(c.position(&tp), Some(5));
        assert_eq!(c.high_watermark(&tp), Some(5));
    }

    #[test]
    fn out_of_range_applies_the_reset_policy() {
        let tp = TopicPartition::new("t", 0);
        let mut c = consumer(OffsetReset::Earliest);
        c.assign([tp.clone()]);
        c.seek(&tp, SeekTo::Offset(99)).unwrap();
        assert!(c.apply(tp.clone(), Outcome::OutOfRange).unwrap().is_none());
        assert_eq!(c.position(&tp), None);
        assert_eq!(c.partitions[&tp].pending, Some(SeekTo::Beginning));

        let mut strict = consumer(OffsetReset::None);
        strict.assign([tp.clone()]);
        strict.seek(&tp, SeekTo::Offset(99)).unwrap();
        let err = strict.apply(tp.clone(), Outcome::OutOfRange).unwrap_err();
        assert!(matches!(err, Error::NoOffset { partition: 0, .. }));
    }

    #[test]
    fn a_seek_while_fetching_discards_the_stale_answer() {
        let mut c = consumer(OffsetReset::Latest);
        let tp = TopicPartition::new("t", 0);
        c.assign([tp.clone()]);
        c.seek(&tp, SeekTo::Offset(0)).unwrap();
        c.seek(&tp, SeekTo::Beginning).unwrap();
        assert!(c.apply(tp.clone(), data(0, 2, 2)).unwrap().is_none());
        assert_eq!(c.partitions[&tp].pending, Some(SeekTo::Beginning));
    }
}
