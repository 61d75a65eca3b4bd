//! A count with its noun, for narration and checks: `1 rebalance`, `2 rebalances`, `1,300
//! payments`, never `rebalance(s)`. Counts use the one thousands separator every lab prints.

use crate::lab::report::thousands;

/// `n` with `one` or `many` after it, as `n` asks.
pub fn counted(n: u64, one: &str, many: &str) -> String {
    let noun = if n == 1 { one } else { many };
    format!("{} {noun}", thousands(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted(0, "rebalance", "rebalances"), "0 rebalances");
        assert_eq!(counted(1, "rebalance", "rebalances"), "1 rebalance");
        assert_eq!(counted(1300, "payment", "payments"), "1,300 payments");
    }
}
