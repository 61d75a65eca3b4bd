//! The line-up: every scheme the lab compares, built over the same nodes, changed the same way,
//! measured on the same keys.

use super::keys::KeySet;
use super::measure::{measure, Measurement};
use crate::kit::schemes::{
    FixedSlots, Jump, Membership, ModN, Rendezvous, RingScheme, Scheme, SchemeError, SlotHash,
    REDIS_SLOTS,
};

/// Source 004's number of logical buckets: fixed whatever the number of shards.
pub const SLOTS: u32 = 4096;

/// One scheme with its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spec {
    ModN,
    Ring { vnodes: u32 },
    Rendezvous,
    Jump,
    FixedSlots { slots: u32, hash: SlotHash },
}

impl Spec {
    /// The scheme's name in figures.
    pub fn scheme(self) -> &'static str {
        match self {
            Spec::ModN => "mod-n",
            Spec::Ring { .. } => "ring",
            Spec::Rendezvous => "rendezvous",
            Spec::Jump => "jump",
            Spec::FixedSlots { .. } => "fixed-slots",
        }
    }

    pub fn vnodes(self) -> Option<u32> {
        match self {
            Spec::Ring { vnodes } => Some(vnodes),
            _ => None,
        }
    }

    pub fn slots(self) -> Option<u32> {
        match self {
            Spec::FixedSlots { slots, .. } => Some(slots),
            _ => None,
        }
    }

    /// The hash that places keys: Redis's CRC16 for its slots, Kafka's murmur2 for Kafka's
    /// partitions, XXH3 for the rest.
    pub fn hash(self) -> &'static str {
        match self {
            Spec::FixedSlots { hash, .. } => hash.name(),
            _ => SlotHash::Xxh3.name(),
        }
    }

    /// How a table row names it.
    pub fn label(self) -> String {
        match self {
            Spec::Ring { vnodes } => {
                format!("ring, {vnodes} vnode{}", if vnodes == 1 { "" } else { "s" })
            }
            Spec::FixedSlots { slots, hash } => {
                let (name, _, unit) = slot_names(hash);
                format!("{name}, {slots}{unit}")
            }
            other => other.scheme().to_string(),
        }
    }

    /// A short name for narrow table columns.
    pub fn short(self) -> String {
        match self {
            Spec::Ring { vnodes } => format!("ring/{vnodes}"),
            Spec::Rendezvous => "hrw".into(),
            Spec::FixedSlots { slots, hash } => format!("{}/{slots}", slot_names(hash).1),
            other => other.scheme().to_string(),
        }
    }

    /// Builds the scheme over `from`, changes it to `to`, and measures both on `keys`.
    pub fn measure(
        self,
        from: &Membership,
        to: &Membership,
        keys: &KeySet,
        salt: u64,
    ) -> Result<Measurement, SchemeError> {
        match self {
            Spec::ModN => measure_change(ModN::new(from), from, to, keys),
            Spec::Ring { vnodes } => {
                measure_change(RingScheme::new(from, vnodes, salt), from, to, keys)
            }
            Spec::Rendezvous => measure_change(Rendezvous::new(from, salt), from, to, keys),
            Spec::Jump => measure_change(Jump::new(from), from, to, keys),
            Spec::FixedSlots { slots, hash } => {
                measure_change(FixedSlots::new(hash, slots, from), from, to, keys)
            }
        }
    }
}

/// Fixed slots by their hash: the label's name, the short name, and the unit after the count.
fn slot_names(hash: SlotHash) -> (&'static str, &'static str, &'static str) {
    match hash {
        SlotHash::Xxh3 => ("fixed slots", "slots", ""),
        SlotHash::RedisCrc16 => ("Redis", "redis", " slots"),
        SlotHash::KafkaMurmur2 => ("Kafka", "kafka", " partitions"),
    }
}

fn measure_change<S: Scheme>(
    before: Result<S, SchemeError>,
    from: &Membership,
    to: &Membership,
    keys: &KeySet,
) -> Result<Measurement, SchemeError> {
    let before = before?;
    let after = before.change(to)?;
    Ok(measure(&before, &after, keys, from, to))
}

/// Every scheme the lab compares, in table order: the ring once per `vnodes` setting, fixed
/// slots as source 004's 4096 buckets, as Redis Cluster's 16384 slots and as Kafka's
/// `partitions`.
pub fn lineup(vnodes: &[u32], partitions: u32) -> Vec<Spec> {
    let mut specs = vec![Spec::ModN];
    specs.extend(vnodes.iter().map(|&vnodes| Spec::Ring { vnodes }));
    specs.extend([
        Spec::Rendezvous,
        Spec::Jump,
        Spec::FixedSlots {
            slots: SLOTS,
            hash: SlotHash::Xxh3,
        },
        Spec::FixedSlots {
            slots: REDIS_SLOTS,
            hash: SlotHash::RedisCrc16,
        },
        Spec::FixedSlots {
            slots: partitions,
            hash: SlotHash::KafkaMurmur2,
        },
    ]);
    specs
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn every_scheme_of_the_lineup_measures_a_growth() {
        let keys = KeySet::generate(4_000, &mut ChaCha8Rng::seed_from_u64(0));
        let from = Membership::uniform(4).unwrap();
        let to = from.grown(1);
        for spec in lineup(&[1, 16], 60) {
            let m = spec.measure(&from, &to, &keys, 1).unwrap();
            assert_eq!(m.keys, 4_000);
            assert_eq!(
                m.loads.iter().map(|l| l.keys).sum::<usize>(),
                4_000,
                "{spec:?}"
            );
            if spec != Spec::ModN {
                assert_eq!(m.moved_between_survivors, 0, "{spec:?}");
                assert!(
                    (m.share_of(4) - m.moved_fraction()).abs() < 1e-12,
                    "{spec:?}"
                );
            }
        }
    }

    #[test]
    fn labels_and_names() {
        assert_eq!(Spec::Ring { vnodes: 1 }.label(), "ring, 1 vnode");
        assert_eq!(Spec::Ring { vnodes: 256 }.label(), "ring, 256 vnodes");
        let kafka = Spec::FixedSlots {
            slots: 60,
            hash: SlotHash::KafkaMurmur2,
        };
        assert_eq!(
            (kafka.scheme(), kafka.hash(), kafka.slots()),
            ("fixed-slots", "murmur2", Some(60))
        );
        assert_eq!(Spec::Jump.vnodes(), None);
        let redis = Spec::FixedSlots {
            slots: REDIS_SLOTS,
            hash: SlotHash::RedisCrc16,
        };
        assert_eq!(redis.label(), "Redis, 16384 slots");
        assert_eq!(
            (redis.hash(), redis.short()),
            ("crc16", "redis/16384".to_string())
        );
    }
}
