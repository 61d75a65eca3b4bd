//! One instance of the billing service: a real `GroupConsumer` in a task of its own, with its
//! own client (client id = the member's name), doing what an at-least-once consumer does: poll,
//! apply every payment of the batch to the ledger, commit the batch's offsets, poll again.
//! Nothing in the group protocol is simulated; the lab only chooses when this member stalls or
//! restarts ([`Incident`]), and holds every member at a gate while the payments are produced,
//! so each member's first fetch finds its whole backlog and batches come out the same every run.
//!
//! What the member does and sees goes into the scenario's journal as it happens, and its log
//! lines are worded as Kafka's Java consumer words them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use client::group::coordinator::Coordinator;
use client::group::offsets::{commit_once, fetch_committed, CommitAs};
use client::group::requests::{leave_answer, leave_request};
use client::group::Generation;
use client::{
    Client, ClientConfig, Error as ClientError, GroupConfig, GroupConsumer, PolledRecords,
    RebalanceListener, TopicPartition,
};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use super::capture::{MemberTag, MEMBER};
use super::eos::{Transactional, Txn};
use super::journal::{Event, Journal, Range};
use super::ledger::{Applier, Delivery, Stores};
use super::payments::Payment;
use super::plan::{Incident, Spec, Timing};
use crate::kit::group::manual_commit;

/// What the scenario tells its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Run,
    /// Finish the current poll, then wait instead of polling (the lab produces meanwhile).
    Hold,
    /// Leave the group and end.
    Stop,
}

/// Everything one member needs.
pub struct Setup {
    pub name: &'static str,
    pub addr: String,
    pub topic: String,
    pub group: String,
    pub config: GroupConfig,
    pub incident: Option<Incident>,
    pub processing: Duration,
    pub journal: Arc<Journal>,
    pub stores: Arc<Stores>,
    /// In the transactional run: each batch is one Kafka transaction.
    pub transactional: Option<Transactional>,
    pub control: watch::Receiver<Control>,
}

impl Setup {
    /// The member's group configuration under Kafka's names: manual commits (after each
    /// batch), reading from the start of a partition nobody committed, and a static
    /// `group.instance.id` equal to the client id when the scenario asks for one.
    pub fn group_config(
        spec: &Spec,
        group: &str,
        name: &str,
        timing: &Timing,
    ) -> Result<GroupConfig, String> {
        let mut c = timed_config(group, timing)
            .assignors_named(&[spec.assignor])
            .map_err(|e| e.to_string())?;
        c.max_poll_records = spec.max_poll_records;
        c.allow_auto_create_topics = false;
        c.group_instance_id = spec.static_members.then(|| name.to_string());
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }
}

/// A member of `group` with the lab's timeouts, before the run's own choices (assignor, batch
/// size, static membership).
pub fn timed_config(group: &str, timing: &Timing) -> GroupConfig {
    let mut c = manual_commit(group, timing.heartbeat, timing.fetch_max_wait);
    c.session_timeout = timing.session;
    c.max_poll_interval = timing.max_poll_interval;
    c
}

/// Runs the member until told to stop; an error it cannot handle goes into the journal.
pub async fn run(setup: Setup) {
    let tag = MemberTag::new(setup.name, setup.journal.clone());
    let (name, journal) = (setup.name, setup.journal.clone());
    let member = Member {
        setup,
        coordinator: None,
        txn: None,
        tag: tag.clone(),
        added: Arc::default(),
        seen_generation: -1,
        processed: 0,
        incident_done: false,
        returning: false,
    };
    if let Err(error) = MEMBER.scope(tag, member.run()).await {
        journal.record(Some(name), Event::Failed { error });
    }
}

struct Member {
    setup: Setup,
    /// The route to the group's coordinator for the lab's own requests (offset lookups, the
    /// late commit, a static member's LeaveGroup); one per incarnation, as the client is.
    coordinator: Option<Coordinator>,
    /// The transactional producer, in the transactional run; one per incarnation too.
    txn: Option<Txn>,
    tag: Arc<MemberTag>,
    /// Partitions the listener was given, waiting for their committed offsets to be read.
    added: Arc<Mutex<Vec<i32>>>,
    /// The generation of the last `Joined` this consumer recorded.
    seen_generation: i32,
    /// Payments processed by this member, over all its incarnations.
    processed: usize,
    incident_done: bool,
    /// Back from the incident, until its next poll.
    returning: bool,
}

/// A batch processed and not yet committed.
struct Processed {
    generation: Generation,
    offsets: BTreeMap<i32, i64>,
}

