//! The shared handle that producers, consumers and the admin API are built on: bootstrap
//! addresses, one connection slot per broker address, and the metadata cache with its refresh
//! policy.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use parking_lot::{Mutex, RwLock};
use tokio::time::Instant;

use crate::connection::{BrokerConnection, ConnectionSettings, ConnectionSlot};
use crate::error::{Error, ProtocolError, Result, ServerError};
use crate::metadata::{ClusterInfo, MetadataCache, MetadataSnapshot, TopicInfo};
use crate::retry::RetryPolicy;

/// Kafka's default port, used when a bootstrap address names only a host.
pub const DEFAULT_PORT: u16 = 9092;

#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `host:port` addresses to learn the cluster from.
    pub bootstrap: Vec<String>,
    pub client_id: String,
    pub connect_timeout: Duration,
    /// How long a broker may take to answer one request (a Fetch adds its max wait).
    pub request_timeout: Duration,
    /// Topic metadata older than this is fetched again before use, so partitions added to a
    /// topic are picked up by running producers. Kafka's default is 5 minutes; the workshop
    /// wants changes to show within seconds.
    pub metadata_max_age: Duration,
    /// Answers larger than this break the connection (librdkafka's receive.message.max.bytes).
    pub max_response_bytes: usize,
    /// For transient failures: broken connections, leaders moving, brokers restarting.
    pub retry: RetryPolicy,
}

impl ClientConfig {
    /// `bootstrap` is a comma-separated list; a missing port means 9092.
    pub fn new(bootstrap: &str) -> Self {
        Self {
            bootstrap: bootstrap
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    if s.contains(':') {
                        s.to_string()
                    } else {
                        format!("{s}:{DEFAULT_PORT}")
                    }
                })
                .collect(),
            client_id: "workshop-client".to_string(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            metadata_max_age: Duration::from_secs(5),
            max_response_bytes: 100 * 1000 * 1000,
            retry: RetryPolicy::default(),
        }
    }
}

struct Inner {
    config: ClientConfig,
    settings: ConnectionSettings,
    cache: RwLock<MetadataCache>,
    /// Counts changes to `cache`, so that a producer may keep a partition count for itself and
    /// know, with one atomic load per record, whether the cache has changed since.
    generation: AtomicU64,
    /// Metadata requests answered, for whoever wants to see how often a map was re-read.
    metadata_requests: AtomicU64,
    // One metadata refresh at a time: many producers noticing stale metadata together should
    // cause one request, not one each.
    refresh: tokio::sync::Mutex<()>,
}

type Slots = Mutex<HashMap<String, Arc<ConnectionSlot>>>;

/// A connection to a Kafka cluster. Cheap to clone; clones share connections and metadata.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    slots: Arc<Slots>,
}

impl Client {
    /// Contacts the cluster once, so a wrong address fails here and now rather than on first use.
    /// This first contact is not retried.
    pub async fn connect(config: ClientConfig) -> Result<Self> {
        if config.bootstrap.is_empty() {
            return Err(Error::InvalidArgument(
                "no bootstrap address given".to_string(),
            ));
        }
        let client = Self::unconnected(config);
        client.fetch_metadata(Some(&[]), false).await?;
        Ok(client)
    }

    /// A client that has not talked to anyone yet (connections are made on first use).
    pub(crate) fn unconnected(config: ClientConfig) -> Self {
        let settings = ConnectionSettings {
            client_id: config.client_id.clone(),
            connect_timeout: config.connect_timeout,
            request_timeout: config.request_timeout,
            max_response_bytes: config.max_response_bytes,
        };
        Self {
            inner: Arc::new(Inner {
                config,
                settings,
                cache: RwLock::new(MetadataCache::default()),
                generation: AtomicU64::new(0),
                metadata_requests: AtomicU64::new(0),
                refresh: tokio::sync::Mutex::new(()),
            }),
            slots: Arc::default(),
        }
    }

