//! Which version of each API to speak with a broker, agreed through ApiVersions.
//!
//! The client's own ranges start at Kafka 4.0's floor (KIP-896) so they also work against Apache
//! Kafka, and stop where requests would have to name topics by id. The handshake follows KIP-511:
//! a broker that does not know our ApiVersions version answers error 35 encoded at v0 with its own
//! range, and we retry once at a version it does know.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::io::{AsyncRead, AsyncWrite};

use super::messenger::{api_name, decode_response, Messenger};
use crate::error::{ProtocolError, Result, ServerError};

/// The versions this client can speak: (API, lowest, highest).
pub const CLIENT_APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::CreatePartitions, 0, 3),
    // Idempotent producers. v4 adds PRODUCER_FENCED; v5 needs KIP-939 (two-phase commit).
    (ApiKey::InitProducerId, 0, 4),
    // Consumer groups. OffsetFetch v8+ asks in a `groups` array (a batch of one, for us).
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::DeleteGroups, 0, 2),
    // Transactions, before KIP-890's second part (transaction.version 2).
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::EndTxn, 0, 4),
    (ApiKey::TxnOffsetCommit, 0, 4),
    (ApiKey::OffsetDelete, 0, 0),
    // Topic configs; v1 reports where each value comes from. IncrementalAlterConfigs (Kafka
    // 2.3+) changes the configs named; AlterConfigs, for brokers without it, replaces them all.
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    // Moving partitions between brokers (kafka-reassign-partitions.sh); v1 only adds a flag
    // allowing the replication factor to change.
    (ApiKey::AlterPartitionReassignments, 0, 0),
    (ApiKey::ListPartitionReassignments, 0, 0),
];

const SOFTWARE_NAME: &str = "workshop-client";

fn client_range(key: i16) -> Option<(i16, i16)> {
    CLIENT_APIS
        .iter()
        .find(|(k, _, _)| *k as i16 == key)
        .map(|&(_, lo, hi)| (lo, hi))
}

/// What a broker advertised, and the choice of version per API that follows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiVersions {
    broker: HashMap<i16, (i16, i16)>,
}

impl ApiVersions {
    pub fn from_response(resp: &ApiVersionsResponse) -> Self {
        Self {
            broker: resp
                .api_keys
                .iter()
                .map(|a| (a.api_key, (a.min_version, a.max_version)))
                .collect(),
        }
    }

    /// The highest version both sides speak for API `key`.
    pub fn negotiate(&self, key: i16) -> Result<i16, ProtocolError> {
        let ours = client_range(key).unwrap_or((0, -1));
        let theirs = self.broker.get(&key).copied();
        let unsupported = || ProtocolError::UnsupportedVersion {
            api: api_name(key),
            broker: theirs,
            client: ours,
        };
        let (lo, hi) = theirs.ok_or_else(unsupported)?;
        let version = hi.min(ours.1);
        if version < lo.max(ours.0) {
            return Err(unsupported());
        }
        Ok(version)
    }
}

/// How to read an ApiVersions answer to a request sent at some version.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    Supported(ApiVersions),
    /// KIP-511: the broker does not know the version we sent; ask again at this one.
    RetryAt(i16),
}

/// Reads an ApiVersions answer frame (header v0, then the body) to a request sent at `sent`.
pub fn interpret(frame: Bytes, sent: i16) -> Result<Answer> {
    // The error code comes first in every version; a broker answering 35 encodes the rest at v0
    // whatever we sent, so the code decides how to decode.
    let code = frame
        .get(4..6)
        .map(|b| i16::from_be_bytes([b[0], b[1]]))
        .ok_or_else(|| ProtocolError::Decode {
            api: "ApiVersions",
            version: sent,
            reason: format!("{}-byte answer", frame.len()),
        })?;
    if code == ResponseError::UnsupportedVersion.code() {
        let resp = decode_response::<ApiVersionsRequest>(frame, 0)?;
        let key = ApiKey::ApiVersions as i16;
        let broker_max = resp
            .api_keys
            .iter()
            .find(|a| a.api_key == key)
            .map_or(0, |a| a.max_version);
        let retry = broker_max.min(sent - 1);
        if retry < 0 {
            return Err(ServerError::new(code)
                .message(Some("the broker refused every ApiVersions version"))
                .into());
        }
        return Ok(Answer::RetryAt(retry));
    }
    let resp = decode_response::<ApiVersionsRequest>(frame, sent)?;
    ServerError::check(resp.error_code)?;
    Ok(Answer::Supported(ApiVersions::from_response(&resp)))
}

/// The ApiVersions request, per version (v3 added the software name and version).
pub fn request(version: i16) -> ApiVersionsRequest {
    let mut req = ApiVersionsRequest::default();
    if version >= 3 {
        req.client_software_name = StrBytes::from_static_str(SOFTWARE_NAME);
        req.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
    }
    req
}

