//! Routes a request frame to its API's handler and encodes the answer.
//!
//! Errors are Kafka's: a request that cannot be understood closes the connection, as Kafka does
//! (unknown key, unsupported version, a body that does not decode); everything past decoding is
//! answered with per-topic or per-partition error codes, so one bad partition fails only itself.

mod admin;
mod api_versions;
mod configs;
mod delete_records;
mod fetch;
mod fetch_body;
mod group_admin;
mod group_membership;
mod group_offsets;
mod leader_epoch;
mod list_offsets;
mod metadata;
mod produce;
mod reassign;
mod route;
mod txn;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use protocol::frame::start_frame;
use protocol::pieces::OutFrame;
use protocol::versions::{broker_accepts, HeaderPrefix};
use route::Routed;
use tracing::debug;

use crate::fetch_memory::FetchPermit;
use crate::state::BrokerState;

/// What the connection does after a request.
#[derive(Debug)]
pub enum Reply {
    /// Send this frame: size prefix, header and fields, then the pieces (stored record batches of
    /// a Fetch answer; none for every other API). The permit, a Fetch answer's share of the fetch
    /// memory budget, is held until the frame is written.
    Frame(OutFrame, Option<FetchPermit>),
    /// Send nothing: a produce with `acks=0` gets no response at all.
    Silent,
    /// Close the connection, as Kafka does for a request it cannot parse.
    Close(String),
    /// The answer once it is known: an acks=all produce's, after its sync.
    Later(Deferred),
}

/// An answer that is only known later (after a sync).
pub struct Deferred(pub Pin<Box<dyn Future<Output = Reply> + Send>>);

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Deferred")
    }
}

