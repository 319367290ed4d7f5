//! DescribeClientQuotas (API 48): the quotas of the entities a filter matches, as Kafka
//! matches them (each component names an entity type and an exact name, the default, or any
//! name; `strict` leaves out entities with types the filter does not name). A filter that
//! names an unknown type, a type twice, or an exact match without a name is INVALID_REQUEST.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;
use laminar_security::quota::{EntityFilter, NameMatch, ENTITY_CLIENT_ID, ENTITY_IP, ENTITY_USER};

use crate::authorization::Access;
use crate::broker::BrokerShared;

pub fn handle(
    shared: &BrokerShared,
    _access: &Access,
    request: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let filter = match filter_of(&request.components) {
        Ok(filter) => filter,
        Err(reason) => {
            return DescribeClientQuotasResponse::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(StrBytes::from_string(reason)))
        }
    };
    let quotas = shared.client_quotas.quotas();
    let entries = quotas.matching(&filter, request.strict).map(|(entity, keys)| {
        let entity = entity.parts().into_iter().map(|(kind, name)| {
            EntityData::default()
                .with_entity_type(StrBytes::from_static_str(kind))
                .with_entity_name(name.map(|n| StrBytes::from_string(n.to_string())))
        });
        let values = keys.iter().map(|(key, value)| {
            ValueData::default()
                .with_key(StrBytes::from_static_str(key.name()))
                .with_value(*value)
        });
        EntryData::default()
            .with_entity(entity.collect())
            .with_values(values.collect())
    });
    DescribeClientQuotasResponse::default().with_entries(Some(entries.collect()))
}

fn filter_of(components: &[ComponentData]) -> Result<Vec<EntityFilter>, String> {
    let mut filter: Vec<EntityFilter> = Vec::with_capacity(components.len());
    for component in components {
        let entity_type = component.entity_type.as_str();
        if ![ENTITY_USER, ENTITY_CLIENT_ID, ENTITY_IP].contains(&entity_type) {
            return Err(format!("unknown entity type {entity_type:?}"));
        }
        if filter.iter().any(|f| f.entity_type == entity_type) {
            return Err(format!("entity type {entity_type} named twice"));
        }
        let matched = match (component.match_type, &component._match) {
            (0, Some(name)) => NameMatch::Exact(name.to_string()),
            (0, None) => return Err("an exact match needs a name".into()),
            (1, _) => NameMatch::Default,
            (2, _) => NameMatch::Any,
            (other, _) => return Err(format!("unknown match type {other}")),
        };
        filter.push(EntityFilter {
            entity_type: entity_type.to_string(),
            matched,
        });
    }
    Ok(filter)
}
