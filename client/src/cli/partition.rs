//! `client partition KEY... --partitions N [--to M]`: where Kafka's partitioner puts keys, and
//! which of them move when a topic grows. Needs no broker.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};

use clap::Args;
use protocol::partitioner::partition_for_key;

use super::words::count;
use super::{table, Failure};

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  client partition order-8842 --partitions 12 --to 24
  seq -f 'order-%g' 10000 | client partition --partitions 12 --to 24")]
pub struct PartitionArgs {
    /// Keys to place; without any, keys are read from stdin (one per line) and summarised
    pub keys: Vec<String>,
    /// Partition count of the topic
    #[arg(short, long, value_name = "N")]
    pub partitions: i32,
    /// A new partition count, to see which keys move
    #[arg(long, value_name = "M")]
    pub to: Option<i32>,
}

pub fn run(args: &PartitionArgs) -> Result<(), Failure> {
    for n in std::iter::once(args.partitions).chain(args.to) {
        if n <= 0 {
            return Err(Failure::usage(format!(
                "a partition count must be at least 1, not {n}"
            )));
        }
    }
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if args.keys.is_empty() {
        let stdin = io::stdin();
        let keys = stdin.lock().split(b'\n').map(|line| {
            line.map(|mut l| {
                if l.last() == Some(&b'\r') {
                    l.pop();
                }
                l
            })
        });
        summarise(keys, args.partitions, args.to, &mut out)?;
    } else {
        let keys: Vec<&[u8]> = args.keys.iter().map(|k| k.as_bytes()).collect();
        place(&keys, args.partitions, args.to, &mut out)?;
    }
    Ok(())
}

/// One row per key.
fn place(keys: &[&[u8]], from: i32, to: Option<i32>, out: &mut impl Write) -> io::Result<()> {
    let before = format!("PARTITION({from})");
    let mut header = vec!["KEY", before.as_str()];
    let after = to.map(|m| format!("PARTITION({m})"));
    if let Some(after) = &after {
        header.extend([after.as_str(), "MOVES"]);
    }
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|key| {
            let p = partition_for_key(key, from);
            let mut row = vec![String::from_utf8_lossy(key).into_owned(), p.to_string()];
            if let Some(m) = to {
                let q = partition_for_key(key, m);
                row.extend([q.to_string(), if p == q { "no" } else { "yes" }.to_string()]);
            }
            row
        })
        .collect();
    table::write(out, &header, &rows)
}

/// Counts instead of rows, for any number of keys.
fn summarise(
    keys: impl Iterator<Item = io::Result<Vec<u8>>>,
    from: i32,
    to: Option<i32>,
    out: &mut impl Write,
) -> io::Result<()> {
    let mut total = 0u64;
    let mut moved = 0u64;
    let mut per_partition: BTreeMap<i32, u64> = BTreeMap::new();
    for key in keys {
        let key = key?;
        if key.is_empty() {
            continue;
        }
        total += 1;
        let p = partition_for_key(&key, from);
        *per_partition.entry(p).or_default() += 1;
        if to.is_some_and(|m| partition_for_key(&key, m) != p) {
            moved += 1;
        }
    }
    match to {
        Some(m) => {
            let pct = if total == 0 {
                0.0
            } else {
                100.0 * moved as f64 / total as f64
            };
            writeln!(
                out,
                "{}, {from} -> {m} partitions: {moved} move ({pct:.1}%), {} stay",
                count(total, "key"),
                total - moved
            )
        }
        None => {
            writeln!(
                out,
                "{} over {}:",
                count(total, "key"),
                count(from, "partition")
            )?;
            let rows: Vec<Vec<String>> = (0..from)
                .map(|p| {
                    let n = per_partition.get(&p).copied().unwrap_or(0);
                    vec![p.to_string(), n.to_string()]
                })
                .collect();
            table::write(out, &["PARTITION", "KEYS"], &rows)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> String {
        let mut out = Vec::new();
        f(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_workshop_key_moves_from_4_to_16() {
        let out = text(|o| place(&[b"order-8842"], 12, Some(24), o));
        assert_eq!(
            out,
            "KEY         PARTITION(12)  PARTITION(24)  MOVES\norder-8842  4              16             yes\n"
        );
        let out = text(|o| place(&[b"kafka"], 3, None, o));
        assert_eq!(out, "KEY    PARTITION(3)\nkafka  1\n");
    }

    #[test]
    fn doubling_moves_about_half_the_keys() {
        let keys = (0..10_000).map(|i| Ok(format!("order-{i}").into_bytes()));
        let out = text(|o| summarise(keys, 12, Some(24), o));
        let moved: u64 = out
            .split(": ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!((4500..5500).contains(&moved), "{out}");
        assert!(out.starts_with("10000 keys, 12 -> 24 partitions: "));
    }

    #[test]
    fn without_to_the_summary_counts_per_partition() {
        let keys = ["kafka", "key1", "key3", "1", ""].map(|k| Ok(k.as_bytes().to_vec()));
        let out = text(|o| summarise(keys.into_iter(), 3, None, o));
        assert_eq!(out, "4 keys over 3 partitions:\nPARTITION  KEYS\n0          1\n1          2\n2          1\n");
    }
}
