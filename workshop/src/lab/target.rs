//! Where a lab's broker comes from, shared by every lab that needs one: an embedded broker
//! started in-process on 127.0.0.1:0 (the default), or any Kafka-protocol cluster given with
//! `--bootstrap`, a real Kafka cluster included.
//!
//! Against a cluster the lab talks only through public Kafka APIs (our client), and what it
//! creates gets a unique name: a topic asked for as `payments` becomes `payments-<run id>`, so
//! runs on a shared cluster never collide, and [`Cluster::close`] deletes it again; so does a
//! consumer group named with [`Cluster::group`]. On the embedded broker, which lives only as long
//! as the lab, names stay as asked, which keeps the narration readable.
//!
//! Labs are synchronous ([`crate::lab::Lab::run`]) and the client is async: a lab makes a
//! [`runtime`], and runs its phases with `block_on`. Cleanup is async too, so a lab ends with
//!
//! ```text
//! let cluster = runtime.block_on(Cluster::open(&ctx.target, &ctx.stop, "idempotence"))?;
//! let outcome = runtime.block_on(cluster.until_stopped(phases(&cluster)));
//! runtime.block_on(cluster.close()); // also after a failed or interrupted phase
//! outcome
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use client::{
    Admin, ApiKey, Client, ClientConfig, Consumer, ConsumerConfig, NewTopic, OffsetReset,
    OffsetSpec, Producer, ProducerConfig, ProtocolError, Record, RetryPolicy, SeekTo,
    TopicPartition,
};

use crate::lab::stop::{Stop, Watching};
use crate::lab::watch::{Watch, WatchedCluster};
use crate::lab::{LabError, Target};

/// A tokio runtime for a lab. Two workers: the embedded broker and the lab's clients run side by
/// side without taking over a shared machine.
pub fn runtime() -> Result<tokio::runtime::Runtime, LabError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| LabError::Internal(format!("cannot start a tokio runtime: {e}")))
}

/// What every lab's producer starts from: Kafka's defaults, except that its metadata requests
/// never create a topic. A lab creates its topics itself, and one deleted while a producer still
/// sends (the cleanup after Ctrl-C or a failed phase) must stay deleted on a cluster whose
/// brokers create topics on request (Kafka's `auto.create.topics.enable` is on by default).
pub fn producer_config() -> ProducerConfig {
    ProducerConfig {
        allow_auto_create_topics: false,
        ..ProducerConfig::default()
    }
}

/// A lab's broker, connected.
pub struct Cluster {
    client: Client,
    admin: Admin,
    /// Where the broker listens, as given or as bound.
    addr: String,
    embedded: Option<broker::Broker>,
    /// The suffix of every name under `--bootstrap`; `None` on the embedded broker.
    run_id: Option<String>,
    /// Topics to delete at the end.
    topics: Mutex<Vec<String>>,
    /// Consumer groups to delete at the end, after the topics.
    groups: Mutex<Vec<String>>,
    /// Ctrl-C and SIGTERM: the phases stop ([`until_stopped`](Self::until_stopped)) and
    /// [`close`](Self::close) still cleans up.
    stop: Stop,
    /// On a cluster, from open to the end of close: a signal then waits for the cleanup
    /// instead of ending the process at once.
    _watching: Option<Watching>,
    /// Where views that read the broker themselves learn of it (see [`crate::lab::watch`]).
    watched: Option<WatchedCluster>,
}

impl Cluster {
    /// Starts the embedded broker, or connects to the cluster at `--bootstrap`. `lab` names the
    /// client to the brokers (`workshop-<lab>`), which shows up in their logs.
    /// `stop` ends the phases early (see [`until_stopped`](Self::until_stopped)).
    pub async fn open(target: &Target, stop: &Stop, lab: &str) -> Result<Self, LabError> {
        match target {
            Target::Embedded => {
                Self::start_embedded(broker::BrokerConfig::default(), stop, lab).await
            }
            Target::Bootstrap(addr) => {
                Self::connect(addr.clone(), None, Some(run_id()), stop, lab).await
            }
        }
    }

