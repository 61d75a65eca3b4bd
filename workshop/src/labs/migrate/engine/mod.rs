//! The migration engine: everything the lab decides, with no I/O of its own and no narration.
//!
//! - [`keys`]: shards, rows, ring positions, scopes, lab time.
//! - [`routing`]: the routing topic's records (ring versions, tenant routes, migration
//!   records) and the table a router builds from them.
//! - [`store`]: a shard store and its write path (fencing tokens, freezes, idempotency keys).
//! - [`machine`]: the migration state machine and what each step records.
//! - [`world`]: shards, routers and the ledger, driven one lab millisecond at a time;
//!   [`worker`]: the migration worker's steps within it.
//! - [`ledger`]: what clients were told, and the audit against the stores.
//! - [`backend`]: the changelogs and the routing topic the world needs ([`backend::Memory`]
//!   here; the lab's Kafka topics in `super::kafka`).

pub mod backend;
pub mod keys;
pub mod ledger;
pub mod machine;
pub mod routing;
pub mod store;
pub mod worker;
pub mod world;

#[cfg(test)]
mod properties;
