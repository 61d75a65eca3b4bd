//! Client-side fault injection: acknowledgements the producer throws away after the broker sent
//! them, so that labs and tests lose acknowledgements against any broker, a real Kafka cluster
//! included.
//!
//! A lost acknowledgement is the failure idempotence exists for: the broker has appended the
//! batch, the producer cannot tell that from a batch that never arrived, and retries. The
//! broker's own fault (`broker --fault drop-ack`) closes the connection after the append; this
//! hook does the same from the other side: the answer arrives, the producer drops it, fails the
//! batch with [`Error::AckLost`](crate::Error::AckLost) (retriable) and retries it like any
//! request that got no answer. Only successful answers are lost (a refused batch was not
//! appended, so losing its answer would prove nothing), and the decision is made per batch.
//!
//! Which acknowledgements: each successful answer to a matching partition is counted in the
//! order the producer handles them (0 = the first), retries included. [`AckLoss::first`] loses
//! the first N, [`AckLoss::spread`] exactly N of the first M chosen by a seed, [`AckLoss::nth`]
//! one, [`AckLoss::probability`] each with probability P from a seeded generator. A producer
//! that sends one request at a time handles answers in a fixed order, so the same seed loses
//! the same acknowledgements on every run.
//!
//! Spec syntax (as the broker's drop-ack): `count=N`, `count=N,among=M,seed=S`,
//! `probability=P,seed=S`, each optionally with `topic=T` and `partition=N`.

use std::collections::BTreeSet;
use std::str::FromStr;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Which acknowledgements to lose, counted from 0 over successful answers to matching batches.
#[derive(Debug, Clone, PartialEq)]
pub enum LossPattern {
    /// These acknowledgements, by index.
    At(BTreeSet<u64>),
    /// Each with probability `p`, drawn from a generator seeded with `seed`.
    Probability { p: f64, seed: u64 },
}

/// Acknowledgements to lose, for [`ProducerConfig::lose_acks`](super::ProducerConfig::lose_acks).
#[derive(Debug, Clone, PartialEq)]
pub struct AckLoss {
    /// Only acknowledgements of this topic (`None`: any).
    pub topic: Option<String>,
    /// Only acknowledgements of this partition (`None`: any).
    pub partition: Option<i32>,
    pub pattern: LossPattern,
}

impl AckLoss {
    fn new(pattern: LossPattern) -> Self {
        Self {
            topic: None,
            partition: None,
            pattern,
        }
    }

    /// The first `n` acknowledgements (a retry's acknowledgement counts too, so a small retry
    /// budget can run out).
    pub fn first(n: u64) -> Self {
        Self::new(LossPattern::At((0..n).collect()))
    }

    /// Exactly `lost` of the first `among` acknowledgements, chosen by `seed`. With one record
    /// per request and `among` the number of records, exactly `lost` acknowledgements are lost
    /// however the retries fall.
    pub fn spread(lost: u64, among: u64, seed: u64) -> Self {
        let lost = lost.min(among);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut chosen = BTreeSet::new();
        // Floyd's algorithm: `lost` distinct indices below `among`, uniformly, in `lost` draws.
        for j in among - lost..among {
            let pick = rng.gen_range(0..=j);
            if !chosen.insert(pick) {
                chosen.insert(j);
            }
        }
        Self::new(LossPattern::At(chosen))
    }

    /// Only the acknowledgement with this index.
    pub fn nth(index: u64) -> Self {
        Self::new(LossPattern::At(BTreeSet::from([index])))
    }

    /// Each acknowledgement with probability `p` (0 to 1), from a generator seeded with `seed`.
    pub fn probability(p: f64, seed: u64) -> Self {
        Self::new(LossPattern::Probability {
            p: p.clamp(0.0, 1.0),
            seed,
        })
    }

    pub fn topic(mut self, topic: impl Into<String>) -> Self {
        self.topic = Some(topic.into());
        self
    }

    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    fn matches(&self, topic: &str, partition: i32) -> bool {
        self.topic.as_deref().is_none_or(|t| t == topic)
            && self.partition.is_none_or(|p| p == partition)
    }
}

impl FromStr for AckLoss {
    type Err = String;

    fn from_str(spec: &str) -> Result<Self, String> {
        let mut params = std::collections::BTreeMap::new();
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("ack loss parameter '{pair}' is not key=value"))?;
            params.insert(k.trim(), v.trim());
        }
        fn parse<T: FromStr>(key: &str, value: Option<&str>) -> Result<Option<T>, String> {
            value
                .map(|v| {
                    v.parse()
                        .map_err(|_| format!("ack loss parameter {key}={v} is not a valid value"))
                })
                .transpose()
        }
        let count: Option<u64> = parse("count", params.remove("count"))?;
        let among: Option<u64> = parse("among", params.remove("among"))?;
        let probability: Option<f64> = parse("probability", params.remove("probability"))?;
        let seed: Option<u64> = parse("seed", params.remove("seed"))?;
        let topic = params.remove("topic").map(str::to_string);
        let partition: Option<i32> = parse("partition", params.remove("partition"))?;
        if let Some(unknown) = params.keys().next() {
            return Err(format!("ack loss has no parameter '{unknown}'"));
        }
        let loss = match (count, among, probability) {
            (Some(n), None, None) => Self::first(n),
            (Some(n), Some(m), None) if n <= m => Self::spread(n, m, seed.unwrap_or(1)),
            (Some(n), Some(m), None) => {
                return Err(format!("cannot lose {n} of only {m} acknowledgements"))
            }
            (None, None, Some(p)) if (0.0..=1.0).contains(&p) => {
                Self::probability(p, seed.unwrap_or(1))
            }
            (None, None, Some(p)) => return Err(format!("probability {p} is not between 0 and 1")),
            _ => {
                return Err(
                    "ack loss takes count=N, count=N,among=M,seed=S or probability=P,seed=S".into(),
                )
            }
        };
        Ok(Self {
            topic,
            partition,
            ..loss
        })
    }
}

