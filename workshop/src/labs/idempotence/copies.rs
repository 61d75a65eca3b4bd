//! Counting duplicates the only way that counts: by reading the topic back. Every message the
//! lab sends carries a unique id as its value, so a duplicate is a second copy of an id.

use std::collections::{BTreeMap, BTreeSet};

use client::Record;

/// What one partition holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionCount {
    pub records: u64,
    /// Records whose id already appeared at a lower offset of this partition.
    pub duplicates: u64,
}

/// The copies of every message id in a topic.
#[derive(Debug, Clone, Default)]
pub struct LogCount {
    pub partitions: BTreeMap<i32, PartitionCount>,
    /// Where each id was found: (partition, offset), in partition then offset order.
    pub places: BTreeMap<String, Vec<(i32, i64)>>,
}

impl LogCount {
    pub fn of(log: &BTreeMap<i32, Vec<Record>>) -> Self {
        let mut count = LogCount::default();
        for (&partition, records) in log {
            let mut seen = BTreeSet::new();
            let entry = count.partitions.entry(partition).or_default();
            for record in records {
                let id = id_of(record);
                entry.records += 1;
                if !seen.insert(id.clone()) {
                    entry.duplicates += 1;
                }
                count
                    .places
                    .entry(id)
                    .or_default()
                    .push((partition, record.offset));
            }
        }
        count
    }

    pub fn records(&self) -> u64 {
        self.partitions.values().map(|p| p.records).sum()
    }

    /// Copies beyond the first of each id, over the whole topic.
    pub fn duplicates(&self) -> u64 {
        self.records() - self.places.len() as u64
    }

    /// Ids with copies in more than one partition: duplicates that no deduplication kept per
    /// partition can see.
    pub fn split_ids(&self) -> u64 {
        self.places
            .values()
            .filter(|places| {
                let first = places[0].0;
                places.iter().any(|(p, _)| *p != first)
            })
            .count() as u64
    }

    pub fn copies(&self, id: &str) -> &[(i32, i64)] {
        self.places.get(id).map_or(&[], Vec::as_slice)
    }
}

/// A record's message id: its value as text (the lab writes nothing else there).
pub fn id_of(record: &Record) -> String {
    record
        .value
        .as_deref()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_default()
}

/// `p@o` for narration.
pub fn place((partition, offset): (i32, i64)) -> String {
    format!("p{partition}@{offset}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(parts: &[(i32, &[&str])]) -> BTreeMap<i32, Vec<Record>> {
        // Records are only built by the client when decoding, so go through a real batch.
        use client::record::{BatchBuilder, Compression, FetchedBatch, ProducerIdentity};
        parts
            .iter()
            .map(|&(p, values)| {
                if values.is_empty() {
                    return (p, Vec::new());
                }
                let mut b = BatchBuilder::new(1 << 16);
                for v in values {
                    assert!(b.try_append(0, None, Some(v.as_bytes()), &[]));
                }
                let bytes = b.finish(Compression::None, ProducerIdentity::NONE).unwrap();
                let batch = FetchedBatch::split(bytes, "t", p).unwrap().remove(0);
                let records = batch.records().unwrap().map(Result::unwrap).collect();
                (p, records)
            })
            .collect()
    }

    #[test]
    fn duplicates_within_and_across_partitions() {
        let count = LogCount::of(&log(&[(0, &["a", "b", "a"]), (1, &["c", "b"]), (2, &[])]));
        assert_eq!(count.records(), 5);
        assert_eq!(count.duplicates(), 2, "a twice in p0, b in p0 and p1");
        assert_eq!(count.partitions[&0].duplicates, 1);
        assert_eq!(count.partitions[&1].duplicates, 0);
        assert_eq!(count.split_ids(), 1);
        assert_eq!(count.copies("b"), [(0, 1), (1, 1)]);
        assert_eq!(count.partitions[&2], PartitionCount::default());
        assert_eq!(place((1, 7)), "p1@7");
    }
}
