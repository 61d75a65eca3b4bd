//! The timed run's traffic: orders keyed by tenant, one super tenant sending as much as all the
//! others together (source 001: 99 tenants and tenant 42 with as many orders as all of them),
//! drawn from the seed so that the same seed sends the same records in the same order.
//!
//! Each record's key is its tenant (`tenant-42`), or, once the hot tenant is salted, one of its
//! S sub-keys (`tenant-42#0` to `tenant-42#15`, picked at random per record as source 003's
//! `write_key` does). Its value is the tenant's sequence number (8 bytes, big-endian), so a
//! consumer can tell when it applies a tenant's orders out of order.
//!
//! The generator also tallies what it sent per key: the lab predicts each partition's load from
//! that with Kafka's partitioner and checks it against the log end offsets the broker reports.

use protocol::partitioner::partition_for_key;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The key of a tenant's records.
pub fn tenant_key(tenant: u32) -> String {
    format!("tenant-{tenant}")
}

/// Sub-key `salt` of a salted tenant.
pub fn sub_key(tenant: u32, salt: u32) -> String {
    format!("tenant-{tenant}#{salt}")
}

/// The tenant a key belongs to, salted or not; `None` for a key this lab did not write.
pub fn tenant_of_key(key: &[u8]) -> Option<u32> {
    let rest = key.strip_prefix(b"tenant-")?;
    let digits = match rest.iter().position(|&b| b == b'#') {
        Some(hash) => &rest[..hash],
        None => rest,
    };
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// A tenant's sequence number as a record value.
pub fn encode_seq(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

/// The sequence number in a record value; `None` for a value this lab did not write.
pub fn decode_seq(value: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(value.try_into().ok()?))
}

/// Who sends how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    /// Tenants 1 to `tenants`.
    pub tenants: u32,
    pub hot_tenant: u32,
    /// Sub-keys of the hot tenant; `None` before salting.
    pub salt: Option<u32>,
}

/// One record to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Draw<'a> {
    pub tenant: u32,
    pub seq: u64,
    pub key: &'a str,
}

/// The seeded stream of records.
pub struct Traffic {
    mix: Mix,
    tenants_rng: ChaCha8Rng,
    /// Salts come from a stream of their own, so the salted run draws the same tenants in the
    /// same order as the unsalted one: the two runs differ only in the keys.
    salt_rng: ChaCha8Rng,
    keys: Vec<String>,
    sub_keys: Vec<String>,
    /// Next sequence number per tenant (index = tenant).
    seq: Vec<u64>,
    sent_by_key: Vec<u64>,
    sent_by_sub_key: Vec<u64>,
}

impl Traffic {
    /// The mix must name a hot tenant among `1..=tenants`, with at least one other tenant
    /// (checked by the lab's flags).
    pub fn new(mix: Mix, seed: u64) -> Self {
        let salt = mix.salt.unwrap_or(0);
        Traffic {
            mix,
            tenants_rng: ChaCha8Rng::seed_from_u64(seed),
            salt_rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5a17),
            keys: (0..=mix.tenants).map(tenant_key).collect(),
            sub_keys: (0..salt).map(|s| sub_key(mix.hot_tenant, s)).collect(),
            seq: vec![0; mix.tenants as usize + 1],
            sent_by_key: vec![0; mix.tenants as usize + 1],
            sent_by_sub_key: vec![0; salt as usize],
        }
    }

    /// The next record: the hot tenant with probability one half, else one of the others, each
    /// as likely.
    pub fn next_record(&mut self) -> Draw<'_> {
        let Mix {
            tenants,
            hot_tenant,
            ..
        } = self.mix;
        let tenant = if self.tenants_rng.gen_bool(0.5) {
            hot_tenant
        } else {
            // One of the tenants-1 others, skipping the hot one.
            let t = self.tenants_rng.gen_range(1..tenants);
            if t >= hot_tenant {
                t + 1
            } else {
                t
            }
        };
        let seq = self.seq[tenant as usize];
        self.seq[tenant as usize] += 1;
        let key = if tenant == hot_tenant && !self.sub_keys.is_empty() {
            let s = self.salt_rng.gen_range(0..self.sub_keys.len());
            self.sent_by_sub_key[s] += 1;
            &self.sub_keys[s]
        } else {
            self.sent_by_key[tenant as usize] += 1;
            &self.keys[tenant as usize]
        };
        Draw { tenant, seq, key }
    }

    /// Records sent per tenant so far (index = tenant; index 0 unused).
    pub fn sent_by_tenant(&self) -> &[u64] {
        &self.seq
    }

    /// Records per partition, as Kafka's partitioner places what was sent so far.
    pub fn predicted_loads(&self, partitions: i32) -> Vec<u64> {
        let mut loads = vec![0u64; partitions.max(1) as usize];
        let keyed = self.keys.iter().zip(&self.sent_by_key);
        let salted = self.sub_keys.iter().zip(&self.sent_by_sub_key);
        for (key, &n) in keyed.chain(salted) {
            if n > 0 {
                loads[partition_for_key(key.as_bytes(), partitions.max(1)) as usize] += n;
            }
        }
        loads
    }
}

