//! Where a partition's log starts: retention by size (`retention.bytes`, at each append) and by
//! age (`retention.ms`, from the background task), and DeleteRecords, which an admin asks for.
//!
//! In memory a batch is the unit that goes; on disk whole segments go, as Kafka deletes them,
//! and the active segment stays unless its records have all expired (it is then rolled first).
//! Retention by size keeps the newest batch, as Kafka keeps a segment until the log holds
//! `retention.bytes` without it. DeleteRecords moves the log start to any offset up to the high
//! watermark; on disk that start is recorded beside the segments, so a restart starts there too.

use kafka_protocol::ResponseError;

use super::{LogState, PartitionLog};

impl LogState {
    /// Drops the oldest batches while the log would still hold `retention.bytes` without them,
    /// the condition on which Kafka deletes a segment. In memory a batch is a segment and the
    /// newest batch always stays; on disk whole segments go, and the active one stays.
    pub(super) fn apply_retention_bytes(&mut self) {
        let Some(keep) = self.policy.retention_bytes else {
            return;
        };
        if let Some(disk) = &mut self.disk {
            if let Some(first) = disk.apply_retention(keep) {
                self.drop_below(first);
            }
            return;
        }
        while self.batches.len() > 1 && self.bytes - self.batches[0].len >= keep {
            if let Some(oldest) = self.batches.pop_front() {
                self.bytes -= oldest.len;
            }
        }
        if let Some(first) = self.batches.front().map(|b| b.base_offset) {
            self.move_start(first);
        }
    }

    /// Forgets the batches that start below `first` (their segments are gone) and moves the log
    /// start there.
    fn drop_below(&mut self, first: i64) {
        while self.batches.front().is_some_and(|b| b.base_offset < first) {
            if let Some(oldest) = self.batches.pop_front() {
                self.bytes -= oldest.len;
            }
        }
        self.move_start(first);
    }

    fn move_start(&mut self, start: i64) {
        self.start = self.start.max(start).min(self.end);
        if let Some(txns) = &mut self.txns {
            txns.forget_below(self.start);
        }
    }

    /// The largest timestamp of the batches of each segment starting at `bases` (in order);
    /// `None` for an empty segment.
    fn segment_max_timestamps(&self, bases: &[i64]) -> Vec<Option<i64>> {
        let mut out = vec![None; bases.len()];
        let mut segment = 0;
        for batch in &self.batches {
            while segment + 1 < bases.len() && batch.base_offset >= bases[segment + 1] {
                segment += 1;
            }
            let max = out[segment].get_or_insert(i64::MIN);
            *max = (*max).max(batch.max_timestamp);
        }
        out
    }
}

impl PartitionLog {
    /// DeleteRecords: moves the log start to `offset` (-1: the high watermark), never back.
    /// Returns the log start after it (Kafka's low watermark).
    pub fn delete_records(&self, offset: i64) -> Result<i64, ResponseError> {
        let mut state = self.state.lock();
        let offset = if offset == -1 { state.end } else { offset };
        if offset < 0 || offset > state.end {
            return Err(ResponseError::OffsetOutOfRange);
        }
        if offset <= state.start {
            return Ok(state.start);
        }
        if let Some(disk) = &mut state.disk {
            disk.record_start(offset).map_err(|e| {
                tracing::error!("the log start offset could not be recorded: {e}");
                ResponseError::KafkaStorageError
            })?;
            if let Some(first) = disk.delete_segments_below(offset) {
                state.drop_below(first);
            }
        }
        // The batch holding the new start stays whole (its earlier records are skipped by
        // consumers); those wholly before it are no longer reachable.
        while state
            .batches
            .front()
            .is_some_and(|b| b.last_offset < offset)
        {
            if let Some(oldest) = state.batches.pop_front() {
                state.bytes -= oldest.len;
            }
        }
        state.move_start(offset);
        Ok(state.start)
    }

