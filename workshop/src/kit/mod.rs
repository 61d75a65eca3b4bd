//! Machinery two or more rooms use, below the labs and above the framework: a lab's story
//! reads from the top of its own folder, and comes here only for how.
//!
//! - [`schemes`]: ways to route a key to a node (mod-N, a hash ring, rendezvous, jump hash,
//!   fixed slots), and what each keeps when the nodes change: lab rehash compares them, lab
//!   migrate routes its store with the ring.
//! - [`group`]: a consumer-group member's configuration as every lab runs one.
//! - [`members`]: a real consumer group driven by a lab: members poll on their own, the lab
//!   takes what they fetched and tells them what to commit (labs partitions and migrate).
//! - [`offsets`]: a consumer group's committed offsets, log ends and lag as
//!   `kafka-consumer-groups.sh` reads them, and commits for a group without members.
//! - [`rebalance_time`]: how long the cluster takes to rebalance a group, measured, for labs
//!   whose incidents must outlast a rebalance (lab rebalance's stall).
//! - [`reader`]: one partition read in offset order, a fixed number of records at a time.
//! - [`steps`]: source 000's step model on the broker, a step at a time: lab hot-tenant's
//!   `--steps` and the playground's exercise.

pub mod group;
pub mod members;
pub mod offsets;
pub mod reader;
pub mod rebalance_time;
pub mod schemes;
pub mod steps;
