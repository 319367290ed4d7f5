//! CreateAcls (API 30): adds ACLs, each validated as Kafka validates it; needs Alter on the
//! cluster. One result per creation, in request order; the valid ones are stored together.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use laminar_security::acl::Operation;

use super::acl_wire::{self, WireAcl};
use crate::authorization::Access;
use crate::broker::BrokerShared;

pub async fn handle(
    shared: &BrokerShared,
    access: &Access,
    request: CreateAclsRequest,
) -> CreateAclsResponse {
    let failed = |(error, message): (ResponseError, String)| {
        AclCreationResult::default()
            .with_error_code(error.code())
            .with_error_message(Some(acl_wire::text(&message)))
    };
    let results = match (
        acl_wire::refusal(shared, access, Operation::Alter),
        &shared.authorizer,
    ) {
        (None, Some(authorizer)) => {
            let parsed: Vec<Result<_, String>> = request
                .creations
                .iter()
                .map(|c| {
                    acl_wire::binding(WireAcl {
                        resource_type: c.resource_type,
                        resource_name: &c.resource_name,
                        pattern_type: c.resource_pattern_type,
                        principal: &c.principal,
                        host: &c.host,
                        operation: c.operation,
                        permission: c.permission_type,
                    })
                })
                .collect();
            let valid: Vec<_> = parsed.iter().filter_map(|p| p.as_ref().ok()).cloned().collect();
            let stored = authorizer.create(&valid).await;
            parsed
                .into_iter()
                .map(|p| match (p, &stored) {
                    (Err(message), _) => failed((ResponseError::InvalidRequest, message)),
                    (Ok(_), Err(error)) => failed(error.clone()),
                    (Ok(_), Ok(())) => AclCreationResult::default(),
                })
                .collect()
        }
        (refused, _) => {
            let refused = refused.unwrap_or((ResponseError::SecurityDisabled, String::new()));
            request
                .creations
                .iter()
                .map(|_| failed(refused.clone()))
                .collect()
        }
    };
    CreateAclsResponse::default().with_results(results)
}