impl Member {
    async fn run(mut self) -> Result<(), String> {
        let mut consumer = self.connect().await?;
        loop {
            if self.wait_for_go().await == Control::Stop {
                break;
            }
            let batch = consumer
                .poll()
                .await
                .map_err(|e| format!("poll failed: {e}"))?;
            self.observe(&consumer, true);
            self.resume_points().await;
            if batch.is_empty() {
                continue;
            }
            let processed = self.process(consumer.generation(), batch).await?;
            self.maybe_stall().await;
            self.commit(&mut consumer, processed).await?;
            self.observe(&consumer, false);
            if let Some(downtime) = self.restart_due() {
                consumer = self.restart(consumer, downtime).await?;
            }
        }
        self.leave(consumer).await;
        Ok(())
    }

    async fn connect(&mut self) -> Result<GroupConsumer, String> {
        let s = &self.setup;
        let mut config = ClientConfig::new(&s.addr);
        config.client_id = s.name.to_string();
        let client = Client::connect(config)
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let mut consumer =
            GroupConsumer::new(client.clone(), s.config.clone()).map_err(|e| e.to_string())?;
        consumer
            .subscribe([s.topic.clone()])
            .map_err(|e| e.to_string())?;
        consumer.set_listener(Listener {
            tag: self.tag.clone(),
            added: self.added.clone(),
        });
        self.seen_generation = -1;
        self.coordinator = Some(Coordinator::new(&client, &s.group));
        if let Some(t) = &s.transactional {
            self.txn = Some(Txn::start(&client, t, s.name)?);
        }
        Ok(consumer)
    }

    /// Returns the control once it is not Hold; parks meanwhile.
    async fn wait_for_go(&mut self) -> Control {
        let name = self.setup.name;
        let mut parked = false;
        loop {
            let control = *self.setup.control.borrow_and_update();
            if control != Control::Hold {
                if parked {
                    self.setup.journal.update_view(name, |v| v.parked = false);
                }
                return control;
            }
            if !parked {
                parked = true;
                self.setup.journal.update_view(name, |v| v.parked = true);
            }
            if self.setup.control.changed().await.is_err() {
                return Control::Stop;
            }
        }
    }

    /// Shows the scenario where the member stands, and records a new generation once. A member
    /// back from its incident counts as back once a poll has put it in a generation again.
    fn observe(&mut self, consumer: &GroupConsumer, after_poll: bool) {
        let g = consumer.generation();
        let partitions: BTreeSet<i32> = consumer
            .assignment()
            .iter()
            .filter(|tp| tp.topic == self.setup.topic)
            .map(|tp| tp.partition)
            .collect();
        if g.is_valid() && g.id != self.seen_generation {
            self.seen_generation = g.id;
            self.tag.set_generation(g.id);
            self.setup.journal.record(
                Some(self.setup.name),
                Event::Joined {
                    generation: g.id,
                    member_id: g.member_id.clone(),
                    protocol: g.protocol.clone(),
                    partitions: partitions.iter().copied().collect(),
                },
            );
        }
        let back = self.returning && after_poll && g.is_valid();
        if back {
            self.returning = false;
        }
        self.setup.journal.update_view(self.setup.name, |v| {
            v.generation = g.id;
            v.partitions = partitions;
            if back {
                v.away = false;
            }
        });
    }

    /// Reads where newly assigned partitions start: the group's committed offsets, which the
    /// consumer has just sought to (Kafka's "Setting offset for partition ..."). Read through a
    /// coordinator of our own: `GroupConsumer::committed` borrows the consumer across the
    /// request, and a consumer is not `Sync`, so that future could not run in a spawned task.
    async fn resume_points(&mut self) {
        let added: Vec<i32> = std::mem::take(&mut *self.added.lock());
        if added.is_empty() {
            return;
        }
        let partitions: Vec<TopicPartition> = added
            .iter()
            .map(|&p| TopicPartition::new(self.setup.topic.clone(), p))
            .collect();
        let Some(coordinator) = &self.coordinator else {
            return;
        };
        match fetch_committed(coordinator, Some(&partitions)).await {
            Ok(committed) => {
                for (tp, offset) in committed {
                    let partition = tp.partition;
                    let event = match offset {
                        Some(offset) => Event::SettingOffset { partition, offset },
                        None => Event::NoCommittedOffset { partition },
                    };
                    self.setup.journal.record(Some(self.setup.name), event);
                }
            }
            // Only evidence is lost: the consumer found the offsets itself inside poll.
            Err(e) => tracing::warn!(member = self.setup.name, %e, "committed offsets not read"),
        }
    }

