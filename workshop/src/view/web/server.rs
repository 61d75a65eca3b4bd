//! The HTTP side of the room view: a server on a runtime of its own, the pages and scripts
//! compiled into the binary, the event stream, and the answers to requests it does not serve.
//!
//! Every request passes the [`super::guard`] first (only the page's own Host, Origin and JSON
//! change anything), bodies are bounded ([`MAX_BODY`]) and connections are served within
//! [`super::listen`]'s limits.
//!
//! The server runs on its own one-worker runtime, not the lab's: a lab may run on a paused
//! clock (lab rebalance) or keep its runtime busy, and the page must answer all the same. It is
//! stopped by dropping it; open event streams end with it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{sse, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::guard::{self, Guard};
use super::hub::Hub;
use super::listen;
use crate::lab::LabError;

/// The page's stylesheet and the scripts every page shares; each page adds its own.
const STYLE: &str = include_str!("assets/style.css");
const COMMON_JS: &str = include_str!("assets/common.js");
const BROKER_JS: &str = include_str!("assets/broker.js");

/// How often an idle event stream sends a comment, so a closed tab is noticed (the write fails)
/// and proxies keep the connection.
const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// The largest request body read: the page's requests are a few dozen bytes of JSON.
pub const MAX_BODY: usize = 4 * 1024;

/// Connections the kernel queues before the server accepts them (std's default is 128, which
/// a burst of idle connections fills, delaying the page's own).
const BACKLOG: u32 = 1024;

/// A running server.
pub struct Server {
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Server {
    /// Binds `addr` (failing at once, in one line, if it cannot) and serves `app` there, to
    /// the requests the [`Guard`] lets through.
    pub fn start(addr: SocketAddr, app: Router) -> Result<Server, LabError> {
        let cannot = |e: std::io::Error| {
            LabError::InvalidInput(format!(
                "cannot serve the room view on {addr}: {e}; give --web another address, for \
                 example 127.0.0.1:0 for any free port"
            ))
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("room-view")
            .enable_all()
            .build()
            .map_err(|e| {
                LabError::Internal(format!("cannot start the room view's runtime: {e}"))
            })?;
        let listener = {
            let _entered = runtime.enter();
            let socket = match addr {
                SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
                SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
            }
            .map_err(cannot)?;
            // As std's bind does: a port of a run that just ended is free again at once.
            socket.set_reuseaddr(true).map_err(cannot)?;
            socket.bind(addr).map_err(cannot)?;
            socket.listen(BACKLOG).map_err(cannot)?
        };
        let addr = listener.local_addr()?;
        let app =
            app.layer(DefaultBodyLimit::max(MAX_BODY))
                .layer(axum::middleware::from_fn_with_state(
                    Guard::new(addr),
                    guard::check,
                ));
        runtime.spawn(listen::serve(listener, app));
        Ok(Server {
            addr,
            runtime: Some(runtime),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's address, as printed for the trainer.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The server's runtime, for the tasks that feed its pages (the broker poller).
    pub fn handle(&self) -> tokio::runtime::Handle {
        self.runtime
            .as_ref()
            .map(|rt| rt.handle().clone())
            .expect("the runtime lives as long as the server")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Open event streams never end by themselves: stop without waiting for them.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The routes every view has: its page at `/`, the shared assets, `/api/state` and
/// `/api/events` from `hub`, and 404 for everything else.
pub fn common(page: &'static str, script: &'static str, hub: Arc<Hub>) -> Router {
    let state_hub = hub.clone();
    Router::new()
        .route(
            "/",
            get(move || async move { asset(page, "text/html; charset=utf-8") }),
        )
        .route(
            "/assets/style.css",
            get(|| async { asset(STYLE, "text/css; charset=utf-8") }),
        )
        .route(
            "/assets/common.js",
            get(|| async { asset(COMMON_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/assets/broker.js",
            get(|| async { asset(BROKER_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/assets/page.js",
            get(move || async move { asset(script, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/api/state",
            get(move || async move { json_text(StatusCode::OK, state_hub.snapshot()) }),
        )
        .route(
            "/api/events",
            get(move || async move {
                sse::Sse::new(hub.stream()).keep_alive(sse::KeepAlive::new().interval(KEEP_ALIVE))
            }),
        )
        .fallback(|uri: axum::http::Uri| async move {
            message(
                StatusCode::NOT_FOUND,
                &format!("no such page: {}", uri.path()),
            )
        })
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// A JSON answer.
pub fn json(status: StatusCode, value: &impl Serialize) -> Response {
    // Plain data: serialising cannot fail.
    json_text(
        status,
        serde_json::to_string(value).expect("an answer serialises"),
    )
}

fn json_text(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body,
    )
        .into_response()
}

/// An error answer: `{"error": "..."}` with `status`.
pub fn message(status: StatusCode, text: &str) -> Response {
    json(status, &serde_json::json!({ "error": text }))
}

/// A control request's body, or what is wrong with it (for a 400: [`bad_request`]).
pub fn parse<T: DeserializeOwned>(body: &Bytes) -> Result<T, String> {
    serde_json::from_slice(body)
        .map_err(|e| format!("bad request: {e}; send a JSON object as the page does"))
}

/// 400, with what is wrong with the request.
pub fn bad_request(text: &str) -> Response {
    message(StatusCode::BAD_REQUEST, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_in_use_is_one_line() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let err = match Server::start(taken.local_addr().unwrap(), Router::new()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("bound an address in use"),
        };
        assert!(
            err.contains("cannot serve the room view") && !err.contains('\n'),
            "{err}"
        );
    }
}
