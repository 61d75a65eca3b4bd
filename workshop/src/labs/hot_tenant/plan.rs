//! The lab's flags, and the checks that turn them into a plan or one clear error line.

use clap::Args;

use crate::lab::LabError;

/// Traffic time is cut into ticks of this many per second. A tick is the unit of the lab's
/// traffic-time model: the producer sends a tick's records (a tenth of its rate) and has them
/// acknowledged, and each partition's consumer then processes at most its rate's worth of that
/// tick's time, from what has arrived.
pub const TICKS_PER_SECOND: u64 = 10;

/// Lab `hot-tenant`'s own flags. The timed run's flags are options so that a mode they do not
/// apply to can refuse them by name instead of ignoring them.
#[derive(Debug, Clone, Args)]
pub struct HotTenantArgs {
    /// Only source 001's routing model: 100 tenants on 8 shards by SHA-256, then the super tenant
    /// split into 64 virtual buckets (no broker)
    #[arg(long, conflicts_with = "steps")]
    pub model: bool,
    /// Source 000's step model on the broker: 12 keys on 3 partitions, each completing at most 4
    /// records per step
    #[arg(long)]
    pub steps: bool,
    /// Partitions of the timed run's topic (one group member each, so at most 64) [default: 8]
    #[arg(long, value_name = "N")]
    pub partitions: Option<i32>,
    /// Tenants 1 to N; one of them sends as much as all the others together [default: 100]
    #[arg(long, value_name = "N")]
    pub tenants: Option<u32>,
    /// The super tenant (the consumers are not told: the lab finds it from the traffic)
    /// [default: 42]
    #[arg(long, value_name = "ID")]
    pub hot_tenant: Option<u32>,
    /// Records sent in each of the two timed runs (tenant keys, then salted) [default: 4000000]
    #[arg(long, value_name = "N")]
    pub records: Option<u64>,
    /// Records per second the producer sends [default: 2000000, or half of --records when that
    /// is less, so that a run is 2 s of traffic]
    #[arg(long, value_name = "N")]
    pub rate: Option<u64>,
    /// Records per second each partition's consumer processes [default: 1.5 x rate / partitions,
    /// so the group as a whole has half again the capacity the traffic needs]
    #[arg(long, value_name = "N")]
    pub consumer_rate: Option<u64>,
    /// Sub-keys the hot tenant is salted into (`tenant-42#0` to `tenant-42#S-1`) [default: 16]
    #[arg(long, value_name = "S")]
    pub salt: Option<u32>,
    /// Heavy hitters to report (at most 20) [default: 5]
    #[arg(long, value_name = "K")]
    pub top: Option<usize>,
}

/// The timed run's defaults.
const PARTITIONS: i32 = 8;
const TENANTS: u32 = 100;
const HOT_TENANT: u32 = 42;
const RECORDS: u64 = 4_000_000;
const RATE: u64 = 2_000_000;
const SALT: u32 = 16;
const TOP: usize = 5;

impl HotTenantArgs {
    /// The timed run's flags that were given, by name.
    fn timed_flags(&self) -> Vec<&'static str> {
        [
            ("--partitions", self.partitions.is_some()),
            ("--tenants", self.tenants.is_some()),
            ("--hot-tenant", self.hot_tenant.is_some()),
            ("--records", self.records.is_some()),
            ("--rate", self.rate.is_some()),
            ("--consumer-rate", self.consumer_rate.is_some()),
            ("--salt", self.salt.is_some()),
            ("--top", self.top.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }
}

/// What the flags ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Model,
    Steps,
    Timed(Timed),
}

/// The timed run's parameters, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timed {
    pub partitions: i32,
    pub tenants: u32,
    pub hot_tenant: u32,
    pub records: u64,
    pub rate: u64,
    pub consumer_rate: u64,
    pub salt: u32,
    pub top: usize,
}

impl Timed {
    /// Seconds of traffic each run lasts.
    pub fn seconds(&self) -> f64 {
        self.records as f64 / self.rate as f64
    }

    /// Records one partition's consumer can process in the traffic time it takes to send `sent`
    /// records: its rate times that time. Integer arithmetic, so the budget is exact.
    pub fn budget(&self, sent: u64) -> u64 {
        (u128::from(self.consumer_rate) * u128::from(sent) / u128::from(self.rate)) as u64
    }

    /// Records per tick.
    pub fn tick_records(&self) -> u64 {
        (self.rate / TICKS_PER_SECOND).max(1)
    }

