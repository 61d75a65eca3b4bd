//! Fault injection for labs and tests: lost produce acknowledgements, slow responses, connections
//! that break after a number of requests.
//!
//! A lost acknowledgement is the failure that idempotence exists for: the batch is appended, then
//! the connection closes before the answer leaves, exactly as when a network drops it. The
//! producer sees a broken connection and retries. Faults never touch what is stored.
//!
//! Faults are set at start (`broker --fault SPEC`), through [`crate::Broker::faults`], or changed
//! while the broker runs through the same handle. Spec syntax: `KIND[:key=value,...]`:
//!
//! - `drop-ack[:topic=T][,partition=N][,count=N | ,probability=P[,seed=S]]`: after appending a
//!   produce to a matching partition, close the connection instead of answering (default: every
//!   time).
//! - `delay:ms=N[,api=produce|fetch|...]`: hold each matching response back for N milliseconds.
//! - `close-after:requests=N`: close every connection after it has been answered N times.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use parking_lot::Mutex;

/// Which produce acknowledgements to lose.
#[derive(Debug, Clone, PartialEq)]
pub enum DropBudget {
    Always,
    /// The next N matching acknowledgements.
    Count(u64),
    /// Each with probability P, drawn from a seeded generator so a run repeats.
    Probability {
        p: f64,
        seed: u64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    DropAck {
        topic: Option<String>,
        partition: Option<i32>,
        budget: DropBudget,
    },
    Delay {
        api: Option<ApiKey>,
        delay: Duration,
    },
    CloseAfter {
        requests: u64,
    },
}

/// The faults in force. Cheap to consult when there are none: one atomic load.
#[derive(Debug, Default)]
pub struct Faults {
    armed: AtomicBool,
    rules: Mutex<Vec<ActiveFault>>,
    acks_dropped: AtomicU64,
}

#[derive(Debug)]
struct ActiveFault {
    fault: Fault,
    /// xorshift state for probability budgets.
    rng: u64,
}

impl Faults {
    pub fn add(&self, fault: Fault) {
        let rng = match &fault {
            Fault::DropAck {
                budget: DropBudget::Probability { seed, .. },
                ..
            } => seed.max(&1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            _ => 1,
        };
        self.rules.lock().push(ActiveFault { fault, rng });
        self.armed.store(true, Ordering::Release);
    }

    pub fn clear(&self) {
        self.rules.lock().clear();
        self.armed.store(false, Ordering::Release);
    }

    /// Acknowledgements lost so far.
    pub fn acks_dropped(&self) -> u64 {
        self.acks_dropped.load(Ordering::Relaxed)
    }

    fn armed(&self) -> bool {
        self.armed.load(Ordering::Acquire)
    }

    /// Decides, once per appended partition, whether its acknowledgement is lost.
    pub fn drop_ack(&self, topic: &str, partition: i32) -> bool {
        if !self.armed() {
            return false;
        }
        let mut rules = self.rules.lock();
        for rule in rules.iter_mut() {
            let Fault::DropAck {
                topic: t,
                partition: p,
                budget,
            } = &mut rule.fault
            else {
                continue;
            };
            if t.as_deref().is_some_and(|t| t != topic) || p.is_some_and(|p| p != partition) {
                continue;
            }
            let fire = match budget {
                DropBudget::Always => true,
                DropBudget::Count(0) => false,
                DropBudget::Count(n) => {
                    *n -= 1;
                    true
                }
                DropBudget::Probability { p, .. } => {
                    rule.rng ^= rule.rng << 13;
                    rule.rng ^= rule.rng >> 7;
                    rule.rng ^= rule.rng << 17;
                    ((rule.rng >> 11) as f64 / (1u64 << 53) as f64) < *p
                }
            };
            if fire {
                self.acks_dropped.fetch_add(1, Ordering::Relaxed);
                return true;
            }
        }
        false
    }

    /// How long to hold back a response to `api`.
    pub fn delay(&self, api: ApiKey) -> Option<Duration> {
        if !self.armed() {
            return None;
        }
        self.rules.lock().iter().find_map(|rule| match rule.fault {
            Fault::Delay { api: a, delay } if a.is_none_or(|a| a == api) => Some(delay),
            _ => None,
        })
    }

    /// After how many answered requests a connection is closed.
    pub fn close_after(&self) -> Option<u64> {
        if !self.armed() {
            return None;
        }
        self.rules.lock().iter().find_map(|rule| match rule.fault {
            Fault::CloseAfter { requests } => Some(requests),
            _ => None,
        })
    }
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(spec: &str) -> Result<Self, String> {
        let (kind, args) = spec.split_once(':').unwrap_or((spec, ""));
        let mut params = std::collections::BTreeMap::new();
        for pair in args.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("fault parameter '{pair}' is not key=value"))?;
            params.insert(k.trim(), v.trim());
        }
        let mut take = |key: &str| params.remove(key);
        fn parse<T: FromStr>(key: &str, value: &str) -> Result<T, String> {
            value
                .parse()
                .map_err(|_| format!("fault parameter {key}={value} is not a valid value"))
        }
        let fault = match kind {
            "drop-ack" => {
                let topic = take("topic").map(str::to_string);
                let partition = take("partition")
                    .map(|v| parse("partition", v))
                    .transpose()?;
                let budget = match (take("count"), take("probability")) {
                    (Some(_), Some(_)) => {
                        return Err("drop-ack takes count or probability, not both".into())
                    }
                    (Some(n), None) => DropBudget::Count(parse("count", n)?),
                    (None, Some(p)) => {
                        let p: f64 = parse("probability", p)?;
                        if !(0.0..=1.0).contains(&p) {
                            return Err(format!("probability {p} is not between 0 and 1"));
                        }
                        let seed = take("seed")
                            .map(|s| parse("seed", s))
                            .transpose()?
                            .unwrap_or(1);
                        DropBudget::Probability { p, seed }
                    }
                    (None, None) => DropBudget::Always,
                };
                Fault::DropAck {
                    topic,
                    partition,
                    budget,
                }
            }
            "delay" => {
                let ms: u64 = parse("ms", take("ms").ok_or("delay needs ms=N")?)?;
                let api = take("api").map(parse_api).transpose()?;
                Fault::Delay {
                    api,
                    delay: Duration::from_millis(ms),
                }
            }
            "close-after" => Fault::CloseAfter {
                requests: parse(
                    "requests",
                    take("requests").ok_or("close-after needs requests=N")?,
                )?,
            },
            other => {
                return Err(format!(
                    "unknown fault '{other}' (expected drop-ack, delay or close-after)"
                ))
            }
        };
        if let Some(unused) = params.keys().next() {
            return Err(format!("fault {kind} has no parameter '{unused}'"));
        }
        Ok(fault)
    }
}

