//! Kafka transactions for a producer with a transactional id: [`Producer::begin_transaction`],
//! records sent as usual, [`Producer::send_offsets_to_transaction`] for a consume-transform-
//! produce loop, then [`Producer::commit_transaction`] or [`Producer::abort_transaction`].
//!
//! While a transaction is open every batch is marked transactional, and before the first batch
//! of a partition goes out the sender adds the partition to the transaction
//! (AddPartitionsToTxn, at the transaction coordinator). Committing first flushes: EndTxn is
//! sent only once every record of the transaction is acknowledged, and a transaction with a
//! failed batch cannot commit (it must be aborted). A producer fenced by a newer instance of
//! its transactional id stops for good, as Kafka's does.
//!
//! The caller does not send from other tasks while beginning or ending a transaction: a record
//! sent in between would fall on either side of the boundary.

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId, ProducerId,
    TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::identity::ProducerIdAndEpoch;
use super::shared::Shared;
use super::Producer;
use crate::client::{topic_name, Client};
use crate::connection::BrokerConnection;
use crate::coordinator::{find_coordinator, KeyType};
use crate::error::{Error, Result, ServerError};
use crate::group::Generation;

/// What the open transaction holds so far.
#[derive(Debug, Default)]
pub struct TxnProgress {
    pub active: bool,
    /// Partitions already added to the transaction.
    pub partitions: HashSet<(Arc<str>, i32)>,
    /// A group's offsets were added (AddOffsetsToTxn).
    pub offsets: bool,
    /// The first batch of the transaction that failed: the transaction can only be aborted.
    pub failed: Option<Error>,
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

fn check(code: i16, what: &str) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    Err(ServerError::new(code)
        .message(Some(what.to_string()))
        .into())
}

async fn coordinator(
    client: &Client,
    key_type: KeyType,
    key: &str,
) -> Result<Arc<BrokerConnection>> {
    let node = find_coordinator(client, key_type, key).await?;
    client.broker(node.id).await
}

/// AddPartitionsToTxn for `partitions` (v3 and below: one transaction per request).
pub(super) async fn add_partitions(shared: &Shared, partitions: &[(Arc<str>, i32)]) -> Result<()> {
    let (id, producer) = identity(shared).await?;
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for (topic, partition) in partitions {
        match topics.iter_mut().find(|t| t.name.0.as_str() == &**topic) {
            Some(t) => t.partitions.push(*partition),
            None => topics.push(
                AddPartitionsToTxnTopic::default()
                    .with_name(topic_name(topic))
                    .with_partitions(vec![*partition]),
            ),
        }
    }
    let conn = coordinator(&shared.client, KeyType::Transaction, &id).await?;
    let resp = conn
        .call(|_| {
            AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(s(&id)))
                .with_v3_and_below_producer_id(ProducerId(producer.producer_id))
                .with_v3_and_below_producer_epoch(producer.epoch)
                .with_v3_and_below_topics(topics)
        })
        .await?;
    for topic in &resp.results_by_topic_v3_and_below {
        for p in &topic.results_by_partition {
            check(
                p.partition_error_code,
                &format!("AddPartitionsToTxn {}-{}", topic.name.0, p.partition_index),
            )?;
        }
    }
    Ok(())
}

/// The transactional id and the producer's id and epoch.
async fn identity(shared: &Shared) -> Result<(String, ProducerIdAndEpoch)> {
    let id = shared
        .config
        .transactional_id
        .clone()
        .ok_or(Error::NotTransactional)?;
    Ok((id, shared.producer_id().await?))
}

impl Producer {
    fn shared(&self) -> &Shared {
        &self.handle.shared
    }

    /// Starts a transaction: what is sent from now on until the end is committed or aborted as
    /// a whole. Anything sent before is delivered first.
    pub async fn begin_transaction(&self) -> Result<()> {
        identity(self.shared()).await?;
        self.flush().await;
        let mut txn = self.shared().txn.lock();
        if txn.active {
            return Err(Error::TransactionState("a transaction is already open"));
        }
        *txn = TxnProgress {
            active: true,
            ..TxnProgress::default()
        };
        Ok(())
    }

    /// Commits `offsets` (topic, partition, next offset to read) for `group_id` as part of
    /// the open transaction: they become the group's committed offsets only if it commits.
    /// Sent without a member's identity (a consumer outside the group protocol); a group
    /// member passes its generation with [`send_offsets_as_member`](Self::send_offsets_as_member).
    pub async fn send_offsets_to_transaction(
        &self,
        group_id: &str,
        offsets: &[(String, i32, i64)],
    ) -> Result<()> {
        self.send_offsets_as_member(group_id, &Generation::none(), None, offsets)
            .await
    }

