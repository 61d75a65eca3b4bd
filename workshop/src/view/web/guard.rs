//! Which requests the room view obeys: only its own page's.
//!
//! The server runs on the trainer's laptop while the trainer's browser has other pages open. Any
//! of them can send requests to `127.0.0.1`: a form or a `fetch` with `mode: "no-cors"` reaches
//! the server even though the page never reads the answer, and a domain whose DNS is switched to
//! 127.0.0.1 (DNS rebinding) even reads answers. So every request is checked before it is routed:
//!
//! - **Host**: the address the server is bound to, `localhost` or a loopback address, with the
//!   server's port (an IP literal cannot be rebound; a name other than `localhost` can). A server
//!   bound to every interface (`0.0.0.0`) answers to any IP literal with its port.
//! - **State changes** (any method but GET and HEAD): the `Origin` must be the page's own,
//!   `http://` and the request's Host exactly (a foreign site, `null`, another port, or an origin
//!   that only starts like ours are refused), and the body must be declared `application/json`,
//!   which no form can send and which a cross-origin `fetch` can send only after a CORS preflight
//!   that this server never grants.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::server::message;

/// The address the server is bound to, which every request is checked against.
#[derive(Debug, Clone, Copy)]
pub struct Guard {
    bound: SocketAddr,
}

impl Guard {
    pub fn new(bound: SocketAddr) -> Guard {
        Guard { bound }
    }

    /// Why `method` with `headers` is refused, with the status to answer; `None` to obey.
    pub fn refuse(&self, method: &Method, headers: &HeaderMap) -> Option<(StatusCode, String)> {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        let Some(host) = host.filter(|h| self.is_ours(h)) else {
            return Some((
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "this server answers only to http://{}/ (the Host was {})",
                    self.bound,
                    host.unwrap_or("missing")
                ),
            ));
        };
        if *method == Method::GET || *method == Method::HEAD {
            return None;
        }
        let origin = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok());
        let own = format!("http://{host}");
        if !origin.is_some_and(|o| o.eq_ignore_ascii_case(&own)) {
            return Some((
                StatusCode::FORBIDDEN,
                format!(
                    "only the room view's own page (Origin {own}) may change anything; the Origin \
                     was {}",
                    origin.unwrap_or("missing")
                ),
            ));
        }
        let declared = headers
            .get(header::CONTENT_TYPE)
            .and_then(|c| c.to_str().ok());
        let media_type = declared.map(|c| c.split(';').next().unwrap_or("").trim());
        if !media_type.is_some_and(|m| m.eq_ignore_ascii_case("application/json")) {
            return Some((
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "send a JSON object with Content-Type: application/json, as the page does \
                     (the Content-Type was {})",
                    declared.unwrap_or("missing")
                ),
            ));
        }
        None
    }

    /// Whether `host` (a Host header: name or IP literal, and a port) names this server.
    fn is_ours(&self, host: &str) -> bool {
        let Some((name, port)) = host.rsplit_once(':') else {
            return false;
        };
        if port.parse::<u16>().ok() != Some(self.bound.port()) {
            return false;
        }
        if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        let literal = name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .unwrap_or(name);
        let Ok(ip) = literal.parse::<IpAddr>() else {
            return false;
        };
        // `[::1]` must be bracketed and `127.0.0.1` must not: one spelling each, as browsers send.
        if ip.is_ipv6() != name.starts_with('[') {
            return false;
        }
        self.bound.ip().is_unspecified() || ip == self.bound.ip() || ip.is_loopback()
    }
}

/// The middleware: a request the [`Guard`] refuses is answered with why; nothing else runs.
pub async fn check(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    match guard.refuse(request.method(), request.headers()) {
        Some((status, why)) => message(status, &why),
        None => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn status(guard: Guard, method: Method, pairs: &[(header::HeaderName, &str)]) -> u16 {
        guard
            .refuse(&method, &headers(pairs))
            .map_or(200, |(s, _)| s.as_u16())
    }

    #[test]
    fn hosts_that_name_the_server_and_no_others() {
        let loopback = Guard::new("127.0.0.1:8842".parse().unwrap());
        for ours in [
            "127.0.0.1:8842",
            "localhost:8842",
            "LOCALHOST:8842",
            "[::1]:8842",
        ] {
            assert_eq!(
                status(loopback, Method::GET, &[(header::HOST, ours)]),
                200,
                "{ours}"
            );
        }
        for foreign in [
            "evil.example:8842",
            "127.0.0.1:8843",
            "127.0.0.1",
            "localhost.evil.example:8842",
            "192.168.1.5:8842",
            "::1:8842",
            "[127.0.0.1]:8842",
            "127.0.0.1:8842:8842",
        ] {
            assert_eq!(
                status(loopback, Method::GET, &[(header::HOST, foreign)]),
                421,
                "{foreign}"
            );
        }
        assert_eq!(status(loopback, Method::GET, &[]), 421);
        let everywhere = Guard::new("0.0.0.0:8842".parse().unwrap());
        assert_eq!(
            status(
                everywhere,
                Method::GET,
                &[(header::HOST, "192.168.1.5:8842")]
            ),
            200
        );
        assert_eq!(
            status(
                everywhere,
                Method::GET,
                &[(header::HOST, "evil.example:8842")]
            ),
            421
        );
    }

    #[test]
    fn a_state_change_needs_the_pages_origin_and_json() {
        let guard = Guard::new("127.0.0.1:8842".parse().unwrap());
        let json = (header::CONTENT_TYPE, "application/json");
        let host = (header::HOST, "127.0.0.1:8842");
        let own = (header::ORIGIN, "http://127.0.0.1:8842");
        assert_eq!(
            status(
                guard,
                Method::POST,
                &[host.clone(), own.clone(), json.clone()]
            ),
            200
        );
        assert_eq!(
            status(
                guard,
                Method::POST,
                &[
                    host.clone(),
                    own.clone(),
                    (header::CONTENT_TYPE, "Application/JSON; charset=utf-8")
                ]
            ),
            200
        );
        for origin in [
            "http://evil.example",
            "null",
            "http://127.0.0.1:8843",
            "http://127.0.0.1:8842.evil.example",
            "https://127.0.0.1:8842",
            "http://localhost:8842",
        ] {
            assert_eq!(
                status(
                    guard,
                    Method::POST,
                    &[host.clone(), (header::ORIGIN, origin), json.clone()]
                ),
                403,
                "{origin}"
            );
        }
        assert_eq!(
            status(guard, Method::POST, &[host.clone(), json.clone()]),
            403
        );
        for kind in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/json-seq",
        ] {
            assert_eq!(
                status(
                    guard,
                    Method::POST,
                    &[host.clone(), own.clone(), (header::CONTENT_TYPE, kind)]
                ),
                415,
                "{kind}"
            );
        }
        assert_eq!(
            status(guard, Method::POST, &[host.clone(), own.clone()]),
            415
        );
        // The same page on localhost: its Origin follows its Host.
        assert_eq!(
            status(
                guard,
                Method::PUT,
                &[
                    (header::HOST, "localhost:8842"),
                    (header::ORIGIN, "http://localhost:8842"),
                    json
                ]
            ),
            200
        );
    }
}
