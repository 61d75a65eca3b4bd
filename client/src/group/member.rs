//! What the poll loop, the heartbeat task and the commit queue share: the member's state, its
//! configuration and the route to the coordinator, plus the calls all of them make (LeaveGroup,
//! OffsetCommit).
//!
//! Commits, synchronous or not, go through one queue served in order, so an older asynchronous
//! commit can never land after a newer one and move the committed offset backwards (Kafka's
//! client gets the same guarantee from sending in call order over one connection).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use kafka_protocol::messages::LeaveGroupRequest;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::config::GroupConfig;
use super::coordinator::Coordinator;
use super::offsets::{commit_once, CommitAs};
use super::requests::{leave_answer, leave_request};
use super::state::{Generation, MemberState};
use crate::client::Client;
use crate::consumer::TopicPartition;
use crate::error::{Error, Result, ServerError};

/// The shared part of a group member. Cheap to clone.
#[derive(Clone)]
pub struct Member {
    pub config: Arc<GroupConfig>,
    pub coordinator: Coordinator,
    state: Arc<Mutex<MemberState>>,
    /// Wakes the heartbeat task when the state changed in a way its schedule depends on.
    wake: Arc<Notify>,
}

impl Member {
    pub fn new(client: &Client, config: GroupConfig) -> Self {
        Self {
            coordinator: Coordinator::new(client, &config.group_id),
            config: Arc::new(config),
            state: Arc::new(Mutex::new(MemberState::new(Instant::now()))),
            wake: Arc::new(Notify::new()),
        }
    }

    pub fn state(&self) -> MutexGuard<'_, MemberState> {
        self.state.lock()
    }

    pub fn wake_heartbeat(&self) {
        self.wake.notify_one();
    }

    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    pub fn instance_id(&self) -> Option<&str> {
        self.config.group_instance_id.as_deref()
    }

    /// LeaveGroup for `generation`'s member id. Errors are only logged: the member is gone from
    /// our side either way, and the session timeout removes it on the coordinator's.
    pub async fn leave(&self, member_id: &str, reason: &str) {
        if member_id.is_empty() {
            return;
        }
        let group = self.config.group_id.clone();
        let build = |v| -> LeaveGroupRequest {
            // A dynamic member leaves by member id only, as Kafka's client does.
            leave_request(&group, member_id, None, reason, v)
        };
        let result = match self.coordinator.call(build, None).await {
            Ok(resp) => leave_answer(resp).map_err(Error::from),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => tracing::info!(group = %group, member_id, reason, "left the group"),
            Err(e) => tracing::warn!(group = %group, member_id, %e, "LeaveGroup failed"),
        }
    }

    /// Commits `offsets` for the current generation, retrying while the coordinator moves or
    /// loads. A refusal that means the member lost its partitions resets the generation and
    /// fails with [`Error::CommitFailed`].
    pub async fn commit_now(&self, offsets: &BTreeMap<TopicPartition, i64>) -> Result<()> {
        if offsets.is_empty() {
            return Ok(());
        }
        let attempt = || async {
            let generation: Generation = self.state().commit_generation()?;
            let who = CommitAs {
                generation_id: generation.id,
                member_id: &generation.member_id,
                instance_id: self.instance_id(),
            };
            let refused = commit_once(&self.coordinator, &who, offsets).await?;
            let Some((tp, code)) = refused.first().cloned() else {
                return Ok(());
            };
            let mut state = self.state();
            for (_, code) in &refused {
                if let Some(e) = state.on_commit_error(&generation, *code) {
                    return Err(e);
                }
            }
            Err(ServerError::new(code)
                .topic(tp.topic)
                .partition(tp.partition)
                .into())
        };
        self.coordinator
            .client()
            .config()
            .retry
            .run("OffsetCommit", attempt, |_| {})
            .await
    }
}

/// The answer to a queued commit; await it, or drop it to let the commit finish unobserved
/// (a failure is then logged).
pub struct CommitFuture(oneshot::Receiver<Result<()>>);

impl Future for CommitFuture {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.0).poll(cx).map(|answer| {
            answer.unwrap_or_else(|_| {
                Err(Error::InvalidArgument(
                    "the group member closed before the commit was sent".into(),
                ))
            })
        })
    }
}

impl CommitFuture {
    /// The outcome if the commit has finished, without waiting.
    pub fn try_result(&mut self) -> Option<Result<()>> {
        match self.0.try_recv() {
            Ok(result) => Some(result),
            Err(oneshot::error::TryRecvError::Empty) => None,
            Err(oneshot::error::TryRecvError::Closed) => Some(Err(Error::InvalidArgument(
                "the group member closed before the commit was sent".into(),
            ))),
        }
    }
}

struct CommitJob {
    offsets: BTreeMap<TopicPartition, i64>,
    done: oneshot::Sender<Result<()>>,
}

/// Commits served one at a time, in the order submitted.
pub struct CommitQueue {
    jobs: Option<mpsc::UnboundedSender<CommitJob>>,
    worker: Option<JoinHandle<()>>,
}

impl CommitQueue {
    pub fn start(member: Member) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<CommitJob>();
        let worker = tokio::spawn(async move {
            while let Some(job) = rx.recv().await {
                let result = member.commit_now(&job.offsets).await;
                if let Err(e) = &result {
                    tracing::warn!(group = %member.config.group_id, %e, "offset commit failed");
                }
                let _ = job.done.send(result);
            }
        });
        Self {
            jobs: Some(tx),
            worker: Some(worker),
        }
    }

    pub fn submit(&self, offsets: BTreeMap<TopicPartition, i64>) -> CommitFuture {
        let (done, answer) = oneshot::channel();
        if let Some(jobs) = &self.jobs {
            // A send only fails after `drain`; the dropped sender then answers the caller.
            let _ = jobs.send(CommitJob { offsets, done });
        }
        CommitFuture(answer)
    }

    /// Waits for every commit submitted so far, then stops taking more.
    pub async fn drain(&mut self) {
        self.jobs = None;
        if let Some(worker) = self.worker.take() {
            if let Err(e) = worker.await {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
        }
    }
}

impl Drop for CommitQueue {
    fn drop(&mut self) {
        if let Some(worker) = &self.worker {
            worker.abort();
        }
    }
}
