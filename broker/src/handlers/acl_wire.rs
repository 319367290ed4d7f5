//! ACLs between Kafka's wire codes and `laminar_security::acl`'s types, for CreateAcls,
//! DescribeAcls and DeleteAcls; and the refusal all three share when ACLs are off or the
//! principal may not manage them.

use kafka_protocol::error::ResponseError;
use kafka_protocol::protocol::StrBytes;
use laminar_security::acl::{
    AclBinding, AclFilter, Operation, PatternFilter, PatternType, Permission, ResourceType,
};

use crate::authorization::Access;
use crate::broker::BrokerShared;

/// Kafka's code for "any" in filters.
const ANY: i8 = 1;
/// Kafka's pattern-type code for MATCH in filters.
const MATCH: i8 = 2;

/// Why an ACL request is refused as a whole: ACLs off (SECURITY_DISABLED), or the principal
/// lacks `operation` on the cluster.
pub fn refusal(
    shared: &BrokerShared,
    access: &Access,
    operation: Operation,
) -> Option<(ResponseError, String)> {
    if shared.authorizer.is_none() {
        let message = "No authorizer is configured (authorizer.class.name)".to_string();
        return Some((ResponseError::SecurityDisabled, message));
    }
    if !access.allows_cluster(operation) {
        let message = format!("{operation} on the cluster is needed to manage ACLs");
        return Some((ResponseError::ClusterAuthorizationFailed, message));
    }
    None
}

/// The fields of a wire ACL, as CreateAcls sends them.
pub struct WireAcl<'a> {
    pub resource_type: i8,
    pub resource_name: &'a str,
    pub pattern_type: i8,
    pub principal: &'a str,
    pub host: &'a str,
    pub operation: i8,
    pub permission: i8,
}

/// A new ACL from its wire form, validated as Kafka validates it.
pub fn binding(wire: WireAcl<'_>) -> Result<AclBinding, String> {
    let code = |what: &str, value: i8| format!("invalid {what} code {value}");
    let binding = AclBinding {
        resource_type: ResourceType::from_code(wire.resource_type)
            .ok_or_else(|| code("resource type", wire.resource_type))?,
        resource_name: wire.resource_name.to_string(),
        pattern_type: PatternType::from_code(wire.pattern_type)
            .ok_or_else(|| code("pattern type", wire.pattern_type))?,
        principal: wire.principal.parse().map_err(|e| format!("{e}"))?,
        host: wire.host.to_string(),
        operation: Operation::from_code(wire.operation).ok_or_else(|| code("operation", wire.operation))?,
        permission: Permission::from_code(wire.permission)
            .ok_or_else(|| code("permission", wire.permission))?,
    };
    binding.validate().map_err(|e| e.to_string())?;
    Ok(binding)
}

/// The fields of a wire filter (DescribeAcls' request, a DeleteAcls filter); `None` is any.
pub struct WireFilter<'a> {
    pub resource_type: i8,
    pub resource_name: Option<&'a StrBytes>,
    pub pattern_type: i8,
    pub principal: Option<&'a StrBytes>,
    pub host: Option<&'a StrBytes>,
    pub operation: i8,
    pub permission: i8,
}

/// A filter from its wire form.
pub fn filter(wire: WireFilter<'_>) -> Result<AclFilter, String> {
    fn any_or<T>(value: i8, parse: fn(i8) -> Option<T>, what: &str) -> Result<Option<T>, String> {
        match value {
            ANY => Ok(None),
            value => parse(value)
                .map(Some)
                .ok_or_else(|| format!("invalid {what} code {value}")),
        }
    }
    let pattern_type = match wire.pattern_type {
        ANY => PatternFilter::Any,
        MATCH => PatternFilter::Match,
        value => PatternFilter::Exactly(
            PatternType::from_code(value).ok_or_else(|| format!("invalid pattern type code {value}"))?,
        ),
    };
    Ok(AclFilter {
        resource_type: any_or(wire.resource_type, ResourceType::from_code, "resource type")?,
        resource_name: wire.resource_name.map(|n| n.to_string()),
        pattern_type,
        principal: wire
            .principal
            .map(|p| p.parse())
            .transpose()
            .map_err(|e| format!("{e}"))?,
        host: wire.host.map(|h| h.to_string()),
        operation: any_or(wire.operation, Operation::from_code, "operation")?,
        permission: any_or(wire.permission, Permission::from_code, "permission")?,
    })
}

pub fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}
