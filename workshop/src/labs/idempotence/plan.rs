//! The lab's flags, checked.

use clap::value_parser;

use crate::lab::deadline::Work;
use crate::lab::LabError;

/// Requests of every producer run besides its sends, one after another: creating the topic,
/// InitProducerId, the end offsets, and the fetches that read it back.
const SETUP_ROUND_TRIPS: u64 = 4;

const MAX_RECORDS: i64 = 100_000;
const MAX_PARTITIONS: i64 = 1000;
const MAX_ACCOUNTS: i64 = 1000;

/// `workshop idempotence`: lost acknowledgements, duplicates, and where deduplication ends.
#[derive(Debug, Clone, clap::Args)]
pub struct IdempotenceArgs {
    /// Records per phase: payments (phases 1-2), orders (3), events (4); one request each
    #[arg(long, value_name = "N", default_value_t = 200,
          value_parser = value_parser!(u32).range(2..=MAX_RECORDS))]
    pub records: u32,
    /// Acknowledgements the producer loses in phases 1 and 2, spread over the records by --seed
    #[arg(long, value_name = "N", default_value_t = 12)]
    pub lost_acks: u64,
    /// Partitions of each topic; phase 3 doubles them
    #[arg(long, value_name = "P", default_value_t = 3,
          value_parser = value_parser!(i32).range(1..=MAX_PARTITIONS))]
    pub partitions: i32,
    /// Orders the application sends again after the partition change (phase 3)
    #[arg(long, value_name = "N", default_value_t = 12)]
    pub resends: u32,
    /// Producer instances that die with an unacknowledged event (phase 4)
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub restarts: u32,
    /// Accounts that a zombie writer and its successor both write (phase 5)
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = value_parser!(u32).range(1..=MAX_ACCOUNTS))]
    pub accounts: u32,
}

/// The flags, checked against each other; the phases read them through it.
#[derive(Debug, Clone)]
pub struct Plan(IdempotenceArgs);

impl std::ops::Deref for Plan {
    type Target = IdempotenceArgs;

    fn deref(&self) -> &IdempotenceArgs {
        &self.0
    }
}

impl Plan {
    pub fn new(args: &IdempotenceArgs) -> Result<Plan, LabError> {
        let invalid = |message: String| Err(LabError::InvalidInput(message));
        if args.lost_acks > u64::from(args.records) {
            return invalid(format!(
                "--lost-acks {} is more than the {} records sent: at most one acknowledgement per record is lost",
                args.lost_acks, args.records
            ));
        }
        if args.resends > args.records {
            return invalid(format!(
                "--resends {} is more than the {} orders sent; give at most --resends {}",
                args.resends, args.records, args.records
            ));
        }
        if args.restarts >= args.records {
            return invalid(format!(
                "--restarts {} needs more than {} events (each instance dies after the first one); give at most --restarts {}",
                args.restarts,
                args.records,
                args.records - 1
            ));
        }
        Ok(Plan(args.clone()))
    }

    /// The work of a phase whose producers make `runs` runs of `sends` requests each, every one
    /// waiting for its answer (no linger), and read what they wrote back in bulk.
    pub fn sends(&self, runs: u64, sends: u64) -> Work {
        Work {
            round_trips: runs * (sends + SETUP_ROUND_TRIPS),
            records: runs * sends,
            ..Work::default()
        }
    }

    /// Phases 1 and 2 send every payment once, and once more for each lost acknowledgement.
    pub fn payments(&self) -> u64 {
        u64::from(self.records) + self.lost_acks
    }

    /// Phase 5: each writer writes every account once (A twice), plus the probe for a
    /// transactional id; with fencing, each of the three transactions adds its partitions (at
    /// most one request per account) and ends, each request after finding the coordinator.
    pub fn zombie_work(&self) -> Work {
        let mut work = self.sends(2, 3 * u64::from(self.accounts) + 1);
        work.round_trips += 1 + 3 * 2 * (u64::from(self.accounts) + 1);
        work
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> IdempotenceArgs {
        IdempotenceArgs {
            records: 20,
            lost_acks: 3,
            partitions: 3,
            resends: 4,
            restarts: 2,
            accounts: 2,
        }
    }

    #[test]
    fn counts_must_fit_in_the_records() {
        assert!(Plan::new(&args()).is_ok());
        let too_many = |f: fn(&mut IdempotenceArgs)| {
            let mut a = args();
            f(&mut a);
            Plan::new(&a).unwrap_err().to_string()
        };
        assert!(too_many(|a| a.lost_acks = 21).contains("--lost-acks"));
        assert!(too_many(|a| a.resends = 21).contains("--resends"));
        assert!(too_many(|a| a.restarts = 20).contains("--restarts 19"));
    }

    #[test]
    fn each_phase_gets_the_time_of_its_requests() {
        let plan = Plan::new(&args()).unwrap();
        // 20 payments and 3 retries, twice over with idempotence: 2 x (23 + 4) round trips.
        let work = plan.sends(2, plan.payments());
        assert_eq!((work.round_trips, work.records), (54, 46));
        assert_eq!(
            work.limit(&crate::lab::deadline::Budget::KAFKA),
            std::time::Duration::from_micros(64_001_150)
        );
        // Two writers over 2 accounts, two runs, the probe, and three transactions.
        assert_eq!(plan.zombie_work().round_trips, 2 * (7 + 4) + 1 + 3 * 2 * 3);
    }
}