/// One acknowledgement the producer threw away: what the broker had said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostAck {
    pub topic: String,
    pub partition: i32,
    /// Where the broker had put the batch: the offset a deduplicated retry gets back.
    pub base_offset: i64,
    /// The batch's base sequence, -1 without idempotence.
    pub base_sequence: i32,
    pub records: i32,
}

/// Lost acknowledgements kept for [`Producer::lost_acks`](super::Producer::lost_acks); the count
/// goes on past it.
const LOG_CAP: usize = 10_000;

/// The running state of an [`AckLoss`]: how many acknowledgements it has seen and lost.
#[derive(Debug)]
pub struct AckLossState {
    loss: Option<AckLoss>,
    seen: u64,
    rng: StdRng,
    lost: u64,
    log: Vec<LostAck>,
}

impl AckLossState {
    pub fn new(loss: Option<AckLoss>) -> Self {
        let seed = match &loss {
            Some(AckLoss {
                pattern: LossPattern::Probability { seed, .. },
                ..
            }) => *seed,
            _ => 0,
        };
        Self {
            loss,
            seen: 0,
            rng: StdRng::seed_from_u64(seed),
            lost: 0,
            log: Vec::new(),
        }
    }

    /// Decides whether this successful answer is lost, and remembers it if so.
    pub fn lose(&mut self, ack: LostAck) -> bool {
        let Some(loss) = &self.loss else {
            return false;
        };
        if !loss.matches(&ack.topic, ack.partition) {
            return false;
        }
        let index = self.seen;
        self.seen += 1;
        let lost = match &loss.pattern {
            LossPattern::At(indices) => indices.contains(&index),
            LossPattern::Probability { p, .. } => self.rng.gen_bool(*p),
        };
        if lost {
            self.lost += 1;
            if self.log.len() < LOG_CAP {
                self.log.push(ack);
            }
        }
        lost
    }

    pub fn lost(&self) -> u64 {
        self.lost
    }

    pub fn log(&self) -> &[LostAck] {
        &self.log
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(topic: &str, partition: i32) -> LostAck {
        LostAck {
            topic: topic.into(),
            partition,
            base_offset: 0,
            base_sequence: -1,
            records: 1,
        }
    }

    fn run(loss: AckLoss, n: usize) -> Vec<bool> {
        let mut state = AckLossState::new(Some(loss));
        (0..n).map(|_| state.lose(ack("t", 0))).collect()
    }

    #[test]
    fn first_loses_a_prefix() {
        assert_eq!(run(AckLoss::first(2), 4), [true, true, false, false]);
        assert_eq!(run(AckLoss::nth(2), 4), [false, false, true, false]);
    }

    #[test]
    fn spread_loses_exactly_n_of_m_and_repeats_with_its_seed() {
        for (lost, among) in [(0, 10), (3, 10), (10, 10), (12, 200)] {
            let picks = run(AckLoss::spread(lost, among, 7), among as usize + 50);
            assert_eq!(picks.iter().filter(|l| **l).count() as u64, lost);
            assert!(picks[among as usize..].iter().all(|l| !l));
        }
        assert_eq!(
            run(AckLoss::spread(12, 200, 7), 200),
            run(AckLoss::spread(12, 200, 7), 200)
        );
        assert_ne!(
            run(AckLoss::spread(12, 200, 7), 200),
            run(AckLoss::spread(12, 200, 8), 200)
        );
    }

    #[test]
    fn probability_repeats_with_its_seed() {
        let a = run(AckLoss::probability(0.3, 5), 1000);
        assert_eq!(a, run(AckLoss::probability(0.3, 5), 1000));
        let lost = a.iter().filter(|l| **l).count();
        assert!((200..400).contains(&lost), "{lost} of 1000 at 0.3");
    }

    #[test]
    fn filters_and_counts() {
        let mut state = AckLossState::new(Some(AckLoss::first(5).topic("a").partition(1)));
        assert!(!state.lose(ack("b", 1)));
        assert!(!state.lose(ack("a", 0)));
        assert!(state.lose(ack("a", 1)));
        assert_eq!(state.lost(), 1);
        assert_eq!(state.log()[0].topic, "a");
        assert!(!AckLossState::new(None).lose(ack("a", 1)));
    }

    #[test]
    fn specs_parse_like_the_brokers_drop_ack() {
        assert_eq!("count=3".parse(), Ok(AckLoss::first(3)));
        assert_eq!(
            "count=2,among=10,seed=4,topic=t,partition=1".parse(),
            Ok(AckLoss::spread(2, 10, 4).topic("t").partition(1))
        );
        assert_eq!(
            "probability=0.2,seed=5".parse(),
            Ok(AckLoss::probability(0.2, 5))
        );
        for bad in [
            "",
            "count=x",
            "count=5,among=3",
            "probability=2",
            "count=1,probability=0.5",
            "colour=red",
            "count",
        ] {
            assert!(bad.parse::<AckLoss>().is_err(), "{bad}");
        }
    }
}