    /// The same cluster and metadata cache, over connections of its own. Brokers answer the
    /// requests of one connection in order, so a Fetch parked for its max wait delays whatever
    /// was sent after it; a consumer therefore talks over its own connections, as each Kafka
    /// client instance does.
    pub fn with_own_connections(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            slots: Arc::default(),
        }
    }

    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// Brokers, controller and cluster id as last learned.
    pub fn cluster(&self) -> ClusterInfo {
        self.inner.cache.read().cluster().clone()
    }

    /// Asks a broker for metadata now (`None`: every topic) and updates the cache with it.
    pub async fn fetch_metadata(
        &self,
        topics: Option<&[&str]>,
        allow_auto_create: bool,
    ) -> Result<MetadataSnapshot> {
        let conn = self.any_connection().await?;
        let resp = conn
            .call(|version| metadata_request(topics, allow_auto_create, version))
            .await?;
        self.inner.metadata_requests.fetch_add(1, Ordering::Relaxed);
        let snapshot = MetadataSnapshot::from_response(resp);
        let mut cache = self.inner.cache.write();
        cache.apply(&snapshot, Instant::now());
        self.inner.generation.fetch_add(1, Ordering::Release);
        drop(cache);
        Ok(snapshot)
    }

    /// The topic's metadata, from the cache while it is fresh, else from a broker (retrying
    /// transient failures). `allow_auto_create` asks the broker to create a missing topic, as a
    /// producer does.
    pub async fn topic(&self, name: &str, allow_auto_create: bool) -> Result<Arc<TopicInfo>> {
        if let Some(info) = self.fresh_topic(name) {
            return Ok(info);
        }
        protocol::names::validate_topic_name(name).map_err(Error::InvalidArgument)?;
        // A topic known before is refreshed once: when no broker can be reached, what is known
        // is used, as Kafka's clients keep routing by their last metadata while a refresh
        // fails. Retrying here would nest these retries inside the caller's (a poll's), which
        // kept a consumer under a dead broker going for 8 s per poll retry, 30 s and more in
        // all; the caller's request to the leader then fails and its own retries decide.
        let known = self.inner.cache.read().topic(name).cloned();
        if let Some(known) = known {
            return match self.refresh_topic(name, allow_auto_create).await {
                Err(Error::Transport(e)) => {
                    tracing::debug!(topic = name, %e, "metadata refresh failed: using what is known");
                    Ok(known)
                }
                other => other,
            };
        }
        self.inner
            .config
            .retry
            .run(
                "metadata refresh",
                || self.refresh_topic(name, allow_auto_create),
                |_| {},
            )
            .await
    }

    /// The partition count, without allocating while the cache is fresh (the producer's path).
    pub async fn partition_count(&self, name: &str, allow_auto_create: bool) -> Result<i32> {
        let now = Instant::now();
        let max_age = self.inner.config.metadata_max_age;
        if let Some(info) = self.inner.cache.read().fresh_topic(name, now, max_age) {
            return Ok(info.partition_count());
        }
        Ok(self.topic(name, allow_auto_create).await?.partition_count())
    }

    /// Marks a topic's metadata stale, after an error that suggests it changed.
    pub fn invalidate(&self, topic: &str) {
        let mut cache = self.inner.cache.write();
        cache.invalidate(topic);
        self.inner.generation.fetch_add(1, Ordering::Release);
    }

    /// Changes with every change to the metadata cache (a fetch, or a topic marked stale). Read
    /// it before [`partition_count`](Self::partition_count): a count learned then holds for as
    /// long as the generation stays the same and the count is younger than the metadata max age.
    pub fn metadata_generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }

    /// Metadata requests this client (and its clones) had answered: how often it re-read the
    /// cluster's map, its first contact included.
    pub fn metadata_requests(&self) -> u64 {
        self.inner.metadata_requests.load(Ordering::Relaxed)
    }

    /// The leader of a partition as last learned, without asking anyone.
    pub fn cached_leader(&self, topic: &str, partition: i32) -> Option<i32> {
        let cache = self.inner.cache.read();
        let leader = cache.topic(topic)?.partition(partition)?.leader;
        (leader >= 0).then_some(leader)
    }

    /// The broker leading `partition` of `topic`. Producers pass `allow_auto_create` as
    /// configured (on by default, as in Kafka), so a topic lost with a restarted broker comes
    /// back.
    pub async fn leader(
        &self,
        topic: &str,
        partition: i32,
        allow_auto_create: bool,
    ) -> Result<i32> {
        let mut info = self.topic(topic, allow_auto_create).await?;
        if info.partition(partition).is_none() {
            // Perhaps the topic grew since we looked.
            self.invalidate(topic);
            info = self.topic(topic, allow_auto_create).await?;
        }
        let Some(p) = info.partition(partition) else {
            return Err(Error::UnknownPartition {
                topic: topic.to_string(),
                partition,
                count: info.partition_count(),
            });
        };
        if p.leader < 0 {
            self.invalidate(topic);
            let code = if p.error_code != 0 {
                p.error_code
            } else {
                ResponseError::LeaderNotAvailable.code()
            };
            return Err(ServerError::new(code)
                .topic(topic)
                .partition(partition)
                .into());
        }
        Ok(p.leader)
    }

    /// A connection to the broker with this id.
    pub async fn broker(&self, id: i32) -> Result<Arc<BrokerConnection>> {
        let known = self.inner.cache.read().broker_addr(id);
        let addr =
            match known {
                Some(addr) => addr,
                None => {
                    self.fetch_metadata(Some(&[]), false).await?;
                    self.inner.cache.read().broker_addr(id).ok_or_else(|| {
                        ProtocolError::BadAnswer {
                            api: "Metadata",
                            reason: format!("broker {id} is named but not listed"),
                        }
                    })?
                }
            };
        self.slot(&addr).get(&self.inner.settings).await
    }

    /// A connection to the leader of a partition.
    pub async fn leader_connection(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<BrokerConnection>> {
        let leader = self.leader(topic, partition, false).await?;
        self.broker(leader).await
    }

    /// A connection to the controller, where topic changes must go (NOT_CONTROLLER otherwise).
    pub async fn controller(&self) -> Result<Arc<BrokerConnection>> {
        let controller = self.inner.cache.read().cluster().controller;
        let controller = match controller {
            Some(id) => Some(id),
            None => {
                self.fetch_metadata(Some(&[]), false)
                    .await?
                    .cluster
                    .controller
            }
        };
        match controller {
            Some(id) => self.broker(id).await,
            None => self.any_connection().await,
        }
    }

    /// The version a request for `api` goes out at, as any broker's ApiVersions answer allows;
    /// [`ProtocolError::UnsupportedVersion`] when the cluster does not offer it in a version this
    /// client speaks. For a tool that skips what a cluster cannot do, rather than failing midway.
    pub async fn api_version(&self, api: ApiKey) -> Result<i16> {
        self.any_connection().await?.version(api as i16)
    }

    /// Any broker that answers: a live connection if there is one, else the known brokers and
    /// then the bootstrap list, in order.
    pub async fn any_connection(&self) -> Result<Arc<BrokerConnection>> {
        let mut candidates: Vec<String> = {
            let cache = self.inner.cache.read();
            cache.cluster().brokers.values().map(|b| b.addr()).collect()
        };
        for addr in &self.inner.config.bootstrap {
            if !candidates.contains(addr) {
                candidates.push(addr.clone());
            }
        }
        let slots: Vec<Arc<ConnectionSlot>> = candidates.iter().map(|a| self.slot(a)).collect();
        if let Some(conn) = slots.iter().find_map(|s| s.peek()) {
            return Ok(conn);
        }
        let mut last_error = None;
        for slot in slots {
            match slot.get(&self.inner.settings).await {
                Ok(conn) => return Ok(conn),
                Err(e) => {
                    tracing::debug!(addr = slot.addr(), %e, "broker unreachable");
                    last_error = Some(e);
                }
            }
        }
        Err(last_error.expect("at least one bootstrap address"))
    }

    fn fresh_topic(&self, name: &str) -> Option<Arc<TopicInfo>> {
        let max_age = self.inner.config.metadata_max_age;
        self.inner
            .cache
            .read()
            .fresh_topic(name, Instant::now(), max_age)
            .cloned()
    }

    async fn refresh_topic(&self, name: &str, allow_auto_create: bool) -> Result<Arc<TopicInfo>> {
        let _single_flight = self.inner.refresh.lock().await;
        if let Some(info) = self.fresh_topic(name) {
            return Ok(info);
        }
        let snapshot = self
            .fetch_metadata(Some(&[name]), allow_auto_create)
            .await?;
        match snapshot.topic(name) {
            Some(Ok(info)) => Ok(Arc::new(info.clone())),
            Some(Err(e)) if e.is(ResponseError::UnknownTopicOrPartition) => {
                Err(Error::UnknownTopic {
                    topic: name.to_string(),
                })
            }
            Some(Err(e)) => Err(e.clone().into()),
            None => Err(ProtocolError::BadAnswer {
                api: "Metadata",
                reason: format!("topic {name} was asked for but not described"),
            }
            .into()),
        }
    }

    fn slot(&self, addr: &str) -> Arc<ConnectionSlot> {
        let mut slots = self.slots.lock();
        match slots.get(addr) {
            Some(slot) => Arc::clone(slot),
            None => {
                let slot = Arc::new(ConnectionSlot::new(addr.to_string()));
                slots.insert(addr.to_string(), Arc::clone(&slot));
                slot
            }
        }
    }
}

