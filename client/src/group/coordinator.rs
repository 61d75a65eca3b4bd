//! The route to a group's coordinator: found with FindCoordinator, remembered until an error says
//! it moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a broken connection), then found again.
//!
//! Group requests travel over connections of their own, as Java's consumer keeps a separate
//! coordinator connection: a fetch parked for its max wait must not hold up a heartbeat.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::protocol::Request;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;

use crate::client::Client;
use crate::connection::BrokerConnection;
use crate::coordinator::KeyType;
use crate::error::{Error, Result, ServerError};
use crate::metadata::BrokerInfo;

/// Asks any broker which one coordinates `group`, retrying while none is available yet.
pub async fn find_coordinator(client: &Client, group: &str) -> Result<BrokerInfo> {
    let attempt = || crate::coordinator::find_coordinator(client, KeyType::Group, group);
    client
        .config()
        .retry
        .run("FindCoordinator", attempt, |_| {})
        .await
}

/// True for the codes after which the coordinator must be looked up again.
pub fn is_coordinator_error(e: &Error) -> bool {
    match e {
        Error::Transport(_) => true,
        Error::Server(s) => matches!(
            s.kind(),
            ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable
        ),
        _ => false,
    }
}

/// A group's coordinator, shared by the poll loop and the heartbeat task.
#[derive(Clone)]
pub struct Coordinator {
    client: Client,
    group: Arc<str>,
    known: Arc<Mutex<Option<BrokerInfo>>>,
}

impl Coordinator {
    pub fn new(client: &Client, group: &str) -> Self {
        Self {
            client: client.with_own_connections(),
            group: group.into(),
            known: Arc::default(),
        }
    }

    /// Over `client`'s own connections, for one-off calls (admin) that park nothing.
    pub fn sharing(client: &Client, group: &str) -> Self {
        Self {
            client: client.clone(),
            group: group.into(),
            known: Arc::default(),
        }
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The coordinator as last found, if it is still believed.
    pub fn known(&self) -> Option<BrokerInfo> {
        self.known.lock().clone()
    }

    pub fn mark_unknown(&self, why: &str) {
        if let Some(old) = self.known.lock().take() {
            tracing::info!(group = %self.group, coordinator = old.id, why, "coordinator lost");
        }
    }

    /// A connection to the coordinator, finding it first if needed.
    pub async fn connection(&self) -> Result<Arc<BrokerConnection>> {
        let known = self.known();
        let node = match known {
            Some(node) => node,
            None => {
                let node = find_coordinator(&self.client, &self.group).await?;
                tracing::debug!(group = %self.group, coordinator = node.id, "coordinator found");
                *self.known.lock() = Some(node.clone());
                node
            }
        };
        match self.client.broker(node.id).await {
            Ok(conn) => Ok(conn),
            Err(e) => {
                self.mark_unknown(&e.to_string());
                Err(e)
            }
        }
    }

    /// Sends one request to the coordinator; `timeout` overrides the request timeout (a parked
    /// JoinGroup may take the whole rebalance timeout). Errors that say the coordinator moved
    /// make it be looked up again on the next call; retrying is the caller's choice.
    pub async fn call<R: Request>(
        &self,
        build: impl FnOnce(i16) -> R,
        timeout: Option<Duration>,
    ) -> Result<R::Response> {
        let conn = self.connection().await?;
        let answer = match timeout {
            Some(t) => conn.call_with_timeout(build, t).await,
            None => conn.call(build).await,
        };
        if let Err(e) = &answer {
            if is_coordinator_error(e) {
                self.mark_unknown(&e.to_string());
            }
        }
        answer
    }

    /// The version the coordinator speaks for `key`.
    pub async fn version(&self, key: kafka_protocol::messages::ApiKey) -> Result<i16> {
        self.connection().await?.version(key as i16)
    }

    /// Forgets the coordinator if `code` says it moved, and turns the code into an error.
    pub fn check(&self, code: i16) -> Result<(), ServerError> {
        let result = ServerError::check(code);
        if let Err(e) = &result {
            if is_coordinator_error(&Error::Server(e.clone())) {
                self.mark_unknown(&e.to_string());
            }
        }
        result
    }
}
