//! `broker --metrics ADDR`: partition offsets and consumer lag (in records, and in seconds: the
//! age of the oldest record not yet consumed) as Prometheus text, on `GET /metrics` over plain
//! HTTP/1.1.
//!
//! Metric names follow kafka-lag-exporter, so dashboards built for it read these too. The HTTP
//! side is deliberately tiny: one request per connection, a bounded request head, a timeout to
//! send it and one to take the answer, and a cap on connections served at once; anything but
//! `GET /metrics` gets a plain error status. A scraper that never reads its answer holds one slot
//! for [`WRITE_TIMEOUT`] at most, so a few of them leave the others served.

use std::fmt::Write as _;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info};

use crate::accept::accept_loop;
use crate::lag;
use crate::state::BrokerState;

/// A request head larger than this is refused; a scraper sends a few hundred bytes.
const MAX_HEAD_BYTES: usize = 8 * 1024;
/// A client that has not sent its request head by then is dropped.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A client that has not taken its answer by then is dropped (Prometheus' scrape timeout is 10 s).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Scrapes served at once; more wait in the accept queue. Each holds its rendered answer, a few
/// hundred bytes per partition, until it is written or times out.
const MAX_CONNECTIONS: usize = 32;

/// Binds `addr` and serves until `shutdown`; returns the address actually bound.
pub async fn start(
    addr: SocketAddr,
    state: Arc<BrokerState>,
    shutdown: CancellationToken,
    tasks: &TaskTracker,
) -> io::Result<SocketAddr> {
    // Say which address failed: the broker's own listener is bound by then.
    let context = |e: io::Error| io::Error::new(e.kind(), format!("metrics address {addr}: {e}"));
    let listener = TcpListener::bind(addr).await.map_err(context)?;
    let bound = listener.local_addr().map_err(context)?;
    let stop = shutdown.clone();
    let serve = move |stream, peer: SocketAddr| {
        let state = state.clone();
        let shutdown = stop.clone();
        async move {
            tokio::select! {
                result = serve(stream, &state) => if let Err(e) = result {
                    debug!(%peer, "metrics connection: {e}");
                },
                _ = shutdown.cancelled() => {}
            }
        }
    };
    tasks.spawn(accept_loop(
        listener,
        MAX_CONNECTIONS,
        shutdown,
        tasks.clone(),
        serve,
    ));
    info!(addr = %bound, "metrics listening on http://{bound}/metrics");
    Ok(bound)
}

async fn serve(mut stream: TcpStream, state: &BrokerState) -> io::Result<()> {
    let head = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
        Ok(head) => head?,
        Err(_) => return Ok(()),
    };
    let response = match head {
        Some(head) => respond(&head, state),
        None => status(400, "Bad Request", "request head too large or malformed\n"),
    };
    let written = tokio::time::timeout(WRITE_TIMEOUT, async {
        stream.write_all(&response).await?;
        stream.shutdown().await
    });
    match written.await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("answer not taken within {WRITE_TIMEOUT:?}"),
        )),
    }
}

/// Reads up to the blank line ending the request head; `None` when it does not fit the cap or
/// the client stops early.
async fn read_head(stream: &mut TcpStream) -> io::Result<Option<String>> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&chunk[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            head.truncate(end);
            return Ok(String::from_utf8(head).ok());
        }
        if head.len() > MAX_HEAD_BYTES {
            return Ok(None);
        }
    }
}

fn respond(head: &str, state: &BrokerState) -> Vec<u8> {
    let request_line = head.lines().next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (method, target) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let path = target.split('?').next().unwrap_or_default();
    match (method, path) {
        ("GET", "/metrics") => {
            let body = render(state, now_ms());
            let mut out = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )
            .into_bytes();
            out.extend_from_slice(body.as_bytes());
            out
        }
        ("GET", _) => status(404, "Not Found", "try /metrics\n"),
        _ => status(405, "Method Not Allowed", "only GET /metrics\n"),
    }
}

