//! Client quotas: AlterClientQuotas and DescribeClientQuotas, in `laminar_security::quota`'s
//! types.

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{AlterClientQuotasRequest, ApiKey, DescribeClientQuotasRequest};
use kafka_protocol::protocol::StrBytes;
use laminar_security::quota::{EntityFilter, NameMatch};
use laminar_security::{QuotaEntity, QuotaKey};

use crate::connection::Connection;
use crate::error::{check_code, ClientError};

/// One entity's quotas as DescribeClientQuotas lists them: Kafka's key names and values.
pub type QuotaValues = Vec<(String, f64)>;

impl Connection {
    /// Sets (`Some`) or removes (`None`) quotas of `entity`.
    pub fn alter_client_quotas(
        &mut self,
        entity: &QuotaEntity,
        ops: &[(QuotaKey, Option<f64>)],
    ) -> Result<(), ClientError> {
        let parts = entity.parts().into_iter().map(|(kind, name)| {
            EntityData::default()
                .with_entity_type(StrBytes::from_static_str(kind))
                .with_entity_name(name.map(|n| StrBytes::from_string(n.to_string())))
        });
        let ops = ops.iter().map(|(key, value)| {
            OpData::default()
                .with_key(StrBytes::from_static_str(key.name()))
                .with_value(value.unwrap_or(0.0))
                .with_remove(value.is_none())
        });
        let entry = EntryData::default()
            .with_entity(parts.collect())
            .with_ops(ops.collect());
        let answer = self.request(&AlterClientQuotasRequest::default().with_entries(vec![entry]))?;
        for result in answer.entries {
            let message = result.error_message.as_ref().map(|m| m.to_string());
            check_code(
                ApiKey::AlterClientQuotas,
                result.error_code,
                message.as_deref(),
                || format!(" for {entity}"),
            )?;
        }
        Ok(())
    }

    /// The quotas of the entities `filter` matches (`strict`: only entities of exactly the
    /// types it names).
    pub fn describe_client_quotas(
        &mut self,
        filter: &[EntityFilter],
        strict: bool,
    ) -> Result<Vec<(QuotaEntity, QuotaValues)>, ClientError> {
        let components = filter.iter().map(|component| {
            let (match_type, name) = match &component.matched {
                NameMatch::Exact(name) => (0, Some(StrBytes::from_string(name.clone()))),
                NameMatch::Default => (1, None),
                NameMatch::Any => (2, None),
            };
            ComponentData::default()
                .with_entity_type(StrBytes::from_string(component.entity_type.clone()))
                .with_match_type(match_type)
                .with_match(name)
        });
        let request = DescribeClientQuotasRequest::default()
            .with_components(components.collect())
            .with_strict(strict);
        let answer = self.request(&request)?;
        let message = answer.error_message.as_ref().map(|m| m.to_string());
        check_code(
            ApiKey::DescribeClientQuotas,
            answer.error_code,
            message.as_deref(),
            String::new,
        )?;
        let mut described = Vec::new();
        for entry in answer.entries.unwrap_or_default() {
            let parts = entry
                .entity
                .iter()
                .map(|part| (part.entity_type.as_str(), part.entity_name.as_deref()));
            let entity = QuotaEntity::from_parts(parts).map_err(|e| ClientError::Decode {
                api: ApiKey::DescribeClientQuotas,
                version: 0,
                message: e.to_string(),
            })?;
            let values = entry
                .values
                .iter()
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            described.push((entity, values));
        }
        Ok(described)
    }
}
