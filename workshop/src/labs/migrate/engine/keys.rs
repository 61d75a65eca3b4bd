//! What the profile service stores, and where each row sits on source 004's ring.
//!
//! Shards have stable logical ids (A, B, C, D), never host names (source 004). A row is a user's
//! profile, keyed by user id, or one order of a tenant (source 001's super tenant). The ring has
//! positions 0 to 99; a key's position is XXH3 of its route key modulo 100, the same hash lab
//! `rehash` uses, fixed as part of the routing protocol (source 004: never a language's default
//! hash). Lab time is milliseconds on the lab's own clock, never the wall clock.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::kit::schemes::{key_hash, NodeId};

/// Source 004's ring: positions 0 to 99, wrapping past 99 to 0.
pub const RING_POSITIONS: u64 = 100;

/// A shard's stable logical id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ShardId {
    A,
    B,
    C,
    D,
}

impl ShardId {
    pub const ALL: [ShardId; 4] = [ShardId::A, ShardId::B, ShardId::C, ShardId::D];

    /// The shard as a node of lab `rehash`'s ring.
    pub fn node(self) -> NodeId {
        self as NodeId
    }

    pub fn from_node(node: NodeId) -> Option<ShardId> {
        ShardId::ALL.get(node as usize).copied()
    }
}

impl fmt::Display for ShardId {
    /// The shard's letter.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// A row of a shard store.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum RowKey {
    /// A user's profile, by user id.
    User(String),
    /// One order of a tenant, `<tenant>/order-<n>`.
    Order { tenant: u32, order: u32 },
}

impl RowKey {
    pub fn user(id: &str) -> RowKey {
        RowKey::User(id.to_string())
    }

    /// The string the ring hashes when the row is routed with its user or its whole tenant.
    pub fn route_key(&self) -> String {
        match self {
            RowKey::User(id) => id.clone(),
            RowKey::Order { tenant, .. } => tenant.to_string(),
        }
    }
}

impl fmt::Display for RowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowKey::User(id) => f.write_str(id),
            RowKey::Order { tenant, order } => write!(f, "{tenant}/order-{order}"),
        }
    }
}

impl From<RowKey> for String {
    fn from(key: RowKey) -> String {
        key.to_string()
    }
}

impl FromStr for RowKey {
    type Err = String;

    fn from_str(s: &str) -> Result<RowKey, String> {
        if let Some((tenant, order)) = s.split_once("/order-") {
            let number = |text: &str| {
                text.parse::<u32>()
                    .map_err(|_| format!("`{s}` is not a row key: `{text}` is not a number"))
            };
            return Ok(RowKey::Order {
                tenant: number(tenant)?,
                order: number(order)?,
            });
        }
        if s.is_empty() || s.contains('/') {
            return Err(format!(
                "`{s}` is not a row key (a user id or <tenant>/order-<n>)"
            ));
        }
        Ok(RowKey::User(s.to_string()))
    }
}

impl TryFrom<String> for RowKey {
    type Error = String;

    fn try_from(s: String) -> Result<RowKey, String> {
        s.parse()
    }
}

/// The ring position of a route key: XXH3 modulo 100.
pub fn position(route_key: &str) -> u64 {
    key_hash(route_key.as_bytes()) % RING_POSITIONS
}

/// Source 001's virtual bucket of an order: `hash(order_id) % bucket_count`.
pub fn bucket_of(order: u32, bucket_count: u32) -> u32 {
    (key_hash(order.to_string().as_bytes()) % u64::from(bucket_count.max(1))) as u32
}

/// The route key of a tenant's bucket, `"<tenant>:<bucket>"` (source 001).
pub fn bucket_route_key(tenant: u32, bucket: u32) -> String {
    format!("{tenant}:{bucket}")
}

/// An arc of the ring, `(from, to]`: positions greater than `from` and at most `to`, wrapping
/// past 99 when `from` is the larger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arc {
    pub from: u64,
    pub to: u64,
}