    /// [`open`](Self::open) for a lab about a cluster: embedded, `nodes` brokers in one process
    /// (`broker --nodes`) serving their metrics on a port of their own on loopback; a cluster
    /// at `--bootstrap` is what it is.
    pub async fn open_nodes(
        target: &Target,
        stop: &Stop,
        lab: &str,
        nodes: usize,
    ) -> Result<Self, LabError> {
        match target {
            Target::Embedded => {
                let config = broker::BrokerConfig {
                    nodes,
                    metrics: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
                    ..broker::BrokerConfig::default()
                };
                Self::start_embedded(config, stop, lab).await
            }
            Target::Bootstrap(_) => Self::open(target, stop, lab).await,
        }
    }

    /// Starts the embedded broker with `config`, on a port of its own on loopback.
    async fn start_embedded(
        config: broker::BrokerConfig,
        stop: &Stop,
        lab: &str,
    ) -> Result<Self, LabError> {
        let config = broker::BrokerConfig {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            ..config
        };
        let broker = broker::Broker::start(config)
            .await
            .map_err(|e| LabError::Internal(format!("cannot start the embedded broker: {e}")))?;
        Self::connect(broker.addr().to_string(), Some(broker), None, stop, lab).await
    }

    async fn connect(
        addr: String,
        embedded: Option<broker::Broker>,
        run_id: Option<String>,
        stop: &Stop,
        lab: &str,
    ) -> Result<Self, LabError> {
        let mut config = ClientConfig::new(&addr);
        config.client_id = format!("workshop-{lab}");
        let client = Client::connect(config)
            .await
            .map_err(|e| unreachable(&addr, &e))?;
        let watched = Watch::current().map(|watch| watch.opened(&addr));
        Ok(Self {
            admin: Admin::new(client.clone()),
            client,
            addr,
            embedded,
            topics: Mutex::new(Vec::new()),
            groups: Mutex::new(Vec::new()),
            _watching: run_id.is_some().then(|| stop.watch()),
            run_id,
            stop: stop.clone(),
            watched,
        })
    }

    /// Runs the lab's phases until they end, or until a stop is asked for (Ctrl-C): then they
    /// are dropped where they wait, their group members with them, and the lab fails with
    /// [`LabError::Interrupted`]. Either way the lab calls [`close`](Self::close) next.
    pub async fn until_stopped<T>(
        &self,
        phases: impl Future<Output = Result<T, LabError>>,
    ) -> Result<T, LabError> {
        tokio::select! {
            biased;
            () = self.stop.requested() => Err(self.interrupted()),
            result = phases => result,
        }
    }

    /// For a lab whose phases are synchronous between their requests: fails once a stop was
    /// asked for.
    pub fn check_stop(&self) -> Result<(), LabError> {
        match self.stop.is_requested() {
            true => Err(self.interrupted()),
            false => Ok(()),
        }
    }

