//! Rebalance callbacks (Java's `ConsumerRebalanceListener`), called inside `poll` when the
//! member's partitions change. Every method has a default that does nothing, so a listener
//! implements only what it cares about; a channel sender is a listener too, turning the
//! callbacks into [`RebalanceEvent`]s for whoever reads the other end.

use tokio::sync::mpsc::UnboundedSender;

use crate::consumer::TopicPartition;

pub trait RebalanceListener: Send {
    /// The member is about to give these partitions up, while it still owns them: the last
    /// moment to commit what was processed. Returns offsets (the next to read, per partition)
    /// to commit before they go; with auto-commit on, the member has already committed its
    /// positions.
    ///
    /// Eager assignors revoke everything at the start of every rebalance; cooperative-sticky
    /// revokes only partitions that move to another member.
    fn on_partitions_revoked(&mut self, _revoked: &[TopicPartition]) -> Vec<(TopicPartition, i64)> {
        Vec::new()
    }

    /// The member now owns these partitions too (all of them after an eager rebalance, the
    /// added ones after a cooperative one; possibly none). Positions start at the committed
    /// offsets, else per `auto.offset.reset`.
    fn on_partitions_assigned(&mut self, _assigned: &[TopicPartition]) {}

    /// The member lost these partitions without a chance to revoke them: it was dropped from
    /// the group (session timeout, poll timeout, fencing), so another member may already own
    /// them and committing them would fail.
    fn on_partitions_lost(&mut self, _lost: &[TopicPartition]) {}
}

/// What a channel listener sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebalanceEvent {
    Revoked(Vec<TopicPartition>),
    Assigned(Vec<TopicPartition>),
    Lost(Vec<TopicPartition>),
}

/// The listener a member has when nobody sets one.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopListener;

impl RebalanceListener for NoopListener {}

impl RebalanceListener for UnboundedSender<RebalanceEvent> {
    fn on_partitions_revoked(&mut self, revoked: &[TopicPartition]) -> Vec<(TopicPartition, i64)> {
        // A closed receiver only means nobody is watching any more.
        let _ = self.send(RebalanceEvent::Revoked(revoked.to_vec()));
        Vec::new()
    }

    fn on_partitions_assigned(&mut self, assigned: &[TopicPartition]) {
        let _ = self.send(RebalanceEvent::Assigned(assigned.to_vec()));
    }

    fn on_partitions_lost(&mut self, lost: &[TopicPartition]) {
        let _ = self.send(RebalanceEvent::Lost(lost.to_vec()));
    }
}
