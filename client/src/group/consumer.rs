//! [`GroupConsumer`]: a member of a consumer group, on top of the assign-mode [`Consumer`].
//!
//! `poll` drives everything the application must take part in, as Kafka's `poll` does: it
//! rejoins when the group rebalances (revoking partitions through the listener first), picks up
//! committed offsets for new partitions, commits automatically every `auto.commit.interval`,
//! and fetches. Heartbeats and the poll-interval watch run in a background task, so processing
//! between polls is fine as long as it stays under `max.poll.interval`.

use std::collections::{BTreeMap, BTreeSet};

use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::assignor::{common_protocol, PartitionCounts, RebalanceProtocol};
use super::buffer::{PolledRecords, RecordBuffer};
use super::config::GroupConfig;
use super::heartbeat;
use super::listener::{NoopListener, RebalanceListener};
use super::member::{CommitFuture, CommitQueue, Member};
use super::offsets::{fetch_committed, CommittedOffsets};
use super::rebalance::{join_and_sync, Synced};
use super::state::{Generation, Phase};
use crate::client::Client;
use crate::consumer::{Consumer, SeekTo, TopicPartition};
use crate::error::{Error, Result};

pub struct GroupConsumer {
    member: Member,
    consumer: Consumer,
    /// Eager or cooperative: decided by the configured assignors, not by the group's choice.
    protocol: RebalanceProtocol,
    /// Sorted, without duplicates.
    subscription: Vec<String>,
    owned: BTreeSet<TopicPartition>,
    /// Newly assigned partitions whose committed offsets are still to be looked up.
    awaiting_committed: BTreeSet<TopicPartition>,
    buffer: RecordBuffer,
    listener: Box<dyn RebalanceListener>,
    /// Kafka's `needsJoinPrepare`: revocation and the pre-rebalance commit happen once per
    /// rebalance, not once per JoinGroup attempt.
    needs_join_prepare: bool,
    /// Rejoin attempts in a row that changed nothing, for the backoff.
    failed_rounds: u32,
    /// As leader: the partition counts the assignment was made with.
    leader_counts: Option<PartitionCounts>,
    next_count_check: Instant,
    next_auto_commit: Instant,
    /// The last automatic commit, until it has finished: a slow coordinator gets one at a time
    /// rather than a queue of them.
    auto_commit_pending: Option<CommitFuture>,
    commits: CommitQueue,
    heartbeat: JoinHandle<()>,
}

impl GroupConsumer {
    /// A member of `config.group_id`, not yet joined: [`subscribe`](Self::subscribe), then
    /// [`poll`](Self::poll). Starts its background tasks, so it must be created inside a tokio
    /// runtime.
    pub fn new(client: Client, config: GroupConfig) -> Result<Self> {
        config.validate()?;
        let consumer = Consumer::new(client.clone(), config.consumer.clone());
        let protocol = common_protocol(&config.assignors);
        let now = Instant::now();
        let next_auto_commit = now + config.auto_commit_interval;
        let member = Member::new(&client, config);
        Ok(Self {
            heartbeat: heartbeat::spawn(member.clone()),
            commits: CommitQueue::start(member.clone()),
            member,
            consumer,
            protocol,
            subscription: Vec::new(),
            owned: BTreeSet::new(),
            awaiting_committed: BTreeSet::new(),
            buffer: RecordBuffer::default(),
            listener: Box::new(NoopListener),
            needs_join_prepare: true,
            failed_rounds: 0,
            leader_counts: None,
            next_count_check: now,
            next_auto_commit,
            auto_commit_pending: None,
        })
    }

    /// Consumes these topics from the next poll on; a change of subscription while in the group
    /// rebalances it.
    pub fn subscribe<S: Into<String>>(
        &mut self,
        topics: impl IntoIterator<Item = S>,
    ) -> Result<()> {
        let topics: BTreeSet<String> = topics.into_iter().map(Into::into).collect();
        for t in &topics {
            protocol::names::validate_topic_name(t).map_err(Error::InvalidArgument)?;
        }
        let topics: Vec<String> = topics.into_iter().collect();
        if topics != self.subscription {
            self.subscription = topics;
            let mut state = self.member.state();
            if state.phase() != Phase::Unjoined {
                state.request_rejoin("the subscription changed");
            }
        }
        Ok(())
    }

    /// Called inside `poll` when partitions are revoked, assigned or lost.
    pub fn set_listener(&mut self, listener: impl RebalanceListener + 'static) {
        self.listener = Box::new(listener);
    }

