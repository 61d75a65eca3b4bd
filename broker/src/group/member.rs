//! A member of a classic group: identity, timeouts, protocols, assignment, and the JoinGroup or
//! SyncGroup request it may have parked.

use std::collections::HashSet;
use std::net::IpAddr;

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::messages::{JoinResult, Protocol, SyncResult};

#[derive(Debug)]
pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    /// What the leader assigned this member, exactly as sent; empty until the first sync.
    pub assignment: Bytes,
    /// A parked JoinGroup, answered when the join phase completes.
    pub(super) awaiting_join: Option<oneshot::Sender<JoinResult>>,
    /// A parked SyncGroup, answered when the leader's assignment arrives.
    pub(super) awaiting_sync: Option<oneshot::Sender<SyncResult>>,
    /// Added in the current join phase. New members cannot heartbeat yet, so their parked join
    /// is bounded by the new-member timeout instead of counting as a heartbeat.
    pub(super) is_new: bool,
    /// When the member is removed unless it heartbeats (or joins, or syncs) first.
    pub(super) heartbeat_deadline: Option<Instant>,
}

impl Member {
    pub(super) fn new(
        id: String,
        instance_id: Option<String>,
        client_id: String,
        client_host: String,
        protocol_type: String,
    ) -> Self {
        Self {
            id,
            instance_id,
            client_id,
            client_host,
            session_timeout_ms: 0,
            rebalance_timeout_ms: 0,
            protocol_type,
            protocols: Vec::new(),
            assignment: Bytes::new(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
            heartbeat_deadline: None,
        }
    }

    pub fn is_static(&self) -> bool {
        self.instance_id.is_some()
    }

    pub fn is_awaiting_join(&self) -> bool {
        self.awaiting_join.is_some()
    }

    pub fn is_awaiting_sync(&self) -> bool {
        self.awaiting_sync.is_some()
    }

    /// Kafka's `hasSatisfiedHeartbeat`, asked when the heartbeat timer fires: a member with a
    /// parked join or sync is waiting on the group, not dead; a new member is not given that
    /// benefit, so a client that gave up on its first join does not linger.
    pub(super) fn has_satisfied_heartbeat(&self) -> bool {
        !self.is_new && (self.is_awaiting_join() || self.is_awaiting_sync())
    }

    /// Same protocols, same order, same metadata: a rejoin that changes nothing.
    pub fn matches(&self, protocols: &[Protocol]) -> bool {
        self.protocols == protocols
    }

    /// The member's most preferred protocol among the candidates.
    pub(super) fn vote<'a>(&'a self, candidates: &HashSet<&str>) -> Option<&'a str> {
        self.protocols
            .iter()
            .map(|p| p.name.as_str())
            .find(|name| candidates.contains(name))
    }

    /// The metadata sent with `protocol`, or nothing.
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|p| p.name == protocol)
            .map(|p| p.metadata.clone())
            .unwrap_or_default()
    }

    /// Each protocol name once: a client listing one twice still supports it once.
    pub(super) fn protocol_names(&self) -> HashSet<&str> {
        protocol_names(&self.protocols)
    }
}

pub(super) fn protocol_names(protocols: &[Protocol]) -> HashSet<&str> {
    protocols.iter().map(|p| p.name.as_str()).collect()
}

/// Kafka's member ids: the client id (or, for static members, the instance id), a dash, a UUID.
pub(super) fn generate_member_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}

/// The peer address as Java's `InetAddress.toString()` prints it (no host name resolved): a
/// slash, then the address; IPv6 in full, uncompressed form.
pub fn java_client_host(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => format!("/{v4}"),
        IpAddr::V6(v6) => {
            let groups: Vec<String> = v6.segments().iter().map(|s| format!("{s:x}")).collect();
            format!("/{}", groups.join(":"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_host_looks_like_kafkas() {
        assert_eq!(java_client_host("127.0.0.1".parse().unwrap()), "/127.0.0.1");
        assert_eq!(java_client_host("::1".parse().unwrap()), "/0:0:0:0:0:0:0:1");
        assert_eq!(
            java_client_host("::ffff:10.0.0.7".parse().unwrap()),
            "/10.0.0.7"
        );
        assert_eq!(
            java_client_host("fe80::1:abcd".parse().unwrap()),
            "/fe80:0:0:0:0:0:1:abcd"
        );
    }

    #[test]
    fn member_ids_are_prefix_dash_uuid() {
        let id = generate_member_id("rdkafka");
        let (prefix, uuid) = id.split_at("rdkafka-".len());
        assert_eq!(prefix, "rdkafka-");
        assert!(uuid::Uuid::parse_str(uuid).is_ok());
    }
}
