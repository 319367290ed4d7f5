//! PRODUCER_FENCED (KIP-588) for the versions that know it: older requests get
//! INVALID_PRODUCER_EPOCH instead, as Kafka answers them, so clients that only speak those
//! versions (kafkajs) recognise that they were fenced.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ResponseKind;

const FENCED: i16 = 90;

/// Rewrites PRODUCER_FENCED in `response` to INVALID_PRODUCER_EPOCH where `version` predates it.
pub fn answer_fencing_as_version_knows(response: &mut ResponseKind, version: i16) {
    let older = ResponseError::InvalidProducerEpoch.code();
    let downgrade = |code: &mut i16| {
        if *code == FENCED {
            *code = older;
        }
    };
    match response {
        ResponseKind::InitProducerId(r) if version < 4 => downgrade(&mut r.error_code),
        ResponseKind::EndTxn(r) if version < 2 => downgrade(&mut r.error_code),
        ResponseKind::AddOffsetsToTxn(r) if version < 2 => downgrade(&mut r.error_code),
        ResponseKind::AddPartitionsToTxn(r) if version < 2 => r
            .results_by_topic_v3_and_below
            .iter_mut()
            .flat_map(|t| t.results_by_partition.iter_mut())
            .for_each(|p| downgrade(&mut p.partition_error_code)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{EndTxnResponse, InitProducerIdResponse};

    #[test]
    fn older_versions_hear_invalid_producer_epoch_newer_ones_producer_fenced() {
        let fenced = ResponseError::ProducerFenced.code();
        assert_eq!(fenced, FENCED);
        let end = |version| {
            let mut response = ResponseKind::EndTxn(EndTxnResponse::default().with_error_code(fenced));
            answer_fencing_as_version_knows(&mut response, version);
            match response {
                ResponseKind::EndTxn(r) => r.error_code,
                _ => unreachable!(),
            }
        };
        assert_eq!((end(1), end(2)), (47, 90));
        let mut init =
            ResponseKind::InitProducerId(InitProducerIdResponse::default().with_error_code(fenced));
        answer_fencing_as_version_knows(&mut init, 3);
        assert!(matches!(init, ResponseKind::InitProducerId(r) if r.error_code == 47));
    }
}
