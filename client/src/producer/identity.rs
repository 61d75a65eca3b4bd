//! Who an idempotent producer is to the brokers: a producer id and epoch from InitProducerId,
//! and which answers to its batches Kafka's producer treats as fatal.
//!
//! Without a transactional id, every InitProducerId hands out a fresh producer id at epoch 0,
//! so a restarted producer is a stranger to the brokers' sequence windows. With one, the
//! transactional id keeps its producer id and each InitProducerId bumps the epoch: the epoch is
//! the fencing token, and batches of an older epoch are refused (INVALID_PRODUCER_EPOCH), which
//! shuts out a zombie instance that came back after its replacement started.

use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::client::Client;
use crate::coordinator::{find_coordinator, KeyType};
use crate::error::{Error, ProtocolError, Result, ServerError};
use crate::retry::RetryPolicy;

/// The identity InitProducerId hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerIdAndEpoch {
    pub producer_id: i64,
    pub epoch: i16,
}

/// Kafka's `transaction.timeout.ms` default. Brokers check it against their maximum even though
/// this producer never opens a transaction.
const TRANSACTION_TIMEOUT_MS: i32 = 60_000;

/// Asks for a producer id (and, with a transactional id, the next epoch), retrying what Kafka's
/// producer retries: unreachable brokers and coordinators that are moving or loading.
pub async fn init_producer_id(
    client: &Client,
    transactional_id: Option<&str>,
    retry: &RetryPolicy,
) -> Result<ProducerIdAndEpoch> {
    let mut attempt = 0;
    loop {
        let err = match try_init(client, transactional_id).await {
            Ok(id) => return Ok(id),
            Err(err) => err,
        };
        attempt += 1;
        let delay = retry
            .delay(attempt)
            .filter(|_| init_is_retriable(&err))
            .ok_or_else(|| err.clone())?;
        tracing::debug!(%err, attempt, ?delay, "InitProducerId failed, retrying");
        tokio::time::sleep(delay).await;
    }
}

async fn try_init(client: &Client, transactional_id: Option<&str>) -> Result<ProducerIdAndEpoch> {
    let conn = match transactional_id {
        // InitProducerId with a transactional id must go to the broker that owns the id's state
        // (NOT_COORDINATOR elsewhere); a single broker is its own coordinator.
        Some(id) => {
            let node = find_coordinator(client, KeyType::Transaction, id).await?;
            client.broker(node.id).await?
        }
        // Kafka's producer asks the least loaded broker; any broker can allocate an id.
        None => client.any_connection().await?,
    };
    let resp = conn.call(|_| request(transactional_id)).await?;
    identity_from(&resp, transactional_id)
}

/// The request for every version: v3+ could name a previous id and epoch to resume after an
/// error (KIP-360); this producer never resumes, so they stay -1.
fn request(transactional_id: Option<&str>) -> InitProducerIdRequest {
    InitProducerIdRequest::default()
        // The crate's default is Some(""), which a broker refuses: set it either way.
        .with_transactional_id(
            transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.to_string()))),
        )
        .with_transaction_timeout_ms(TRANSACTION_TIMEOUT_MS)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

fn identity_from(
    resp: &InitProducerIdResponse,
    transactional_id: Option<&str>,
) -> Result<ProducerIdAndEpoch> {
    if resp.error_code != 0 {
        let mut err = ServerError::new(resp.error_code);
        if let Some(id) = transactional_id {
            err = err.message(Some(format!("transactional id {id}")));
        }
        return Err(err.into());
    }
    if resp.producer_id.0 < 0 || resp.producer_epoch < 0 {
        return Err(ProtocolError::BadAnswer {
            api: "InitProducerId",
            reason: format!(
                "producer id {} epoch {} without an error",
                resp.producer_id.0, resp.producer_epoch
            ),
        }
        .into());
    }
    Ok(ProducerIdAndEpoch {
        producer_id: resp.producer_id.0,
        epoch: resp.producer_epoch,
    })
}

/// CONCURRENT_TRANSACTIONS is not retriable in Kafka's error table, but for InitProducerId it
/// only means the previous instance's transaction is still being aborted: Kafka's producer
/// waits and asks again, and so does this one.
fn init_is_retriable(err: &Error) -> bool {
    err.is_retriable()
        || err
            .server()
            .is_some_and(|e| e.is(ResponseError::ConcurrentTransactions))
}

