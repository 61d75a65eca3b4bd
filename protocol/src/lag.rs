//! Time lag, defined once for the broker's metrics and the client's tools: the age of the oldest
//! record a consumer group has not consumed yet, read from that record's timestamp.

/// The time lag at `now_ms` of a partition with `lag` records not consumed, the oldest stamped
/// `oldest_unconsumed` (epoch ms): 0 without lag, never below 0 (a producer's clock may run
/// ahead of ours); `None` when the lag is positive and that timestamp is unknown.
pub fn time_lag_ms(lag: i64, oldest_unconsumed: Option<i64>, now_ms: i64) -> Option<i64> {
    if lag <= 0 {
        return Some(0);
    }
    Some(now_ms.saturating_sub(oldest_unconsumed?).max(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_age_of_the_oldest_record_not_consumed() {
        assert_eq!(time_lag_ms(3, Some(1_000), 43_000), Some(42_000));
        assert_eq!(time_lag_ms(0, None, 43_000), Some(0));
        assert_eq!(time_lag_ms(3, None, 43_000), None);
        assert_eq!(time_lag_ms(3, Some(50_000), 43_000), Some(0), "clock skew");
    }
}
