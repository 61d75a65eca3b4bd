//! Where things live when nobody moved them: each partition's leader and each group's and
//! transactional id's coordinator, derived from names alone, so every node (and every restart
//! with the same `--nodes`) computes the same map without storing it.

/// Kafka's `offsets.topic.num.partitions` and `transaction.state.log.num.partitions`: a group
/// (or transactional id) is coordinated by the leader of its partition of `__consumer_offsets`
/// (or `__transaction_state`), both of which have 50 by default.
pub const COORDINATOR_PARTITIONS: i32 = 50;

/// Java's `String.hashCode` over the UTF-16 code units, as Kafka hashes a group id.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Kafka's `Utils.abs`: the hash with its sign bit cleared (so `i32::MIN` maps to 0, not to
/// itself).
fn kafka_abs(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// The index among `nodes` of the default leader of `topic`'s partition `partition`: Kafka's
/// rack-unaware placement, round-robin from a start index. Kafka picks that start at random per
/// topic; here it is the topic name's hash, so a restart gives the same map.
pub fn default_leader_index(nodes: usize, topic: &str, partition: i32) -> usize {
    let nodes = nodes.max(1);
    let start = kafka_abs(java_string_hash(topic)) as usize % nodes;
    (start + usize::try_from(partition).unwrap_or(0)) % nodes
}

/// The index among `nodes` of the coordinator of `key` (a group id or a transactional id):
/// Kafka's `partitionFor` picks the internal topic's partition, whose leader round-robin
/// placement (from node 0) puts on `partition % nodes`.
pub fn coordinator_index(nodes: usize, key: &str) -> usize {
    let partition = kafka_abs(java_string_hash(key)) % COORDINATOR_PARTITIONS;
    partition as usize % nodes.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_javas() {
        // "orders".hashCode() and "".hashCode() in Java.
        assert_eq!(java_string_hash("orders"), -1_008_770_331);
        assert_eq!(java_string_hash(""), 0);
        // Kafka's coordinator partition for group "group-1": abs("group-1".hashCode()) % 50.
        assert_eq!(java_string_hash("group-1"), 293_427_299);
        assert_eq!(coordinator_index(50, "group-1"), 49);
    }

    #[test]
    fn consecutive_partitions_go_round_robin_over_every_node() {
        let leaders: Vec<usize> = (0..6)
            .map(|p| default_leader_index(3, "orders", p))
            .collect();
        let start = leaders[0];
        assert_eq!(leaders, (0..6).map(|p| (start + p) % 3).collect::<Vec<_>>());
        assert_eq!(default_leader_index(1, "orders", 5), 0);
    }
}
