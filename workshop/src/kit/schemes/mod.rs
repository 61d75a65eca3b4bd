//! Ways to route a key to a node, and what each keeps when the set of nodes changes.
//!
//! Every scheme answers the same two questions: which node owns a key ([`Scheme::route`]), and
//! what the routing looks like after a membership change ([`Scheme::change`]). How many keys
//! change owner between the two is the lab's subject (source 003, sections 3.3 and 4; source 004).
//!
//! - [`ModN`]: `hash(key) % N`, the divisor tied to the node count.
//! - [`RingScheme`]: a consistent-hash ring with v tokens (virtual nodes) per node.
//! - [`Rendezvous`]: highest random weight; weighted.
//! - [`Jump`]: Lamping and Veach's jump consistent hash; buckets only come and go at the end.
//! - [`FixedSlots`]: a fixed number of slots and a placement table ([`PlacementTable`]), as with
//!   4096 logical buckets (source 004), Redis's 16384 slots or Kafka's partitions.
//!
//! Keys are hashed with XXH3 ([`key_hash`]), except Redis Cluster's slots (its CRC16, of the
//! key's hash tag) and Kafka's partitions, which use Kafka's own murmur2 partitioner so that
//! the slot of a key is the partition a Kafka producer picks.

mod jump;
mod membership;
mod mod_n;
mod placement;
mod rendezvous;
mod ring;
mod slots;

pub use jump::{jump_bucket, Jump};
pub use membership::{node_name, Member, Membership, NodeId};
pub use mod_n::ModN;
pub use placement::PlacementTable;
pub use rendezvous::Rendezvous;
pub use ring::{Ring, RingScheme};
pub use slots::{
    hash_tag, redis_slot, redis_slot_crc, FixedSlots, SlotHash, MAX_SLOTS, REDIS_SLOTS,
};

/// A way to route keys to the nodes of a [`Membership`].
pub trait Scheme: Sized {
    /// The node that owns `key`. Includes hashing the key, as a router pays it per request.
    fn route(&self, key: &[u8]) -> NodeId;

    /// Bytes of routing state a router holds: token arrays, tables, per-node seeds.
    fn state_bytes(&self) -> usize;

    /// The scheme after the nodes change to `to`, keeping what this scheme promises to keep
    /// (token identities, the placement table, bucket numbers). Refused when the scheme cannot
    /// express the change.
    fn change(&self, to: &Membership) -> Result<Self, SchemeError>;
}

/// The hash of a key, shared by every scheme but Kafka's partitions. XXH3 is specified and
/// stable across processes, languages and releases (source 004: never a language's default hash).
pub fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// A hash of `data` salted with `salt`: token positions, per-node seeds.
pub fn salted_hash(data: &[u8], salt: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(data, salt)
}

/// Why a scheme cannot route as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemeError {
    /// The scheme gives every node the same share; it cannot honour a weight.
    #[error("{scheme} has no notion of capacity: every node gets an equal share, so weights cannot be honoured")]
    WeightsUnsupported { scheme: &'static str },
    /// Jump hash numbers its buckets 0..n-1; only the last one can go.
    #[error("jump hash cannot remove bucket {bucket} ({node}) of {buckets}: buckets are numbered 0..n-1 and only the last one can be removed without renumbering the ones after it")]
    NotLastBucket {
        bucket: u32,
        buckets: u32,
        node: String,
    },
    /// The membership itself is not valid.
    #[error("{0}")]
    InvalidMembership(String),
    /// The scheme's own parameters are out of range.
    #[error("{0}")]
    InvalidParameter(String),
}

/// Refuses weights for schemes that have none.
fn require_uniform(members: &Membership, scheme: &'static str) -> Result<(), SchemeError> {
    if members.is_uniform() {
        Ok(())
    } else {
        Err(SchemeError::WeightsUnsupported { scheme })
    }
}

#[cfg(test)]
mod testkit;
