//! AlterClientQuotas (API 49): sets and removes client quotas, one result per entity, as
//! Kafka: an entity or key that breaks Kafka's rules gets INVALID_REQUEST and changes nothing;
//! the other entities of the request are applied. `validate_only` checks and changes nothing.
//! A single node keeps the quotas in its `client-quotas` file (published to every shard at
//! once); a cluster in its metadata log (applied as each broker applies the metadata).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_request::EntryData;
use kafka_protocol::messages::alter_client_quotas_response::{self as response, EntityData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;
use laminar_security::quota::{check_alteration, QuotaOps};
use laminar_security::{QuotaEntity, QuotaError};

use crate::authorization::Access;
use crate::broker::BrokerShared;

/// The most entities one request changes (Kafka sets none; one request is one store write or
/// one metadata log entry).
pub const ENTITIES_PER_REQUEST_MAX: usize = 1000;

pub async fn handle(
    shared: &BrokerShared,
    _access: &Access,
    request: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    if request.entries.len() > ENTITIES_PER_REQUEST_MAX {
        let reason = format!("at most {ENTITIES_PER_REQUEST_MAX} entities per request");
        return answer(&request.entries, |_| {
            Err((ResponseError::InvalidRequest, reason.clone()))
        });
    }
    let checked: Vec<Result<(QuotaEntity, QuotaOps), QuotaError>> =
        request.entries.iter().map(check).collect();
    let valid: Vec<(QuotaEntity, QuotaOps)> =
        checked.iter().filter_map(|c| c.as_ref().ok().cloned()).collect();
    let applied = match request.validate_only || valid.is_empty() {
        true => vec![Ok(()); valid.len()],
        false => shared.client_quotas.alter(&valid).await,
    };
    let (mut results, mut applied) = (checked.into_iter(), applied.into_iter());
    answer(&request.entries, |_| match results.next() {
        Some(Err(invalid)) => Err((ResponseError::InvalidRequest, invalid.0)),
        _ => applied.next().unwrap_or(Ok(())),
    })
}

/// One entry's entity and changes, checked as Kafka checks them.
fn check(entry: &EntryData) -> Result<(QuotaEntity, QuotaOps), QuotaError> {
    let parts = entry
        .entity
        .iter()
        .map(|part| (part.entity_type.as_str(), part.entity_name.as_deref()));
    let entity = QuotaEntity::from_parts(parts)?;
    let ops = entry
        .ops
        .iter()
        .map(|op| (op.key.as_str(), (!op.remove).then_some(op.value)));
    let ops = check_alteration(&entity, ops)?;
    Ok((entity, ops))
}

/// Every entry refused with `code` (the whole request was).
pub fn refused_whole(request: &AlterClientQuotasRequest, code: i16) -> AlterClientQuotasResponse {
    let message = "AlterConfigs on the cluster is needed".to_string();
    let mut response = answer(&request.entries, |_| {
        Err((ResponseError::UnknownServerError, message.clone()))
    });
    for entry in &mut response.entries {
        entry.error_code = code;
    }
    response
}

/// The response: each entry's entity, with what `result_of` says of it.
fn answer(
    entries: &[EntryData],
    mut result_of: impl FnMut(&EntryData) -> Result<(), (ResponseError, String)>,
) -> AlterClientQuotasResponse {
    let entries = entries.iter().map(|entry| {
        let entity = entry
            .entity
            .iter()
            .map(|part| {
                EntityData::default()
                    .with_entity_type(part.entity_type.clone())
                    .with_entity_name(part.entity_name.clone())
            })
            .collect();
        let (code, message) = match result_of(entry) {
            Ok(()) => (0, None),
            Err((error, message)) => (error.code(), Some(StrBytes::from_string(message))),
        };
        response::EntryData::default()
            .with_error_code(code)
            .with_error_message(message)
            .with_entity(entity)
    });
    AlterClientQuotasResponse::default().with_entries(entries.collect())
}
