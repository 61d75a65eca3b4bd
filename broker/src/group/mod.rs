//! The group coordinator of the classic consumer-group protocol: membership (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup), committed offsets, and the group listings admin tools read.
//!
//! Each group sits behind its own lock in a concurrent map, so groups never wait on each other.
//! The rules live in [`state`]; this module finds or creates the group a request names, parks
//! JoinGroup and SyncGroup requests until their phase completes, and keeps one timer task per
//! group with a deadline pending ([`timer`]).

pub mod member;
pub mod messages;
pub mod offsets;
pub mod offsets_log;
pub mod state;
mod timer;

use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use messages::{
    GroupListing, GroupSummary, JoinRequest, JoinResult, LeavingMember, OffsetCommit, SyncRequest,
    SyncResult,
};
use offsets::{metadata_too_large, CommitTime, CommittedOffset};
use offsets_log::{OffsetChange, OffsetsLog, ReplayedOffsets};
use state::{Group, GroupState, Timing};
use timer::GroupCell;

/// Kafka's `group.min.session.timeout.ms` and `group.max.session.timeout.ms`.
pub const MIN_SESSION_TIMEOUT_MS: i32 = 6_000;
pub const MAX_SESSION_TIMEOUT_MS: i32 = 1_800_000;

/// One partition's committed offset as OffsetFetch reports it: `None` when never committed.
pub type FetchedOffset = (i32, Option<CommittedOffset>);

/// One topic's answer to OffsetDelete: each partition asked, with its error if it kept its
/// offset.
pub type TopicOffsetsDeleted = (String, Vec<(i32, Option<ResponseError>)>);

#[derive(Debug)]
pub struct GroupCoordinator {
    groups: DashMap<String, Arc<GroupCell>>,
    timing: Timing,
    /// Cancelled when the broker stops: timer tasks end and parked requests are answered.
    shutdown: CancellationToken,
    /// Where commits are written with `--data-dir`; `None` keeps them in memory only.
    offsets_log: Option<OffsetsLog>,
}

impl GroupCoordinator {
    pub fn new(timing: Timing, shutdown: CancellationToken) -> Self {
        Self {
            groups: DashMap::new(),
            timing,
            shutdown,
            offsets_log: None,
        }
    }

    /// Keeps committed offsets in `log` from now on, starting from what it replayed: each group
    /// comes back Empty, holding its offsets, as after a Kafka coordinator loads its partition.
    /// The file holds no commit times: a replayed offset's retention starts again at the start.
    pub fn persist_to(mut self, log: OffsetsLog, replayed: ReplayedOffsets) -> Self {
        for (group_id, partitions) in replayed {
            let cell = self.get_or_create(&group_id);
            cell.read_mut(|group| {
                for ((topic, partition), committed) in partitions {
                    let time = CommitTime::now();
                    group
                        .offsets_mut()
                        .commit(&topic, partition, committed, time);
                }
            });
        }
        self.offsets_log = Some(log);
        self
    }

    fn get(&self, group_id: &str) -> Option<Arc<GroupCell>> {
        self.groups.get(group_id).map(|cell| cell.clone())
    }

    fn get_or_create(&self, group_id: &str) -> Arc<GroupCell> {
        if let Some(cell) = self.get(group_id) {
            return cell;
        }
        self.groups
            .entry(group_id.to_string())
            .or_insert_with(|| Arc::new(GroupCell::new(Group::new(group_id, self.timing))))
            .clone()
    }

    /// Every group, collected first: a group's lock is never taken while a map shard is held
    /// (DeleteGroups takes them in the other order).
    fn all(&self) -> Vec<Arc<GroupCell>> {
        self.groups
            .iter()
            .map(|entry| entry.value().clone())
            .collect()
    }

    /// Waits for a parked request's answer. If the coordinator stops first, the client is sent
    /// to look for the coordinator again, as Kafka answers when it unloads a group.
    async fn parked<T>(&self, answer: oneshot::Receiver<T>, gone: impl FnOnce() -> T) -> T {
        tokio::select! {
            biased;
            answer = answer => answer.unwrap_or_else(|_| gone()),
            _ = self.shutdown.cancelled() => gone(),
        }
    }

