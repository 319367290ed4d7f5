//! AlterUserScramCredentials: adds, replaces and deletes SCRAM users. The client sends the salt
//! and the salted password (it ran PBKDF2), never the password; what is kept is the stored and
//! server keys derived from them. A single node keeps them in its credential store
//! (`laminar_security::credentials`); a cluster in its metadata log, through the controller, so
//! that every broker checks the same users (applied as each broker applies the metadata).
//! As Kafka: one result per user; a user named twice in one request gets DUPLICATE_RESOURCE,
//! an unknown mechanism UNSUPPORTED_SASL_MECHANISM, iterations outside 4096–16384
//! UNACCEPTABLE_CREDENTIAL, deleting what does not exist RESOURCE_NOT_FOUND.

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

/// One user's change, checked.
enum Change {
    Delete(String, Mechanism),
    Upsert(String, ScramCredential),
}

pub async fn handle(
    shared: &BrokerShared,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let (mut outcome, changes) = checked(&request);
    match &shared.cluster {
        Some(link) => outcome.extend(through_the_controller(&link.handle, changes).await),
        None => {
            let mut store = shared
                .scram_credentials
                .write()
                .unwrap_or_else(|p| p.into_inner());
            outcome.extend(changes.into_iter().map(|change| apply(&mut store, change)));
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

/// The users refused already (named twice, an unknown mechanism, an unusable credential), and
/// the changes of the others.
fn checked(
    request: &AlterUserScramCredentialsRequest,
) -> (BTreeMap<String, Result<(), Refusal>>, Vec<Change>) {
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
    let deletions = request
        .deletions
        .iter()
        .map(|d| (d.name.to_string(), deletion(d)));
    let upsertions = request
        .upsertions
        .iter()
        .map(|u| (u.name.to_string(), upsertion(u)));
    let mut changes = Vec::new();
    for (user, change) in deletions.chain(upsertions) {
        if outcome.contains_key(&user) {
            continue;
        }
        match change {
            Ok(change) => changes.push(change),
            Err(refusal) => drop(outcome.insert(user, Err(refusal))),
        }
    }
    (outcome, changes)
}

fn deletion(deletion: &ScramCredentialDeletion) -> Result<Change, Refusal> {
    let mechanism = mechanism(deletion.mechanism)?;
    check_user(&deletion.name)?;
    Ok(Change::Delete(deletion.name.to_string(), mechanism))
}

fn upsertion(upsertion: &ScramCredentialUpsertion) -> Result<Change, Refusal> {
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
    Ok(Change::Upsert(upsertion.name.to_string(), credential))
}

/// A single node's change, made in its store.
fn apply(store: &mut ScramCredentialStore, change: Change) -> (String, Result<(), Refusal>) {
    match change {
        Change::Delete(user, mechanism) => {
            let result = match store.delete(&user, mechanism) {
                Ok(true) => Ok(()),
                Ok(false) => Err((
                    ResponseError::ResourceNotFound,
                    "Attempt to delete a user credential that does not exist".to_string(),
                )),
                Err(e) => Err(store_failed(e)),
            };
            (user, result)
        }
        Change::Upsert(user, credential) => {
            let result = store.upsert(&user, credential).map_err(store_failed);
            (user, result)
        }
    }
}

/// A cluster's changes, decided by the controller and written to the metadata log. A request
/// refused as a whole (no controller, no answer in time) is every user's refusal.
async fn through_the_controller(
    controller: &laminar_controller::ControllerHandle,
    changes: Vec<Change>,
) -> Vec<(String, Result<(), Refusal>)> {
    if changes.is_empty() {
        return Vec::new();
    }
    let mut users = Vec::with_capacity(changes.len());
    let (mut upsertions, mut deletions) = (Vec::new(), Vec::new());
    for change in changes {
        match change {
            Change::Delete(user, mechanism) => {
                deletions.push((user.clone(), mechanism.kafka_type()));
                users.push(user);
            }
            Change::Upsert(user, credential) => {
                upsertions.push(crate::scram_users::record_of(&user, credential));
                users.push(user);
            }
        }
    }
    let kafka = |refusal: laminar_controller::Refusal| (refusal.response_error(), refusal.to_string());
    match controller
        .alter_user_scram_credentials(upsertions, deletions)
        .await
    {
        Ok(results) => results
            .into_iter()
            .map(|(user, r)| (user, r.map_err(kafka)))
            .collect(),
        Err(refusal) => {
            let refusal = kafka(refusal);
            users
                .into_iter()
                .map(|user| (user, Err(refusal.clone())))
                .collect()
        }
    }
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
