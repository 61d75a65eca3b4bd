//! The thresholds of the verdict's checks, and the two checks every mode makes.
//!
//! The thresholds are the lab's reading of its sources: "skewed" is a busiest partition above
//! three times the mean (source 001's tenant-only routing is 4.38x; eight partitions with one
//! tenant at half the traffic give about 4.5x), and "near 1" is at most 1.5x (source 001 calls its
//! 1.44x split the fix; a perfectly even split is 1x, and hashed sub-keys never land perfectly).

use crate::lab::report::Checks;

/// Max over mean above this is a hot spot.
pub const SKEW_HIGH: f64 = 3.0;
/// Max over mean at or below this is "near 1": the load is spread.
pub const NEAR_ONE: f64 = 1.5;

/// The skew check, worded for any phase: `what` names the distribution ("loads before salting").
pub fn skew_high(checks: &mut Checks, name: &str, what: &str, max_over_avg: f64) -> bool {
    checks.check(
        name,
        max_over_avg > SKEW_HIGH,
        format!("{what}: busiest {max_over_avg:.2}x the mean (a hot spot is above {SKEW_HIGH}x)"),
    )
}

/// The spread check: `max_over_avg` near 1.
pub fn near_one(checks: &mut Checks, name: &str, what: &str, max_over_avg: f64) -> bool {
    checks.check(
        name,
        max_over_avg > 0.0 && max_over_avg <= NEAR_ONE,
        format!("{what}: busiest {max_over_avg:.2}x the mean (near 1 is at most {NEAR_ONE}x)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_only_when_every_check_holds() {
        let mut checks = Checks::new();
        skew_high(&mut checks, "skewed", "before", 4.38);
        near_one(&mut checks, "spread", "after", 1.44);
        assert!(checks.shown(), "{checks:?}");
        near_one(&mut checks, "spread again", "again", 1.9);
        assert!(!checks.shown());
        assert_eq!(checks.failed().collect::<Vec<_>>(), ["spread again"]);
    }

    #[test]
    fn the_thresholds_bite() {
        let mut checks = Checks::new();
        assert!(!skew_high(&mut checks, "even", "even", 3.0));
        assert!(!near_one(&mut checks, "nothing", "nothing measured", 0.0));
    }
}
