//! Connections to brokers: a TCP stream, the ApiVersions handshake, and replacement of a broken
//! connection on next use.
//!
//! [`messenger`] does the pipelining over any stream; [`versions`] agrees on versions;
//! [`BrokerConnection`] ties them to a socket; [`ConnectionSlot`] owns the connection to one
//! address and reconnects when the previous one was poisoned.

pub mod messenger;
pub mod versions;

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::protocol::Request;
use tokio::net::TcpStream;

use crate::error::{Error, Result, TransportError};
pub use messenger::Outgoing;
use messenger::{Messenger, PendingAnswer};
use versions::ApiVersions;

/// How connections are made and how long requests may take.
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    pub client_id: String,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// Answers above this size break the connection instead of being buffered.
    pub max_response_bytes: usize,
}

/// A live, version-negotiated connection to one broker.
pub struct BrokerConnection {
    messenger: Messenger<TcpStream>,
    versions: ApiVersions,
    request_timeout: Duration,
}

impl BrokerConnection {
    pub async fn connect(addr: &str, settings: &ConnectionSettings) -> Result<Self> {
        // Resolved first, so that a name that does not resolve is told apart from a refusal.
        let connect = async {
            let resolved: Vec<std::net::SocketAddr> = tokio::net::lookup_host(addr)
                .await
                .map_err(|source| TransportError::Unresolved {
                    addr: addr.to_string(),
                    source: Arc::new(source),
                })?
                .collect();
            TcpStream::connect(&resolved[..])
                .await
                .map_err(|source| TransportError::Connect {
                    addr: addr.to_string(),
                    source: Arc::new(source),
                })
        };
        let stream = match tokio::time::timeout(settings.connect_timeout, connect).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => {
                return Err(TransportError::ConnectTimeout {
                    addr: addr.to_string(),
                    after: settings.connect_timeout,
                }
                .into())
            }
        };
        // Requests are small and latency matters more than packet count.
        let _ = stream.set_nodelay(true);
        let messenger = Messenger::new(
            stream,
            addr.to_string(),
            &settings.client_id,
            settings.max_response_bytes,
        );
        // The handshake is part of setting the connection up, bounded as the connect is:
        // librdkafka likewise gives ApiVersions its own, shorter timeout
        // (api.version.request.timeout.ms, 10 s) than other requests'. A listener that accepts
        // and stays silent is then reported in seconds, not after the request timeout.
        let handshake_timeout = settings.connect_timeout.min(settings.request_timeout);
        let versions = match versions::handshake(&messenger, handshake_timeout).await {
            Err(Error::Transport(TransportError::Timeout { .. })) => {
                return Err(TransportError::Silent {
                    addr: addr.to_string(),
                    after: handshake_timeout,
                }
                .into())
            }
            other => other?,
        };
        tracing::debug!(addr, "connected");
        Ok(Self {
            messenger,
            versions,
            request_timeout: settings.request_timeout,
        })
    }

    pub fn addr(&self) -> &str {
        self.messenger.addr()
    }

    pub fn is_broken(&self) -> bool {
        self.messenger.poisoned().is_some()
    }

    /// The version the request for `key` goes out at.
    pub fn version(&self, key: i16) -> Result<i16> {
        Ok(self.versions.negotiate(key)?)
    }

    /// Negotiates the version, lets `build` fill the request for it, sends it, decodes the answer.
    pub async fn call<R: Request>(&self, build: impl FnOnce(i16) -> R) -> Result<R::Response> {
        self.call_with_timeout(build, self.request_timeout).await
    }

    /// As [`call`](Self::call), for requests the broker may hold (a Fetch long poll).
    pub async fn call_with_timeout<R: Request>(
        &self,
        build: impl FnOnce(i16) -> R,
        timeout: Duration,
    ) -> Result<R::Response> {
        let version = self.version(R::KEY)?;
        self.messenger
            .request(&build(version), version, timeout)
            .await
    }

    /// Writes the request now and returns its answer to come. Requests started one after another
    /// (each `start` awaited before the next) reach the broker, and are answered, in that order;
    /// the idempotent producer keeps several batches of a partition in flight this way.
    pub async fn start<O: Outgoing>(
        &self,
        build: impl FnOnce(i16) -> O,
    ) -> Result<PendingCall<O::Request>> {
        let version = self.version(O::Request::KEY)?;
        let answer = self.messenger.send(&build(version), version).await?;
        Ok(PendingCall {
            answer,
            version,
            timeout: self.request_timeout,
            request: PhantomData,
        })
    }

    /// Sends a request the broker does not answer (Produce with acks=0).
    pub async fn send_only<O: Outgoing>(&self, build: impl FnOnce(i16) -> O) -> Result<()> {
        let version = self.version(O::Request::KEY)?;
        self.messenger.send_only(&build(version), version).await
    }
}

/// A request written by [`BrokerConnection::start`], its answer not read yet.
pub struct PendingCall<R> {
    answer: PendingAnswer,
    version: i16,
    timeout: Duration,
    request: PhantomData<fn() -> R>,
}

impl<R: Request> PendingCall<R> {
    /// Waits (up to the connection's request timeout) for the answer and decodes it.
    pub async fn answer(self) -> Result<R::Response> {
        let frame = self.answer.wait(self.timeout).await?;
        messenger::decode_response::<R>(frame, self.version)
    }
}

/// The connection to one address, made on first use and remade after it breaks.
pub struct ConnectionSlot {
    addr: String,
    // An async lock: concurrent users of a broken connection wait for one reconnect instead of
    // each opening their own.
    current: tokio::sync::Mutex<Option<Arc<BrokerConnection>>>,
}

impl ConnectionSlot {
    pub fn new(addr: String) -> Self {
        Self {
            addr,
            current: tokio::sync::Mutex::new(None),
        }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// A working connection, reconnecting if the last one broke.
    pub async fn get(&self, settings: &ConnectionSettings) -> Result<Arc<BrokerConnection>> {
        let mut current = self.current.lock().await;
        if let Some(conn) = current.as_ref().filter(|c| !c.is_broken()) {
            return Ok(Arc::clone(conn));
        }
        if current.take().is_some() {
            tracing::info!(addr = %self.addr, "reconnecting");
        }
        let conn = Arc::new(BrokerConnection::connect(&self.addr, settings).await?);
        *current = Some(Arc::clone(&conn));
        Ok(conn)
    }

    /// The current connection if it is up, without connecting.
    pub fn peek(&self) -> Option<Arc<BrokerConnection>> {
        let current = self.current.try_lock().ok()?;
        current.as_ref().filter(|c| !c.is_broken()).cloned()
    }
}