/// Handles one request received by node `node` (the only node unless `--nodes`).
pub async fn handle(state: &BrokerState, node: i32, peer: SocketAddr, frame: Bytes) -> Reply {
    let Some(prefix) = HeaderPrefix::peek(&frame) else {
        return Reply::Close(format!(
            "frame of {} bytes is shorter than a request header",
            frame.len()
        ));
    };
    let Ok(key) = ApiKey::try_from(prefix.api_key) else {
        return Reply::Close(format!("unknown API key {}", prefix.api_key));
    };
    let version = prefix.api_version;
    if key == ApiKey::ApiVersions && version > api_versions::MAX_VERSION {
        // KIP-511: answer in v0 so the client can read our range and retry with a version we know.
        return encode(
            prefix.correlation_id,
            key,
            0,
            &api_versions::unsupported_version(),
        );
    }
    if !broker_accepts(key, version) {
        return Reply::Close(format!("{key:?} v{version} is not supported"));
    }
    let mut body = frame;
    let header = match RequestHeader::decode(&mut body, key.request_header_version(version)) {
        Ok(header) => header,
        Err(e) => return Reply::Close(format!("bad {key:?} v{version} request header: {e}")),
    };
    let request = match RequestKind::decode(key, &mut body, version) {
        Ok(request) => request,
        Err(e) => return Reply::Close(format!("bad {key:?} v{version} request body: {e}")),
    };
    debug!(api = ?key, version, correlation_id = header.correlation_id, client = ?header.client_id, "request");
    let (request, misrouted) = match route::before(state, node, key, request) {
        Routed::Forward(request, misrouted) => (request, misrouted),
        Routed::Answered(response) => {
            return encode(header.correlation_id, key, version, &response)
        }
    };
    let mut response = match request {
        RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(api_versions::handle()),
        RequestKind::Metadata(r) => ResponseKind::Metadata(metadata::handle(state, r, version)),
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(admin::create_topics(state, r, version))
        }
        RequestKind::DeleteTopics(r) => ResponseKind::DeleteTopics(admin::delete_topics(state, r)),
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(admin::create_partitions(state, r))
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(configs::describe(state, r, version))
        }
        RequestKind::AlterConfigs(r) => ResponseKind::AlterConfigs(configs::alter(state, r)),
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(configs::incremental_alter(state, r))
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(delete_records::handle(state, r))
        }
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(list_offsets::handle(state, r, version))
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            ResponseKind::OffsetForLeaderEpoch(leader_epoch::handle(state, r))
        }
        RequestKind::Produce(r) => match produce::handle(state, r, version) {
            produce::ProduceReply::Respond(response) => ResponseKind::Produce(response),
            produce::ProduceReply::AfterSync(waiting) => {
                let correlation_id = header.correlation_id;
                return Reply::Later(Deferred(Box::pin(async move {
                    let mut response = ResponseKind::Produce(waiting.synced().await);
                    misrouted.answer(&mut response);
                    encode(correlation_id, key, version, &response)
                })));
            }
            // acks=0 has no answer to carry NOT_LEADER_OR_FOLLOWER, so Kafka closes the
            // connection instead: the client then re-reads metadata.
            produce::ProduceReply::Silent if !misrouted.is_empty() => {
                return Reply::Close("acks=0 produce to partitions another node leads".into())
            }
            produce::ProduceReply::Silent => return Reply::Silent,
            produce::ProduceReply::Close(reason) => return Reply::Close(reason.into()),
        },
        RequestKind::Fetch(r) => {
            // Written around the stored batches, not through the crate (which would copy them).
            let (mut body, permit) = fetch::handle(state, r).await;
            body.add_not_led(misrouted.partitions());
            return match respond(header.correlation_id, key, version, |out| {
                body.encode(out, version)
            }) {
                Reply::Frame(frame, _) => Reply::Frame(frame, permit),
                other => other,
            };
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(txn::init_producer_id(state, r, version).await)
        }
        RequestKind::AddPartitionsToTxn(r) => {
            ResponseKind::AddPartitionsToTxn(txn::add_partitions(state, r, version).await)
        }
        RequestKind::AddOffsetsToTxn(r) => {
            ResponseKind::AddOffsetsToTxn(txn::add_offsets(state, r, version).await)
        }
        RequestKind::EndTxn(r) => ResponseKind::EndTxn(txn::end(state, r, version).await),
        RequestKind::TxnOffsetCommit(r) => {
            ResponseKind::TxnOffsetCommit(txn::commit_offsets(state, r, version).await)
        }
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(group_admin::find_coordinator(state, r, version))
        }
        RequestKind::JoinGroup(r) => {
            ResponseKind::JoinGroup(group_membership::join(state, &header, peer, r, version).await)
        }
        RequestKind::SyncGroup(r) => {
            ResponseKind::SyncGroup(group_membership::sync(state, r, version).await)
        }
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(group_membership::heartbeat(state, r)),
        RequestKind::LeaveGroup(r) => {
            ResponseKind::LeaveGroup(group_membership::leave(state, r, version))
        }
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(group_offsets::commit(state, r, version))
        }
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(group_offsets::fetch(state, r, version))
        }
        RequestKind::OffsetDelete(r) => ResponseKind::OffsetDelete(group_offsets::delete(state, r)),
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(group_admin::describe_groups(state, r, version))
        }
        RequestKind::ListGroups(r) => {
            ResponseKind::ListGroups(group_admin::list_groups(state, r, version))
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(group_admin::delete_groups(state, r))
        }
        RequestKind::AlterPartitionReassignments(r) => {
            ResponseKind::AlterPartitionReassignments(reassign::alter(state, r))
        }
        RequestKind::ListPartitionReassignments(_) => {
            ResponseKind::ListPartitionReassignments(reassign::list())
        }
        other => return Reply::Close(format!("no handler for {other:?}")),
    };
    route::after(state, node, &mut response, misrouted);
    encode(header.correlation_id, key, version, &response)
}

/// A response encoded whole by the crate.
fn encode(correlation_id: i32, key: ApiKey, version: i16, response: &ResponseKind) -> Reply {
    respond(correlation_id, key, version, |out| {
        response.encode(out, version).map_err(|e| e.to_string())?;
        Ok(Vec::new())
    })
}

/// The response frame: size prefix and header, then what `body` encodes into the buffer and the
/// pieces it returns to follow it.
fn respond(
    correlation_id: i32,
    key: ApiKey,
    version: i16,
    body: impl FnOnce(&mut BytesMut) -> Result<Vec<Bytes>, String>,
) -> Reply {
    let mut out = BytesMut::new();
    let at = start_frame(&mut out);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let encoded = header
        .encode(&mut out, key.response_header_version(version))
        .map_err(|e| e.to_string())
        .and_then(|()| body(&mut out))
        .and_then(|pieces| OutFrame::seal(out, at, pieces).map_err(|e| e.to_string()));
    match encoded {
        Ok(frame) => Reply::Frame(frame, None),
        // Only a handler bug can get here (a field set that the version lacks), or an answer past
        // 2 GiB; closing is what a client can recover from.
        Err(e) => Reply::Close(format!("cannot encode {key:?} v{version} response: {e}")),
    }
}

/// Kafka's error code as the wire carries it.
fn code(error: kafka_protocol::ResponseError) -> i16 {
    error.code()
}

/// A string field from a `&str`.
fn str_bytes(s: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.to_string())
}
