//! What an empty partition costs: the broker-wide partition limit is only a memory bound if each
//! partition is cheap until it holds data. Measured with a counting allocator, so this file holds
//! one test and nothing else allocates while it measures.

use std::alloc::System;
use std::collections::BTreeMap;

use broker::topics::{NewTopic, Topics};
use cap::Cap;

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

#[test]
fn an_empty_partition_costs_less_than_half_a_kib() {
    let topics = Topics::default();
    let before = ALLOCATOR.allocated();
    for i in 0..10 {
        let new = NewTopic {
            name: format!("t{i}"),
            partitions: 1000,
            replication_factor: 1,
            configs: BTreeMap::new(),
        };
        topics.create(new, false).unwrap();
    }
    let per_partition = (ALLOCATOR.allocated() - before) / 10_000;
    println!("an empty in-memory partition: {per_partition} bytes");
    assert!(
        per_partition < 512,
        "{per_partition} bytes per empty partition"
    );
}
