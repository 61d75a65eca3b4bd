//! What the client knows about the cluster: brokers, controller, and per topic its partitions and
//! their leaders, each topic with the time it was learned.
//!
//! Pure data: the [`Client`](crate::Client) decides when to ask a broker. A topic entry is used
//! until it is older than `metadata_max_age` or until an error (unknown partition, not leader)
//! marks it stale, which is how a running producer notices that a topic grew.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::MetadataResponse;
use kafka_protocol::ResponseError;
use tokio::time::Instant;
use uuid::Uuid;

use crate::error::ServerError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

impl BrokerInfo {
    /// `host:port`, bracketing IPv6 literals so the result parses as a socket address.
    pub fn addr(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    pub partition: i32,
    /// -1 while no leader is known.
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline_replicas: Vec<i32>,
    /// Non-zero when the broker reported a problem with this partition.
    pub error_code: i16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    pub id: Uuid,
    pub internal: bool,
    /// Sorted by partition number.
    pub partitions: Vec<PartitionInfo>,
}

impl TopicInfo {
    pub fn partition_count(&self) -> i32 {
        self.partitions.len() as i32
    }

    pub fn partition(&self, partition: i32) -> Option<&PartitionInfo> {
        let at = usize::try_from(partition).ok()?;
        // Partitions are numbered 0..n, so the index is the number; fall back to a search for a
        // broker that skips numbers.
        match self.partitions.get(at) {
            Some(p) if p.partition == partition => Some(p),
            _ => self.partitions.iter().find(|p| p.partition == partition),
        }
    }

    /// The replication factor as Kafka's tools print it: the replica count of partition 0.
    pub fn replication_factor(&self) -> usize {
        self.partitions.first().map_or(0, |p| p.replicas.len())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterInfo {
    pub cluster_id: Option<String>,
    pub controller: Option<i32>,
    pub brokers: BTreeMap<i32, BrokerInfo>,
}

/// One Metadata answer, parsed.
#[derive(Debug, Clone)]
pub struct MetadataSnapshot {
    pub cluster: ClusterInfo,
    /// Per requested topic (or every topic), its description or the broker's error for it.
    pub topics: Vec<(String, Result<TopicInfo, ServerError>)>,
}

impl MetadataSnapshot {
    pub fn from_response(resp: MetadataResponse) -> Self {
        let brokers = resp
            .brokers
            .into_iter()
            .map(|b| {
                let info = BrokerInfo {
                    id: b.node_id.0,
                    host: b.host.to_string(),
                    port: b.port,
                    rack: b.rack.map(|r| r.to_string()),
                };
                (info.id, info)
            })
            .collect();
        let cluster = ClusterInfo {
            cluster_id: resp.cluster_id.map(|c| c.to_string()),
            controller: Some(resp.controller_id.0).filter(|id| *id >= 0),
            brokers,
        };
        let topics = resp
            .topics
            .into_iter()
            // v10+ may describe a topic by id only; we always ask by name.
            .filter_map(|t| {
                let name = t.name?.0.to_string();
                if t.error_code != 0 {
                    let err = ServerError::new(t.error_code).topic(name.clone());
                    return Some((name, Err(err)));
                }
                let mut partitions: Vec<PartitionInfo> = t
                    .partitions
                    .into_iter()
                    .map(|p| PartitionInfo {
                        partition: p.partition_index,
                        leader: p.leader_id.0,
                        leader_epoch: p.leader_epoch,
                        replicas: p.replica_nodes.into_iter().map(|b| b.0).collect(),
                        isr: p.isr_nodes.into_iter().map(|b| b.0).collect(),
                        offline_replicas: p.offline_replicas.into_iter().map(|b| b.0).collect(),
                        error_code: p.error_code,
                    })
                    .collect();
                partitions.sort_by_key(|p| p.partition);
                let info = TopicInfo {
                    name: name.clone(),
                    id: t.topic_id,
                    internal: t.is_internal,
                    partitions,
                };
                Some((name, Ok(info)))
            })
            .collect();
        Self { cluster, topics }
    }

    pub fn topic(&self, name: &str) -> Option<&Result<TopicInfo, ServerError>> {
        self.topics.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }
}

struct CachedTopic {
    info: Arc<TopicInfo>,
    fetched_at: Instant,
    stale: bool,
}

#[derive(Default)]
pub struct MetadataCache {
    cluster: ClusterInfo,
    topics: HashMap<String, CachedTopic>,
}

impl MetadataCache {
    /// Takes in a fresh answer. Topics the broker says do not exist are forgotten; other topic
    /// errors (no leader yet) leave the old entry, marked stale so the next use asks again.
    pub fn apply(&mut self, snapshot: &MetadataSnapshot, now: Instant) {
        self.cluster = snapshot.cluster.clone();
        for (name, topic) in &snapshot.topics {
            match topic {
                Ok(info) => {
                    self.topics.insert(
                        name.clone(),
                        CachedTopic {
                            info: Arc::new(info.clone()),
                            fetched_at: now,
                            stale: false,
                        },
                    );
                }
                Err(e) if e.is(ResponseError::UnknownTopicOrPartition) => {
                    self.topics.remove(name);
                }
                Err(_) => self.invalidate(name),
            }
        }
    }

    /// The topic if it was learned less than `max_age` ago and nothing marked it stale since.
    pub fn fresh_topic(
        &self,
        name: &str,
        now: Instant,
        max_age: Duration,
    ) -> Option<&Arc<TopicInfo>> {
        let cached = self.topics.get(name)?;
        let fresh = !cached.stale && now.saturating_duration_since(cached.fetched_at) < max_age;
        fresh.then_some(&cached.info)
    }

    /// The topic whatever its age.
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicInfo>> {
        self.topics.get(name).map(|c| &c.info)
    }

    /// Forces the next lookup of `name` to ask a broker.
    pub fn invalidate(&mut self, name: &str) {
        if let Some(cached) = self.topics.get_mut(name) {
            cached.stale = true;
        }
    }

    pub fn cluster(&self) -> &ClusterInfo {
        &self.cluster
    }

    pub fn broker_addr(&self, id: i32) -> Option<String> {
        self.cluster.brokers.get(&id).map(BrokerInfo::addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn response(topic: &str, partitions: i32, error: i16) -> MetadataResponse {
        let parts = (0..partitions)
            .rev()
            .map(|p| {
                MetadataResponsePartition::default()
                    .with_partition_index(p)
                    .with_leader_id(BrokerId(1))
                    .with_replica_nodes(vec![BrokerId(1)])
                    .with_isr_nodes(vec![BrokerId(1)])
            })
            .collect();
        MetadataResponse::default()
            .with_controller_id(BrokerId(1))
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(BrokerId(1))
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(9092)])
            .with_topics(vec![MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(topic.into()))))
                .with_error_code(error)
                .with_partitions(parts)])
    }