    /// `retention.ms`: drops, oldest first, the batches (segments on disk) whose newest record
    /// is older than `now_ms` minus the retention; returns how many went.
    pub fn expire(&self, now_ms: i64) -> usize {
        let mut state = self.state.lock();
        let Some(retention) = state.policy.retention_ms else {
            return 0;
        };
        let cutoff = now_ms.saturating_sub(retention);
        let state = &mut *state;
        let Some(bases) = state.disk.as_ref().map(|d| d.segment_bases()) else {
            let mut dropped = 0;
            while state
                .batches
                .front()
                .is_some_and(|b| b.max_timestamp < cutoff)
            {
                if let Some(oldest) = state.batches.pop_front() {
                    state.bytes -= oldest.len;
                    dropped += 1;
                }
            }
            let first = state.batches.front().map_or(state.end, |b| b.base_offset);
            state.move_start(first);
            return dropped;
        };
        let expired = state
            .segment_max_timestamps(&bases)
            .iter()
            .take_while(|max| max.is_none_or(|t| t < cutoff))
            .count();
        if expired == 0 {
            return 0;
        }
        let end = state.end;
        let Some(disk) = state.disk.as_mut() else {
            return 0;
        };
        if expired == bases.len() {
            // Every record has expired, the active segment's too: roll it so it can go.
            if let Err(e) = disk.roll_at(end) {
                tracing::warn!("cannot roll the active segment for retention: {e}");
                return 0;
            }
        }
        match disk.delete_oldest(expired) {
            Some(first) => {
                state.drop_below(first);
                expired
            }
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::append;
    use super::super::{Isolation, LogOffsets, PartitionLog};
    use crate::topic_config::LogPolicy;
    use kafka_protocol::ResponseError;

    fn keeping_for(log: &PartitionLog, ms: i64) {
        log.set_policy(LogPolicy {
            retention_ms: Some(ms),
            ..LogPolicy::default()
        });
    }

    #[test]
    fn delete_records_moves_the_start_within_the_log_only() {
        let log = PartitionLog::new();
        for _ in 0..4 {
            append(&log, 3, 10, 0);
        }
        assert_eq!(log.delete_records(13), Err(ResponseError::OffsetOutOfRange));
        assert_eq!(log.delete_records(-2), Err(ResponseError::OffsetOutOfRange));
        assert_eq!(log.delete_records(4), Ok(4));
        // The batch holding offset 4 stays, the one before goes; reads below 4 are out of range.
        assert_eq!(log.size_bytes(), 3 * protocol::batch::HEADER_LEN);
        assert!(log.read(3, 1000, true, Isolation::ReadUncommitted).is_err());
        let read = log.read(4, 1000, true, Isolation::ReadUncommitted).unwrap();
        assert_eq!(read.records.len(), 3);
        assert_eq!(log.delete_records(2), Ok(4), "never back");
        assert_eq!(log.delete_records(-1), Ok(12));
        assert_eq!(
            log.offsets(),
            LogOffsets {
                start: 12,
                stable: 12,
                end: 12
            }
        );
        assert_eq!(append(&log, 1, 10, 0), 12);
    }

    #[test]
    fn retention_ms_drops_what_is_older_from_the_front() {
        let log = PartitionLog::new();
        append(&log, 2, 1_000, 0);
        append(&log, 2, 5_000, 0);
        append(&log, 2, 2_000, 0); // older, but behind a younger batch: stays
        keeping_for(&log, 3_000);
        assert_eq!(log.expire(6_000), 1);
        assert_eq!(log.offsets().start, 2);
        assert_eq!(log.expire(6_000), 0);
        assert_eq!(log.expire(9_000), 2);
        assert_eq!(
            log.offsets(),
            LogOffsets {
                start: 6,
                stable: 6,
                end: 6
            }
        );
        log.set_policy(LogPolicy {
            retention_ms: None,
            ..LogPolicy::default()
        });
        append(&log, 2, 1, 0);
        assert_eq!(log.expire(i64::MAX), 0, "retention.ms=-1 keeps everything");
    }
}
