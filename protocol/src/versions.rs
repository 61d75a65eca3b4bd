//! The API versions the broker advertises and the ones it accepts.
//!
//! Built by hand, not from `ApiKey::valid_versions()`, which reports response-schema ranges wider
//! than the crate's request decoders (see `shared/reference/kafka-protocol.md`, section 3). The
//! advertised minimum can sit below the accepted one: librdkafka before 2.11.1 checks "features"
//! against single old versions (Produce v0 for compression), yet no client sends a version below
//! what the decoders and Kafka 4.0 (KIP-896) still take.

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Message, VersionRange};

/// One API: the range put in the ApiVersions answer and the lowest version actually decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiSupport {
    pub key: ApiKey,
    pub advertised_min: i16,
    pub max: i16,
    pub accepted_min: i16,
}

const fn api(key: ApiKey, advertised_min: i16, accepted_min: i16, max: i16) -> ApiSupport {
    ApiSupport {
        key,
        advertised_min,
        max,
        accepted_min,
    }
}

/// Every API the broker serves, in key order.
pub const BROKER_APIS: &[ApiSupport] = &[
    api(ApiKey::Produce, 0, 3, 9),
    api(ApiKey::Fetch, 4, 4, 12),
    api(ApiKey::ListOffsets, 1, 1, 7),
    api(ApiKey::Metadata, 0, 0, 12),
    api(ApiKey::OffsetCommit, 2, 2, 9),
    api(ApiKey::OffsetFetch, 1, 1, 9),
    api(ApiKey::FindCoordinator, 0, 0, 4),
    api(ApiKey::JoinGroup, 0, 0, 9),
    api(ApiKey::Heartbeat, 0, 0, 4),
    api(ApiKey::LeaveGroup, 0, 0, 5),
    api(ApiKey::SyncGroup, 0, 0, 5),
    api(ApiKey::DescribeGroups, 0, 0, 5),
    api(ApiKey::ListGroups, 0, 0, 4),
    api(ApiKey::ApiVersions, 0, 0, 4),
    api(ApiKey::CreateTopics, 2, 2, 7),
    api(ApiKey::DeleteTopics, 1, 1, 5),
    api(ApiKey::DescribeConfigs, 1, 1, 4),
    api(ApiKey::DeleteRecords, 0, 0, 2),
    api(ApiKey::InitProducerId, 0, 0, 4),
    // From v2, the first with current_leader_epoch; Kafka 4.0 removed v0-1 (KIP-896).
    api(ApiKey::OffsetForLeaderEpoch, 2, 2, 4),
    // Up to the versions before KIP-890's second part (transaction.version 2), which this
    // broker does not offer as a feature.
    api(ApiKey::AddPartitionsToTxn, 0, 0, 3),
    api(ApiKey::AddOffsetsToTxn, 0, 0, 3),
    api(ApiKey::EndTxn, 0, 0, 4),
    api(ApiKey::TxnOffsetCommit, 0, 0, 4),
    api(ApiKey::CreatePartitions, 0, 0, 3),
    api(ApiKey::DeleteGroups, 0, 0, 2),
    api(ApiKey::AlterConfigs, 0, 0, 2),
    api(ApiKey::IncrementalAlterConfigs, 0, 0, 1),
    api(ApiKey::AlterPartitionReassignments, 0, 0, 0),
    api(ApiKey::ListPartitionReassignments, 0, 0, 0),
    api(ApiKey::OffsetDelete, 0, 0, 0),
];

/// What the broker does with a request of this key and version.
pub fn broker_support(key: ApiKey) -> Option<&'static ApiSupport> {
    BROKER_APIS.iter().find(|api| api.key == key)
}

/// True when the broker decodes and answers this version of this API.
pub fn broker_accepts(key: ApiKey, version: i16) -> bool {
    broker_support(key).is_some_and(|api| (api.accepted_min..=api.max).contains(&version))
}

/// The first fields of every request header: enough to route a frame, or to refuse it, before
/// decoding anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderPrefix {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

impl HeaderPrefix {
    /// `None` when the frame is shorter than these eight bytes.
    pub fn peek(frame: &[u8]) -> Option<Self> {
        let bytes: &[u8; 8] = frame.get(..8)?.try_into().ok()?;
        Some(Self {
            api_key: i16::from_be_bytes([bytes[0], bytes[1]]),
            api_version: i16::from_be_bytes([bytes[2], bytes[3]]),
            correlation_id: i32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
        })
    }
}

