//! DeleteAcls (API 31): removes the ACLs each filter matches and answers them per filter;
//! needs Alter on the cluster.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use laminar_security::acl::{AclBinding, Operation};

use super::acl_wire::{self, WireFilter};
use crate::authorization::Access;
use crate::broker::BrokerShared;

pub async fn handle(
    shared: &BrokerShared,
    access: &Access,
    request: DeleteAclsRequest,
) -> DeleteAclsResponse {
    let failed = |error: ResponseError, message: &str| {
        DeleteAclsFilterResult::default()
            .with_error_code(error.code())
            .with_error_message(Some(acl_wire::text(message)))
    };
    let results = match (
        acl_wire::refusal(shared, access, Operation::Alter),
        &shared.authorizer,
    ) {
        (None, Some(authorizer)) => {
            let parsed: Vec<Result<_, String>> = request
                .filters
                .iter()
                .map(|f| {
                    acl_wire::filter(WireFilter {
                        resource_type: f.resource_type_filter,
                        resource_name: f.resource_name_filter.as_ref(),
                        pattern_type: f.pattern_type_filter,
                        principal: f.principal_filter.as_ref(),
                        host: f.host_filter.as_ref(),
                        operation: f.operation,
                        permission: f.permission_type,
                    })
                })
                .collect();
            let valid: Vec<_> = parsed.iter().filter_map(|p| p.as_ref().ok()).cloned().collect();
            match authorizer.delete(&valid).await {
                Ok(removed) => {
                    let mut removed = removed.into_iter();
                    parsed
                        .iter()
                        .map(|p| match p {
                            Err(message) => failed(ResponseError::InvalidRequest, message),
                            Ok(_) => matched(removed.next().unwrap_or_default()),
                        })
                        .collect()
                }
                Err((error, message)) => parsed.iter().map(|_| failed(error, &message)).collect(),
            }
        }
        (refused, _) => {
            let (error, message) = refused.unwrap_or((ResponseError::SecurityDisabled, String::new()));
            request.filters.iter().map(|_| failed(error, &message)).collect()
        }
    };
    DeleteAclsResponse::default().with_filter_results(results)
}

fn matched(acls: Vec<AclBinding>) -> DeleteAclsFilterResult {
    let matching = acls
        .into_iter()
        .map(|acl| {
            DeleteAclsMatchingAcl::default()
                .with_resource_type(acl.resource_type.code())
                .with_resource_name(acl_wire::text(&acl.resource_name))
                .with_pattern_type(acl.pattern_type.code())
                .with_principal(acl_wire::text(&acl.principal.to_string()))
                .with_host(acl_wire::text(&acl.host))
                .with_operation(acl.operation.code())
                .with_permission_type(acl.permission.code())
        })
        .collect();
    DeleteAclsFilterResult::default().with_matching_acls(matching)
}