impl Arc {
    pub fn contains(&self, position: u64) -> bool {
        if self.from < self.to {
            self.from < position && position <= self.to
        } else {
            position > self.from || position <= self.to
        }
    }
}

impl fmt::Display for Arc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {}]", self.from, self.to)
    }
}

/// What one migration moves: the users of an arc, or every order of one tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Arc(Arc),
    Tenant(u32),
}

impl Scope {
    pub fn contains(&self, key: &RowKey) -> bool {
        match (self, key) {
            (Scope::Arc(arc), RowKey::User(id)) => arc.contains(position(id)),
            (Scope::Tenant(t), RowKey::Order { tenant, .. }) => t == tenant,
            _ => false,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Arc(arc) => write!(f, "range {arc}"),
            Scope::Tenant(t) => write!(f, "tenant {t}"),
        }
    }
}

/// A moment on the lab's clock, in milliseconds since the scenario began.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct LabTime(pub u64);

impl LabTime {
    pub fn ms(self) -> u64 {
        self.0
    }

    pub fn plus(self, ms: u64) -> LabTime {
        LabTime(self.0.saturating_add(ms))
    }
}

impl fmt::Display for LabTime {
    /// Source 003's log form, `HH:MM:SS`, with milliseconds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0;
        write!(
            f,
            "{:02}:{:02}:{:02}.{:03}",
            ms / 3_600_000,
            ms / 60_000 % 60,
            ms / 1000 % 60,
            ms % 1000
        )
    }
}

/// A command's id: the request id the service was given, usable as an idempotency key.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct CommandId(pub u64);

impl fmt::Display for CommandId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cmd-{:06}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ben_sits_in_the_arc_that_d_takes() {
        // Source 004: D at 40 takes (20, 40]; Ben moves from B to D.
        let moved = Arc { from: 20, to: 40 };
        assert_eq!(position("Ben"), 28);
        assert!(Scope::Arc(moved).contains(&RowKey::user("Ben")));
        assert!(moved.contains(40) && !moved.contains(20) && moved.contains(21));
        let wrapping = Arc { from: 80, to: 20 };
        assert!(wrapping.contains(90) && wrapping.contains(0) && wrapping.contains(20));
        assert!(!wrapping.contains(50) && !wrapping.contains(80));
        assert_eq!(moved.to_string(), "(20, 40]");
    }

    #[test]
    fn row_keys_round_trip_and_bad_ones_are_refused() {
        for key in [
            RowKey::user("Ben"),
            RowKey::Order {
                tenant: 42,
                order: 17,
            },
        ] {
            assert_eq!(key.to_string().parse::<RowKey>().unwrap(), key);
            let json = serde_json::to_string(&key).unwrap();
            assert_eq!(serde_json::from_str::<RowKey>(&json).unwrap(), key);
        }
        assert_eq!(
            RowKey::Order {
                tenant: 42,
                order: 17
            }
            .to_string(),
            "42/order-17"
        );
        for bad in ["", "42/order-x", "x/order-1", "a/b"] {
            assert!(bad.parse::<RowKey>().is_err(), "{bad:?}");
        }
        let order = RowKey::Order {
            tenant: 42,
            order: 1,
        };
        assert!(Scope::Tenant(42).contains(&order) && !Scope::Tenant(7).contains(&order));
        assert!(!Scope::Arc(Arc { from: 0, to: 99 }).contains(&order));
    }

    #[test]
    fn lab_time_reads_like_a_log_line() {
        assert_eq!(LabTime(0).to_string(), "00:00:00.000");
        assert_eq!(LabTime(3_723_456).to_string(), "01:02:03.456");
        assert_eq!(CommandId(12).to_string(), "cmd-000012");
        assert!(bucket_of(17, 64) < 64);
        assert_eq!(bucket_route_key(42, 5), "42:5");
    }
}
