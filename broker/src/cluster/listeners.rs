//! One listener per node: node k on the configured port + k - 1, or each on a free port when the
//! configured port is 0; and each node as clients are told to reach it.

use std::io;
use std::net::SocketAddr;

use tokio::net::TcpListener;

use super::Node;
use crate::config::BrokerConfig;

/// Binds every node's listener, in node order; the first failure stops (and closes those bound).
pub async fn bind(config: &BrokerConfig) -> io::Result<Vec<TcpListener>> {
    let mut listeners = Vec::with_capacity(config.nodes.max(1));
    for index in 0..config.nodes.max(1) {
        let mut addr = config.listen;
        if addr.port() != 0 {
            let port = u16::try_from(usize::from(addr.port()) + index).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "node {} would listen past port 65535 ({} nodes from port {})",
                        index + 1,
                        config.nodes,
                        addr.port()
                    ),
                )
            })?;
            addr.set_port(port);
        }
        let bound = TcpListener::bind(addr)
            .await
            .map_err(|e| match config.nodes {
                // Say which node's port failed; a single node's error stays as it always was.
                0 | 1 => e,
                _ => io::Error::new(e.kind(), format!("node {} on {addr}: {e}", index + 1)),
            })?;
        listeners.push(bound);
    }
    Ok(listeners)
}

/// The nodes bound at `addrs` (in node order), with ids from `config.node_id` up.
pub fn nodes(config: &BrokerConfig, addrs: &[SocketAddr]) -> io::Result<Vec<Node>> {
    addrs
        .iter()
        .enumerate()
        .map(|(index, &bound)| {
            let (host, port) = config.advertised_node(bound, index).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("node {} would be advertised past port 65535", index + 1),
                )
            })?;
            let offset = i32::try_from(index).unwrap_or(i32::MAX);
            Ok(Node {
                id: config.node_id.saturating_add(offset),
                host,
                port: i32::from(port),
            })
        })
        .collect()
}
