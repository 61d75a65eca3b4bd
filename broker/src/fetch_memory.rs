//! The bytes of fetch answers built but not yet written, across all connections, held within a
//! budget: a reader that never reads keeps its answer (and the batches it refers to) alive, so
//! without a bound thirty such readers pin thirty times `max_bytes`.
//!
//! A fetch takes its answer's size from the budget before it answers and gives it back once the
//! connection has written it (or given up: the write timeout). When the budget is short, a fetch
//! answers with what fits; when it is spent, the fetch waits for it, until its deadline.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

#[derive(Debug)]
pub struct FetchMemory {
    held: AtomicUsize,
    max: usize,
    released: Notify,
}

/// Bytes of one answer taken from the budget; given back when dropped.
#[derive(Debug)]
pub struct FetchPermit {
    memory: Arc<FetchMemory>,
    bytes: usize,
}

impl Drop for FetchPermit {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.memory.held.fetch_sub(self.bytes, Ordering::AcqRel);
            self.memory.released.notify_waiters();
        }
    }
}

impl FetchMemory {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            held: AtomicUsize::new(0),
            max,
            released: Notify::new(),
        })
    }

    /// Bytes of answers not yet written.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// What a fetch may gather now.
    pub fn available(&self) -> usize {
        self.max.saturating_sub(self.held())
    }

    /// Takes `bytes` (at most the whole budget: one batch larger than it must still be served),
    /// or nothing if they are not available.
    pub fn try_take(self: &Arc<Self>, bytes: usize) -> Option<FetchPermit> {
        let bytes = bytes.min(self.max);
        let mut held = self.held();
        loop {
            let after = held.checked_add(bytes).filter(|&after| after <= self.max)?;
            match self
                .held
                .compare_exchange_weak(held, after, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    return Some(FetchPermit {
                        memory: self.clone(),
                        bytes,
                    })
                }
                Err(now) => held = now,
            }
        }
    }

    /// Completes when some answer gives its bytes back. Create (and `enable`) it before checking
    /// the budget, so a release in between is not missed.
    pub fn released(&self) -> Notified<'_> {
        self.released.notified()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_hold_bytes_until_dropped() {
        let memory = FetchMemory::new(100);
        let a = memory.try_take(60).unwrap();
        assert_eq!((memory.held(), memory.available()), (60, 40));
        assert!(memory.try_take(41).is_none());
        let b = memory.try_take(40).unwrap();
        drop(a);
        assert_eq!(memory.held(), 40);
        drop(b);
        // More than the whole budget takes the whole budget.
        let big = memory.try_take(1000).unwrap();
        assert_eq!(memory.held(), 100);
        drop(big);
        assert_eq!(memory.held(), 0);
    }
}
