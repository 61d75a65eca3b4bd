//! InitProducerId: an id and epoch for an idempotent producer, or the next epoch of a
//! transactional id (which fences the instance that held the previous one).

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::code;
use crate::state::BrokerState;

pub fn handle(state: &BrokerState, request: InitProducerIdRequest) -> InitProducerIdResponse {
    // Ids and epochs sent in v3+ (to resume after an error) are ignored, as Kafka does without a
    // transactional id: a fresh id is always safe.
    let transactional_id = request.transactional_id.as_ref().map(|t| t.as_str());
    match state.producer_ids.init(transactional_id) {
        Ok((id, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Err(error) => InitProducerIdResponse::default()
            .with_error_code(code(error))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }
}