/// `topics`: `None` for every topic, as v1+ encode it (an empty list means none).
fn metadata_request(
    topics: Option<&[&str]>,
    allow_auto_create: bool,
    version: i16,
) -> MetadataRequest {
    let mut req = MetadataRequest::default();
    req.topics = topics.map(|names| {
        names
            .iter()
            .map(|n| MetadataRequestTopic::default().with_name(Some(topic_name(n))))
            .collect()
    });
    // Only v4+ carries the flag; older versions leave creation to the broker's setting.
    if version >= 4 {
        req.allow_auto_topic_creation = allow_auto_create;
    }
    req
}

pub(crate) fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_requests_encode_at_every_version_we_speak() {
        use kafka_protocol::protocol::Encodable;
        for v in 1..=12 {
            for topics in [None, Some(&["orders"][..]), Some(&[][..])] {
                for auto in [false, true] {
                    let req = metadata_request(topics, auto, v);
                    req.encode(&mut bytes::BytesMut::new(), v).unwrap();
                }
            }
        }
    }

    #[test]
    fn bootstrap_lists_get_default_ports() {
        let c = ClientConfig::new(" a:1, b ,,127.0.0.1:9093");
        assert_eq!(c.bootstrap, vec!["a:1", "b:9092", "127.0.0.1:9093"]);
        assert_eq!(c.metadata_max_age, Duration::from_secs(5));
    }

    #[tokio::test]
    async fn connecting_to_nothing_fails_fast_and_says_where() {
        // Bind then drop a listener, so the port is (almost certainly) closed.
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let err = match Client::connect(ClientConfig::new(&addr.to_string())).await {
            Err(e) => e,
            Ok(_) => panic!("connected to a closed port"),
        };
        match err {
            Error::Transport(t) => {
                assert!(t.is_connection_refused(), "{t}");
                assert_eq!(t.addr(), addr.to_string());
            }
            other => panic!("unexpected {other}"),
        }
    }
}
