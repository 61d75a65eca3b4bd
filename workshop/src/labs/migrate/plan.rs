//! The lab's flags, checked, and the timeline they give (in lab milliseconds).

use clap::value_parser;

use crate::lab::LabError;

/// Profiles are created in this first stretch, before the traffic proper.
pub const SIGNUP_MS: u64 = 100;
/// When the move of (20, 40] from B to D starts.
pub const MIGRATE_AT: u64 = 200;
/// How long after its catch-up starts the destination fails, and how long it stays down.
pub const FAIL_AFTER_MS: u64 = 5;
pub const DOWN_MS: u64 = 40;
/// How long after the commit the rollback comes (within the old copy's retention).
pub const ROLLBACK_AFTER_MS: u64 = 150;
/// When tenant 42's split into buckets starts.
pub const SPLIT_AT: u64 = 150;
/// The lab gives a migration this long to end after the traffic stops, then reports it.
pub const DRAIN_LIMIT_MS: u64 = 120_000;

/// `workshop migrate`: online resharding as a state machine, on Kafka.
#[derive(Debug, Clone, clap::Args)]
pub struct MigrateArgs {
    /// Users of the profile service besides Ben (`user-001` ...), placed on the ring by XXH3
    #[arg(long, value_name = "N", default_value_t = 200,
          value_parser = value_parser!(u32).range(1..=5_000))]
    pub users: u32,
    /// Profile writes per lab millisecond (plus one read and Ben's own traffic)
    #[arg(long, value_name = "N", default_value_t = 2,
          value_parser = value_parser!(u32).range(1..=20))]
    pub rate: u32,
    /// Lab milliseconds of traffic in each run
    #[arg(long, value_name = "MS", default_value_t = 1_000,
          value_parser = value_parser!(u64).range(600..=20_000))]
    pub duration_ms: u64,
    /// Rows the snapshot copy or backfill writes per lab millisecond (the throttle)
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = value_parser!(u32).range(1..=1_000))]
    pub copy_rate: u32,
    /// Changelog records the catch-up replays per lab millisecond
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = value_parser!(u32).range(1..=1_000))]
    pub replay_rate: u32,
    /// How long the stale instance keeps routing with version 7 after the handover
    #[arg(long, value_name = "MS", default_value_t = 300,
          value_parser = value_parser!(u64).range(1..=10_000))]
    pub stale_ms: u64,
    /// Orders of tenant 42, the hot tenant split into buckets
    #[arg(long, value_name = "N", default_value_t = 256,
          value_parser = value_parser!(u32).range(1..=10_000))]
    pub orders: u32,
    /// Virtual buckets tenant 42 is split into (source 001: 64)
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = value_parser!(u32).range(2..=4_096))]
    pub buckets: u32,
    /// Percent of dual writes whose second write fails the first time
    #[arg(long, value_name = "PERCENT", default_value_t = 3,
          value_parser = value_parser!(u32).range(0..=50))]
    pub failure_percent: u32,
}

/// The flags, checked: the arguments once [`Plan::new`] accepted them.
#[derive(Debug, Clone)]
pub struct Plan(MigrateArgs);

impl std::ops::Deref for Plan {
    type Target = MigrateArgs;

    fn deref(&self) -> &MigrateArgs {
        &self.0
    }
}

impl Plan {
    pub fn new(args: &MigrateArgs) -> Result<Plan, LabError> {
        let plan = Plan(args.clone());
        // The catch-up must outrun the writes that reach B, or it never ends. B holds about
        // 30 % of the ring ((20, 50]); a generous bound keeps the check simple and safe.
        if u64::from(plan.replay_rate) * 10 < u64::from(plan.rate) * 4 {
            return Err(LabError::InvalidInput(format!(
                "--replay-rate {} cannot keep up with --rate {}: B's changelog grows by about {} \
                 records a millisecond; give at least --replay-rate {}",
                plan.replay_rate,
                plan.rate,
                f64::from(plan.rate) * 0.3,
                (plan.rate * 4).div_ceil(10)
            )));
        }
        Ok(plan)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use clap::{Args, FromArgMatches};

    /// The plan of the default flags, as a user who gives none runs the lab.
    pub(crate) fn default_plan() -> Plan {
        parse(&[]).unwrap()
    }

    /// The plan of `flags` as the command line gives them, or the error line.
    pub(crate) fn parse(flags: &[&str]) -> Result<Plan, String> {
        let command = MigrateArgs::augment_args(clap::Command::new("migrate"));
        let matches = command
            .try_get_matches_from(std::iter::once("migrate").chain(flags.iter().copied()))
            .map_err(|e| e.to_string())?;
        let args = MigrateArgs::from_arg_matches(&matches).map_err(|e| e.to_string())?;
        Plan::new(&args).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_the_seeds_scenario() {
        let plan = parse(&[]).unwrap();
        assert_eq!((plan.users, plan.buckets, plan.stale_ms), (200, 64, 300));
    }

    #[test]
    fn bad_input_is_an_error_line_not_a_panic() {
        for flags in [
            &["--users", "0"][..],
            &["--rate", "0"],
            &["--rate", "many"],
            &["--duration-ms", "10"],
            &["--buckets", "1"],
            &["--failure-percent", "80"],
            &["--rate", "20", "--replay-rate", "1"],
        ] {
            let err = parse(flags).expect_err(&format!("{flags:?} was accepted"));
            assert!(!err.trim().is_empty() && !err.contains("panicked"));
        }
        assert!(parse(&["--rate", "20", "--replay-rate", "8"]).is_ok());
    }
}
