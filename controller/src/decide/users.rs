//! AlterUserScramCredentials: SCRAM users added, replaced and removed through the metadata log,
//! so that every broker of the cluster checks the same credentials. The broker that took the
//! request derived the keys from the client's salted password; the decision checks again what
//! a record may hold (a known mechanism, keys of its hash's length, Kafka's bounds on the salt
//! and the iterations), since a record in the log is applied by every node.

use std::collections::BTreeMap;

use super::Decision;
use crate::api::ControllerResponse;
use crate::metadata::ClusterMetadata;
use crate::records::*;
use crate::refusal::Refusal;

/// Users one request may change: one log entry, at most about 1.2 KiB a credential.
pub const USERS_PER_REQUEST_MAX: usize = 1000;
/// Kafka's bounds on SCRAM iterations (`ScramMechanism`).
const ITERATIONS: std::ops::RangeInclusive<i32> = 4096..=16384;
/// The longest salt taken (it is sent in every server-first message).
const SALT_LEN_MAX: usize = 1024;

pub fn alter_user_scram_credentials(
    md: &ClusterMetadata,
    upsertions: &[UserScramCredentialRecord],
    deletions: &[(String, i8)],
) -> Decision {
    let named = deletions
        .iter()
        .map(|(name, _)| name)
        .chain(upsertions.iter().map(|u| &u.name));
    let mut times_named: BTreeMap<&String, usize> = BTreeMap::new();
    for name in named {
        *times_named.entry(name).or_default() += 1;
    }
    if times_named.len() > USERS_PER_REQUEST_MAX {
        let reason = format!("at most {USERS_PER_REQUEST_MAX} users per request");
        return Decision::answer(ControllerResponse::Refused(Refusal::UnacceptableCredential {
            reason,
        }));
    }
    let mut records = Vec::new();
    let mut results: BTreeMap<String, Result<(), Refusal>> = BTreeMap::new();
    for (name, times) in &times_named {
        if *times > 1 {
            results.insert((*name).clone(), Err(Refusal::UserNamedTwice));
        }
    }
    for (name, mechanism) in deletions {
        if results.contains_key(name) {
            continue;
        }
        let result = match md.scram_credentials.contains_key(&(name.clone(), *mechanism)) {
            true => {
                records.push(MetadataRecord::RemoveUserScramCredential(
                    RemoveUserScramCredentialRecord {
                        name: name.clone(),
                        mechanism: *mechanism,
                    },
                ));
                Ok(())
            }
            false => Err(Refusal::ScramCredentialNotFound),
        };
        results.insert(name.clone(), result);
    }
    for upsertion in upsertions {
        if results.contains_key(&upsertion.name) {
            continue;
        }
        let result = credential_error(upsertion).map_or(Ok(()), |reason| {
            Err(Refusal::UnacceptableCredential {
                reason: reason.to_string(),
            })
        });
        if result.is_ok() {
            records.push(MetadataRecord::UserScramCredential(upsertion.clone()));
        }
        results.insert(upsertion.name.clone(), result);
    }
    Decision {
        records,
        response: ControllerResponse::UserScramCredentials(results.into_iter().collect()),
    }
}

/// Why a credential cannot be a record, if it cannot.
fn credential_error(credential: &UserScramCredentialRecord) -> Option<&'static str> {
    let key_len = match credential.mechanism {
        SCRAM_SHA_256 => 32,
        SCRAM_SHA_512 => 64,
        _ => return Some("Unknown SCRAM mechanism"),
    };
    if credential.name.is_empty() {
        return Some("Username must not be empty");
    }
    if !ITERATIONS.contains(&credential.iterations) {
        return Some("Iterations out of range [4096, 16384]");
    }
    if credential.salt.is_empty() || credential.salt.len() > SALT_LEN_MAX {
        return Some("Salt length out of range [1, 1024]");
    }
    if credential.stored_key.len() != key_len || credential.server_key.len() != key_len {
        return Some("Keys are not of the mechanism's length");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(name: &str, mechanism: i8) -> UserScramCredentialRecord {
        let key_len = if mechanism == SCRAM_SHA_256 { 32 } else { 64 };
        UserScramCredentialRecord {
            name: name.to_string(),
            mechanism,
            salt: vec![7; 16],
            stored_key: vec![1; key_len],
            server_key: vec![2; key_len],
            iterations: 8192,
        }
    }

    fn apply(md: &mut ClusterMetadata, decision: &Decision) {
        for record in &decision.records {
            md.apply(record, 1).expect("a decided record applies");
        }
    }

    fn results(decision: &Decision) -> Vec<(String, Result<(), Refusal>)> {
        match &decision.response {
            ControllerResponse::UserScramCredentials(results) => results.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn users_are_added_replaced_and_removed_and_each_refusal_is_kafkas() {
        let mut md = ClusterMetadata::default();
        let added = alter_user_scram_credentials(&md, &[credential("alice", SCRAM_SHA_512)], &[]);
        assert_eq!(results(&added), [("alice".to_string(), Ok(()))]);
        apply(&mut md, &added);
        assert!(md
            .scram_credentials
            .contains_key(&("alice".to_string(), SCRAM_SHA_512)));
        let mut short_keys = credential("bob", SCRAM_SHA_256);
        short_keys.stored_key.pop();
        let mut few_iterations = credential("carol", SCRAM_SHA_256);
        few_iterations.iterations = 100;
        let mixed = alter_user_scram_credentials(
            &md,
            &[short_keys, few_iterations, credential("dave", SCRAM_SHA_256)],
            &[
                ("dave".to_string(), SCRAM_SHA_256),
                ("erin".to_string(), SCRAM_SHA_256),
            ],
        );
        let codes: Vec<(String, i16)> = results(&mixed)
            .into_iter()
            .map(|(name, r)| (name, r.err().map_or(0, |e| e.response_error().code())))
            .collect();
        let expected = [("bob", 93), ("carol", 93), ("dave", 92), ("erin", 91)];
        let expected: Vec<(String, i16)> = expected.iter().map(|(n, c)| (n.to_string(), *c)).collect();
        assert_eq!(codes, expected);
        assert!(mixed.records.is_empty(), "{:?}", mixed.records);
        let removed = alter_user_scram_credentials(&md, &[], &[("alice".to_string(), SCRAM_SHA_512)]);
        apply(&mut md, &removed);
        assert!(md.scram_credentials.is_empty());
    }
}
