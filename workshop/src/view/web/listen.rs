//! The room view's connections: how many it keeps, and how long a request's head may take.
//!
//! A page in a browser opens a handful of connections (its event stream, a few requests). A
//! program on the laptop, or a page that tricks the browser, can open thousands and send nothing,
//! or send a request's head one byte at a time (slowloris). Neither may stop the room's page, so:
//!
//! - a request's head must arrive within [`HEADER_TIMEOUT`] (hyper's own timer: the clock starts
//!   when the server starts reading a head, an idle keep-alive connection included), and may be
//!   [`MAX_HEAD`] bytes at most;
//! - at most [`MAX_CONNECTIONS`] are open at once. One more evicts the oldest connection that has
//!   not yet sent a whole request head (idle, or slow); if every open connection is serving a
//!   request (event streams), the new one is closed at once.
//!
//! Bodies are bounded by the router ([`super::server::MAX_BODY`]); the event streams by the hub's
//! backlog ([`super::hub::BACKLOG`]). So the server's memory is bounded whatever its clients do.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

/// Connections open at once.
pub const MAX_CONNECTIONS: usize = 256;

/// How long a request's head may take to arrive, from the moment the server waits for it.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest request head read (hyper's read buffer; a longer head is refused with 431).
pub const MAX_HEAD: usize = 16 * 1024;

/// How long to wait before accepting again when the process is out of file descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// One open connection, as the accept loop knows it.
struct Open {
    /// Set once a whole request head arrived: the connection is serving, not waiting.
    answered: Arc<AtomicBool>,
    task: tokio::task::AbortHandle,
}

/// The open connections, by the order they were accepted (oldest first).
#[derive(Default)]
struct Connections(Mutex<BTreeMap<u64, Open>>);

impl Connections {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Open>> {
        // Only handles: a panic elsewhere leaves them whole.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes room for one more: true if there is (evicting the oldest connection still waiting
    /// for its head, if need be), false if every open connection is serving.
    fn make_room(&self) -> bool {
        let mut open = self.lock();
        if open.len() < MAX_CONNECTIONS {
            return true;
        }
        let oldest_waiting = open
            .iter()
            .find(|(_, c)| !c.answered.load(Ordering::Relaxed))
            .map(|(id, _)| *id);
        match oldest_waiting.and_then(|id| open.remove(&id)) {
            Some(evicted) => {
                evicted.task.abort();
                true
            }
            None => false,
        }
    }
}

/// Accepts connections on `listener` and serves `app` on each, within the limits above; runs
/// until its runtime stops.
pub async fn serve(listener: TcpListener, app: Router) {
    let connections = Arc::new(Connections::default());
    let mut next_id = 0u64;
    loop {
        let socket = match listener.accept().await {
            Ok((socket, _)) => socket,
            Err(e) => {
                // Out of file descriptors, or a connection reset before it was accepted: the
                // listener itself is fine; try again shortly rather than spin.
                tracing::debug!(%e, "the room view could not accept a connection");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        if !connections.make_room() {
            tracing::debug!("the room view is at its connection cap; one refused");
            continue;
        }
        let id = next_id;
        next_id += 1;
        let answered = Arc::new(AtomicBool::new(false));
        // Registered before the task can end, so its own removal always finds it.
        let mut open = connections.lock();
        let (app, flag, registry) = (app.clone(), answered.clone(), connections.clone());
        let task = tokio::spawn(async move {
            connection(socket, app, flag).await;
            registry.lock().remove(&id);
        });
        open.insert(
            id,
            Open {
                answered,
                task: task.abort_handle(),
            },
        );
    }
}

/// Serves HTTP/1.1 on one connection until it closes, times out or fails; `answered` is set
/// when the first whole request head has arrived.
pub async fn connection(
    io: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
    app: Router,
    answered: Arc<AtomicBool>,
) {
    let app = TowerToHyperService::new(app);
    let service = hyper::service::service_fn(move |request| {
        answered.store(true, Ordering::Relaxed);
        hyper::service::Service::call(&app, request)
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .serve_connection(TokioIo::new(io), service)
        .await;
    if let Err(e) = served {
        tracing::debug!(%e, "a room view connection ended");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::time::Instant;

    fn app() -> Router {
        Router::new().route("/", get(|| async { "page" }))
    }

    /// A client that sends its request head one byte a second: the server closes the connection
    /// when the head has taken HEADER_TIMEOUT, however steadily the bytes come.
    #[tokio::test(start_paused = true)]
    async fn a_head_sent_byte_by_byte_is_cut_off_at_the_header_timeout() {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let answered = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let served = tokio::spawn({
            let answered = answered.clone();
            async move {
                connection(server, app(), answered).await;
                Instant::now()
            }
        });
        let head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".repeat(4);
        for byte in &head {
            if served.is_finished() || client.write_all(&[*byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        assert!(
            served.is_finished(),
            "the whole head was sent one byte a second"
        );
        let ended = served.await.unwrap();
        assert_eq!(ended - started, HEADER_TIMEOUT);
        assert!(!answered.load(Ordering::Relaxed));
        // Nothing was answered: the connection just ends.
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    }

    /// An idle keep-alive connection is closed after HEADER_TIMEOUT too; a request in time is
    /// answered.
    #[tokio::test(start_paused = true)]
    async fn a_request_in_time_is_answered_and_an_idle_connection_then_closes() {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let answered = Arc::new(AtomicBool::new(false));
        let served = tokio::spawn(connection(server, app(), answered.clone()));
        tokio::time::sleep(HEADER_TIMEOUT / 2).await;
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let started = Instant::now();
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8(answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.ends_with("page"), "{answer}");
        assert!(answered.load(Ordering::Relaxed));
        assert_eq!(started.elapsed(), HEADER_TIMEOUT);
        served.await.unwrap();
    }

    #[test]
    fn the_oldest_connection_waiting_for_its_head_makes_room() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let connections = Connections::default();
        let mut tasks = Vec::new();
        for id in 0..MAX_CONNECTIONS as u64 {
            let task = runtime.spawn(std::future::pending::<()>());
            // The first two are serving (event streams); the rest wait for a head.
            let answered = Arc::new(AtomicBool::new(id < 2));
            connections.lock().insert(
                id,
                Open {
                    answered,
                    task: task.abort_handle(),
                },
            );
            tasks.push(task);
        }
        assert!(connections.make_room());
        let open: Vec<u64> = connections.lock().keys().copied().collect();
        assert_eq!(open.len(), MAX_CONNECTIONS - 1);
        assert_eq!(&open[..3], [0, 1, 3], "connection 2 was evicted");
        runtime.block_on(async {
            assert!(tasks.remove(2).await.unwrap_err().is_cancelled());
        });
        // Every one serving: nothing to evict, the newcomer is refused.
        for c in connections.lock().values() {
            c.answered.store(true, Ordering::Relaxed);
        }
        connections.lock().insert(
            u64::MAX,
            Open {
                answered: Arc::new(AtomicBool::new(true)),
                task: runtime.spawn(std::future::pending::<()>()).abort_handle(),
            },
        );
        assert!(!connections.make_room());
        assert_eq!(connections.lock().len(), MAX_CONNECTIONS);
    }
}
