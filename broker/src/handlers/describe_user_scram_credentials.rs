//! DescribeUserScramCredentials: which SCRAM mechanisms each user has, with their iteration
//! counts (never salts or keys). As Kafka: no list, or an empty one, means every user; a user named twice gets
//! DUPLICATE_RESOURCE, one without credentials RESOURCE_NOT_FOUND.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::BrokerShared;

pub fn handle(
    shared: &BrokerShared,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let listed = crate::scram_users::with_scram_users(shared, |users| users.list());
    let mut known: BTreeMap<&str, Vec<CredentialInfo>> = BTreeMap::new();
    for (user, mechanism, iterations) in &listed {
        known.entry(user).or_default().push(
            CredentialInfo::default()
                .with_mechanism(mechanism.kafka_type())
                .with_iterations(i32::try_from(*iterations).unwrap_or(i32::MAX)),
        );
    }
    let results = match request.users.as_ref().filter(|users| !users.is_empty()) {
        None => known
            .into_iter()
            .map(|(user, infos)| found(user, infos))
            .collect(),
        Some(users) => {
            let mut asked: BTreeMap<&str, usize> = BTreeMap::new();
            for user in users {
                *asked.entry(user.name.as_str()).or_default() += 1;
            }
            asked
                .into_iter()
                .map(|(user, count)| match (count, known.remove(user)) {
                    (1, Some(infos)) => found(user, infos),
                    (1, None) => refused(
                        user,
                        ResponseError::ResourceNotFound,
                        "Attempt to describe a user credential that does not exist",
                    ),
                    _ => refused(
                        user,
                        ResponseError::DuplicateResource,
                        "Cannot describe SCRAM credentials for the same user twice in a single request",
                    ),
                })
                .collect()
        }
    };
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

fn found(user: &str, infos: Vec<CredentialInfo>) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(StrBytes::from_string(user.to_string()))
        .with_credential_infos(infos)
}

fn refused(user: &str, error: ResponseError, message: &str) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(StrBytes::from_string(user.to_string()))
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message.to_string())))
}