    /// Ticks in one run (the last one may send fewer records).
    pub fn ticks(&self) -> u32 {
        u32::try_from(self.records.div_ceil(self.tick_records())).unwrap_or(u32::MAX)
    }

    /// Records sent once tick `tick` (counted from 1) has been sent.
    pub fn sent_after(&self, tick: u32) -> u64 {
        (u64::from(tick) * self.tick_records()).min(self.records)
    }

    /// Records one partition's consumer may process in tick `tick`: its rate's worth of that
    /// tick's traffic time. A consumer cannot bank idle time: what a tick's capacity does not
    /// use (nothing had arrived) is gone, as it is for a real consumer that waited.
    pub fn capacity(&self, tick: u32) -> u64 {
        let before = self.sent_after(tick.saturating_sub(1));
        self.budget(self.sent_after(tick)) - self.budget(before)
    }

    /// Whether the lag is sampled after tick `tick`: a whole second of traffic has passed, or
    /// it is the last tick.
    pub fn samples_after(&self, tick: u32) -> bool {
        let second = |t: u32| self.sent_after(t) / self.rate;
        tick == self.ticks() || second(tick) > second(tick.saturating_sub(1))
    }
}

/// One group member per partition: each has its own connections and tasks.
const MAX_PARTITIONS: i32 = 64;
/// The detector's top entries worth printing.
const MAX_TOP: usize = 20;
const MAX_TENANTS: u32 = 1_000_000;
const MAX_SALT: u32 = 1024;
const MAX_RECORDS: u64 = 100_000_000;

