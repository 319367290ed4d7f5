//! DescribeAcls (API 29): the ACLs a filter matches, grouped by resource pattern; needs
//! Describe on the cluster.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use laminar_security::acl::Operation;

use super::acl_wire::{self, WireFilter};
use crate::authorization::Access;
use crate::broker::BrokerShared;

pub fn handle(shared: &BrokerShared, access: &Access, request: DescribeAclsRequest) -> DescribeAclsResponse {
    let refused = |error: ResponseError, message: String| {
        DescribeAclsResponse::default()
            .with_error_code(error.code())
            .with_error_message(Some(acl_wire::text(&message)))
    };
    if let Some((error, message)) = acl_wire::refusal(shared, access, Operation::Describe) {
        return refused(error, message);
    }
    let Some(authorizer) = &shared.authorizer else {
        return refused(ResponseError::SecurityDisabled, String::new());
    };
    let filter = match acl_wire::filter(WireFilter {
        resource_type: request.resource_type_filter,
        resource_name: request.resource_name_filter.as_ref(),
        pattern_type: request.pattern_type_filter,
        principal: request.principal_filter.as_ref(),
        host: request.host_filter.as_ref(),
        operation: request.operation,
        permission: request.permission_type,
    }) {
        Ok(filter) => filter,
        Err(message) => return refused(ResponseError::InvalidRequest, message),
    };
    let acls = authorizer.acls();
    let mut by_resource: BTreeMap<_, Vec<AclDescription>> = BTreeMap::new();
    for acl in acls.bindings().filter(|acl| filter.matches(acl)) {
        let description = AclDescription::default()
            .with_principal(acl_wire::text(&acl.principal.to_string()))
            .with_host(acl_wire::text(&acl.host))
            .with_operation(acl.operation.code())
            .with_permission_type(acl.permission.code());
        let resource = (acl.resource_type, acl.resource_name.clone(), acl.pattern_type);
        by_resource.entry(resource).or_default().push(description);
    }
    let resources = by_resource
        .into_iter()
        .map(|((resource_type, name, pattern_type), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(resource_type.code())
                .with_resource_name(acl_wire::text(&name))
                .with_pattern_type(pattern_type.code())
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default().with_resources(resources)
}
