//! Counts in words: "1 record", "2 records", never "1 records" or "record(s)".

/// `n` and `noun`, plural (with an "s") unless `n` is 1. Every noun the CLI counts takes an "s".
pub fn count(n: impl TryInto<i128>, noun: &str) -> String {
    // Every count fits: usize and u64 are at most 64 bits.
    let n: i128 = n.try_into().unwrap_or(i128::MAX);
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_everything_else_plural() {
        assert_eq!(count(1u64, "record"), "1 record");
        assert_eq!(count(0usize, "key"), "0 keys");
        assert_eq!(count(12i32, "partition"), "12 partitions");
    }
}