    pub fn group_id(&self) -> &str {
        &self.member.config.group_id
    }

    pub fn subscription(&self) -> &[String] {
        &self.subscription
    }

    /// The partitions this member owns now.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.owned.iter().cloned().collect()
    }

    /// The generation and member id the coordinator gave (generation -1 when not in one).
    pub fn generation(&self) -> Generation {
        self.member.state().generation().clone()
    }

    /// The next offset `poll` returns for a partition this member owns, once known.
    pub fn position(&self, tp: &TopicPartition) -> Option<i64> {
        if !self.owned.contains(tp) {
            return None;
        }
        self.buffer
            .next_offset(tp)
            .or_else(|| self.consumer.position(tp))
    }

    /// True when the member owns partitions and has handed out everything up to their ends as
    /// of the last fetch (kcat's `-e`).
    pub fn at_end(&self) -> bool {
        !self.owned.is_empty()
            && self.buffer.is_empty()
            && self.awaiting_committed.is_empty()
            && self.consumer.at_end()
    }

    /// Every owned partition with a known position: what a commit of "everything consumed" sends.
    pub fn positions(&self) -> BTreeMap<TopicPartition, i64> {
        self.owned
            .iter()
            .filter_map(|tp| Some((tp.clone(), self.position(tp)?)))
            .collect()
    }

    /// Moves an owned partition's position; records already fetched for it are dropped.
    pub fn seek(&mut self, tp: &TopicPartition, to: SeekTo) -> Result<()> {
        if !self.owned.contains(tp) {
            return Err(Error::InvalidArgument(format!(
                "{tp} is not assigned to this member"
            )));
        }
        self.consumer.seek(tp, to)?;
        self.awaiting_committed.remove(tp);
        self.buffer.retain(|t| t != tp);
        Ok(())
    }

    /// The group's committed offsets for `partitions`.
    pub async fn committed(&self, partitions: &[TopicPartition]) -> Result<CommittedOffsets> {
        fetch_committed(&self.member.coordinator, Some(partitions)).await
    }

    /// Takes part in the group (joining, rebalancing, committing as configured) and returns up to
    /// `max.poll.records` records, waiting at most the fetch max wait for some to arrive.
    pub async fn poll(&mut self) -> Result<Vec<PolledRecords>> {
        if self.subscription.is_empty() {
            return Err(Error::InvalidArgument(
                "subscribe to at least one topic before polling".into(),
            ));
        }
        if let Some(e) = self.member.state().take_fatal() {
            return Err(e);
        }
        let _inside = InsidePoll::enter(&self.member);
        self.watch_partition_counts().await;
        self.ensure_active_group().await?;
        self.resolve_committed().await?;
        self.maybe_auto_commit();
        if self.buffer.is_empty() {
            let fetched = self.consumer.poll().await?;
            self.buffer.push(fetched)?;
        }
        Ok(self.buffer.take(self.member.config.max_poll_records))
    }

    /// Commits the positions of every owned partition and waits for the answer.
    pub async fn commit_sync(&mut self) -> Result<()> {
        self.commits.submit(self.positions()).await
    }

    /// Commits these offsets (each the next offset to read) and waits for the answer.
    pub async fn commit_offsets_sync(
        &mut self,
        offsets: BTreeMap<TopicPartition, i64>,
    ) -> Result<()> {
        self.commits.submit(offsets).await
    }

    /// Commits the positions of every owned partition without waiting; the future tells how it
    /// went, and may be dropped.
    pub fn commit_async(&mut self) -> CommitFuture {
        self.commits.submit(self.positions())
    }

    pub fn commit_offsets_async(&mut self, offsets: BTreeMap<TopicPartition, i64>) -> CommitFuture {
        self.commits.submit(offsets)
    }

    /// Leaves the group as Kafka's `close` does: commits (with auto-commit on), revokes through
    /// the listener, waits for pending commits, and sends LeaveGroup, except for a static member,
    /// whose partitions wait for it to come back within the session timeout. Returns the first
    /// commit error, after leaving anyway.
    pub async fn close(mut self) -> Result<()> {
        let (generation, in_group) = {
            let state = self.member.state();
            let g = state.generation().clone();
            let in_group = state.phase() == Phase::Stable && g.is_valid();
            (g, in_group)
        };
        let mut result = Ok(());
        let all: Vec<TopicPartition> = self.assignment();
        if in_group {
            if self.member.config.auto_commit {
                result = self.commits.submit(self.positions()).await;
            }
            if !all.is_empty() {
                let offsets = self.listener.on_partitions_revoked(&all);
                let committed = self.commits.submit(offsets.into_iter().collect()).await;
                result = result.and(committed);
            }
        } else if !all.is_empty() {
            self.listener.on_partitions_lost(&all);
        }
        self.commits.drain().await;
        self.heartbeat.abort();
        if self.member.config.group_instance_id.is_none() {
            self.member
                .leave(&generation.member_id, "the consumer is being closed")
                .await;
        }
        result
    }

    /// Rejoins until the member is Stable with nothing left to rebalance.
    async fn ensure_active_group(&mut self) -> Result<()> {
        loop {
            let Some(reason) = self.member.state().rejoin_reason().map(str::to_string) else {
                return Ok(());
            };
            if self.needs_join_prepare {
                self.prepare_rejoin().await;
                self.needs_join_prepare = false;
            }
            let owned: Vec<TopicPartition> = self.assignment();
            match join_and_sync(&self.member, &self.subscription, &owned, &reason).await {
                Ok(Some(synced)) => {
                    self.failed_rounds = 0;
                    self.needs_join_prepare = true;
                    self.complete_join(synced).await;
                }
                // Join again at once the first time (Kafka does, after a stale member id or a
                // new rebalance), then back off so a confused coordinator is not hammered.
                Ok(None) => {
                    self.failed_rounds += 1;
                    if self.failed_rounds > 1 {
                        tokio::time::sleep(self.retry().backoff).await;
                    }
                }
                Err(e) if e.is_retriable() => {
                    self.failed_rounds += 1;
                    let Some(delay) = self.retry().delay(self.failed_rounds) else {
                        self.failed_rounds = 0;
                        return Err(e);
                    };
                    tracing::debug!(%e, ?delay, "rebalance failed, retrying");
                    tokio::time::sleep(delay).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn retry(&self) -> &crate::retry::RetryPolicy {
        &self.member.coordinator.client().config().retry
    }

    /// Before rejoining (Kafka's `onJoinPrepare`): commit with auto-commit on, then give up
    /// partitions. Eager members revoke everything; cooperative members only what they no
    /// longer subscribe to; a member that lost its generation has lost everything.
    async fn prepare_rejoin(&mut self) {
        let generation = self.member.state().generation().clone();
        if self.member.config.auto_commit && generation.is_valid() {
            if let Err(e) = self.commits.submit(self.positions()).await {
                tracing::warn!(%e, "auto-commit before rebalancing failed");
            }
        }
        if self.owned.is_empty() {
            return;
        }
        if !generation.is_valid() {
            let lost = self.assignment();
            tracing::info!(?lost, "partitions lost with the generation");
            self.listener.on_partitions_lost(&lost);
            self.set_owned(BTreeSet::new());
            return;
        }
        let revoked: Vec<TopicPartition> = match self.protocol {
            RebalanceProtocol::Eager => self.assignment(),
            RebalanceProtocol::Cooperative => self
                .owned
                .iter()
                .filter(|tp| self.subscription.binary_search(&tp.topic).is_err())
                .cloned()
                .collect(),
        };
        if !revoked.is_empty() {
            self.revoke(&revoked).await;
        }
    }

    /// Hands partitions back: the listener's last word (and commit), then they are gone.
    async fn revoke(&mut self, revoked: &[TopicPartition]) {
        tracing::info!(?revoked, "revoking partitions");
        let offsets = self.listener.on_partitions_revoked(revoked);
        if !offsets.is_empty() {
            if let Err(e) = self.commits.submit(offsets.into_iter().collect()).await {
                tracing::warn!(%e, "commit of revoked partitions failed");
            }
        }
        let mut owned = self.owned.clone();
        for tp in revoked {
            owned.remove(tp);
        }
        self.set_owned(owned);
    }

    /// After SyncGroup (Kafka's `onJoinComplete`): revoke what a cooperative assignment took
    /// away (then rejoin, so it can be handed on), take the new partitions, look up where to
    /// start them, and tell the listener.
    async fn complete_join(&mut self, synced: Synced) {
        let assigned: BTreeSet<TopicPartition> = synced.assignment.into_iter().collect();
        let foreign: Vec<&TopicPartition> = assigned
            .iter()
            .filter(|tp| self.subscription.binary_search(&tp.topic).is_err())
            .collect();
        if !foreign.is_empty() {
            tracing::warn!(?foreign, "assigned partitions of topics not subscribed to");
            self.member
                .state()
                .request_rejoin("the assignment does not match the subscription");
        }
        let revoked: Vec<TopicPartition> = self.owned.difference(&assigned).cloned().collect();
        let added: Vec<TopicPartition> = assigned.difference(&self.owned).cloned().collect();
        if !revoked.is_empty() {
            self.revoke(&revoked).await;
        }
        tracing::info!(
            generation = synced.generation.id,
            assigned = assigned.len(),
            added = added.len(),
            revoked = revoked.len(),
            "rebalance complete"
        );
        self.set_owned(assigned);
        self.awaiting_committed.extend(added.iter().cloned());
        self.leader_counts = synced.leader_counts;
        self.listener.on_partitions_assigned(&added);
        if !revoked.is_empty() {
            self.member
                .state()
                .request_rejoin("partitions were revoked and must be reassigned (cooperative)");
        }
    }

    fn set_owned(&mut self, owned: BTreeSet<TopicPartition>) {
        self.consumer.assign(owned.iter().cloned());
        self.buffer.retain(|tp| owned.contains(tp));
        self.awaiting_committed.retain(|tp| owned.contains(tp));
        self.owned = owned;
    }

    /// Starts new partitions at their committed offsets; the others at `auto.offset.reset`. Until
    /// the lookup succeeds nothing is fetched, so a failed lookup never turns into a reset.
    async fn resolve_committed(&mut self) -> Result<()> {
        if self.awaiting_committed.is_empty() {
            return Ok(());
        }
        let partitions: Vec<TopicPartition> = self.awaiting_committed.iter().cloned().collect();
        let committed = fetch_committed(&self.member.coordinator, Some(&partitions)).await?;
        for tp in &partitions {
            if let Some(Some(offset)) = committed.get(tp) {
                self.consumer.seek(tp, SeekTo::Offset(*offset))?;
            }
        }
        self.awaiting_committed.clear();
        Ok(())
    }

    /// As leader, rejoins when a subscribed topic's partition count changed (or a subscribed
    /// topic appeared), so the new partitions get consumed; Kafka's leader does the same. Checked
    /// at most once per metadata max age.
    async fn watch_partition_counts(&mut self) {
        let now = Instant::now();
        if now < self.next_count_check || !self.member.state().is_leader() {
            return;
        }
        let Some(counts) = self.leader_counts.clone() else {
            return;
        };
        let client = self.member.coordinator.client().clone();
        self.next_count_check = now + client.config().metadata_max_age;
        let auto_create = self.member.config.allow_auto_create_topics;
        for (topic, known) in counts {
            let current = match client.partition_count(&topic, auto_create).await {
                Ok(count) => count,
                Err(Error::UnknownTopic { .. }) => 0,
                Err(e) => {
                    tracing::debug!(%topic, %e, "partition count not checked");
                    continue;
                }
            };
            if current != known {
                self.member.state().request_rejoin(format!(
                    "topic {topic} went from {known} to {current} partitions"
                ));
                self.leader_counts = None;
                return;
            }
        }
    }

    fn maybe_auto_commit(&mut self) {
        let now = Instant::now();
        if !self.member.config.auto_commit || now < self.next_auto_commit {
            return;
        }
        if let Some(pending) = &mut self.auto_commit_pending {
            if pending.try_result().is_none() {
                // Still going: try again on the next poll. Its failure, if any, the queue logs.
                return;
            }
        }
        self.next_auto_commit = now + self.member.config.auto_commit_interval;
        let offsets = self.positions();
        self.auto_commit_pending = (!offsets.is_empty()).then(|| self.commits.submit(offsets));
    }
}

impl Drop for GroupConsumer {
    /// Without `close` the member just stops heartbeating; the coordinator drops it after the
    /// session timeout.
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

/// The application is inside `poll` while this lives; dropping it (on return, on an error, or
/// with a poll future the application dropped) starts the application's poll interval.
struct InsidePoll(Member);

impl InsidePoll {
    fn enter(member: &Member) -> Self {
        member.state().poll_started(Instant::now());
        Self(member.clone())
    }
}

impl Drop for InsidePoll {
    fn drop(&mut self) {
        self.0.state().poll_ended(Instant::now());
        // The heartbeat task may be waiting for the next heartbeat only: it now has a poll
        // deadline to watch too.
        self.0.wake_heartbeat();
    }
}
