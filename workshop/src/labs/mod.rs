//! The labs, and the registry that makes each one a subcommand and a line of `workshop list`.
//!
//! Adding a lab: a module here (one file or folder) with a type implementing [`crate::lab::Lab`],
//! and one line in [`LABS`].

pub mod hot_tenant;
pub mod idempotence;
pub mod migrate;
pub mod partitions;
pub mod rebalance;
pub mod rehash;
pub mod routing;

use crate::lab::LabEntry;

/// Every lab, in the order `workshop list` shows them.
pub const LABS: &[LabEntry] = &[
    LabEntry::of::<rehash::Rehash>(),
    LabEntry::of::<partitions::Partitions>(),
    LabEntry::of::<hot_tenant::HotTenant>(),
    LabEntry::of::<idempotence::Idempotence>(),
    LabEntry::of::<rebalance::Rebalance>(),
    LabEntry::of::<migrate::Migrate>(),
    LabEntry::of::<routing::Routing>(),
];
