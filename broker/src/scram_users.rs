//! Where a broker finds its SCRAM users: its own credential store on a single node, the
//! metadata log's users in a cluster (`UserScramCredentialRecord`s, as this broker last applied
//! them). SaslAuthenticate and DescribeUserScramCredentials read them through [`ScramUsers`],
//! so neither knows which.

use std::collections::BTreeMap;

use laminar_controller::UserScramCredentialRecord;
use laminar_security::credentials::ScramCredentialStore;
use laminar_security::{Credentials, Mechanism, ScramCredential};

use crate::broker::BrokerShared;

/// SCRAM users, to check a login against and to list.
pub trait ScramUsers: Credentials {
    /// Every credential: `(user, mechanism, iterations)`, by user.
    fn list(&self) -> Vec<(String, Mechanism, u32)>;
}

impl ScramUsers for ScramCredentialStore {
    fn list(&self) -> Vec<(String, Mechanism, u32)> {
        self.describe()
            .map(|(user, mechanism, iterations)| (user.to_string(), mechanism, iterations))
            .collect()
    }
}

/// A cluster's users, from the metadata.
struct MetadataScramUsers<'a>(&'a BTreeMap<(String, i8), UserScramCredentialRecord>);

impl Credentials for MetadataScramUsers<'_> {
    /// The metadata holds no PLAIN passwords.
    fn plain_password_matches(&self, _user: &str, _password: &str) -> bool {
        false
    }

    fn scram_credential(&self, user: &str, mechanism: Mechanism) -> Option<ScramCredential> {
        let record = self.0.get(&(user.to_string(), mechanism.kafka_type()))?;
        credential_of(record)
    }
}

impl ScramUsers for MetadataScramUsers<'_> {
    fn list(&self) -> Vec<(String, Mechanism, u32)> {
        self.0
            .values()
            .filter_map(|record| {
                credential_of(record).map(|c| (record.name.clone(), c.mechanism, c.iterations))
            })
            .collect()
    }
}

/// The credential a record holds, if it is a valid one (the controller checked it when it
/// decided; a record that is not is skipped, never trusted).
fn credential_of(record: &UserScramCredentialRecord) -> Option<ScramCredential> {
    let credential = ScramCredential {
        mechanism: Mechanism::from_kafka_type(record.mechanism)?,
        salt: record.salt.clone(),
        iterations: u32::try_from(record.iterations).ok()?,
        stored_key: record.stored_key.clone(),
        server_key: record.server_key.clone(),
    };
    credential.validate().ok()?;
    Some(credential)
}

/// Runs `f` with this broker's SCRAM users.
pub fn with_scram_users<R>(shared: &BrokerShared, f: impl FnOnce(&dyn ScramUsers) -> R) -> R {
    match &shared.cluster {
        Some(link) => {
            let image = link.image();
            f(&MetadataScramUsers(&image.metadata.scram_credentials))
        }
        None => {
            let store = shared.scram_credentials.read().unwrap_or_else(|p| p.into_inner());
            f(&*store)
        }
    }
}

/// The users a new cluster starts with: those `laminar storage format --add-scram` put in this
/// node's credential store, as the metadata log's records (the first active controller writes
/// them when it names the cluster; later, the metadata log alone holds the cluster's users).
pub fn bootstrap_records(log_dir: &std::path::Path) -> anyhow::Result<Vec<UserScramCredentialRecord>> {
    let store =
        ScramCredentialStore::open(log_dir).map_err(|e| anyhow::anyhow!("{}: {e}", log_dir.display()))?;
    let records = store
        .describe()
        .filter_map(|(user, mechanism, _)| Some(record_of(user, store.scram_credential(user, mechanism)?)));
    Ok(records.collect())
}

/// `user`'s credential as the metadata log's record.
pub fn record_of(user: &str, credential: ScramCredential) -> UserScramCredentialRecord {
    UserScramCredentialRecord {
        name: user.to_string(),
        mechanism: credential.mechanism.kafka_type(),
        salt: credential.salt,
        stored_key: credential.stored_key,
        server_key: credential.server_key,
        iterations: i32::try_from(credential.iterations).unwrap_or(i32::MAX),
    }
}
