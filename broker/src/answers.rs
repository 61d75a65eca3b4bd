//! The answers of one connection, written strictly in request order.
//!
//! An acks=all produce with a data directory is answered once its appends are on disk. Until
//! then the connection goes on reading: further produces are appended and their answers queue
//! behind it, so the produces of one connection (a producer keeps up to five in flight) share a
//! sync instead of each waiting for its own. Any other request waits until every earlier answer
//! is written, so nothing but a produce ever overtakes the answer to an earlier request.

use std::collections::VecDeque;
use std::net::SocketAddr;

use kafka_protocol::messages::ApiKey;
use tokio::net::tcp::OwnedWriteHalf;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::handler::{Deferred, Reply};
use crate::state::BrokerState;

/// Requests read ahead of their answers at most: the five a producer keeps in flight, with room.
pub const MAX_QUEUED: usize = 16;

enum Answer {
    Known(Reply, Option<ApiKey>),
    Later(Deferred, Option<ApiKey>),
}

/// The connection must close (the reason is logged where it is found).
pub struct Closing;

pub struct Answers {
    queue: VecDeque<Answer>,
    answered: u64,
    /// The broker's shutdown, which cuts a write short.
    shutdown: CancellationToken,
}

impl Answers {
    pub fn new(shutdown: CancellationToken) -> Self {
        Answers {
            queue: VecDeque::new(),
            answered: 0,
            shutdown,
        }
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Queues the reply to the request just handled.
    pub fn push(&mut self, reply: Reply, api: Option<ApiKey>) {
        self.queue.push_back(match reply {
            Reply::Later(later) => Answer::Later(later, api),
            known => Answer::Known(known, api),
        });
    }

    /// Completes once the oldest answer is known. Cancel-safe: a wait cut short resumes.
    pub async fn oldest_known(&mut self) {
        if let Some(oldest) = self.queue.front_mut() {
            if let Answer::Later(later, api) = oldest {
                let reply = later.0.as_mut().await;
                *oldest = Answer::Known(reply, *api);
            }
        }
    }

    /// Writes the answers known at the head of the queue, in order.
    pub async fn write_known(
        &mut self,
        writer: &mut OwnedWriteHalf,
        state: &BrokerState,
        peer: SocketAddr,
    ) -> Result<(), Closing> {
        while let Some(Answer::Known(..)) = self.queue.front() {
            let Some(Answer::Known(reply, api)) = self.queue.pop_front() else {
                unreachable!("the front was just seen known");
            };
            self.write(reply, api, writer, state, peer).await?;
        }
        Ok(())
    }

    /// Waits for and writes every queued answer.
    pub async fn write_all(
        &mut self,
        writer: &mut OwnedWriteHalf,
        state: &BrokerState,
        peer: SocketAddr,
    ) -> Result<(), Closing> {
        while !self.queue.is_empty() {
            self.oldest_known().await;
            self.write_known(writer, state, peer).await?;
        }
        Ok(())
    }

    async fn write(
        &mut self,
        reply: Reply,
        api: Option<ApiKey>,
        writer: &mut OwnedWriteHalf,
        state: &BrokerState,
        peer: SocketAddr,
    ) -> Result<(), Closing> {
        match reply {
            // The permit (a fetch answer's share of the fetch memory budget) is given back
            // once the frame is written, or the connection closed.
            Reply::Frame(out, _permit) => {
                if let Some(delay) = api.and_then(|api| state.faults.delay(api)) {
                    tokio::time::sleep(delay).await;
                }
                // One writev for the frame and the stored batches it carries, as the socket
                // takes them.
                let timeout = state.config.write_timeout;
                let written = tokio::select! {
                    written = tokio::time::timeout(timeout, out.write_to(writer)) => written,
                    _ = self.shutdown.cancelled() => return Err(Closing),
                };
                match written {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        debug!(%peer, "write failed: {e}");
                        return Err(Closing);
                    }
                    Err(_) => {
                        info!(%peer, "closing connection: an answer not taken within {timeout:?}");
                        return Err(Closing);
                    }
                }
                self.answered += 1;
                if state
                    .faults
                    .close_after()
                    .is_some_and(|n| self.answered >= n)
                {
                    let answered = self.answered;
                    info!(%peer, "closing connection: fault injection after {answered} requests");
                    return Err(Closing);
                }
                Ok(())
            }
            Reply::Silent => Ok(()),
            Reply::Close(reason) => {
                info!(%peer, "closing connection: {reason}");
                Err(Closing)
            }
            Reply::Later(_) => unreachable!("a known answer is never deferred"),
        }
    }
}