    #[test]
    fn parses_brokers_topics_and_sorts_partitions() {
        let snap = MetadataSnapshot::from_response(response("orders", 3, 0));
        assert_eq!(snap.cluster.controller, Some(1));
        assert_eq!(snap.cluster.brokers[&1].addr(), "127.0.0.1:9092");
        let topic = snap.topic("orders").unwrap().as_ref().unwrap();
        let ids: Vec<i32> = topic.partitions.iter().map(|p| p.partition).collect();
        assert_eq!(ids, vec![0, 1, 2]);
        assert_eq!(topic.partition(2).unwrap().leader, 1);
        assert!(topic.partition(3).is_none());
        assert!(topic.partition(-1).is_none());
        assert_eq!(topic.replication_factor(), 1);
    }

    #[test]
    fn ipv6_hosts_are_bracketed() {
        let b = BrokerInfo {
            id: 1,
            host: "::1".into(),
            port: 9092,
            rack: None,
        };
        assert_eq!(b.addr(), "[::1]:9092");
    }

    #[tokio::test(start_paused = true)]
    async fn entries_expire_after_max_age_or_when_invalidated() {
        let max_age = Duration::from_secs(5);
        let mut cache = MetadataCache::default();
        let t0 = Instant::now();
        cache.apply(
            &MetadataSnapshot::from_response(response("orders", 2, 0)),
            t0,
        );
        assert!(cache.fresh_topic("orders", t0, max_age).is_some());
        tokio::time::advance(Duration::from_millis(4999)).await;
        assert!(cache
            .fresh_topic("orders", Instant::now(), max_age)
            .is_some());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(cache
            .fresh_topic("orders", Instant::now(), max_age)
            .is_none());
        // Still usable as a fallback.
        assert_eq!(cache.topic("orders").unwrap().partition_count(), 2);

        let t1 = Instant::now();
        cache.apply(
            &MetadataSnapshot::from_response(response("orders", 4, 0)),
            t1,
        );
        assert_eq!(
            cache
                .fresh_topic("orders", t1, max_age)
                .unwrap()
                .partition_count(),
            4
        );
        cache.invalidate("orders");
        assert!(cache.fresh_topic("orders", t1, max_age).is_none());
    }

    #[test]
    fn unknown_topics_are_forgotten_leaderless_ones_marked_stale() {
        let now = Instant::now();
        let max_age = Duration::from_secs(5);
        let mut cache = MetadataCache::default();
        cache.apply(
            &MetadataSnapshot::from_response(response("orders", 2, 0)),
            now,
        );
        cache.apply(
            &MetadataSnapshot::from_response(response("orders", 0, 5)),
            now,
        );
        assert!(cache.fresh_topic("orders", now, max_age).is_none());
        assert!(cache.topic("orders").is_some());
        cache.apply(
            &MetadataSnapshot::from_response(response("orders", 0, 3)),
            now,
        );
        assert!(cache.topic("orders").is_none());
        assert_eq!(cache.broker_addr(1).as_deref(), Some("127.0.0.1:9092"));
        assert_eq!(cache.broker_addr(2), None);
    }
}