    /// Applies every payment of the batch to the stores, one after the other.
    async fn process(
        &mut self,
        generation: Generation,
        batch: Vec<PolledRecords>,
    ) -> Result<Processed, String> {
        let by = Applier::new(self.setup.name, generation.id);
        let clock = self.setup.journal.clock();
        if let Some(txn) = &self.txn {
            txn.begin().await?;
        }
        let mut ranges = Vec::new();
        let mut offsets = BTreeMap::new();
        for part in batch {
            let (Some(first), Some(last)) = (part.records.first(), part.records.last()) else {
                continue;
            };
            let range = Range {
                partition: part.partition,
                first: first.offset,
                last: last.offset,
            };
            for record in &part.records {
                let payment = Payment::decode(record.key.as_deref(), record.value.as_deref())
                    .map_err(|e| {
                        format!("{}-{}@{}: {e}", part.topic, part.partition, record.offset)
                    })?;
                if !self.setup.processing.is_zero() {
                    tokio::time::sleep(self.setup.processing).await;
                }
                self.setup.stores.apply(&Delivery {
                    payment: &payment,
                    partition: part.partition,
                    offset: record.offset,
                    by: &by,
                    at_ms: clock.ms(),
                    at: Instant::now(),
                });
                if let Some(txn) = &self.txn {
                    txn.produce(&payment, part.partition, record.offset).await?;
                }
            }
            self.processed += part.records.len();
            offsets.insert(part.partition, range.last + 1);
            ranges.push(range);
        }
        self.setup.journal.record(
            Some(self.setup.name),
            Event::Batch {
                generation: generation.id,
                ranges,
            },
        );
        Ok(Processed {
            generation,
            offsets,
        })
    }

    /// The stall: between the batch that reaches the incident's count and its commit.
    async fn maybe_stall(&mut self) {
        let Some(Incident::Stall {
            after, duration, ..
        }) = self.setup.incident
        else {
            return;
        };
        if self.incident_done || self.processed < after {
            return;
        }
        self.incident_done = true;
        let (name, journal) = (self.setup.name, &self.setup.journal);
        journal.update_view(name, |v| v.away = true);
        journal.record(
            Some(name),
            Event::StallStarted {
                duration_ms: duration.as_millis() as u64,
            },
        );
        tokio::time::sleep(duration).await;
        journal.record(Some(name), Event::StallEnded);
        self.returning = true;
    }

    /// Commits the batch; a refusal is recorded, and a `CommitFailed` is put to the coordinator
    /// once more with the member's old identity, to show it is the broker's answer too. In the
    /// transactional run the offsets go into the batch's transaction instead.
    async fn commit(
        &mut self,
        consumer: &mut GroupConsumer,
        done: Processed,
    ) -> Result<(), String> {
        if self.txn.is_some() {
            return self.commit_transaction(done).await;
        }
        let topic = &self.setup.topic;
        let offsets: BTreeMap<TopicPartition, i64> = done
            .offsets
            .iter()
            .map(|(&p, &o)| (TopicPartition::new(topic.clone(), p), o))
            .collect();
        let committed = consumer.commit_offsets_sync(offsets.clone()).await;
        let commit_failed = matches!(committed, Err(ClientError::CommitFailed { .. }));
        self.record_commit(&done, committed.err().map(|e| e.to_string()));
        let generation = &done.generation;
        if commit_failed && generation.is_valid() {
            let answer = self.late_commit(generation, &offsets).await;
            self.setup.journal.record(
                Some(self.setup.name),
                Event::LateCommitAnswered {
                    generation: generation.id,
                    member_id: generation.member_id.clone(),
                    answer,
                },
            );
        }
        Ok(())
    }

    /// The batch's offsets into its transaction, as the member of the batch's generation, then
    /// the commit; a refused transaction is aborted. Only an abort that fails stops the member.
    async fn commit_transaction(&mut self, done: Processed) -> Result<(), String> {
        let Some(txn) = &self.txn else {
            return Ok(());
        };
        let s = &self.setup;
        let offsets: Vec<(String, i32, i64)> = done
            .offsets
            .iter()
            .map(|(&p, &o)| (s.topic.clone(), p, o))
            .collect();
        let instance = s.config.group_instance_id.as_deref();
        let refused = txn
            .commit(&s.group, &done.generation, instance, &offsets)
            .await
            .err();
        self.record_commit(&done, refused.as_ref().map(|r| r.error.clone()));
        if let Some(refused) = refused {
            refused.aborted?;
            let generation = done.generation.id;
            let aborted = Event::TransactionAborted { generation };
            self.setup.journal.record(Some(self.setup.name), aborted);
        }
        Ok(())
    }

    /// The batch's commit in the journal: done, or refused with `error`.
    fn record_commit(&self, done: &Processed, error: Option<String>) {
        let (generation, offsets) = (done.generation.id, done.offsets.clone());
        let event = match error {
            None => Event::Commit {
                generation,
                offsets,
            },
            Some(error) => Event::CommitFailed {
                generation,
                offsets,
                error,
            },
        };
        self.setup.journal.record(Some(self.setup.name), event);
    }

