//! One scenario, end to end, through a real broker: the shop's producer writes the traffic, a
//! real consumer group reads it, the lab applies what the members fetched to the aggregate store
//! round by round ([`super::pace`]), and the ordering checker watches every arrival.
//!
//! What changes halfway is the scenario ([`Change`]): a real CreatePartitions on the live topic
//! (the failure), nothing at all on a topic provisioned big enough (fix 1), or a migration to a
//! new topic: block the producers, drain the old topic to lag 0, switch producers and consumers
//! with a routing version (fix 2).
//!
//! The producer's and the members' metadata are refreshed by their own clients' policy, as in
//! any Kafka application: the lab never tells them that the topic grew.

use std::collections::BTreeMap;
use std::time::Duration;

use client::{Client, ClientConfig, OffsetReset, Producer, ProducerConfig, ProducerRecord};

use super::events::{OrderEvent, LAST_VERSION, ROUTING_HEADER};
use super::group::{Delivery, Group};
use super::pace::{self, PartitionId};
use super::plan::Plan;
use super::store::{AggregateStore, LogLine};
use super::traffic::{Traffic, FEATURED_ORDER};
use super::{GROUP, METADATA_MAX_AGE};
use crate::kit::offsets::{all_zero, described_rows};
use crate::lab::report::{self, LagRow, Progress, Tail};
use crate::lab::target::{self, broker_error, Cluster};
use crate::lab::LabError;
use client::check::{OrderingChecker, Position, Violation};

/// Where a run happens: the cluster (and the operator's admin client on it), and the settings
/// of the order service's own clients, whose `metadata_max_age` is how soon its producer and
/// its members see a change.
pub struct Env<'c> {
    pub cluster: &'c Cluster,
    pub service: ClientConfig,
    /// The store's lines and the checker's violations as they happen, for live views.
    pub tail: Tail,
}

impl<'c> Env<'c> {
    /// The order service on `cluster`: its clients are named after its group, and see a change
    /// of the topic after [`METADATA_MAX_AGE`].
    pub fn new(cluster: &'c Cluster, tail: Tail) -> Self {
        let mut service = ClientConfig::new(cluster.addr());
        service.client_id = GROUP.to_string();
        service.metadata_max_age = METADATA_MAX_AGE;
        Env {
            cluster,
            service,
            tail,
        }
    }
}

/// What happens when half the traffic has been produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The failure: the operator raises the live topic's partition count (CreatePartitions).
    Grow { to: i32 },
    /// Fix 1: the topic was created with enough partitions; nothing needs to change.
    Nothing,
    /// Fix 2: a new topic; block the producers, drain the old topic, switch with a new version.
    Migrate { topic: String, partitions: i32 },
}

/// One scenario. Names are the lab's (`orders`); the cluster makes them unique under
/// `--bootstrap` (see [`Cluster::name`]).
#[derive(Debug, Clone)]
pub struct Spec {
    pub topic: String,
    pub partitions: i32,
    pub group: String,
    pub change: Change,
}

/// Where producers send, and under which version (sources 001 and 004: routing is versioned
/// state, and a switch is a new version, never an edit in place).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Routing {
    version: u32,
    topic: String,
    /// Producers hold their events while the old topic drains.
    blocked: bool,
}

/// A violation as the lab saw it: the checker's finding, the store's line, the round.
#[derive(Debug, Clone)]
pub struct Seen {
    pub violation: Violation,
    pub line: String,
    pub round: u32,
}

impl Seen {
    /// The violation as the lab event stream carries it.
    pub fn reported(&self) -> report::Violation {
        report::Violation::of_order(&self.violation, format!("round {}", self.round))
    }
}

/// The migration's price and its proof.
#[derive(Debug, Clone)]
pub struct Migration {
    pub topic: String,
    pub partitions: i32,
    pub routing_version: u32,
    /// Rounds the producers were blocked while the old topic drained.
    pub blocked_rounds: u32,
    /// Events the shop produced meanwhile, held and sent after the switch.
    pub held_events: usize,
    /// The old topic's lag per partition when the switch happened: 0 everywhere.
    pub old_topic_lag: Vec<LagRow>,
}