/// The versions the crate's request type for `key` encodes and decodes, for the APIs this
/// workspace speaks. Not `ApiKey::valid_versions()`, which is wider (see the module docs).
pub fn request_versions(key: ApiKey) -> Option<VersionRange> {
    use kafka_protocol::messages::*;
    Some(match key {
        ApiKey::Produce => ProduceRequest::VERSIONS,
        ApiKey::Fetch => FetchRequest::VERSIONS,
        ApiKey::ListOffsets => ListOffsetsRequest::VERSIONS,
        ApiKey::Metadata => MetadataRequest::VERSIONS,
        ApiKey::OffsetCommit => OffsetCommitRequest::VERSIONS,
        ApiKey::OffsetFetch => OffsetFetchRequest::VERSIONS,
        ApiKey::FindCoordinator => FindCoordinatorRequest::VERSIONS,
        ApiKey::JoinGroup => JoinGroupRequest::VERSIONS,
        ApiKey::Heartbeat => HeartbeatRequest::VERSIONS,
        ApiKey::LeaveGroup => LeaveGroupRequest::VERSIONS,
        ApiKey::SyncGroup => SyncGroupRequest::VERSIONS,
        ApiKey::DescribeGroups => DescribeGroupsRequest::VERSIONS,
        ApiKey::ListGroups => ListGroupsRequest::VERSIONS,
        ApiKey::ApiVersions => ApiVersionsRequest::VERSIONS,
        ApiKey::CreateTopics => CreateTopicsRequest::VERSIONS,
        ApiKey::DeleteTopics => DeleteTopicsRequest::VERSIONS,
        ApiKey::DeleteGroups => DeleteGroupsRequest::VERSIONS,
        ApiKey::DeleteRecords => DeleteRecordsRequest::VERSIONS,
        ApiKey::InitProducerId => InitProducerIdRequest::VERSIONS,
        ApiKey::OffsetForLeaderEpoch => OffsetForLeaderEpochRequest::VERSIONS,
        ApiKey::AddPartitionsToTxn => AddPartitionsToTxnRequest::VERSIONS,
        ApiKey::AddOffsetsToTxn => AddOffsetsToTxnRequest::VERSIONS,
        ApiKey::EndTxn => EndTxnRequest::VERSIONS,
        ApiKey::TxnOffsetCommit => TxnOffsetCommitRequest::VERSIONS,
        ApiKey::DescribeConfigs => DescribeConfigsRequest::VERSIONS,
        ApiKey::CreatePartitions => CreatePartitionsRequest::VERSIONS,
        ApiKey::AlterConfigs => AlterConfigsRequest::VERSIONS,
        ApiKey::IncrementalAlterConfigs => IncrementalAlterConfigsRequest::VERSIONS,
        ApiKey::OffsetDelete => OffsetDeleteRequest::VERSIONS,
        ApiKey::AlterPartitionReassignments => AlterPartitionReassignmentsRequest::VERSIONS,
        ApiKey::ListPartitionReassignments => ListPartitionReassignmentsRequest::VERSIONS,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_accepted_version_is_one_the_crate_decodes() {
        for api in BROKER_APIS {
            let decodable = request_versions(api.key)
                .unwrap_or_else(|| panic!("no request type listed for {:?}", api.key));
            assert!(
                decodable.min <= api.accepted_min && api.max <= decodable.max,
                "{:?}: accepted {}..={} outside decodable {}",
                api.key,
                api.accepted_min,
                api.max,
                decodable
            );
            assert!(api.advertised_min <= api.accepted_min);
        }
    }

    #[test]
    fn the_reference_minimums_that_librdkafka_2_0_checks_are_advertised() {
        let advertised = |key| broker_support(key).map(|a| (a.advertised_min, a.max));
        assert_eq!(advertised(ApiKey::Produce), Some((0, 9)));
        assert_eq!(advertised(ApiKey::Fetch), Some((4, 12)));
        // Its coordinator lookup and balanced-consumer features.
        assert_eq!(advertised(ApiKey::FindCoordinator), Some((0, 4)));
        for key in [
            ApiKey::JoinGroup,
            ApiKey::SyncGroup,
            ApiKey::Heartbeat,
            ApiKey::LeaveGroup,
        ] {
            assert_eq!(advertised(key).map(|(min, _)| min), Some(0), "{key:?}");
        }
        assert_eq!(advertised(ApiKey::OffsetFetch), Some((1, 9)));
        assert!(broker_accepts(ApiKey::Produce, 3));
        assert!(!broker_accepts(ApiKey::Produce, 2));
        assert!(!broker_accepts(ApiKey::Fetch, 13));
    }

    #[test]
    fn header_prefix_needs_eight_bytes() {
        assert_eq!(HeaderPrefix::peek(&[0, 18, 0, 3, 0, 0, 0]), None);
        assert_eq!(
            HeaderPrefix::peek(&[0, 18, 0, 3, 0, 0, 1, 2, 9]),
            Some(HeaderPrefix {
                api_key: 18,
                api_version: 3,
                correlation_id: 258
            })
        );
    }
}
