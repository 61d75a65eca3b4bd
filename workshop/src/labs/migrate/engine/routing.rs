//! The routing table: versioned, central, auditable (source 001), kept as records in one topic
//! so that every service instance reads the same versions (source 004: ring version 7 gives
//! Ben to B, version 8 gives him to D).
//!
//! Three kinds of record, each under its own key, the latest one per key in force: the ring
//! (`ring`), a tenant's own route (`tenant/<id>`, source 001's `route_version` and
//! `migration_state`), and a migration's progress (`migration/<id>`, what each step recorded).
//! Older records stay in the topic: the audit trail (a compacted topic would keep only the
//! latest record per key).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::keys::{bucket_of, bucket_route_key, position, RowKey, ShardId, RING_POSITIONS};
use super::machine::MigrationRecord;
use crate::kit::schemes::Ring;

/// A shard's position on the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token {
    pub shard: ShardId,
    pub position: u64,
}

/// One version of the ring.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RingVersion {
    pub version: u32,
    pub tokens: Vec<Token>,
}

impl RingVersion {
    /// This ring with `shard` added at `position`, as version `version`.
    pub fn with(&self, shard: ShardId, position: u64, version: u32) -> RingVersion {
        let mut tokens = self.tokens.clone();
        tokens.push(Token { shard, position });
        tokens.sort_by_key(|t| t.position);
        RingVersion { version, tokens }
    }

    /// The same tokens under a new version number (a rollback is a new version, never an
    /// edit of an old one).
    pub fn renumbered(&self, version: u32) -> RingVersion {
        RingVersion {
            version,
            tokens: self.tokens.clone(),
        }
    }

    /// `A:20 B:50 C:80`, in ring order.
    pub fn describe(&self) -> String {
        let mut tokens = self.tokens.clone();
        tokens.sort_by_key(|t| t.position);
        let parts: Vec<String> = tokens
            .iter()
            .map(|t| format!("{}:{}", t.shard, t.position))
            .collect();
        parts.join(" ")
    }
}

/// How a tenant's rows are placed (source 001).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Every row of the tenant on the shard of the tenant id.
    TenantHash,
    /// Rows spread over `bucket_count` virtual buckets, each placed on the ring by itself.
    Bucketed,
}

/// Where a tenant's move from one placement to the other stands (source 001's `migration_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TenantState {
    /// One placement, no move.
    Stable,
    /// Writes go to both placements, reads to the old one.
    DualWrite,
    /// Reads go to the new placement; writes still go to both (the old one is the fallback).
    ReadNew,
    /// The new placement only.
    Done,
}

impl TenantState {
    pub fn name(self) -> &'static str {
        match self {
            TenantState::Stable => "stable",
            TenantState::DualWrite => "dual_write",
            TenantState::ReadNew => "read_new",
            TenantState::Done => "done",
        }
    }
}

/// A tenant's own route, overriding the ring for its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantRoute {
    pub tenant: u32,
    pub strategy: Strategy,
    pub bucket_count: u32,
    pub route_version: u32,
    pub migration_state: TenantState,
}

/// A record of the routing topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RoutingRecord {
    Ring(RingVersion),
    Tenant(TenantRoute),
    Migration(MigrationRecord),
}

impl RoutingRecord {
    /// The record's key in the routing topic: the latest record per key is in force.
    pub fn key(&self) -> String {
        match self {
            RoutingRecord::Ring(_) => "ring".to_string(),
            RoutingRecord::Tenant(route) => format!("tenant/{}", route.tenant),
            RoutingRecord::Migration(m) => format!("migration/{}", m.id),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        // Plain data with string keys: serialising cannot fail.
        serde_json::to_vec(self).expect("a routing record serialises")
    }

    pub fn decode(bytes: &[u8]) -> Result<RoutingRecord, String> {
        serde_json::from_slice(bytes).map_err(|e| format!("not a routing record: {e}"))
    }
}

impl From<MigrationRecord> for RoutingRecord {
    fn from(record: MigrationRecord) -> Self {
        RoutingRecord::Migration(record)
    }
}

/// The routing topic read to its end: the latest record per key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoutingState {
    latest: BTreeMap<String, RoutingRecord>,
}

impl RoutingState {
    pub fn apply(&mut self, record: RoutingRecord) {
        self.latest.insert(record.key(), record);
    }

