//! AlterUserScramCredentials: adds, replaces and deletes SCRAM users in the broker's credential
//! store (`laminar_security::credentials`). The client sends the salt and the salted password
//! (it ran PBKDF2), never the password; the store keeps the stored and server keys derived
//! from them. As Kafka: one result per user; a user named twice in one request gets
//! DUPLICATE_RESOURCE, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, iterations outside
//! 4096–16384 UNACCEPTABLE_CREDENTIAL, deleting what does not exist RESOURCE_NOT_FOUND.
//! In a cluster the users would have to live in the metadata log: refused there for now.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse};
use kafka_protocol::protocol::StrBytes;
use laminar_security::credentials::ScramCredentialStore;
use laminar_security::{Mechanism, ScramCredential};

use crate::broker::BrokerShared;

/// Why one user's change was refused: Kafka's code and message.
type Refusal = (ResponseError, String);

pub fn handle(
    shared: &BrokerShared,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let mut named: BTreeMap<&str, usize> = BTreeMap::new();
    let users = request.deletions.iter().map(|d| d.name.as_str());
    for user in users.chain(request.upsertions.iter().map(|u| u.name.as_str())) {
        *named.entry(user).or_default() += 1;
    }
    let mut outcome: BTreeMap<String, Result<(), Refusal>> = BTreeMap::new();
    for (user, count) in &named {
        if *count > 1 {
            let message = "A user credential cannot be altered twice in the same request".to_string();
            outcome.insert(user.to_string(), Err((ResponseError::DuplicateResource, message)));
        }
    }
    if shared.cluster.is_some() {
        for user in named.keys() {
            let message = "SCRAM users cannot be changed in a cluster yet".to_string();
            outcome
                .entry(user.to_string())
                .or_insert(Err((ResponseError::InvalidRequest, message)));
        }
    } else {
        let mut store = shared
            .scram_credentials
            .write()
            .unwrap_or_else(|p| p.into_inner());
        for deletion in &request.deletions {
            let user = deletion.name.to_string();
            outcome
                .entry(user)
                .or_insert_with(|| delete(&mut store, deletion));
        }
        for upsertion in &request.upsertions {
            let user = upsertion.name.to_string();
            outcome
                .entry(user)
                .or_insert_with(|| upsert(&mut store, upsertion));
        }
    }
    let results = outcome
        .into_iter()
        .map(|(user, result)| {
            let (code, message) = match result {
                Ok(()) => (0, None),
                Err((error, message)) => (error.code(), Some(StrBytes::from_string(message))),
            };
            AlterUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user))
                .with_error_code(code)
                .with_error_message(message)
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

fn delete(store: &mut ScramCredentialStore, deletion: &ScramCredentialDeletion) -> Result<(), Refusal> {
    let mechanism = mechanism(deletion.mechanism)?;
    check_user(&deletion.name)?;
    match store.delete(&deletion.name, mechanism) {
        Ok(true) => Ok(()),
        Ok(false) => Err((
            ResponseError::ResourceNotFound,
            "Attempt to delete a user credential that does not exist".to_string(),
        )),
        Err(e) => Err(store_failed(e)),
    }
}

fn upsert(store: &mut ScramCredentialStore, upsertion: &ScramCredentialUpsertion) -> Result<(), Refusal> {
    let mechanism = mechanism(upsertion.mechanism)?;
    check_user(&upsertion.name)?;
    let iterations = u32::try_from(upsertion.iterations).unwrap_or(0);
    let credential = ScramCredential::from_salted_password(
        mechanism,
        &upsertion.salted_password,
        &upsertion.salt,
        iterations,
    )
    .map_err(|e| (ResponseError::UnacceptableCredential, e.to_string()))?;
    store.upsert(&upsertion.name, credential).map_err(store_failed)
}

fn mechanism(kafka_type: i8) -> Result<Mechanism, Refusal> {
    Mechanism::from_kafka_type(kafka_type).ok_or_else(|| {
        (
            ResponseError::UnsupportedSaslMechanism,
            format!("Unknown SCRAM mechanism {kafka_type}"),
        )
    })
}

fn check_user(user: &str) -> Result<(), Refusal> {
    match user.is_empty() {
        true => Err((
            ResponseError::UnacceptableCredential,
            "Username must not be empty".to_string(),
        )),
        false => Ok(()),
    }
}

/// The store refused or could not write: the disk's error is logged, the client told.
fn store_failed(error: laminar_security::credentials::StoreError) -> Refusal {
    tracing::error!(%error, "SCRAM credential store");
    (ResponseError::UnknownServerError, error.to_string())
}