    fn interrupted(&self) -> LabError {
        LabError::Interrupted(match self.embedded {
            Some(_) => String::new(),
            None => ": the topics and groups this run created on the cluster are deleted".into(),
        })
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn admin(&self) -> &Admin {
        &self.admin
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The embedded broker, for what only it offers (fault injection, its counters). A lab
    /// must work without it: under `--bootstrap` this is `None`.
    pub fn embedded(&self) -> Option<&broker::Broker> {
        self.embedded.as_ref()
    }

    /// One line for the narration: which broker the lab is running against.
    pub fn describe(&self) -> String {
        match &self.embedded {
            Some(_) => format!("the embedded broker on {}", self.addr),
            None => format!(
                "the cluster at {} (names suffixed with this run's id)",
                self.addr
            ),
        }
    }

    /// The name to use for a topic or group the lab calls `base`: `base` itself on the embedded
    /// broker, `base-<run id>` on a cluster.
    pub fn name(&self, base: &str) -> String {
        match &self.run_id {
            Some(id) => format!("{base}-{id}"),
            None => base.to_string(),
        }
    }

    /// Creates the topic the lab calls `base` (see [`name`](Self::name)); it is deleted by
    /// [`close`](Self::close). Returns the name used.
    pub async fn create_topic(&self, base: &str, partitions: i32) -> Result<String, LabError> {
        self.create_topic_with(base, partitions, &[]).await
    }

    /// [`create_topic`](Self::create_topic) with topic configs, as `kafka-topics.sh --config`
    /// gives them (`cleanup.policy=compact`, ...).
    pub async fn create_topic_with(
        &self,
        base: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> Result<String, LabError> {
        let name = self.name(base);
        let mut topic = NewTopic::new(name.clone(), partitions);
        topic.configs = configs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.admin
            .create_topic(&topic)
            .await
            .map_err(|e| broker_error(&format!("creating topic {name}"), &e))?;
        lock(&self.topics).push(name.clone());
        self.watched.iter().for_each(|w| w.topic(&name));
        Ok(name)
    }

    /// The name of the consumer group the lab calls `base` (see [`name`](Self::name)), recorded
    /// so that [`close`](Self::close) deletes it. A group comes into being when a member joins
    /// or an offset is committed for it, so there is nothing to create here.
    pub fn group(&self, base: &str) -> String {
        let name = self.name(base);
        let mut groups = lock(&self.groups);
        if !groups.contains(&name) {
            groups.push(name.clone());
        }
        self.watched.iter().for_each(|w| w.group(&name));
        name
    }

    /// Why a phase that needs `api` cannot run on this cluster (`this cluster does not offer
    /// CreatePartitions`), or `None` when it can. Another Kafka-protocol broker may leave out an
    /// API; the lab then skips that phase instead of failing in the middle of it.
    pub async fn lacks(&self, api: ApiKey) -> Result<Option<String>, LabError> {
        match self.client.api_version(api).await {
            Ok(_) => Ok(None),
            Err(client::Error::Protocol(ProtocolError::UnsupportedVersion {
                api,
                broker,
                client,
            })) => Ok(Some(match broker {
                None => format!("this cluster does not offer {api}"),
                Some((lo, hi)) => format!(
                    "this cluster offers {api} only in versions {lo}..={hi}, and this client speaks \
                     {}..={}",
                    client.0, client.1
                ),
            })),
            Err(e) => Err(broker_error("asking the cluster which APIs it offers", &e)),
        }
    }

    /// Why idempotent producers cannot run on this cluster (`this cluster does not offer
    /// InitProducerId (idempotent producers)`), or `None` when they can.
    pub async fn lacks_producer_ids(&self) -> Result<Option<String>, LabError> {
        let lacking = self.lacks(ApiKey::InitProducerId).await?;
        Ok(lacking.map(|reason| format!("{reason} (idempotent producers)")))
    }

    /// Why producers with a transactional id cannot run on this cluster, or `None` when they
    /// can. Another Kafka-protocol broker may offer idempotence without transactions; it then
    /// refuses InitProducerId with a transactional id, or names no coordinator for one. A
    /// producer started with a transactional id of its own finds out, as a lab's writers would,
    /// without touching their ids' epochs.
    pub async fn lacks_transactional_ids(&self) -> Result<Option<String>, LabError> {
        if let Some(reason) = self.lacks_producer_ids().await? {
            return Ok(Some(reason));
        }
        let config = ProducerConfig {
            enable_idempotence: true,
            transactional_id: Some(self.name("ledger-probe")),
            // A cluster without a coordinator for it answers at once; a few quick retries
            // cover one that is still electing one.
            retry: RetryPolicy {
                retries: 10,
                backoff: Duration::from_millis(10),
                backoff_max: Duration::from_millis(200),
            },
            ..producer_config()
        };
        let what = "asking the cluster for a transactional id";
        let probe =
            Producer::new(self.client.clone(), config).map_err(|e| broker_error(what, &e))?;
        let answer = probe.producer_id().await;
        probe.close().await;
        match answer {
            Ok(_) => Ok(None),
            Err(e) => {
                let cause = e.fatal_cause().unwrap_or(&e);
                match (cause.server(), cause.unsupported_api()) {
                    (Some(refused), _) => Ok(Some(format!(
                        "this cluster does not offer transactional ids (it answered {})",
                        refused.name()
                    ))),
                    (None, Some(_)) => Ok(Some(
                        "this cluster does not offer transactional ids".to_string(),
                    )),
                    (None, None) => Err(broker_error(what, &e)),
                }
            }
        }
    }

    /// Grows a topic with CreatePartitions and waits until metadata shows the new count, so
    /// producers on this client route with it from the next record on (a real cluster may take
    /// a moment to spread the change). As long as that takes: the caller's deadline (a lab's
    /// phase, see [`crate::lab::deadline`]) bounds it and says which phase was too slow.
    pub async fn grow_topic(&self, topic: &str, partitions: i32) -> Result<(), LabError> {
        let what = format!("growing topic {topic} to {partitions} partitions");
        self.admin
            .create_partitions(topic, partitions)
            .await
            .map_err(|e| broker_error(&what, &e))?;
        let shows = async {
            loop {
                let info = self.admin.describe_topic(topic).await;
                match info {
                    Ok(info) if info.partition_count() >= partitions => return Ok(()),
                    Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    Err(e) => return Err(broker_error(&what, &e)),
                }
            }
        };
        shows.await
    }

    /// Every record of `topic`, by partition in offset order, read from the log start to the end
    /// offsets of the moment of the call; bounded, like [`grow_topic`](Self::grow_topic), by the
    /// caller's deadline.
    pub async fn read_topic(&self, topic: &str) -> Result<BTreeMap<i32, Vec<Record>>, LabError> {
        let what = format!("reading topic {topic} back");
        let ends = self
            .admin
            .list_offsets(topic, OffsetSpec::Latest)
            .await
            .map_err(|e| broker_error(&what, &e))?;
        let mut consumer = Consumer::new(
            self.client.with_own_connections(),
            ConsumerConfig {
                max_wait: Duration::from_millis(100),
                auto_offset_reset: OffsetReset::Earliest,
                ..ConsumerConfig::default()
            },
        );
        consumer.assign(ends.iter().map(|e| TopicPartition::new(topic, e.partition)));
        consumer
            .seek_all(SeekTo::Beginning)
            .map_err(|e| broker_error(&what, &e))?;
        let mut records: BTreeMap<i32, Vec<Record>> =
            ends.iter().map(|e| (e.partition, Vec::new())).collect();
        let read = async {
            loop {
                let done = ends.iter().all(|end| {
                    let tp = TopicPartition::new(topic, end.partition);
                    consumer.position(&tp).is_some_and(|at| at >= end.offset)
                });
                if done {
                    return Ok::<(), LabError>(());
                }
                for part in consumer.poll().await.map_err(|e| broker_error(&what, &e))? {
                    let into = records.entry(part.partition).or_default();
                    for record in part.records() {
                        into.push(record.map_err(|e| broker_error(&what, &e.into()))?);
                    }
                }
            }
        };
        read.await?;
        // A batch may reach past the end offsets asked for (records produced meanwhile).
        for (partition, list) in &mut records {
            if let Some(end) = ends.iter().find(|e| e.partition == *partition) {
                list.retain(|r| r.offset < end.offset);
            }
        }
        Ok(records)
    }

    /// Deletes what the lab created, topics then groups, and stops the embedded broker. Best
    /// effort: a lab that reached its verdict keeps it even if cleanup fails, so a failure is
    /// only logged.
    pub async fn close(self) {
        let topics = std::mem::take(&mut *lock(&self.topics));
        let groups = std::mem::take(&mut *lock(&self.groups));
        self.watched.iter().for_each(WatchedCluster::closed);
        // The embedded broker goes away with everything on it; only a cluster needs cleaning.
        if self.embedded.is_none() {
            self.delete_topics(&topics).await;
            self.delete_groups(&groups).await;
        }
        if let Some(broker) = self.embedded {
            broker.shutdown().await;
        }
    }

    async fn delete_topics(&self, names: &[String]) {
        if names.is_empty() {
            return;
        }
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        if let Err(e) = self.admin.delete_topics(&names).await {
            tracing::warn!(%e, topics = ?names, "could not delete the lab's topics");
        }
    }

    /// Only empty groups can be deleted. A group that was never joined nor committed to (a lab
    /// that failed early) does not exist, which is fine; one that still has a member (a lab that
    /// failed before its members left) stays until its offsets expire, which is worth a warning.
    async fn delete_groups(&self, names: &[String]) {
        if names.is_empty() {
            return;
        }
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let results = match self.admin.delete_groups(&names).await {
            Ok(results) => results,
            Err(e) => {
                tracing::error!(%e, groups = ?names, "could not delete the lab's groups");
                return;
            }
        };
        for (group, result) in results {
            let Err(e) = result else { continue };
            match e.name().as_str() {
                "GROUP_ID_NOT_FOUND" => {}
                // Members of a lab stopped midway (Ctrl-C, an error) never left: removed as an
                // admin removes them, the group can go now rather than after their session
                // timeout.
                "NON_EMPTY_GROUP" => match self.remove_members(&group).await {
                    Ok(()) => self.delete_emptied_group(&group).await,
                    Err(e) => {
                        tracing::warn!(%group, %e, "the lab's group still has members; not deleted")
                    }
                },
                _ => tracing::error!(%group, %e, "could not delete the lab's group"),
            }
        }
    }

    async fn remove_members(&self, group: &str) -> Result<(), client::Error> {
        let described = self.admin.describe_group(group).await?;
        for member in &described.members {
            self.admin.remove_group_member(group, member).await?;
        }
        Ok(())
    }

    /// Deletes `group` once its members are removed. A member dropped where it waited may have
    /// had a JoinGroup on the wire: the broker then holds a join without a member to remove
    /// (Kafka's pending member, or a member that joined after the removal), and the group is
    /// not empty until that join completes or its session expires. So the removal and the
    /// deletion are repeated until the group goes, for at most one session timeout.
    async fn delete_emptied_group(&self, group: &str) {
        let started = tokio::time::Instant::now();
        let mut said = false;
        loop {
            let failed = match self.admin.delete_groups(&[group]).await {
                Ok(results) => results.into_iter().find_map(|(_, r)| r.err()),
                Err(e) => {
                    tracing::warn!(%group, %e, "could not delete the lab's group");
                    return;
                }
            };
            let Some(e) = failed else { return };
            if e.name() != "NON_EMPTY_GROUP" || started.elapsed() >= PENDING_JOINS_EXPIRE {
                tracing::warn!(%group, %e, "could not delete the lab's group after removing its members");
                return;
            }
            if !said {
                eprintln!(
                    "workshop: group {group} still has joins in flight; waiting up to {} s for                      them to end (Ctrl-C again leaves it)",
                    PENDING_JOINS_EXPIRE.as_secs()
                );
                said = true;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
            if let Err(e) = self.remove_members(group).await {
                tracing::warn!(%group, %e, "the lab's group still has members; not deleted");
                return;
            }
        }
    }
}

#[cfg(test)]
impl Cluster {
    /// For the labs' tests: the embedded broker with `config` (a log cleaner that runs often,
    /// ...).
    pub async fn configured(config: broker::BrokerConfig) -> Cluster {
        Cluster::start_embedded(config, &Stop::never(), "test")
            .await
            .expect("the embedded broker starts")
    }

    /// For the labs' tests: the embedded broker answering every `api` request `delay` late, a
    /// cluster too slow for a lab.
    pub async fn slowed(api: ApiKey, delay: Duration) -> Cluster {
        let cluster = Cluster::open(&Target::Embedded, &Stop::never(), "test")
            .await
            .expect("the embedded broker starts");
        let broker = cluster.embedded().expect("an embedded broker");
        broker.faults().add(broker::faults::Fault::Delay {
            api: Some(api),
            delay,
        });
        cluster
    }
}

/// How long a join that was on the wire when its member was dropped can keep a group from
/// being deleted: the session timeout of the labs' members (Kafka's default, 45 s), plus a margin.
const PENDING_JOINS_EXPIRE: Duration = Duration::from_secs(50);

/// The list stays usable even if a thread panicked while holding it: it is only names.
fn lock(names: &Mutex<Vec<String>>) -> std::sync::MutexGuard<'_, Vec<String>> {
    names
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A suffix no other run shares: the process, the time and a counter, in hex.
fn run_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:x}{:x}{n}", std::process::id(), nanos & 0xff_ffff_ffff)
}

/// A client error while talking to the broker, as one line: what failed, why, what to check.
pub fn broker_error(what: &str, err: &client::Error) -> LabError {
    LabError::Broker(format!(
        "{what} failed: {err}; check that the broker is up and accepts this request"
    ))
}

fn unreachable(addr: &str, err: &client::Error) -> LabError {
    let fix = match err {
        // No broker can be started on a name that does not resolve.
        client::Error::Transport(client::TransportError::Unresolved { .. }) => {
            "the name does not resolve: check the spelling".to_string()
        }
        _ => format!("start one (for example `broker --listen {addr}`)"),
    };
    LabError::Broker(format!(
        "cannot reach a Kafka broker at {addr}: {err}; {fix}, or leave out --bootstrap to use \
         the embedded broker"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_on_the_embedded_broker_and_unique_on_a_cluster() {
        let rt = runtime().unwrap();
        let cluster = rt
            .block_on(Cluster::open(&Target::Embedded, &Stop::never(), "test"))
            .unwrap();
        assert_eq!(cluster.name("payments"), "payments");
        assert_eq!(cluster.group("billing"), "billing");
        assert!(cluster.embedded().is_some());
        let bootstrap = Target::Bootstrap(cluster.addr().to_string());
        let remote = rt
            .block_on(Cluster::open(&bootstrap, &Stop::never(), "test"))
            .unwrap();
        let name = remote.name("payments");
        assert!(name.starts_with("payments-") && name.len() > 10, "{name}");
        assert_ne!(
            name,
            rt.block_on(Cluster::open(&bootstrap, &Stop::never(), "test"))
                .unwrap()
                .name("payments")
        );
        protocol::names::validate_topic_name(&name).unwrap();

        // A cluster's topics are deleted at the end; reading and growing work on either.
        let topic = rt.block_on(remote.create_topic("payments", 2)).unwrap();
        rt.block_on(remote.grow_topic(&topic, 3)).unwrap();
        let records = rt.block_on(remote.read_topic(&topic)).unwrap();
        assert_eq!(records.len(), 3);
        assert!(records.values().all(Vec::is_empty));

        // So are its groups, after the topics; a group that never came into being is no error.
        let group = remote.group("billing");
        assert!(
            group.starts_with("billing-") && group != "billing",
            "{group}"
        );
        assert_eq!(remote.group("billing"), group);
        let never_joined = remote.group("never-joined");
        let offsets = BTreeMap::from([(TopicPartition::new(topic.clone(), 0), 0)]);
        let committed = rt.block_on(remote.admin().commit_offsets(&group, &offsets));
        assert!(committed.unwrap().iter().all(|(_, r)| r.is_ok()));
        let groups = rt.block_on(cluster.admin().list_groups(&[])).unwrap();
        assert!(groups.iter().any(|g| g.group_id == group), "{groups:?}");
        rt.block_on(remote.close());
        let left = rt.block_on(cluster.admin().list_topics()).unwrap();
        assert!(!left.contains(&topic), "{left:?}");
        let groups = rt.block_on(cluster.admin().list_groups(&[])).unwrap();
        assert!(
            groups
                .iter()
                .all(|g| g.group_id != group && g.group_id != never_joined),
            "{groups:?}"
        );
        rt.block_on(cluster.close());
    }

    /// On a cluster that creates topics on request, a lab's producer that sends after its topic
    /// was deleted fails, and the topic stays deleted.
    #[test]
    fn a_lab_producer_does_not_bring_a_deleted_topic_back() {
        let rt = runtime().unwrap();
        let broker = rt
            .block_on(broker::Broker::start(broker::BrokerConfig {
                listen: "127.0.0.1:0".parse().unwrap(),
                auto_create_topics: true,
                ..broker::BrokerConfig::default()
            }))
            .unwrap();
        let target = Target::Bootstrap(broker.addr().to_string());
        let cluster = rt
            .block_on(Cluster::open(&target, &Stop::never(), "test"))
            .unwrap();
        let topic = rt.block_on(cluster.create_topic("orders", 1)).unwrap();
        let err = rt.block_on(async {
            let producer =
                client::Producer::new(cluster.client().clone(), producer_config()).unwrap();
            let record = |value| client::ProducerRecord::new(&topic).value(value);
            producer.send_and_wait(record("before")).await.unwrap();
            cluster.admin().delete_topics(&[&topic]).await.unwrap();
            let late = producer.send_and_wait(record("late")).await;
            producer.close().await;
            late.unwrap_err()
        });
        assert!(matches!(err, client::Error::UnknownTopic { .. }), "{err}");
        let left = rt.block_on(cluster.admin().list_topics()).unwrap();
        assert!(left.is_empty(), "{left:?}");
        rt.block_on(cluster.close());
        rt.block_on(broker.shutdown());
    }

    /// A cluster that answers fetches ten minutes late: reading a topic back waits as long as
    /// the phase it belongs to may take, and then the phase's deadline names it (paused clock).
    #[tokio::test(start_paused = true)]
    async fn a_stuck_read_ends_at_the_deadline_of_its_phase() {
        let cluster = Cluster::slowed(ApiKey::Fetch, Duration::from_secs(600)).await;
        let topic = cluster.create_topic("payments", 1).await.unwrap();
        let work = crate::lab::deadline::Work {
            round_trips: 30,
            ..crate::lab::deadline::Work::default()
        };
        let deadline = crate::lab::deadline::Deadline::start("phase 3 (Reading back)", work);
        let started = tokio::time::Instant::now();
        let read = deadline
            .wait("reading the topic back", cluster.read_topic(&topic))
            .await;
        crate::lab::deadline::assert_too_slow(
            read,
            started.elapsed(),
            Duration::from_secs(40),
            "phase 3 (Reading back) was too slow: not done within 40 s (30 round trips x 1 s + \
             10 s); it was reading the topic back. Is the broker overloaded or slowed down? A \
             smaller run (fewer records) needs less time",
        );
        cluster.close().await;
    }

    #[test]
    fn an_unreachable_cluster_is_one_line_that_says_what_to_do() {
        let rt = runtime().unwrap();
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let err = match rt.block_on(Cluster::open(
            &Target::Bootstrap(addr.clone()),
            &Stop::never(),
            "test",
        )) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("connected to a closed port"),
        };
        assert!(err.contains(&addr) && err.contains("--bootstrap"), "{err}");
        assert!(!err.contains('\n'));

        // A name that does not resolve is no place to start a broker on.
        let nowhere = Target::Bootstrap("nosuchhost.invalid:9092".into());
        let err = match rt.block_on(Cluster::open(&nowhere, &Stop::never(), "test")) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("connected to a name that does not resolve"),
        };
        assert!(err.contains("the name does not resolve"), "{err}");
        assert!(!err.contains("broker --listen"), "{err}");
    }
}
