//! ApiVersions: the table of `protocol::versions`, and KIP-511's answer to a newer client.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::ApiVersionsResponse;
use kafka_protocol::ResponseError;
use protocol::versions::BROKER_APIS;

pub const MAX_VERSION: i16 = 4;

fn advertised() -> Vec<ApiVersion> {
    BROKER_APIS
        .iter()
        .map(|api| {
            ApiVersion::default()
                .with_api_key(api.key as i16)
                .with_min_version(api.advertised_min)
                .with_max_version(api.max)
        })
        .collect()
}

pub fn handle() -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(advertised())
}

/// For a version above ours: UNSUPPORTED_VERSION, with at least our ApiVersions range, encoded at
/// v0 by the caller. Clients retry with a version from it.
pub fn unsupported_version() -> kafka_protocol::messages::ResponseKind {
    kafka_protocol::messages::ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_api_keys(advertised()),
    )
}