    pub async fn join(&self, group_id: &str, request: JoinRequest) -> JoinResult {
        let member_id = request.member_id.clone();
        if group_id.is_empty() {
            return JoinResult::error(ResponseError::InvalidGroupId, member_id);
        }
        if !(MIN_SESSION_TIMEOUT_MS..=MAX_SESSION_TIMEOUT_MS).contains(&request.session_timeout_ms)
        {
            return JoinResult::error(ResponseError::InvalidSessionTimeout, member_id);
        }
        // Only a member without an id creates the group; a named member of a missing group is
        // unknown.
        let cell = if member_id.is_empty() {
            self.get_or_create(group_id)
        } else {
            match self.get(group_id) {
                Some(cell) => cell,
                None => return JoinResult::error(ResponseError::UnknownMemberId, member_id),
            }
        };
        let (respond, answer) = oneshot::channel();
        cell.with(&self.shutdown, |group, now| {
            group.join(request, respond, now)
        });
        self.parked(answer, || {
            JoinResult::error(ResponseError::NotCoordinator, member_id)
        })
        .await
    }

    pub async fn sync(&self, group_id: &str, request: SyncRequest) -> SyncResult {
        if group_id.is_empty() {
            return SyncResult::error(ResponseError::InvalidGroupId);
        }
        let Some(cell) = self.get(group_id) else {
            return SyncResult::error(ResponseError::UnknownMemberId);
        };
        let (respond, answer) = oneshot::channel();
        cell.with(&self.shutdown, |group, now| {
            group.sync(request, respond, now)
        });
        self.parked(answer, || SyncResult::error(ResponseError::NotCoordinator))
            .await
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), ResponseError> {
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        let cell = self.get(group_id).ok_or(ResponseError::UnknownMemberId)?;
        cell.with(&self.shutdown, |group, now| {
            group.heartbeat(member_id, group_instance_id, generation_id, now)
        })
    }

    /// The outer error fails the whole request; otherwise one result per member.
    pub fn leave(
        &self,
        group_id: &str,
        leaving: &[LeavingMember],
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        let cell = self.get(group_id).ok_or(ResponseError::UnknownMemberId)?;
        cell.with(&self.shutdown, |group, now| group.leave(leaving, now))
    }

    /// Commits offsets whose topics and partitions the caller has checked, kept for
    /// `retention_time_ms` when it is not -1 (OffsetCommit v2-4). The outer error fails every
    /// partition; otherwise one result per commit, in order.
    #[allow(clippy::too_many_arguments)]
    pub fn commit_offsets(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        commits: Vec<OffsetCommit>,
        retention_time_ms: i64,
        version: i16,
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        let cell = match self.get(group_id) {
            Some(cell) => cell,
            // A commit outside any generation creates a "simple" group: manually assigned
            // consumers and admin tools keep offsets this way.
            None if generation_id < 0 => self.get_or_create(group_id),
            None if version >= 9 => return Err(ResponseError::GroupIdNotFound),
            None => return Err(ResponseError::IllegalGeneration),
        };
        cell.with(&self.shutdown, |group, now| {
            group.validate_offset_commit(member_id, group_instance_id, generation_id, now)?;
            // Kafka's `expireTimestampMs`: the commit's time plus its retention, unless -1.
            let expires_at = match retention_time_ms {
                -1 => None,
                ms => now.checked_add(Duration::from_millis(ms.max(0) as u64)),
            };
            let time = CommitTime {
                at: now,
                expires_at,
            };
            Ok(self.store_commits(group_id, group, commits, time))
        })
    }

    /// TxnOffsetCommit's check of the member sending a transaction's offsets (KIP-447): with
    /// a member id or a generation, they must be the group's current ones, so a member that
    /// was removed while its transaction was open cannot commit it (ILLEGAL_GENERATION,
    /// UNKNOWN_MEMBER_ID) and must abort. Without either (an older client), nothing is checked.
    pub fn validate_txn_offset_commit(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), ResponseError> {
        if generation_id < 0 && member_id.is_empty() && group_instance_id.is_none() {
            return Ok(());
        }
        let cell = self.get(group_id).ok_or(ResponseError::IllegalGeneration)?;
        cell.with(&self.shutdown, |group, now| {
            group.validate_offset_commit(member_id, group_instance_id, generation_id, now)
        })
    }

    /// The offsets a transaction committed (TxnOffsetCommit, then EndTxn commit): checked when
    /// they were sent, applied now whatever the group's generation has become, as Kafka's
    /// coordinator applies them at the commit marker.
    pub fn commit_transactional(&self, group_id: &str, commits: Vec<OffsetCommit>) {
        let cell = self.get_or_create(group_id);
        cell.with(&self.shutdown, |group, now| {
            self.store_commits(
                group_id,
                group,
                commits,
                CommitTime {
                    at: now,
                    expires_at: None,
                },
            );
        });
    }