/// API names as Kafka's docs write them, lower-case: `produce`, `fetch`, `list-offsets`, ...
fn parse_api(name: &str) -> Result<ApiKey, String> {
    let wanted = name.replace(['-', '_'], "").to_ascii_lowercase();
    (0..=100)
        .filter_map(|key| ApiKey::try_from(key).ok())
        .find(|key| format!("{key:?}").to_ascii_lowercase() == wanted)
        .ok_or_else(|| format!("unknown API '{name}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_specs() {
        assert_eq!(
            "drop-ack:topic=orders,partition=4,count=3".parse(),
            Ok(Fault::DropAck {
                topic: Some("orders".into()),
                partition: Some(4),
                budget: DropBudget::Count(3)
            })
        );
        assert_eq!(
            "delay:ms=200,api=produce".parse(),
            Ok(Fault::Delay {
                api: Some(ApiKey::Produce),
                delay: Duration::from_millis(200)
            })
        );
        assert_eq!(
            "close-after:requests=10".parse(),
            Ok(Fault::CloseAfter { requests: 10 })
        );
        assert!("drop-ack:count=1,probability=0.5".parse::<Fault>().is_err());
        assert!("drop-ack:colour=red".parse::<Fault>().is_err());
        assert!("explode".parse::<Fault>().is_err());
        assert!("delay:ms=5,api=nonsense".parse::<Fault>().is_err());
        assert!("drop-ack:probability=1.5".parse::<Fault>().is_err());
    }

    #[test]
    fn a_count_budget_drops_exactly_that_many_matching_acks() {
        let faults = Faults::default();
        faults.add("drop-ack:topic=orders,count=2".parse().unwrap());
        assert!(!faults.drop_ack("other", 0));
        assert!(faults.drop_ack("orders", 3));
        assert!(faults.drop_ack("orders", 0));
        assert!(!faults.drop_ack("orders", 0));
        assert_eq!(faults.acks_dropped(), 2);
    }

    #[test]
    fn a_probability_budget_repeats_with_its_seed() {
        let run = |seed| {
            let faults = Faults::default();
            faults.add(Fault::DropAck {
                topic: None,
                partition: None,
                budget: DropBudget::Probability { p: 0.3, seed },
            });
            (0..1000)
                .map(|_| faults.drop_ack("t", 0))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        let dropped = run(7).iter().filter(|d| **d).count();
        assert!(
            (200..400).contains(&dropped),
            "{dropped} of 1000 at p = 0.3"
        );
    }

    #[test]
    fn nothing_armed_means_nothing_happens() {
        let faults = Faults::default();
        assert!(!faults.drop_ack("t", 0));
        assert_eq!(faults.delay(ApiKey::Fetch), None);
        faults.add("close-after:requests=3".parse().unwrap());
        assert_eq!(faults.close_after(), Some(3));
        faults.clear();
        assert_eq!(faults.close_after(), None);
    }
}