    /// [`send_offsets_to_transaction`](Self::send_offsets_to_transaction) with the group
    /// member's generation (Kafka's `ConsumerGroupMetadata`, KIP-447): a member removed from
    /// the group since gets ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID, and must abort.
    pub async fn send_offsets_as_member(
        &self,
        group_id: &str,
        generation: &Generation,
        group_instance_id: Option<&str>,
        offsets: &[(String, i32, i64)],
    ) -> Result<()> {
        let shared = self.shared();
        if !shared.txn.lock().active {
            return Err(Error::TransactionState("no transaction is open"));
        }
        let (id, producer) = identity(shared).await?;
        let conn = coordinator(&shared.client, KeyType::Transaction, &id).await?;
        let resp = conn
            .call(|_| {
                AddOffsetsToTxnRequest::default()
                    .with_transactional_id(TransactionalId(s(&id)))
                    .with_producer_id(ProducerId(producer.producer_id))
                    .with_producer_epoch(producer.epoch)
                    .with_group_id(GroupId(s(group_id)))
            })
            .await?;
        check(resp.error_code, "AddOffsetsToTxn")?;
        shared.txn.lock().offsets = true;
        let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
        for (topic, partition, offset) in offsets {
            let entry = TxnOffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(*offset)
                .with_committed_leader_epoch(-1);
            match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                Some(t) => t.partitions.push(entry),
                None => topics.push(
                    TxnOffsetCommitRequestTopic::default()
                        .with_name(topic_name(topic))
                        .with_partitions(vec![entry]),
                ),
            }
        }
        let group = coordinator(&shared.client, KeyType::Group, group_id).await?;
        let resp = group
            .call(|version| {
                let request = TxnOffsetCommitRequest::default()
                    .with_transactional_id(TransactionalId(s(&id)))
                    .with_group_id(GroupId(s(group_id)))
                    .with_producer_id(ProducerId(producer.producer_id))
                    .with_producer_epoch(producer.epoch)
                    .with_topics(topics);
                // The member's identity exists from v3 (KIP-447).
                if version < 3 {
                    return request;
                }
                request
                    .with_generation_id(generation.id)
                    .with_member_id(s(&generation.member_id))
                    .with_group_instance_id(group_instance_id.map(s))
            })
            .await?;
        for topic in &resp.topics {
            for p in &topic.partitions {
                check(p.error_code, "TxnOffsetCommit")?;
            }
        }
        Ok(())
    }

    /// Delivers every record of the transaction, then commits it; a transaction with a failed
    /// record is not committed (the error says why; abort it).
    pub async fn commit_transaction(&self) -> Result<()> {
        self.end_transaction(true).await
    }

    /// Delivers what is in flight, then aborts the transaction: read_committed consumers never
    /// see its records.
    pub async fn abort_transaction(&self) -> Result<()> {
        self.end_transaction(false).await
    }

    async fn end_transaction(&self, commit: bool) -> Result<()> {
        let shared = self.shared();
        if !shared.txn.lock().active {
            return Err(Error::TransactionState("no transaction is open"));
        }
        self.flush().await;
        if let Some(fatal) = shared.fatal_error() {
            return Err(fatal);
        }
        let started = {
            let txn = shared.txn.lock();
            if commit {
                if let Some(failed) = &txn.failed {
                    return Err(Error::TransactionAborted(Box::new(failed.clone())));
                }
            }
            !txn.partitions.is_empty() || txn.offsets
        };
        // Nothing reached the coordinator: there is nothing for it to end.
        if started {
            let (id, producer) = identity(shared).await?;
            let conn = coordinator(&shared.client, KeyType::Transaction, &id).await?;
            let resp = conn
                .call(|_| {
                    EndTxnRequest::default()
                        .with_transactional_id(TransactionalId(s(&id)))
                        .with_producer_id(ProducerId(producer.producer_id))
                        .with_producer_epoch(producer.epoch)
                        .with_committed(commit)
                })
                .await?;
            check(
                resp.error_code,
                if commit {
                    "EndTxn commit"
                } else {
                    "EndTxn abort"
                },
            )?;
        }
        *shared.txn.lock() = TxnProgress::default();
        Ok(())
    }
}
