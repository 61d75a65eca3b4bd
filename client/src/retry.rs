//! When to try again: exponential backoff with a cap and a bounded number of retries, as Kafka's
//! `retry.backoff.ms` / `retry.backoff.max.ms` do. No jitter: the workshop values reproducible
//! timings over spreading a herd of clients, and tests check the exact schedule.

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt; 0 disables retrying.
    pub retries: u32,
    /// Delay before the first retry; each later one doubles it.
    pub backoff: Duration,
    /// Upper bound of a single delay.
    pub backoff_max: Duration,
}

impl Default for RetryPolicy {
    /// 10 retries, 100 ms doubling to 1 s: about 7 s in all, long enough to ride out a broker
    /// restart, short enough that a dead cluster is reported promptly.
    fn default() -> Self {
        Self {
            retries: 10,
            backoff: Duration::from_millis(100),
            backoff_max: Duration::from_secs(1),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        Self {
            retries: 0,
            ..Self::default()
        }
    }

    /// The delay before retry number `retry` (1 for the first retry), or `None` when retries are
    /// used up.
    pub fn delay(&self, retry: u32) -> Option<Duration> {
        if retry == 0 || retry > self.retries {
            return None;
        }
        let factor = 1u32.checked_shl(retry - 1).unwrap_or(u32::MAX);
        Some(
            self.backoff
                .checked_mul(factor)
                .unwrap_or(self.backoff_max)
                .min(self.backoff_max),
        )
    }

    /// Runs `op` until it succeeds, fails with an error that is not retriable, or retries run out.
    /// `on_retry` sees each retriable error first (to invalidate metadata, for instance).
    pub async fn run<T, F, Fut>(
        &self,
        what: &str,
        mut op: F,
        mut on_retry: impl FnMut(&Error),
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut retry = 0;
        loop {
            match op().await {
                Ok(v) => return Ok(v),
                Err(e) if e.is_retriable() => {
                    retry += 1;
                    let Some(delay) = self.delay(retry) else {
                        return Err(e);
                    };
                    tracing::debug!(%e, retry, ?delay, "{what} failed, retrying");
                    on_retry(&e);
                    tokio::time::sleep(delay).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{ServerError, TransportError};
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn doubles_up_to_the_cap_then_stops() {
        let p = RetryPolicy::default();
        let ms = |r| p.delay(r).map(|d| d.as_millis());
        assert_eq!(ms(0), None);
        assert_eq!(ms(1), Some(100));
        assert_eq!(ms(2), Some(200));
        assert_eq!(ms(4), Some(800));
        assert_eq!(ms(5), Some(1000));
        assert_eq!(ms(10), Some(1000));
        assert_eq!(ms(11), None);
        assert_eq!(RetryPolicy::none().delay(1), None);
        let huge = RetryPolicy {
            retries: u32::MAX,
            ..RetryPolicy::default()
        };
        assert_eq!(huge.delay(200), Some(Duration::from_secs(1)));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_retriable_errors_with_the_schedule() {
        let calls = AtomicU32::new(0);
        let start = tokio::time::Instant::now();
        let out = RetryPolicy::default()
            .run(
                "test",
                || async {
                    if calls.fetch_add(1, Ordering::SeqCst) < 3 {
                        Err(TransportError::Closed { addr: "x".into() }.into())
                    } else {
                        Ok(7)
                    }
                },
                |_| {},
            )
            .await
            .unwrap();
        assert_eq!(out, 7);
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        assert_eq!(start.elapsed(), Duration::from_millis(100 + 200 + 400));
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_at_once_on_a_fatal_error() {
        let calls = AtomicU32::new(0);
        let err = RetryPolicy::default()
            .run(
                "test",
                || async {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Err::<(), _>(ServerError::new(36).into())
                },
                |_| {},
            )
            .await
            .unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(err.server().map(|e| e.code), Some(36));
    }
}