    /// Writes `commits` to the offsets log, then to the group: one result per commit.
    fn store_commits(
        &self,
        group_id: &str,
        group: &mut Group,
        commits: Vec<OffsetCommit>,
        time: CommitTime,
    ) -> Vec<Option<ResponseError>> {
        let mut results = Vec::with_capacity(commits.len());
        let mut accepted = Vec::new();
        for commit in commits {
            let metadata = commit.metadata.unwrap_or_default();
            if metadata_too_large(&metadata) {
                results.push(Some(ResponseError::OffsetMetadataTooLarge));
                continue;
            }
            results.push(None);
            accepted.push(OffsetChange::Commit {
                group: group_id.to_string(),
                topic: commit.topic,
                partition: commit.partition,
                committed: CommittedOffset {
                    offset: commit.offset,
                    leader_epoch: commit.leader_epoch,
                    metadata,
                },
            });
        }
        // On disk before it is visible or acknowledged, under the group's lock so two
        // commits of one group reach the file in the order they take effect.
        if let Some(log) = &self.offsets_log {
            if let Err(e) = log.append(&accepted) {
                tracing::error!(group = group_id, "committed offsets not written: {e}");
                return results
                    .into_iter()
                    .map(|r| r.or(Some(ResponseError::KafkaStorageError)))
                    .collect();
            }
        }
        let offsets = group.offsets_mut();
        for change in accepted {
            if let OffsetChange::Commit {
                topic,
                partition,
                committed,
                ..
            } = change
            {
                offsets.commit(&topic, partition, committed, time);
            }
        }
        results
    }