fn status(code: u16, reason: &str, body: &str) -> Vec<u8> {
    let allow = if code == 405 { "Allow: GET\r\n" } else { "" };
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n{allow}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The wall clock in milliseconds since the epoch: record timestamps are on it.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The Prometheus text exposition of every partition's offsets and every group's lag, with time
/// lags as of `now_ms` (a scrape passes the wall clock; a test, the time it chose).
pub fn render(state: &BrokerState, now_ms: i64) -> String {
    let mut start = Family::new(
        "kafka_partition_log_start_offset",
        "Earliest offset still in the partition's log.",
    );
    let mut end = Family::new(
        "kafka_partition_log_end_offset",
        "Offset the next record appended to the partition gets (its high watermark).",
    );
    let mut duplicates = Family::counter(
        "kafka_partition_idempotent_duplicates_total",
        "Retried batches of idempotent producers answered with their first offset, not appended.",
    );
    for topic in state.topics.all() {
        for (index, log) in topic.partitions().iter().enumerate() {
            let offsets = log.offsets();
            let labels = [
                ("topic", topic.name.as_str()),
                ("partition", &index.to_string()),
            ];
            start.sample(&labels, offsets.start);
            end.sample(&labels, offsets.end);
            duplicates.sample(&labels, log.duplicates_absorbed() as i64);
        }
    }
    let mut committed = Family::new(
        "kafka_consumergroup_group_offset",
        "Offset the consumer group last committed for the partition.",
    );
    let mut lag = Family::new(
        "kafka_consumergroup_group_lag",
        "Log end offset minus the consumer group's committed offset.",
    );
    let mut lag_seconds = Family::new(
        "kafka_consumergroup_group_lag_seconds",
        "Age of the oldest record the consumer group has not consumed (0 without lag), read from its timestamp.",
    );
    for (group, partitions) in lag::all_groups_lag(state) {
        for p in partitions {
            let partition = p.partition.to_string();
            let labels = [
                ("group", group.as_str()),
                ("topic", p.topic.as_str()),
                ("partition", partition.as_str()),
            ];
            if let Some(offset) = p.committed {
                committed.sample(&labels, offset);
            }
            if let Some(value) = p.lag() {
                lag.sample(&labels, value);
            }
            if let Some(ms) = p.time_lag_ms(now_ms) {
                lag_seconds.sample(&labels, Seconds(ms));
            }
        }
    }
    let mut faults = Family::counter(
        "kafka_broker_fault_acks_dropped_total",
        "Produce acknowledgements dropped after the append by fault injection.",
    );
    faults.sample(&[], state.faults.acks_dropped() as i64);
    let [requests, redirects] = node_traffic(state);
    [
        start,
        end,
        duplicates,
        committed,
        lag,
        lag_seconds,
        faults,
        requests,
        redirects,
    ]
    .map(|f| f.text)
    .concat()
}

/// Requests per node and API, and those answered with a redirect (as Kafka's RequestsPerSec and
/// ErrorsPerSec, counted from the start).
fn node_traffic(state: &BrokerState) -> [Family; 2] {
    let mut requests = Family::counter(
        "kafka_network_requests_total",
        "Requests the node received, per API.",
    );
    let mut redirects = Family::counter(
        "kafka_network_request_redirects_total",
        "Requests the node answered NOT_LEADER_OR_FOLLOWER (a partition led by another node) or \
         NOT_COORDINATOR (a group or transactional id coordinated by another); over \
         kafka_network_requests_total, the redirect ratio that shows a client's stale map.",
    );
    for (node, api, counts) in state.cluster.traffic.snapshot() {
        let (node, api) = (node.to_string(), format!("{api:?}"));
        let labels = [("node", node.as_str()), ("api", api.as_str())];
        requests.sample(&labels, counts.requests);
        for (error, count) in [
            ("NOT_LEADER_OR_FOLLOWER", counts.not_leader),
            ("NOT_COORDINATOR", counts.not_coordinator),
        ] {
            let labels = [labels[0], labels[1], ("error", error)];
            redirects.sample(&labels, count);
        }
    }
    [requests, redirects]
}

/// One metric family: its HELP and TYPE lines, then its samples.
struct Family {
    name: &'static str,
    text: String,
}

impl Family {
    fn new(name: &'static str, help: &str) -> Self {
        Self::typed(name, help, "gauge")
    }

    fn counter(name: &'static str, help: &str) -> Self {
        Self::typed(name, help, "counter")
    }

    fn typed(name: &'static str, help: &str, kind: &str) -> Self {
        Self {
            name,
            text: format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"),
        }
    }

    fn sample(&mut self, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        let labels: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
            .collect();
        if labels.is_empty() {
            let _ = writeln!(self.text, "{} {value}", self.name);
        } else {
            let _ = writeln!(self.text, "{}{{{}}} {value}", self.name, labels.join(","));
        }
    }
}

/// Milliseconds written as seconds, exactly: `42.5`, `0.001`, `3`.
struct Seconds(i64);

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (s, ms) = (self.0 / 1000, (self.0 % 1000).abs());
        let sign = if self.0 < 0 && s == 0 { "-" } else { "" };
        match ms {
            0 => write!(f, "{sign}{s}"),
            ms => {
                let fraction = format!("{ms:03}");
                write!(f, "{sign}{s}.{}", fraction.trim_end_matches('0'))
            }
        }
    }
}

/// Label values may hold anything a client named a group; the format escapes these three.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label("x\ny"), "x\\ny");
    }

    #[test]
    fn seconds_are_exact_decimals() {
        let shown: Vec<String> = [42_500, 1, 3_000, 0, 61_010]
            .map(|ms| Seconds(ms).to_string())
            .to_vec();
        assert_eq!(shown, ["42.5", "0.001", "3", "0", "61.01"]);
    }

    #[test]
    fn samples_are_written_in_exposition_format() {
        let mut family = Family::new("kafka_x", "Help.");
        family.sample(&[("topic", "t"), ("partition", "3")], -1);
        assert_eq!(
            family.text,
            "# HELP kafka_x Help.\n# TYPE kafka_x gauge\nkafka_x{topic=\"t\",partition=\"3\"} -1\n"
        );
    }
}