/// The same increase as seen by a second group on the topic, left with Kafka's default
/// `auto.offset.reset=latest` (the service's group starts a partition nobody committed on at
/// its beginning): it starts each new partition at its end, so whatever the producer wrote
/// there before the group took it over is never read (KAFKA-12261).
#[derive(Debug, Clone)]
pub struct Latest {
    pub topic: String,
    /// Where the `latest` group started each new partition: the records before it are skipped.
    pub started_at: BTreeMap<i32, i64>,
}

impl Latest {
    /// Events the `latest` group never reads.
    pub fn skipped(&self) -> u64 {
        self.started_at.values().map(|o| *o as u64).sum()
    }

    /// True when the `latest` group never reads the event written at `at`.
    pub fn skips(&self, at: &Position) -> bool {
        self.started_at
            .get(&at.partition)
            .is_some_and(|start| at.offset < *start)
    }
}

/// What one scenario measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub spec: Spec,
    pub rounds: u32,
    pub seen: Vec<Seen>,
    pub keys_out_of_order: usize,
    pub duplicates: u64,
    pub rejected: u64,
    /// Orders that did not end cancelled: each lost an event to a rejection.
    pub incomplete: Vec<u32>,
    /// Where each version of order 8842 was written (index: version - 1).
    pub featured_written: Vec<Option<Position>>,
    /// The store's lines about order 8842.
    pub featured_log: Vec<LogLine>,
    /// The topic's lag per partition just before the change.
    pub lag_at_change: Vec<LagRow>,
    /// The lag of every partition consumed, at the end: 0 everywhere after the drain.
    pub lag_at_end: Vec<LagRow>,
    pub migration: Option<Migration>,
    /// Records refused because their routing version was older than the one in force.
    pub fenced: u64,
    /// Records that were not order events.
    pub undecodable: u64,
    /// The increase as a `latest` group met it (the failure only).
    pub latest: Option<Latest>,
}

/// A scenario in progress.
pub struct Run<'a> {
    env: &'a Env<'a>,
    plan: &'a Plan,
    /// What the scenario has measured so far; [`Run::finish`] completes it.
    out: Outcome,
    traffic: &'a Traffic,
    /// The next event of `traffic` to produce.
    next: usize,
    producer: Producer,
    group: Group,
    /// The group with `auto.offset.reset=latest`, until it has met the increase.
    latest_group: Option<Group>,
    routing: Routing,
    /// The topic the group reads and its partition count as the lab last settled it.
    consumed: (String, i32),
    checker: OrderingChecker,
    store: AggregateStore,
    applied: BTreeMap<PartitionId, i64>,
    log_end: BTreeMap<PartitionId, i64>,
    /// How many store lines and violations the live tail has had.
    tailed: (usize, usize),
    assignment_after: Vec<(String, Vec<i32>)>,
}

