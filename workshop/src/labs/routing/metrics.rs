//! The cluster's own per-node counters, read from its Prometheus endpoint (`broker --metrics`):
//! Produce requests each node received and those it answered NOT_LEADER_OR_FOLLOWER. The lab
//! reads them rather than counting for itself: they are what an operator would graph.

use std::collections::BTreeMap;
use std::future::Future;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::lab::deadline::Deadline;
use crate::lab::LabError;

/// A node's Produce traffic, counted by the node since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct NodeProduce {
    pub requests: u64,
    pub not_leader: u64,
}

/// Produce requests and NOT_LEADER_OR_FOLLOWER answers per node id, as `addr` serves them.
pub async fn produce_by_node(addr: &str) -> Result<BTreeMap<i32, NodeProduce>, LabError> {
    let failed = |e: std::io::Error| {
        LabError::Broker(format!(
            "reading the cluster's metrics at {addr} failed: {e}"
        ))
    };
    let mut stream = tokio::net::TcpStream::connect(addr).await.map_err(failed)?;
    let ask = format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    stream.write_all(ask.as_bytes()).await.map_err(failed)?;
    let mut text = String::new();
    // The endpoint's answer is a page of text; a bound keeps a wrong address from filling memory.
    (&mut stream)
        .take(16 << 20)
        .read_to_string(&mut text)
        .await
        .map_err(failed)?;
    Ok(parse(&text))
}

/// The two families' Produce samples in Prometheus text.
fn parse(text: &str) -> BTreeMap<i32, NodeProduce> {
    let mut nodes: BTreeMap<i32, NodeProduce> = BTreeMap::new();
    for line in text.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Some((name, labels)) = series.split_once('{') else {
            continue;
        };
        let label = |key: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix("=\""))
                .map(|v| v.trim_end_matches(['}', '"']))
        };
        let (Some(node), Some("Produce"), Ok(value)) = (
            label("node").and_then(|n| n.parse().ok()),
            label("api"),
            value.parse::<u64>(),
        ) else {
            continue;
        };
        let entry = nodes.entry(node).or_default();
        match (name, label("error")) {
            ("kafka_network_requests_total", _) => entry.requests = value,
            ("kafka_network_request_redirects_total", Some("NOT_LEADER_OR_FOLLOWER")) => {
                entry.not_leader = value
            }
            _ => {}
        }
    }
    nodes
}

/// Runs `step` between two readings of the counters at `addr`, when the cluster's metrics are
/// readable: what each node counted meanwhile. The readings are steps of `deadline`.
pub async fn around<T>(
    addr: Option<&str>,
    deadline: &Deadline,
    step: impl Future<Output = Result<T, LabError>>,
) -> Result<(T, Option<BTreeMap<i32, NodeProduce>>), LabError> {
    let Some(addr) = addr else {
        return Ok((step.await?, None));
    };
    let reading = "reading the metrics";
    let before = deadline.wait(reading, produce_by_node(addr)).await?;
    let ran = step.await?;
    let after = deadline.wait(reading, produce_by_node(addr)).await?;
    Ok((ran, Some(since(&before, &after))))
}

/// What each node counted between two readings.
fn since(
    before: &BTreeMap<i32, NodeProduce>,
    after: &BTreeMap<i32, NodeProduce>,
) -> BTreeMap<i32, NodeProduce> {
    after
        .iter()
        .map(|(&node, now)| {
            let was = before.get(&node).copied().unwrap_or_default();
            let delta = NodeProduce {
                requests: now.requests.saturating_sub(was.requests),
                not_leader: now.not_leader.saturating_sub(was.not_leader),
            };
            (node, delta)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn produce_samples_are_read_per_node_and_other_apis_are_not() {
        let text = "# HELP kafka_network_requests_total Requests.\n\
            kafka_network_requests_total{node=\"1\",api=\"Produce\"} 12\n\
            kafka_network_requests_total{node=\"1\",api=\"Metadata\"} 4\n\
            kafka_network_requests_total{node=\"2\",api=\"Produce\"} 9\n\
            kafka_network_request_redirects_total{node=\"1\",api=\"Produce\",error=\"NOT_LEADER_OR_FOLLOWER\"} 3\n\
            kafka_network_request_redirects_total{node=\"1\",api=\"Produce\",error=\"NOT_COORDINATOR\"} 0\n";
        let nodes = parse(text);
        assert_eq!(
            nodes.get(&1),
            Some(&NodeProduce {
                requests: 12,
                not_leader: 3
            })
        );
        assert_eq!(nodes.get(&2).map(|n| n.requests), Some(9));
        let later = parse(&text.replace("} 12", "} 20").replace("} 3", "} 7"));
        assert_eq!(
            since(&nodes, &later)[&1],
            NodeProduce {
                requests: 8,
                not_leader: 4
            }
        );
    }
}