/// Records per partition if every tenant sent what `sent_by_tenant` says, unsalted, on a topic
/// of `partitions`: what adding partitions would do.
pub fn loads_by_tenant(sent_by_tenant: &[u64], partitions: i32) -> Vec<u64> {
    let partitions = partitions.max(1);
    let mut loads = vec![0u64; partitions as usize];
    for (tenant, &n) in sent_by_tenant.iter().enumerate().skip(1) {
        if n > 0 {
            let key = tenant_key(tenant as u32);
            loads[partition_for_key(key.as_bytes(), partitions) as usize] += n;
        }
    }
    loads
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIX: Mix = Mix {
        tenants: 100,
        hot_tenant: 42,
        salt: None,
    };

    #[test]
    fn keys_name_their_tenant() {
        assert_eq!(tenant_key(42), "tenant-42");
        assert_eq!(sub_key(42, 3), "tenant-42#3");
        assert_eq!(tenant_of_key(b"tenant-42"), Some(42));
        assert_eq!(tenant_of_key(b"tenant-42#15"), Some(42));
        assert_eq!(tenant_of_key(b"tenant-"), None);
        assert_eq!(tenant_of_key(b"order-8842"), None);
        assert_eq!(tenant_of_key(b"tenant-x#1"), None);
        assert_eq!(decode_seq(&encode_seq(7)), Some(7));
        assert_eq!(decode_seq(b"short"), None);
    }

    #[test]
    fn the_hot_tenant_sends_as_much_as_all_the_others() {
        let mut traffic = Traffic::new(MIX, 5);
        for _ in 0..200_000 {
            let d = traffic.next_record();
            assert!((1..=100).contains(&d.tenant));
        }
        let sent = traffic.sent_by_tenant();
        assert_eq!(sent[0], 0);
        let hot = sent[42] as f64 / 200_000.0;
        assert!((hot - 0.5).abs() < 0.01, "{hot}");
        // Every other tenant sends about 1/99 of the other half.
        for (t, &n) in sent.iter().enumerate().skip(1).filter(|(t, _)| *t != 42) {
            let expected = 100_000.0 / 99.0;
            assert!(
                (n as f64 - expected).abs() < expected * 0.15,
                "tenant {t}: {n}"
            );
        }
    }

    #[test]
    fn the_same_seed_sends_the_same_records() {
        let take = |seed, mix| {
            let mut t = Traffic::new(mix, seed);
            (0..1000)
                .map(|_| {
                    let d = t.next_record();
                    (d.tenant, d.seq, d.key.to_string())
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(take(1, MIX), take(1, MIX));
        assert_ne!(take(1, MIX), take(2, MIX));
        // Salting changes the hot tenant's keys and nothing else.
        let salted = take(
            1,
            Mix {
                salt: Some(16),
                ..MIX
            },
        );
        for (plain, salted) in take(1, MIX).iter().zip(&salted) {
            assert_eq!((plain.0, plain.1), (salted.0, salted.1));
            if plain.0 == 42 {
                assert!(salted.2.starts_with("tenant-42#"), "{}", salted.2);
            } else {
                assert_eq!(plain.2, salted.2);
            }
        }
    }

    #[test]
    fn sequence_numbers_count_per_tenant() {
        let mut traffic = Traffic::new(MIX, 3);
        let mut next = vec![0u64; 101];
        for _ in 0..5000 {
            let d = traffic.next_record();
            assert_eq!(d.seq, next[d.tenant as usize]);
            next[d.tenant as usize] += 1;
        }
    }

    #[test]
    fn predicted_loads_follow_kafkas_partitioner() {
        let mut traffic = Traffic::new(MIX, 9);
        for _ in 0..10_000 {
            traffic.next_record();
        }
        let loads = traffic.predicted_loads(8);
        assert_eq!(loads.iter().sum::<u64>(), 10_000);
        let hot = partition_for_key(b"tenant-42", 8) as usize;
        assert!(loads[hot] >= traffic.sent_by_tenant()[42]);
        assert_eq!(loads, loads_by_tenant(traffic.sent_by_tenant(), 8));
        // Salted, the hot tenant's records spread over its sub-keys' partitions.
        let mut salted = Traffic::new(
            Mix {
                salt: Some(16),
                ..MIX
            },
            9,
        );
        for _ in 0..10_000 {
            salted.next_record();
        }
        let spread = salted.predicted_loads(8);
        assert_eq!(spread.iter().sum::<u64>(), 10_000);
        assert!(spread.iter().max() < loads.iter().max());
    }
}
