//! The lab's flags, checked, and what they add up to.

use clap::value_parser;

use crate::lab::LabError;

const MAX_ORDERS: i64 = 20_000;
const MAX_PARTITIONS: i64 = 1_000;
const MAX_MEMBERS: i64 = 32;
const MAX_RATE: i64 = 10_000;
const MAX_CAPACITY: i64 = 1_000;
/// Events per unit of capacity: the most rounds a scenario can take (every event on one
/// partition). A round costs a few milliseconds against the embedded broker, so this keeps even
/// the worst case of the flags within a minute or two per scenario.
const MAX_ROUNDS: u64 = 20_000;

/// `workshop partitions`: "cancel before create".
#[derive(Debug, Clone, clap::Args)]
pub struct PartitionsArgs {
    /// Orders in the traffic (order ids are consecutive around order 8842), 7 events each
    #[arg(long, value_name = "N", default_value_t = 240,
          value_parser = value_parser!(u32).range(1..=MAX_ORDERS))]
    pub orders: u32,
    /// Orders in progress at a time: how far one order's events spread through the stream
    #[arg(long, value_name = "N", default_value_t = 24,
          value_parser = value_parser!(u32).range(1..=MAX_ORDERS))]
    pub open: u32,
    /// Partitions of `orders` at the start
    #[arg(long, value_name = "P", default_value_t = 12,
          value_parser = value_parser!(i32).range(1..=MAX_PARTITIONS))]
    pub partitions: i32,
    /// Partitions after the operator's increase
    #[arg(long, value_name = "P", default_value_t = 24,
          value_parser = value_parser!(i32).range(2..=MAX_PARTITIONS))]
    pub to: i32,
    /// Partitions of the over-provisioned topic of the first fix; default: 4 x --partitions
    #[arg(long, value_name = "P",
          value_parser = value_parser!(i32).range(1..=MAX_PARTITIONS))]
    pub provisioned: Option<i32>,
    /// Consumers in the group
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = value_parser!(u32).range(1..=MAX_MEMBERS))]
    pub members: u32,
    /// Events the shop produces per round
    #[arg(long, value_name = "N", default_value_t = 36,
          value_parser = value_parser!(u32).range(1..=MAX_RATE))]
    pub rate: u32,
    /// Records one partition's consumer applies per round (one consumer per partition at most:
    /// a partition is never faster than this)
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = value_parser!(u32).range(1..=MAX_CAPACITY))]
    pub capacity: u32,
}

/// The flags, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub orders: u32,
    pub open: u32,
    pub before: i32,
    pub after: i32,
    pub provisioned: i32,
    pub members: u32,
    pub rate: u32,
    pub capacity: u32,
}

impl Plan {
    pub fn new(args: &PartitionsArgs) -> Result<Plan, LabError> {
        let invalid = LabError::InvalidInput;
        if args.to <= args.partitions {
            return Err(invalid(format!(
                "--to {} is not above --partitions {}: Kafka only adds partitions (the lab shows its refusal to shrink at the end); give a larger --to, for example --to {}",
                args.to,
                args.partitions,
                args.partitions * 2
            )));
        }
        let events = u64::from(args.orders) * u64::from(super::events::LAST_VERSION);
        if events / u64::from(args.capacity) > MAX_ROUNDS {
            return Err(invalid(format!(
                "{} orders at --capacity {} could take {} rounds; keep --orders x 7 / --capacity under {MAX_ROUNDS} (fewer orders, or a larger --capacity)",
                args.orders,
                args.capacity,
                events / u64::from(args.capacity)
            )));
        }
        let provisioned = match args.provisioned {
            Some(p) => p,
            None => (args.partitions * 4).min(MAX_PARTITIONS as i32),
        };
        if provisioned < args.to {
            return Err(invalid(format!(
                "--provisioned {provisioned} is below --to {}: the over-provisioned topic must already have what the increase adds (source 003: 3 to 5 times what is needed); give at least --provisioned {}",
                args.to, args.to
            )));
        }
        Ok(Plan {
            orders: args.orders,
            open: args.open,
            before: args.partitions,
            after: args.to,
            provisioned,
            members: args.members,
            rate: args.rate,
            capacity: args.capacity,
        })
    }

    /// Records the group applies per round with `partitions` partitions: one consumer per
    /// partition at most, each at `capacity`.
    pub fn throughput(&self, partitions: i32) -> u64 {
        u64::from(self.capacity) * partitions.max(0) as u64
    }

    /// Whether the shop produces faster than the group applies at the start: the backlog the
    /// operator wants to cure by adding partitions.
    pub fn falls_behind(&self) -> bool {
        u64::from(self.rate) > self.throughput(self.before)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args, FromArgMatches};

    fn parse(flags: &[&str]) -> Result<Plan, String> {
        let command = PartitionsArgs::augment_args(clap::Command::new("partitions"));
        let matches = command
            .try_get_matches_from(std::iter::once("partitions").chain(flags.iter().copied()))
            .map_err(|e| e.to_string())?;
        let args = PartitionsArgs::from_arg_matches(&matches).map_err(|e| e.to_string())?;
        Plan::new(&args).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_the_seeds_scenario() {
        let plan = parse(&[]).unwrap();
        assert_eq!((plan.before, plan.after, plan.provisioned), (12, 24, 48));
        assert!(
            plan.falls_behind(),
            "36 events a round against 12 x 1 applied"
        );
        assert!(
            u64::from(plan.rate) > plan.throughput(plan.after),
            "24 is not enough either"
        );
        assert!(
            u64::from(plan.rate) <= plan.throughput(plan.provisioned),
            "48 is"
        );
    }

    #[test]
    fn bad_input_is_an_error_line_not_a_panic() {
        for flags in [
            &["--to", "12"][..],
            &["--to", "6"],
            &["--partitions", "0"],
            &["--provisioned", "20"],
            &["--orders", "0"],
            &["--orders", "many"],
            &["--members", "0"],
            &["--capacity", "0"],
            &["--rate", "-1"],
            &["--partitions", "5000"],
            &["--orders", "20000"],
        ] {
            let err = parse(flags).expect_err(&format!("{flags:?} was accepted"));
            assert!(!err.trim().is_empty() && !err.contains("panicked"));
        }
        assert_eq!(parse(&["--provisioned", "24"]).unwrap().provisioned, 24);
        assert!(parse(&["--orders", "20000", "--capacity", "7"]).is_ok());
    }
}