/// The first exchange on a new connection.
pub async fn handshake<RW>(messenger: &Messenger<RW>, timeout: Duration) -> Result<ApiVersions>
where
    RW: AsyncRead + AsyncWrite + Send + 'static,
{
    let (_, _, ours) = CLIENT_APIS
        .iter()
        .copied()
        .find(|(k, _, _)| *k == ApiKey::ApiVersions)
        .expect("ApiVersions is in the table");
    let mut version = ours;
    // A version strictly decreases on each retry, so this ends.
    loop {
        let frame = messenger
            .request_raw(&request(version), version, timeout)
            .await?;
        match interpret(frame, version)? {
            Answer::Supported(versions) => {
                tracing::debug!(addr = messenger.addr(), version, "ApiVersions agreed");
                return Ok(versions);
            }
            Answer::RetryAt(v) => {
                tracing::debug!(
                    addr = messenger.addr(),
                    from = version,
                    to = v,
                    "KIP-511 fallback"
                );
                version = v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::ResponseHeader;
    use kafka_protocol::protocol::Encodable;
    use protocol::frame::{finish_frame, read_frame, start_frame};
    use protocol::versions::HeaderPrefix;
    use tokio::io::AsyncWriteExt;

    fn answer(code: i16, apis: &[(i16, i16, i16)], version: i16) -> Bytes {
        let resp = ApiVersionsResponse::default()
            .with_error_code(code)
            .with_api_keys(
                apis.iter()
                    .map(|&(k, lo, hi)| {
                        ApiVersion::default()
                            .with_api_key(k)
                            .with_min_version(lo)
                            .with_max_version(hi)
                    })
                    .collect(),
            );
        let mut out = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(7)
            .encode(&mut out, 0)
            .unwrap();
        resp.encode(&mut out, version).unwrap();
        out.freeze()
    }

    #[test]
    fn our_ranges_are_ones_the_crate_encodes() {
        for &(key, lo, hi) in CLIENT_APIS {
            let crate_range = protocol::versions::request_versions(key)
                .unwrap_or_else(|| panic!("no request type listed for {key:?}"));
            assert!(crate_range.min <= lo && hi <= crate_range.max, "{key:?}");
        }
    }

    #[test]
    fn picks_the_highest_common_version() {
        let v = ApiVersions {
            broker: [(0, (0, 11)), (1, (4, 12)), (3, (0, 13)), (2, (1, 3))].into(),
        };
        assert_eq!(v.negotiate(0), Ok(9));
        assert_eq!(v.negotiate(1), Ok(12));
        assert_eq!(v.negotiate(3), Ok(12));
        assert_eq!(v.negotiate(2), Ok(3));
    }

    #[test]
    fn refuses_disjoint_or_missing_ranges() {
        let v = ApiVersions {
            broker: [(1, (0, 3))].into(),
        };
        assert!(matches!(
            v.negotiate(1),
            Err(ProtocolError::UnsupportedVersion {
                broker: Some((0, 3)),
                client: (4, 12),
                ..
            })
        ));
        assert!(matches!(
            v.negotiate(19),
            Err(ProtocolError::UnsupportedVersion { broker: None, .. })
        ));
    }

    #[test]
    fn kip_511_error_35_means_retry_lower() {
        // The broker answers at v0 whatever we sent, and says it knows ApiVersions up to 2.
        let frame = answer(35, &[(18, 0, 2)], 0);
        assert_eq!(interpret(frame, 4).unwrap(), Answer::RetryAt(2));
        // A broker that lists a higher max than we sent still makes us go down by one.
        let frame = answer(35, &[(18, 0, 9)], 0);
        assert_eq!(interpret(frame, 3).unwrap(), Answer::RetryAt(2));
        // At v0 there is nowhere lower to go.
        let frame = answer(35, &[(18, 0, 2)], 0);
        assert!(interpret(frame, 0).is_err());
    }

    #[test]
    fn a_normal_answer_gives_the_table() {
        let frame = answer(0, &[(0, 0, 9), (18, 0, 4)], 3);
        let Answer::Supported(v) = interpret(frame, 3).unwrap() else {
            panic!("expected the table");
        };
        assert_eq!(v.negotiate(0), Ok(9));
        assert!(interpret(Bytes::from_static(&[0, 0, 0]), 3).is_err());
    }

    #[tokio::test]
    async fn handshake_falls_back_on_the_wire() {
        let (ours, mut theirs) = tokio::io::duplex(1 << 16);
        let m = Messenger::new(ours, "fake:9092".into(), "test", 1 << 20);
        let broker = tokio::spawn(async move {
            let mut buf = BytesMut::new();
            let mut seen = Vec::new();
            for _ in 0..2 {
                let frame = read_frame(&mut theirs, &mut buf, 1 << 20)
                    .await
                    .unwrap()
                    .unwrap();
                let h = HeaderPrefix::peek(&frame).unwrap();
                seen.push(h.api_version);
                let body = if h.api_version > 2 {
                    answer(35, &[(18, 0, 2)], 0)
                } else {
                    answer(0, &[(18, 0, 2), (0, 3, 7)], h.api_version)
                };
                let mut out = BytesMut::new();
                let at = start_frame(&mut out);
                out.extend_from_slice(&h.correlation_id.to_be_bytes());
                out.extend_from_slice(&body[4..]);
                finish_frame(&mut out, at, 0).unwrap();
                theirs.write_all(&out).await.unwrap();
            }
            seen
        });
        let versions = handshake(&m, Duration::from_secs(5)).await.unwrap();
        assert_eq!(versions.negotiate(0), Ok(7));
        assert_eq!(broker.await.unwrap(), vec![4, 2]);
    }
}
