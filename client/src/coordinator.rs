//! FindCoordinator: which broker owns a consumer group's state (key type 0) or a transactional
//! id's (key type 1). One lookup serves both the group member and admin ([`crate::group`]) and
//! the producer's InitProducerId ([`crate::producer`]).
//!
//! Up to v3 the request names one key and the answer is in top-level fields; v4 asks for a batch
//! of keys (KIP-699) and answers one entry per key. v0 has no key type, so it can only find
//! group coordinators.

use kafka_protocol::messages::{ApiKey, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::client::Client;
use crate::error::{ProtocolError, Result, ServerError};
use crate::metadata::BrokerInfo;

/// What a coordinator is looked up for: FindCoordinator's key type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    /// A consumer group id (key type 0).
    Group,
    /// A transactional id (key type 1).
    Transaction,
}

impl KeyType {
    /// The key type as it goes on the wire.
    pub fn code(self) -> i8 {
        match self {
            KeyType::Group => 0,
            KeyType::Transaction => 1,
        }
    }

    /// `group <key>` or `transactional id <key>`, for error messages.
    fn describe(self, key: &str) -> String {
        match self {
            KeyType::Group => format!("group {key}"),
            KeyType::Transaction => format!("transactional id {key}"),
        }
    }
}

/// FindCoordinator for `key` at `version`: the key alone up to v3, a batch of one from v4.
pub fn find_coordinator_request(
    key_type: KeyType,
    key: &str,
    version: i16,
) -> Result<FindCoordinatorRequest> {
    if version < 1 && key_type != KeyType::Group {
        return Err(ProtocolError::UnsupportedVersion {
            api: "FindCoordinator",
            broker: Some((0, version)),
            client: (1, 4),
        }
        .into());
    }
    let key = StrBytes::from_string(key.to_string());
    let req = FindCoordinatorRequest::default().with_key_type(key_type.code());
    Ok(if version >= 4 {
        req.with_coordinator_keys(vec![key])
    } else {
        req.with_key(key)
    })
}

/// The coordinator a FindCoordinator answer names, from the top-level fields (v0-3) or the
/// batch entry (v4+). A broker that names nobody answers COORDINATOR_NOT_AVAILABLE, which is
/// retriable: the coordinator is still being elected or loaded.
pub fn find_coordinator_answer(
    resp: FindCoordinatorResponse,
    key_type: KeyType,
    key: &str,
) -> Result<BrokerInfo, ServerError> {
    let (code, message, id, host, port) = match resp.coordinators.into_iter().next() {
        Some(c) => (c.error_code, c.error_message, c.node_id, c.host, c.port),
        None => (
            resp.error_code,
            resp.error_message,
            resp.node_id,
            resp.host,
            resp.port,
        ),
    };
    let what = key_type.describe(key);
    if code != 0 {
        let context = match message {
            Some(m) => format!("finding the coordinator of {what}: {m}"),
            None => format!("finding the coordinator of {what}"),
        };
        return Err(ServerError::new(code).message(Some(context)));
    }
    if id.0 < 0 || host.is_empty() {
        return Err(
            ServerError::new(ResponseError::CoordinatorNotAvailable.code())
                .message(Some(format!("no coordinator named for {what}"))),
        );
    }
    Ok(BrokerInfo {
        id: id.0,
        host: host.to_string(),
        port,
        rack: None,
    })
}

/// Asks any broker once which one coordinates `key`; retrying is the caller's choice (the group
/// retries with the client's policy, InitProducerId with its own).
pub async fn find_coordinator(client: &Client, key_type: KeyType, key: &str) -> Result<BrokerInfo> {
    let conn = client.any_connection().await?;
    let version = conn.version(ApiKey::FindCoordinator as i16)?;
    let req = find_coordinator_request(key_type, key, version)?;
    let resp = conn.call(|_| req).await?;
    Ok(find_coordinator_answer(resp, key_type, key)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::find_coordinator_response::Coordinator;
    use kafka_protocol::messages::BrokerId;
    use kafka_protocol::protocol::Encodable;

    fn text(s: &str) -> StrBytes {
        StrBytes::from_string(s.to_string())
    }

    #[test]
    fn requests_encode_at_every_version_we_speak() {
        for v in 0..=4 {
            let req = find_coordinator_request(KeyType::Group, "g", v).unwrap();
            req.encode(&mut bytes::BytesMut::new(), v)
                .unwrap_or_else(|e| panic!("v{v}: {e}"));
        }
        for v in 1..=4 {
            let req = find_coordinator_request(KeyType::Transaction, "t", v).unwrap();
            assert_eq!(req.key_type, 1);
            if v >= 4 {
                assert_eq!(req.coordinator_keys, [text("t")]);
            } else {
                assert_eq!(req.key.as_str(), "t");
            }
            req.encode(&mut bytes::BytesMut::new(), v).unwrap();
        }
        // v0 cannot name a transactional id.
        assert!(matches!(
            find_coordinator_request(KeyType::Transaction, "t", 0),
            Err(crate::Error::Protocol(
                ProtocolError::UnsupportedVersion { .. }
            ))
        ));
    }

    #[test]
    fn coordinators_are_read_from_either_shape() {
        let group = KeyType::Group;
        let old = FindCoordinatorResponse::default()
            .with_node_id(BrokerId(1))
            .with_host(text("h"))
            .with_port(9092);
        assert_eq!(
            find_coordinator_answer(old, group, "g").unwrap().addr(),
            "h:9092"
        );
        let new =
            FindCoordinatorResponse::default().with_coordinators(vec![Coordinator::default()
                .with_key(text("g"))
                .with_node_id(BrokerId(2))
                .with_host(text("h2"))
                .with_port(1)]);
        assert_eq!(find_coordinator_answer(new, group, "g").unwrap().id, 2);
        let err = FindCoordinatorResponse::default().with_error_code(15);
        assert_eq!(
            find_coordinator_answer(err, group, "g").unwrap_err().code,
            15
        );
        let nobody = FindCoordinatorResponse::default().with_node_id(BrokerId(-1));
        assert!(find_coordinator_answer(nobody, group, "g")
            .unwrap_err()
            .is_retriable());
    }

    #[test]
    fn errors_name_the_key_they_were_about() {
        let refused = FindCoordinatorResponse::default().with_error_code(53);
        let err = find_coordinator_answer(refused, KeyType::Transaction, "billing").unwrap_err();
        assert_eq!(err.code, 53);
        assert!(
            err.to_string().contains("transactional id billing"),
            "{err}"
        );
    }
}