/// How the producer must take an error answer to one of its idempotent batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchErrorKind {
    /// Retry the batch (after its backoff), or fail it once retries run out.
    Retry,
    /// The producer cannot go on without reordering or losing records: it stops.
    Fatal,
    /// An old broker's way of saying "already appended" (DUPLICATE_SEQUENCE_NUMBER): success
    /// with an unknown offset, as Kafka's and librdkafka's producers take it.
    Duplicate,
    /// Whatever the error's own class says.
    Ordinary,
}

/// Kafka's producer's reading of an error answer to a batch of an idempotent producer.
/// `oldest_unacked`: no batch sent before this one is still unacknowledged.
pub fn classify(err: &ServerError, oldest_unacked: bool) -> BatchErrorKind {
    match err.kind() {
        // An older batch failed and will be retried first; this one follows it again.
        ResponseError::OutOfOrderSequenceNumber if !oldest_unacked => BatchErrorKind::Retry,
        // Everything before this batch is acknowledged, yet the broker expected another
        // sequence: it lost (or never had) this producer's state. Kafka raises
        // OutOfOrderSequenceException, and the records in between could be lost.
        ResponseError::OutOfOrderSequenceNumber
        // A newer instance of this transactional id exists: this one is a zombie.
        | ResponseError::InvalidProducerEpoch
        | ResponseError::ProducerFenced
        // The broker no longer knows this producer id (its records expired): continuing
        // would restart sequences silently.
        | ResponseError::UnknownProducerId
        | ResponseError::InvalidProducerIdMapping
        | ResponseError::TransactionalIdAuthorizationFailed
        | ResponseError::ClusterAuthorizationFailed => BatchErrorKind::Fatal,
        ResponseError::DuplicateSequenceNumber => BatchErrorKind::Duplicate,
        _ => BatchErrorKind::Ordinary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn requests_encode_at_every_version_we_speak() {
        for id in [None, Some("billing")] {
            let req = request(id);
            for v in 0..=4 {
                req.encode(&mut bytes::BytesMut::new(), v).unwrap();
            }
        }
        assert_eq!(request(None).transactional_id, None);
        for v in 1..=4 {
            let req =
                crate::coordinator::find_coordinator_request(KeyType::Transaction, "t", v).unwrap();
            assert_eq!(req.key_type, 1);
            req.encode(&mut bytes::BytesMut::new(), v).unwrap();
        }
    }

    #[test]
    fn answers_become_identities_or_errors() {
        let ok = InitProducerIdResponse::default()
            .with_producer_id(ProducerId(7))
            .with_producer_epoch(2);
        assert_eq!(
            identity_from(&ok, None).unwrap(),
            ProducerIdAndEpoch {
                producer_id: 7,
                epoch: 2
            }
        );
        let refused = InitProducerIdResponse::default()
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
        let err = identity_from(&refused, Some("billing")).unwrap_err();
        assert_eq!(err.server().map(|e| e.code), Some(53));
        assert!(err.to_string().contains("billing"), "{err}");
        assert!(!init_is_retriable(&err));
        let bogus = InitProducerIdResponse::default().with_producer_id(ProducerId(-1));
        assert!(matches!(
            identity_from(&bogus, None),
            Err(Error::Protocol(ProtocolError::BadAnswer { .. }))
        ));
        let busy: Error = ServerError::new(ResponseError::ConcurrentTransactions.code()).into();
        assert!(init_is_retriable(&busy));
        let moving: Error = ServerError::new(ResponseError::NotCoordinator.code()).into();
        assert!(init_is_retriable(&moving));
    }

    #[test]
    fn fatal_errors_are_the_ones_kafkas_producer_cannot_recover_from() {
        let code = |e: ResponseError| ServerError::new(e.code());
        use BatchErrorKind::*;
        assert_eq!(
            classify(&code(ResponseError::OutOfOrderSequenceNumber), false),
            Retry
        );
        assert_eq!(
            classify(&code(ResponseError::OutOfOrderSequenceNumber), true),
            Fatal
        );
        assert_eq!(
            classify(&code(ResponseError::InvalidProducerEpoch), false),
            Fatal
        );
        assert_eq!(classify(&code(ResponseError::ProducerFenced), true), Fatal);
        assert_eq!(
            classify(&code(ResponseError::UnknownProducerId), true),
            Fatal
        );
        assert_eq!(
            classify(&code(ResponseError::DuplicateSequenceNumber), true),
            Duplicate
        );
        assert_eq!(
            classify(&code(ResponseError::NotLeaderOrFollower), true),
            Ordinary
        );
    }
}