impl<'a> Run<'a> {
    /// Creates the topic, starts the group and waits until it owns every partition.
    pub async fn start(
        env: &'a Env<'a>,
        plan: &'a Plan,
        mut spec: Spec,
        traffic: &'a Traffic,
    ) -> Result<Run<'a>, LabError> {
        spec.topic = env
            .cluster
            .create_topic(&spec.topic, spec.partitions)
            .await?;
        spec.group = env.cluster.group(&spec.group);
        let mut producer_client = env.service.clone();
        producer_client.client_id = format!("{}-producer", env.service.client_id);
        let producer_client = Client::connect(producer_client)
            .await
            .map_err(|e| broker_error("connecting the producer", &e))?;
        let producer = Producer::new(producer_client, producer_config())
            .map_err(|e| broker_error("starting the producer", &e))?;
        let group = Group::join(
            &env.service,
            &spec.group,
            &spec.topic,
            plan.members,
            OffsetReset::Earliest,
        )
        .await?;
        let latest_group = match spec.change {
            Change::Grow { .. } => {
                let name = env.cluster.group(&format!("{}-latest", spec.group));
                let latest = Group::join(
                    &env.service,
                    &name,
                    &spec.topic,
                    plan.members,
                    OffsetReset::Latest,
                );
                Some(latest.await?)
            }
            _ => None,
        };
        group.settled(&spec.topic, spec.partitions).await?;
        if let Some(latest) = &latest_group {
            latest.settled(&spec.topic, spec.partitions).await?;
        }
        let mut checker = OrderingChecker::new();
        checker.layout(&spec.topic, spec.partitions);
        Ok(Run {
            env,
            plan,
            routing: Routing {
                version: 1,
                topic: spec.topic.clone(),
                blocked: false,
            },
            consumed: (spec.topic.clone(), spec.partitions),
            out: Outcome {
                spec,
                rounds: 0,
                seen: Vec::new(),
                keys_out_of_order: 0,
                duplicates: 0,
                rejected: 0,
                incomplete: Vec::new(),
                featured_written: vec![None; LAST_VERSION as usize],
                featured_log: Vec::new(),
                lag_at_change: Vec::new(),
                lag_at_end: Vec::new(),
                migration: None,
                fenced: 0,
                undecodable: 0,
                latest: None,
            },
            traffic,
            next: 0,
            producer,
            group,
            latest_group,
            checker,
            store: AggregateStore::new(),
            applied: BTreeMap::new(),
            log_end: BTreeMap::new(),
            tailed: (0, 0),
            assignment_after: Vec::new(),
        })
    }

    /// Rounds of the first half of the traffic: each round the shop produces `rate` events and
    /// the group applies what its capacity allows. Returns the topic's lag per partition at the end.
    pub async fn until_change(&mut self, progress: &Progress) -> Result<&[LagRow], LabError> {
        while self.next < self.traffic.change_at {
            let end = (self.next + self.plan.rate as usize).min(self.traffic.change_at);
            self.produce_next(end).await?;
            self.round(progress).await?;
        }
        self.out.lag_at_change = self.lag(&self.consumed.0.clone()).await?;
        Ok(&self.out.lag_at_change)
    }

    /// The change, then the first event after it (order 8842's cancellation) and one round.
    pub async fn change(&mut self, progress: &Progress) -> Result<(), LabError> {
        let featured = self.traffic.change_at + 1;
        match self.out.spec.change.clone() {
            Change::Nothing => {
                self.produce_next(featured).await?;
            }
            Change::Grow { to } => {
                // The `latest` group notices the increase only after the producer has written
                // to a new partition: in Kafka each client refreshes on its own
                // metadata.max.age.ms, so this order is one of the two a race can give.
                let mut releases = Vec::new();
                if let Some(latest) = &mut self.latest_group {
                    releases = latest.hold().await?;
                }
                // The operator's tool, on its own client: the service is not told.
                self.env
                    .cluster
                    .grow_topic(&self.out.spec.topic, to)
                    .await?;
                // The producer's metadata goes stale after metadata.max.age.ms and the next send
                // refreshes it, as Kafka's producer does.
                tokio::time::sleep(self.env.service.metadata_max_age).await;
                self.checker.layout(&self.out.spec.topic, to);
                self.produce_next(featured).await?;
                // The members notice the new partitions on their own metadata refresh and
                // rejoin; the lab waits for the group to own all of them before the next round.
                let topic = self.out.spec.topic.clone();
                self.assignment_after = self.group.settled(&topic, to).await?;
                self.consumed.1 = to;
                drop(releases);
                if let Some(latest) = self.latest_group.take() {
                    latest.settled(&topic, to).await?;
                    let before = self.out.spec.partitions;
                    let started_at = latest.started_at(&topic, before, to).await?;
                    latest.leave().await;
                    self.out.latest = Some(Latest { topic, started_at });
                }
            }
            Change::Migrate { topic, partitions } => {
                return self.migrate(&topic, partitions, progress).await;
            }
        }
        self.round(progress).await
    }

    /// The rest of the traffic, then rounds until every record is applied.
    pub async fn after_change(&mut self, progress: &Progress) -> Result<(), LabError> {
        while self.next < self.traffic.events.len() {
            let end = (self.next + self.plan.rate as usize).min(self.traffic.events.len());
            self.produce_next(end).await?;
            self.round(progress).await?;
        }
        while self.backlog() > 0 {
            self.round(progress).await?;
        }
        Ok(())
    }

    /// The topic as created (unique under `--bootstrap`).
    pub fn topic(&self) -> &str {
        &self.out.spec.topic
    }

    /// Where each version of order 8842 was written so far (index: version - 1).
    pub fn featured_written(&self) -> &[Option<Position>] {
        &self.out.featured_written
    }

    /// The store's lines about order 8842 so far.
    pub fn featured_log(&self) -> Vec<LogLine> {
        self.store.lines_for(FEATURED_ORDER).cloned().collect()
    }

    /// The first violation on order 8842, if its events were reordered.
    pub fn featured_overtaken(&self) -> Option<&Seen> {
        let key = super::events::order_key(FEATURED_ORDER);
        self.out.seen.iter().find(|s| s.violation.key == key)
    }

    /// The version of order 8842 the store holds so far.
    pub fn featured_version(&self) -> Option<u32> {
        self.store.version(FEATURED_ORDER)
    }

    /// The increase as the `latest` group met it, once it has.
    pub fn latest(&self) -> Option<&Latest> {
        self.out.latest.as_ref()
    }

    /// The group's members and partitions once settled after the change.
    pub fn assignment_after(&self) -> &[(String, Vec<i32>)] {
        &self.assignment_after
    }

    /// Stops the group and returns what was measured.
    pub async fn finish(mut self) -> Result<Outcome, LabError> {
        self.out.lag_at_end = self.lag(&self.consumed.0.clone()).await?;
        // The group is empty now; `Cluster::close` deletes it with the topics on a cluster.
        self.group.leave().await;
        if let Some(latest) = self.latest_group {
            latest.leave().await;
        }
        self.producer.clone().close().await;
        let (out, checker, store) = (&mut self.out, &self.checker, &self.store);
        out.keys_out_of_order = checker.keys_out_of_order();
        out.duplicates = checker.duplicates();
        out.rejected = store.rejected();
        out.incomplete = store.incomplete(self.traffic.order_ids.clone());
        out.featured_log = store.lines_for(FEATURED_ORDER).cloned().collect();
        Ok(self.out)
    }

    /// Fix 2, sources 001 and 004: block, drain, switch, with a version.
    async fn migrate(
        &mut self,
        topic: &str,
        partitions: i32,
        progress: &Progress,
    ) -> Result<(), LabError> {
        let topic = &self.env.cluster.create_topic(topic, partitions).await?;
        // Block: from here the shop's events wait in the producers, order 8842's cancellation
        // first.
        self.routing.blocked = true;
        let held_from = self.next;
        let mut held_to = held_from + 1;
        let mut blocked_rounds = 0;
        // Drain: rounds go on until the group has applied and committed every record of the
        // old topic. The shop keeps taking orders meanwhile; they are held.
        while self.backlog() > 0 {
            held_to = (held_to + self.plan.rate as usize).min(self.traffic.events.len());
            blocked_rounds += 1;
            self.round(progress).await?;
        }
        // The proof is the broker's, as kafka-consumer-groups.sh shows it: lag 0 everywhere.
        let old_topic_lag = self.lag(&self.consumed.0.clone()).await?;
        if !all_zero(&old_topic_lag) {
            return Err(LabError::Broker(format!(
                "group {} applied all of {} but the broker reports lag on it; its commits were lost",
                self.out.spec.group, self.consumed.0
            )));
        }
        // Switch: a new routing version; producers and consumers move together.
        self.routing = Routing {
            version: self.routing.version + 1,
            topic: topic.to_string(),
            blocked: false,
        };
        self.checker.layout(topic, partitions);
        self.group.subscribe(topic).await?;
        self.assignment_after = self.group.settled(topic, partitions).await?;
        self.consumed = (topic.to_string(), partitions);
        self.out.migration = Some(Migration {
            topic: topic.to_string(),
            partitions,
            routing_version: self.routing.version,
            blocked_rounds,
            held_events: held_to - held_from,
            old_topic_lag,
        });
        // The held events go out first, in the order the shop produced them.
        self.produce_next(held_to).await?;
        self.round(progress).await
    }

    /// Produces `traffic.events[next..end]` under the current routing and waits for every
    /// acknowledgement, so the log ends are known before the next round. While routing is
    /// blocked nothing is sent: the events stay where they are, to be sent after the switch.
    async fn produce_next(&mut self, end: usize) -> Result<(), LabError> {
        if self.routing.blocked {
            return Ok(());
        }
        let topic = self.routing.topic.clone();
        let version = self.routing.version.to_string();
        let events = &self.traffic.events[self.next..end];
        let mut pending = Vec::with_capacity(events.len());
        for event in events {
            let key = event.key();
            let value = event.encode();
            let headers = [client::Header {
                key: ROUTING_HEADER,
                value: Some(version.as_bytes()),
            }];
            let record = ProducerRecord::new(&topic)
                .key(&key)
                .value(&value)
                .headers(&headers);
            let delivery = self
                .producer
                .send(record)
                .await
                .map_err(|e| broker_error(&format!("producing to {topic}"), &e))?;
            pending.push((*event, delivery));
        }
        for (event, delivery) in pending {
            let sent = delivery
                .wait()
                .await
                .map_err(|e| broker_error(&format!("producing to {topic}"), &e))?;
            let at = Position::new(topic.clone(), sent.partition, sent.offset);
            self.checker
                .written(&event.key(), event.version.into(), at.clone());
            let end = self
                .log_end
                .entry((topic.clone(), sent.partition))
                .or_insert(0);
            *end = (*end).max(sent.offset + 1);
            if event.order_id == FEATURED_ORDER {
                self.out.featured_written[event.version as usize - 1] = Some(at);
            }
        }
        self.next = end;
        Ok(())
    }

    /// One round: each partition of the consumed topic hands over up to `capacity` records, in
    /// the order of [`pace::round`]; the store applies them, the checker watches, the members
    /// commit what was applied.
    async fn round(&mut self, progress: &Progress) -> Result<(), LabError> {
        self.out.rounds += 1;
        self.store.set_round(self.out.rounds);
        let (topic, partitions) = self.consumed.clone();
        let wants: Vec<(PartitionId, i64, i64)> = (0..partitions)
            .map(|p| {
                let id = (topic.clone(), p);
                let from = self.applied.get(&id).copied().unwrap_or(0);
                let waiting = self.log_end.get(&id).copied().unwrap_or(0) - from;
                (id, from, pace::wanted(waiting, self.plan.capacity))
            })
            .filter(|(_, _, count)| *count > 0)
            .collect();
        let mut queues = self.group.take(&wants).await?;
        for delivery in pace::round(&mut queues, self.plan.capacity) {
            self.apply(delivery);
        }
        self.group.commit(&self.applied)?;
        self.tail_round();
        progress.inc();
        Ok(())
    }

    /// What the round added to the store's log and the checker's findings, to live views.
    fn tail_round(&mut self) {
        let tail = &self.env.tail;
        if tail.is_live() {
            let lines = self.store.log()[self.tailed.0..].iter().map(LogLine::event);
            let seen = self.out.seen[self.tailed.1..].iter().map(Seen::reported);
            tail.push(lines.collect(), seen.collect());
        }
        self.tailed = (self.store.log().len(), self.out.seen.len());
    }

    fn apply(&mut self, delivery: Delivery) {
        let at = delivery.at;
        let id = (at.topic.clone(), at.partition);
        self.applied.insert(id, at.offset + 1);
        let event: OrderEvent = match delivery.event {
            Ok(event) => event,
            Err(reason) => {
                tracing::warn!(target: "workshop::store", %at, %reason, "skipping a record");
                self.out.undecodable += 1;
                return;
            }
        };
        // Source 004: a write under an older routing version than the one in force is refused,
        // so a stale router can never sneak an event past the switch.
        if delivery
            .routing_version
            .is_some_and(|v| v < self.routing.version)
        {
            self.out.fenced += 1;
            return;
        }
        let _ = self.store.apply(event);
        if let Some(violation) = self.checker.arrived(&event.key(), event.version.into(), at) {
            let violation = violation.clone();
            let line = self
                .store
                .log()
                .last()
                .map(ToString::to_string)
                .unwrap_or_default();
            self.out.seen.push(Seen {
                violation,
                line,
                round: self.out.rounds,
            });
        }
    }

    /// Records written but not yet applied, over every partition.
    fn backlog(&self) -> i64 {
        self.log_end
            .iter()
            .map(|(id, end)| end - self.applied.get(id).copied().unwrap_or(0))
            .sum()
    }

    async fn lag(&mut self, topic: &str) -> Result<Vec<LagRow>, LabError> {
        self.group.flush().await?;
        described_rows(self.env.cluster.admin(), &self.out.spec.group, topic).await
    }
}

/// The shop's producer: a lab's producer, with a short linger (the lab waits for every
/// acknowledgement each round, so batching longer only adds latency).
fn producer_config() -> ProducerConfig {
    ProducerConfig {
        linger: Duration::from_millis(1),
        ..target::producer_config()
    }
}