    /// OffsetCommit with the generation and member id the batch was processed under.
    async fn late_commit(
        &self,
        generation: &Generation,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> String {
        let Some(coordinator) = &self.coordinator else {
            return "no coordinator".to_string();
        };
        let who = CommitAs {
            generation_id: generation.id,
            member_id: &generation.member_id,
            instance_id: self.setup.config.group_instance_id.as_deref(),
        };
        match commit_once(coordinator, &who, offsets).await {
            Ok(refused) => match refused.first() {
                Some((_, code)) => client::ServerError::new(*code).name(),
                None => "NONE: the commit was accepted".to_string(),
            },
            Err(e) => e.to_string(),
        }
    }

    fn restart_due(&self) -> Option<Duration> {
        match self.setup.incident {
            Some(Incident::Restart {
                after, downtime, ..
            }) if !self.incident_done && self.processed >= after => Some(downtime),
            _ => None,
        }
    }

    /// The process restarts: the consumer closes (a static member sends no LeaveGroup), and a
    /// new one, configured the same, starts after the downtime.
    async fn restart(
        &mut self,
        consumer: GroupConsumer,
        downtime: Duration,
    ) -> Result<GroupConsumer, String> {
        self.incident_done = true;
        let (name, journal) = (self.setup.name, self.setup.journal.clone());
        journal.update_view(name, |v| v.away = true);
        journal.record(
            Some(name),
            Event::Restarting {
                downtime_ms: downtime.as_millis() as u64,
            },
        );
        if let Err(e) = consumer.close().await {
            return Err(format!("closing before the restart failed: {e}"));
        }
        if let Some(txn) = self.txn.take() {
            txn.close().await;
        }
        journal.update_view(name, |v| {
            v.generation = -1;
            v.partitions.clear();
        });
        tokio::time::sleep(downtime).await;
        let again = self.connect().await?;
        journal.record(Some(name), Event::Restarted);
        self.returning = true;
        Ok(again)
    }

    /// Leaves at the end of the scenario. A static member's `close` keeps its place for the
    /// session timeout, so it is also removed by instance id, as Kafka's admin tool removes
    /// static members, and the group can be deleted.
    async fn leave(&mut self, consumer: GroupConsumer) {
        if let Some(txn) = self.txn.take() {
            txn.close().await;
        }
        let generation = consumer.generation();
        if let Err(e) = consumer.close().await {
            tracing::warn!(member = self.setup.name, %e, "closing the consumer failed");
        }
        let Some(instance) = self.setup.config.group_instance_id.as_deref() else {
            return;
        };
        let group = &self.setup.group;
        let reason = "the workshop lab is over";
        let Some(coordinator) = &self.coordinator else {
            return;
        };
        let build = |v| leave_request(group, &generation.member_id, Some(instance), reason, v);
        let left = coordinator.call(build, None).await;
        if let Err(e) = left
            .map_err(|e| e.to_string())
            .and_then(|r| leave_answer(r).map_err(|e| e.to_string()))
        {
            tracing::warn!(member = self.setup.name, %e, "the static member did not leave");
        }
    }
}

/// The member's rebalance callbacks: each one is a journal entry (and a log line).
struct Listener {
    tag: Arc<MemberTag>,
    added: Arc<Mutex<Vec<i32>>>,
}

impl Listener {
    /// `event` of the listed partitions, in the generation the member owned them in.
    fn record(&self, list: &[TopicPartition], event: fn(i32, Vec<i32>) -> Event) {
        let partitions = list.iter().map(|tp| tp.partition).collect();
        let event = event(self.tag.generation(), partitions);
        self.tag.journal.record(Some(self.tag.name), event);
    }
}

impl RebalanceListener for Listener {
    /// Nothing to commit here: every batch is committed before the next poll, and partitions
    /// are only revoked inside a poll.
    fn on_partitions_revoked(&mut self, revoked: &[TopicPartition]) -> Vec<(TopicPartition, i64)> {
        self.record(revoked, |generation, partitions| Event::Revoked {
            generation,
            partitions,
        });
        Vec::new()
    }

    fn on_partitions_assigned(&mut self, assigned: &[TopicPartition]) {
        self.added
            .lock()
            .extend(assigned.iter().map(|tp| tp.partition));
        self.record(assigned, |generation, partitions| Event::Assigned {
            generation,
            partitions,
        });
    }

    fn on_partitions_lost(&mut self, lost: &[TopicPartition]) {
        self.record(lost, |generation, partitions| Event::Lost {
            generation,
            partitions,
        });
    }
}