    pub fn ring(&self) -> Option<&RingVersion> {
        match self.latest.get("ring") {
            Some(RoutingRecord::Ring(ring)) => Some(ring),
            _ => None,
        }
    }

    pub fn migration(&self, id: &str) -> Option<&MigrationRecord> {
        match self.latest.get(&format!("migration/{id}")) {
            Some(RoutingRecord::Migration(m)) => Some(m),
            _ => None,
        }
    }

    /// The table a router builds from what it read.
    pub fn table(&self) -> Result<RoutingTable, String> {
        let ring = self
            .ring()
            .ok_or("the routing topic holds no ring yet")?
            .clone();
        let tenants = self
            .latest
            .values()
            .filter_map(|r| match r {
                RoutingRecord::Tenant(route) => Some((route.tenant, *route)),
                _ => None,
            })
            .collect();
        RoutingTable::new(ring, tenants)
    }
}

/// Where one request goes, and the version it carries there (the fencing token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub shard: ShardId,
    pub token: u32,
}

/// A router's table: the ring and the tenants' own routes.
#[derive(Debug, Clone)]
pub struct RoutingTable {
    ring: RingVersion,
    index: Ring,
    tenants: BTreeMap<u32, TenantRoute>,
}

impl RoutingTable {
    pub fn new(ring: RingVersion, tenants: BTreeMap<u32, TenantRoute>) -> Result<Self, String> {
        if let Some(t) = ring.tokens.iter().find(|t| t.position >= RING_POSITIONS) {
            return Err(format!(
                "token {}:{} is off the ring (0..{RING_POSITIONS})",
                t.shard, t.position
            ));
        }
        let index = Ring::from_tokens(ring.tokens.iter().map(|t| (t.position, t.shard.node())))
            .map_err(|e| format!("ring version {}: {e}", ring.version))?;
        Ok(RoutingTable {
            ring,
            index,
            tenants,
        })
    }

    pub fn ring(&self) -> &RingVersion {
        &self.ring
    }

    /// The shard that owns a ring position: the first token at or after it (source 004).
    pub fn owner(&self, position: u64) -> ShardId {
        // Every token's node came from a ShardId, so the way back exists.
        ShardId::from_node(self.index.owner_of_hash(position)).unwrap_or(ShardId::A)
    }

    /// Where a read of `key` goes: the first place a write goes.
    pub fn route_read(&self, key: &RowKey) -> Route {
        self.route_write(key)[0]
    }

    /// For a tenant's row: the shard of the whole tenant and the shard of its bucket.
    pub fn placements(&self, tenant: u32, order: u32) -> (ShardId, ShardId) {
        let old = self.owner(position(&tenant.to_string()));
        let buckets = self.tenants.get(&tenant).map_or(1, |t| t.bucket_count);
        let bucket = bucket_of(order, buckets);
        (old, self.owner(position(&bucket_route_key(tenant, bucket))))
    }

    /// Where a write of `key` goes: one shard, or two during a tenant's dual write (the one
    /// reads use first).
    pub fn route_write(&self, key: &RowKey) -> Vec<Route> {
        let ring = |shard| Route {
            shard,
            token: self.ring.version,
        };
        let (tenant, order) = match key {
            RowKey::User(id) => return vec![ring(self.owner(position(id)))],
            RowKey::Order { tenant, order } => (*tenant, *order),
        };
        let Some(route) = self.tenants.get(&tenant) else {
            return vec![ring(self.owner(position(&key.route_key())))];
        };
        let (old, new) = self.placements(tenant, order);
        let at = |shard| Route {
            shard,
            token: route.route_version,
        };
        let (first, second) = match (route.strategy, route.migration_state) {
            (Strategy::TenantHash, _) | (Strategy::Bucketed, TenantState::Stable) => (old, None),
            (Strategy::Bucketed, TenantState::DualWrite) => (old, Some(new)),
            (Strategy::Bucketed, TenantState::ReadNew) => (new, Some(old)),
            (Strategy::Bucketed, TenantState::Done) => (new, None),
        };
        // A bucket placed on the tenant's own shard is one row, written once.
        match second {
            Some(second) if second != first => vec![at(first), at(second)],
            _ => vec![at(first)],
        }
    }
}