impl Mode {
    pub fn new(args: &HotTenantArgs) -> Result<Mode, LabError> {
        let bad = |msg: String| Err(LabError::InvalidInput(msg));
        let model = if args.model {
            Some((
                "--model",
                "source 001's routing model: 100 tenants on 8 shards",
                Mode::Model,
            ))
        } else if args.steps {
            Some((
                "--steps",
                "source 000's step model: 12 keys on 3 partitions",
                Mode::Steps,
            ))
        } else {
            None
        };
        if let Some((flag, what, mode)) = model {
            let given = args.timed_flags();
            return match given.as_slice() {
                [] => Ok(mode),
                [one] => bad(format!(
                    "{one} applies to the timed run only, and {flag} is {what}: drop {one}, or {flag}"
                )),
                many => bad(format!(
                    "{} apply to the timed run only, and {flag} is {what}: drop them, or {flag}",
                    many.join(", ")
                )),
            };
        }
        let partitions = args.partitions.unwrap_or(PARTITIONS);
        let tenants = args.tenants.unwrap_or(TENANTS);
        let hot_tenant = args.hot_tenant.unwrap_or(HOT_TENANT);
        let records = args.records.unwrap_or(RECORDS);
        let salt = args.salt.unwrap_or(SALT);
        let top = args.top.unwrap_or(TOP);
        if !(1..=MAX_PARTITIONS).contains(&partitions) {
            return bad(format!(
                "--partitions {} is out of range: use 1 to {MAX_PARTITIONS}",
                partitions
            ));
        }
        if !(2..=MAX_TENANTS).contains(&tenants) {
            return bad(format!(
                "--tenants {} is out of range: the lab needs a super tenant and at least one other, \
                 at most {MAX_TENANTS}",
                tenants
            ));
        }
        if !(1..=tenants).contains(&hot_tenant) {
            return bad(format!(
                "--hot-tenant {} is not one of the tenants 1 to {}",
                hot_tenant, tenants
            ));
        }
        if !(1_000..=MAX_RECORDS).contains(&records) {
            return bad(format!(
                "--records {records} is out of range: use 1000 to {MAX_RECORDS}"
            ));
        }
        let rate = args.rate.unwrap_or(RATE.min(records / 2));
        if rate == 0 || rate > records {
            return bad(format!(
                "--rate {rate} must be at least 1 and at most --records ({records}), so a run lasts \
                 a second or more"
            ));
        }
        let consumer_rate = args
            .consumer_rate
            .unwrap_or_else(|| (rate * 3 / 2 / partitions as u64).max(1));
        if consumer_rate == 0 {
            return bad("--consumer-rate must be at least 1".into());
        }
        if !(1..=MAX_SALT).contains(&salt) {
            return bad(format!(
                "--salt {} is out of range: use 1 to {MAX_SALT} sub-keys",
                salt
            ));
        }
        if !(1..=MAX_TOP).contains(&top) {
            return bad(format!("--top {} is out of range: use 1 to {MAX_TOP}", top));
        }
        Ok(Mode::Timed(Timed {
            partitions,
            tenants,
            hot_tenant,
            records,
            rate,
            consumer_rate,
            salt,
            top,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{FromArgMatches, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: HotTenantArgs,
    }

    fn mode(args: &[&str]) -> Result<Mode, String> {
        let argv = std::iter::once("lab").chain(args.iter().copied());
        let matches = <Cli as clap::CommandFactory>::command()
            .try_get_matches_from(argv)
            .map_err(|e| e.to_string())?;
        let cli = Cli::from_arg_matches(&matches).map_err(|e| e.to_string())?;
        Mode::new(&cli.args).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_the_timed_run() {
        let Mode::Timed(t) = mode(&[]).unwrap() else {
            panic!("not timed");
        };
        assert_eq!((t.partitions, t.tenants, t.hot_tenant), (8, 100, 42));
        assert_eq!(t.consumer_rate, 375_000);
        assert_eq!(t.seconds(), 2.0);
        assert_eq!(t.budget(t.records), 750_000);
        assert_eq!(t.budget(t.records / 2), 375_000);
        assert_eq!(t.budget(0), 0);
        assert_eq!(t.tick_records(), 200_000);
        assert_eq!(t.ticks(), 20);
        assert_eq!(t.capacity(1), 37_500);
        let total: u64 = (1..=t.ticks()).map(|k| t.capacity(k)).sum();
        assert_eq!(total, t.budget(t.records));
        let sampled: Vec<u32> = (1..=t.ticks()).filter(|&k| t.samples_after(k)).collect();
        assert_eq!(sampled, [10, 20]);
    }

    #[test]
    fn a_short_last_tick_is_a_tick_and_is_sampled() {
        let Mode::Timed(t) = mode(&["--records", "450000", "--rate", "200000"]).unwrap() else {
            panic!("not timed");
        };
        assert_eq!(t.ticks(), 23);
        assert_eq!(t.sent_after(23), 450_000);
        assert_eq!(t.sent_after(24), 450_000);
        let total: u64 = (1..=t.ticks()).map(|k| t.capacity(k)).sum();
        assert_eq!(total, t.budget(450_000));
        let sampled: Vec<u32> = (1..=t.ticks()).filter(|&k| t.samples_after(k)).collect();
        assert_eq!(sampled, [10, 20, 23]);
    }

    #[test]
    fn modes() {
        assert_eq!(mode(&["--model"]).unwrap(), Mode::Model);
        assert_eq!(mode(&["--steps"]).unwrap(), Mode::Steps);
        assert!(mode(&["--model", "--steps"]).is_err());
    }

    /// Issue 17: `--steps --partitions 4` ran source 000's 3 partitions and said nothing.
    #[test]
    fn a_timed_run_flag_in_a_model_mode_is_refused_by_name() {
        let err = mode(&["--steps", "--partitions", "4"]).unwrap_err();
        assert_eq!(
            err,
            "--partitions applies to the timed run only, and --steps is source 000's step model: 12 \
             keys on 3 partitions: drop --partitions, or --steps"
        );
        let err = mode(&["--model", "--salt", "4", "--records", "5000"]).unwrap_err();
        assert!(
            err.starts_with(
                "--records, --salt apply to the timed run only, and --model is source 001's"
            ),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }

    /// Issue 17: `--records 100000` was refused for a `--rate` nobody gave.
    #[test]
    fn fewer_records_without_a_rate_are_two_seconds_of_traffic() {
        let Mode::Timed(t) = mode(&["--records", "100000"]).unwrap() else {
            panic!("not timed");
        };
        assert_eq!((t.rate, t.seconds(), t.consumer_rate), (50_000, 2.0, 9_375));
        let err = mode(&["--records", "100000", "--rate", "200000"]).unwrap_err();
        assert!(
            err.starts_with("--rate 200000 must be at least 1 and at most --records (100000)"),
            "{err}"
        );
    }

    #[test]
    fn bad_flags_are_one_line() {
        for args in [
            &["--partitions", "0"][..],
            &["--partitions", "65"],
            &["--top", "21"],
            &["--tenants", "1"],
            &["--hot-tenant", "101"],
            &["--hot-tenant", "0"],
            &["--records", "10"],
            &["--rate", "0"],
            &["--rate", "5000", "--records", "4000"],
            &["--consumer-rate", "0"],
            &["--salt", "0"],
            &["--top", "0"],
        ] {
            let err = mode(args).expect_err(&format!("{args:?} accepted"));
            assert!(!err.contains('\n'), "{args:?}: {err}");
        }
    }
}