    /// The committed offsets of the named partitions, or of every committed partition when
    /// `wanted` is `None`. An unknown group has none.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        wanted: Option<Vec<(String, Vec<i32>)>>,
    ) -> Vec<(String, Vec<FetchedOffset>)> {
        let cell = self.get(group_id);
        let read = |group: Option<&Group>| match wanted {
            Some(wanted) => wanted
                .into_iter()
                .map(|(topic, partitions)| {
                    let fetched = partitions
                        .into_iter()
                        .map(|p| (p, group.and_then(|g| g.offsets().get(&topic, p)).cloned()))
                        .collect();
                    (topic, fetched)
                })
                .collect(),
            None => {
                let mut all: Vec<(String, Vec<FetchedOffset>)> = Vec::new();
                for (topic, partition, committed) in group.iter().flat_map(|g| g.offsets().iter()) {
                    let entry = (partition, Some(committed.clone()));
                    match all.last_mut() {
                        Some((last, partitions)) if last == topic => partitions.push(entry),
                        _ => all.push((topic.to_string(), vec![entry])),
                    }
                }
                all
            }
        };
        match cell {
            Some(cell) => cell.read(|group| read(Some(group))),
            None => read(None),
        }
    }

    /// OffsetDelete of partitions the caller checked exist. The outer error fails the request
    /// (`GROUP_ID_NOT_FOUND`, `NON_EMPTY_GROUP`); otherwise one result per partition, in the order
    /// asked: `GROUP_SUBSCRIBED_TO_TOPIC` for a topic a member reads, else deleted (or there was
    /// nothing to delete). An Empty group left without offsets stays until deleted, as in
    /// Kafka 4.x until its next cleanup.
    pub fn delete_offsets(
        &self,
        group_id: &str,
        topics: Vec<(String, Vec<i32>)>,
    ) -> Result<Vec<TopicOffsetsDeleted>, ResponseError> {
        let cell = self.get(group_id).ok_or(ResponseError::GroupIdNotFound)?;
        cell.read_mut(|group| {
            group.validate_offset_delete()?;
            let mut changes = Vec::new();
            let mut results = Vec::with_capacity(topics.len());
            for (topic, partitions) in topics {
                let subscribed = group.is_subscribed_to(&topic);
                let answers = partitions
                    .iter()
                    .map(|&p| {
                        (
                            p,
                            subscribed.then_some(ResponseError::GroupSubscribedToTopic),
                        )
                    })
                    .collect();
                if !subscribed {
                    changes.extend(
                        partitions
                            .into_iter()
                            .filter(|&p| group.offsets().get(&topic, p).is_some())
                            .map(|partition| OffsetChange::DeleteOffset {
                                group: group_id.to_string(),
                                topic: topic.clone(),
                                partition,
                            }),
                    );
                }
                results.push((topic, answers));
            }
            if let Some(log) = &self.offsets_log {
                if !changes.is_empty() {
                    log.append(&changes)
                        .map_err(|_| ResponseError::KafkaStorageError)?;
                }
            }
            for change in changes {
                if let OffsetChange::DeleteOffset {
                    topic, partition, ..
                } = change
                {
                    group.offsets_mut().remove(&topic, partition);
                }
            }
            Ok(results)
        })
    }

    /// A deleted topic's offsets leave every group, as Kafka's coordinator writes a tombstone
    /// for each (`OffsetMetadataManager.onPartitionsDeleted`): a consumer of a topic created
    /// again under the name starts by its `auto.offset.reset`, not at an offset of the old one.
    pub fn delete_topic_offsets(&self, topic: &str) -> Result<(), ResponseError> {
        for cell in self.all() {
            cell.read_mut(|group| {
                let partitions = group.offsets().partitions_of(topic);
                if partitions.is_empty() {
                    return Ok(());
                }
                if let Some(log) = &self.offsets_log {
                    let tombstones: Vec<OffsetChange> = partitions
                        .into_iter()
                        .map(|partition| OffsetChange::DeleteOffset {
                            group: group.id().to_string(),
                            topic: topic.to_string(),
                            partition,
                        })
                        .collect();
                    log.append(&tombstones).map_err(|e| {
                        tracing::error!(topic, "offsets of a deleted topic not removed: {e}");
                        ResponseError::KafkaStorageError
                    })?;
                }
                group.offsets_mut().remove_topic(topic);
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Kafka's `cleanupGroupMetadata`: every group's expired offsets go (tombstones written
    /// first), and a group left Empty without offsets is deleted. Returns how many offsets
    /// expired.
    pub fn expire_offsets(&self, retention: Duration) -> usize {
        let now = Instant::now();
        let mut expired_count = 0;
        for cell in self.all() {
            cell.read_mut(|group| {
                let expired = group.expired_offsets(now, retention);
                if !expired.is_empty() {
                    if let Some(log) = &self.offsets_log {
                        let tombstones: Vec<OffsetChange> = expired
                            .iter()
                            .map(|(topic, partition)| OffsetChange::DeleteOffset {
                                group: group.id().to_string(),
                                topic: topic.clone(),
                                partition: *partition,
                            })
                            .collect();
                        if let Err(e) = log.append(&tombstones) {
                            tracing::error!(group = group.id(), "expired offsets kept: {e}");
                            return;
                        }
                    }
                    expired_count += expired.len();
                    for (topic, partition) in &expired {
                        group.offsets_mut().remove(topic, *partition);
                    }
                }
                if group.state() == GroupState::Empty && group.offsets().is_empty() {
                    // Nothing left on disk for it: no DeleteGroup entry is needed.
                    if group.delete().is_ok() {
                        self.groups
                            .remove_if(group.id(), |_, existing| Arc::ptr_eq(existing, &cell));
                    }
                }
            });
        }
        expired_count
    }

    /// Expires offsets every `period` (Kafka's `offsets.retention.check.interval.ms`) until the
    /// coordinator stops.
    pub async fn expire_offsets_every(&self, period: Duration, retention: Duration) {
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let expired = self.expire_offsets(retention);
            if expired > 0 {
                tracing::info!(expired, "committed offsets expired");
            }
        }
    }

    /// Every committed offset of a group, as `(topic, partition, offset)`; `None` for an
    /// unknown group.
    pub fn committed_offsets(&self, group_id: &str) -> Option<Vec<(String, i32, i64)>> {
        let cell = self.get(group_id)?;
        Some(cell.read(|group| {
            group
                .offsets()
                .iter()
                .map(|(topic, partition, c)| (topic.to_string(), partition, c.offset))
                .collect()
        }))
    }

    /// Every group id, sorted.
    pub fn group_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.groups.iter().map(|e| e.key().clone()).collect();
        ids.sort();
        ids
    }

    /// An unknown group is reported Dead with no members, as Kafka does.
    pub fn describe(&self, group_id: &str) -> GroupSummary {
        match self.get(group_id) {
            Some(cell) => cell.read(Group::describe),
            None => GroupSummary {
                state: GroupState::Dead.name(),
                protocol_type: String::new(),
                protocol_data: String::new(),
                members: Vec::new(),
            },
        }
    }

    /// Groups sorted by id, keeping those whose state is in `states` (case-insensitive, as
    /// Kafka compares them); an empty filter keeps all.
    pub fn list(&self, states: &[String]) -> Vec<GroupListing> {
        let states: Vec<String> = states.iter().map(|s| s.trim().to_lowercase()).collect();
        let mut listed: Vec<GroupListing> = self
            .all()
            .iter()
            .map(|cell| cell.read(Group::listing))
            .filter(|g| g.state != GroupState::Dead.name())
            .filter(|g| states.is_empty() || states.contains(&g.state.to_lowercase()))
            .collect();
        listed.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        listed
    }

    /// DeleteGroups: an Empty group and its offsets go; others are refused.
    pub fn delete(&self, group_id: &str) -> Result<(), ResponseError> {
        let cell = self.get(group_id).ok_or(ResponseError::GroupIdNotFound)?;
        cell.with(&self.shutdown, |group, _| {
            if group.state() == GroupState::Empty {
                if let Some(log) = &self.offsets_log {
                    let deletion = OffsetChange::DeleteGroup {
                        group: group_id.to_string(),
                    };
                    log.append(&[deletion])
                        .map_err(|_| ResponseError::KafkaStorageError)?;
                }
            }
            group.delete()?;
            // Removed while the group's lock is held, so no request can see it half-deleted;
            // one that already holds the cell finds it Dead.
            self.groups
                .remove_if(group_id, |_, existing| Arc::ptr_eq(existing, &cell));
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use messages::Protocol;

    fn coordinator(delay_ms: u64) -> (Arc<GroupCoordinator>, CancellationToken) {
        let shutdown = CancellationToken::new();
        let timing = Timing {
            initial_rebalance_delay: Duration::from_millis(delay_ms),
            ..Timing::default()
        };
        (
            Arc::new(GroupCoordinator::new(timing, shutdown.clone())),
            shutdown,
        )
    }

    /// A v3 JoinGroup: no MEMBER_ID_REQUIRED round, so it parks at once.
    fn join_request() -> JoinRequest {
        JoinRequest {
            member_id: String::new(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 60_000,
            protocol_type: "consumer".into(),
            protocols: vec![Protocol {
                name: "range".into(),
                metadata: bytes::Bytes::new(),
            }],
            require_known_member_id: false,
            supports_skip_assignment: false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_timer_task_ends_the_initial_delay_on_tokio_time() {
        let (groups, _shutdown) = coordinator(3_000);
        let started = tokio::time::Instant::now();
        let joining = {
            let groups = groups.clone();
            tokio::spawn(async move { groups.join("g", join_request()).await })
        };
        let joined = joining.await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_millis(3_000));
        assert_eq!((joined.error, joined.generation_id), (None, 1));
        assert_eq!(groups.describe("g").state, "CompletingRebalance");
    }

    #[tokio::test(start_paused = true)]
    async fn a_parked_join_is_sent_elsewhere_when_the_coordinator_stops() {
        let (groups, shutdown) = coordinator(3_000);
        let joining = {
            let groups = groups.clone();
            tokio::spawn(async move { groups.join("g", join_request()).await })
        };
        tokio::task::yield_now().await;
        shutdown.cancel();
        let joined = joining.await.unwrap();
        assert_eq!(joined.error, Some(ResponseError::NotCoordinator));
    }

    #[tokio::test]
    async fn a_commit_without_generation_creates_a_group_that_delete_removes() {
        let (groups, _shutdown) = coordinator(0);
        let commit = OffsetCommit {
            topic: "t".into(),
            partition: 0,
            offset: 42,
            leader_epoch: -1,
            metadata: None,
        };
        assert_eq!(
            groups.commit_offsets("simple", "", None, -1, vec![commit], -1, 8),
            Ok(vec![None])
        );
        assert_eq!(groups.group_ids(), vec!["simple".to_string()]);
        assert_eq!(
            groups.committed_offsets("simple"),
            Some(vec![("t".to_string(), 0, 42)])
        );
        assert_eq!(groups.delete("simple"), Ok(()));
        assert!(groups.group_ids().is_empty());
        assert_eq!(groups.describe("simple").state, "Dead");
        assert_eq!(groups.delete("simple"), Err(ResponseError::GroupIdNotFound));
    }
}
