//! ACLs: CreateAcls, DescribeAcls and DeleteAcls, in `laminar_security::acl`'s types.

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{ApiKey, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;
use laminar_security::acl::{
    AclBinding, AclFilter, Operation, PatternFilter, PatternType, Permission, ResourceType,
};

use crate::connection::Connection;
use crate::error::{check_code, ClientError};

/// Kafka's code for "any" in filters, and for MATCH among pattern types.
const ANY: i8 = 1;
const MATCH: i8 = 2;

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

impl Connection {
    /// Creates `acls`; the first refused one is the error.
    pub fn create_acls(&mut self, acls: &[AclBinding]) -> Result<(), ClientError> {
        let creations = acls
            .iter()
            .map(|acl| {
                AclCreation::default()
                    .with_resource_type(acl.resource_type.code())
                    .with_resource_name(text(&acl.resource_name))
                    .with_resource_pattern_type(acl.pattern_type.code())
                    .with_principal(text(&acl.principal.to_string()))
                    .with_host(text(&acl.host))
                    .with_operation(acl.operation.code())
                    .with_permission_type(acl.permission.code())
            })
            .collect();
        let answer = self.request(&CreateAclsRequest::default().with_creations(creations))?;
        for (acl, result) in acls.iter().zip(answer.results) {
            let message = result.error_message.as_ref().map(|m| m.to_string());
            check_code(ApiKey::CreateAcls, result.error_code, message.as_deref(), || {
                format!(" {acl:?}")
            })?;
        }
        Ok(())
    }

    /// The ACLs `filter` matches.
    pub fn describe_acls(&mut self, filter: &AclFilter) -> Result<Vec<AclBinding>, ClientError> {
        let wire = WireFilter::of(filter);
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(wire.resource_type)
            .with_resource_name_filter(wire.resource_name)
            .with_pattern_type_filter(wire.pattern_type)
            .with_principal_filter(wire.principal)
            .with_host_filter(wire.host)
            .with_operation(wire.operation)
            .with_permission_type(wire.permission);
        let answer = self.request(&request)?;
        let message = answer.error_message.as_ref().map(|m| m.to_string());
        check_code(
            ApiKey::DescribeAcls,
            answer.error_code,
            message.as_deref(),
            String::new,
        )?;
        let mut acls = Vec::new();
        for resource in answer.resources {
            for acl in resource.acls {
                acls.extend(binding(
                    (
                        resource.resource_type,
                        &resource.resource_name,
                        resource.pattern_type,
                    ),
                    (&acl.principal, &acl.host, acl.operation, acl.permission_type),
                ));
            }
        }
        Ok(acls)
    }

    /// Deletes what `filter` matches; returns what was deleted.
    pub fn delete_acls(&mut self, filter: &AclFilter) -> Result<Vec<AclBinding>, ClientError> {
        let wire = WireFilter::of(filter);
        let wire = DeleteAclsFilter::default()
            .with_resource_type_filter(wire.resource_type)
            .with_resource_name_filter(wire.resource_name)
            .with_pattern_type_filter(wire.pattern_type)
            .with_principal_filter(wire.principal)
            .with_host_filter(wire.host)
            .with_operation(wire.operation)
            .with_permission_type(wire.permission);
        let answer = self.request(&DeleteAclsRequest::default().with_filters(vec![wire]))?;
        let mut deleted = Vec::new();
        for result in answer.filter_results {
            let message = result.error_message.as_ref().map(|m| m.to_string());
            check_code(
                ApiKey::DeleteAcls,
                result.error_code,
                message.as_deref(),
                String::new,
            )?;
            for acl in result.matching_acls {
                deleted.extend(binding(
                    (acl.resource_type, &acl.resource_name, acl.pattern_type),
                    (&acl.principal, &acl.host, acl.operation, acl.permission_type),
                ));
            }
        }
        Ok(deleted)
    }
}

/// A filter's fields as DescribeAcls and DeleteAcls both carry them.
struct WireFilter {
    resource_type: i8,
    resource_name: Option<StrBytes>,
    pattern_type: i8,
    principal: Option<StrBytes>,
    host: Option<StrBytes>,
    operation: i8,
    permission: i8,
}

impl WireFilter {
    fn of(filter: &AclFilter) -> WireFilter {
        WireFilter {
            resource_type: filter.resource_type.map_or(ANY, ResourceType::code),
            resource_name: filter.resource_name.as_deref().map(text),
            pattern_type: pattern_code(filter.pattern_type),
            principal: filter.principal.as_ref().map(|p| text(&p.to_string())),
            host: filter.host.as_deref().map(text),
            operation: filter.operation.map_or(ANY, Operation::code),
            permission: filter.permission.map_or(ANY, Permission::code),
        }
    }
}

fn pattern_code(filter: PatternFilter) -> i8 {
    match filter {
        PatternFilter::Any => ANY,
        PatternFilter::Match => MATCH,
        PatternFilter::Exactly(pattern) => pattern.code(),
    }
}

/// An ACL as the broker described it; one with codes this client does not know is skipped.
fn binding(
    (resource_type, name, pattern_type): (i8, &StrBytes, i8),
    (principal, host, operation, permission): (&StrBytes, &StrBytes, i8, i8),
) -> Option<AclBinding> {
    Some(AclBinding {
        resource_type: ResourceType::from_code(resource_type)?,
        resource_name: name.to_string(),
        pattern_type: PatternType::from_code(pattern_type)?,
        principal: principal.parse().ok()?,
        host: host.to_string(),
        operation: Operation::from_code(operation)?,
        permission: Permission::from_code(permission)?,
    })
}
