//! CreateAcls and DeleteAcls through the metadata log, so that every broker of a cluster
//! enforces the same ACLs. The broker that took the request checked each ACL against Kafka's
//! model (`laminar-security`) and resolved DeleteAcls' filters to the ACLs they match; the
//! decision bounds what the log holds (the number of ACLs, the length of each field, the codes
//! being codes) and writes only what changes something.

use std::collections::BTreeSet;

use super::Decision;
use crate::api::ControllerResponse;
use crate::metadata::ClusterMetadata;
use crate::records::*;
use crate::refusal::Refusal;

/// The most ACLs a cluster holds (as a single node's store): bounds the metadata and each
/// broker's authorizer.
pub const ACLS_MAX: usize = 100_000;
/// The most ACLs one request changes: one log entry, at most about 3 KiB an ACL.
pub const ACLS_PER_REQUEST_MAX: usize = 1000;
/// The longest resource name, principal or host (as the brokers' model bounds them).
const FIELD_LEN_MAX: usize = 1024;

pub fn create_acls(md: &ClusterMetadata, entries: &[AccessControlEntryRecord]) -> Decision {
    if let Some(reason) = entries.iter().find_map(entry_error) {
        return refused(reason.to_string());
    }
    if entries.len() > ACLS_PER_REQUEST_MAX {
        return refused(format!("at most {ACLS_PER_REQUEST_MAX} ACLs per request"));
    }
    let new: BTreeSet<&AccessControlEntryRecord> = entries.iter().filter(|e| !md.acls.contains(*e)).collect();
    if md.acls.len() + new.len() > ACLS_MAX {
        return refused(format!("the cluster holds at most {ACLS_MAX} ACLs"));
    }
    Decision {
        records: new
            .into_iter()
            .map(|entry| MetadataRecord::AccessControlEntry(entry.clone()))
            .collect(),
        response: ControllerResponse::AclsCreated,
    }
}

pub fn delete_acls(md: &ClusterMetadata, entries: &[AccessControlEntryRecord]) -> Decision {
    if entries.len() > ACLS_PER_REQUEST_MAX {
        return refused(format!("at most {ACLS_PER_REQUEST_MAX} ACLs per request"));
    }
    let held: BTreeSet<&AccessControlEntryRecord> = entries.iter().filter(|e| md.acls.contains(*e)).collect();
    Decision {
        records: held
            .iter()
            .map(|entry| {
                MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord {
                    entry: (*entry).clone(),
                })
            })
            .collect(),
        response: ControllerResponse::AclsDeleted(held.into_iter().cloned().collect()),
    }
}

fn refused(reason: String) -> Decision {
    Decision::answer(ControllerResponse::Refused(Refusal::InvalidAcl { reason }))
}

/// Why an entry cannot be a record, if it cannot: the bounds of the log, not Kafka's model.
fn entry_error(entry: &AccessControlEntryRecord) -> Option<&'static str> {
    let fields = [&entry.resource_name, &entry.principal, &entry.host];
    if fields.iter().any(|f| f.is_empty() || f.len() > FIELD_LEN_MAX) {
        return Some("an ACL's resource name, principal and host are 1 to 1024 bytes");
    }
    let codes = [
        entry.resource_type,
        entry.pattern_type,
        entry.operation,
        entry.permission_type,
    ];
    // Kafka's codes 0 (UNKNOWN) and 1 (ANY) name no ACL.
    if codes.iter().any(|code| *code < 2) {
        return Some("an ACL's resource type, pattern type, operation and permission are specific");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(name: &str, operation: i8) -> AccessControlEntryRecord {
        AccessControlEntryRecord {
            resource_type: 2,
            resource_name: name.to_string(),
            pattern_type: 3,
            principal: "User:alice".to_string(),
            host: "*".to_string(),
            operation,
            permission_type: 3,
        }
    }

    fn apply(md: &mut ClusterMetadata, decision: &Decision) {
        for record in &decision.records {
            md.apply(record, 1).expect("a decided record applies");
        }
    }

    #[test]
    fn acls_are_created_once_deleted_once_and_bounded() {
        let mut md = ClusterMetadata::default();
        let created = create_acls(&md, &[acl("orders", 3), acl("orders", 4)]);
        assert_eq!(created.records.len(), 2);
        apply(&mut md, &created);
        // Creating what is held writes nothing; a new one only itself.
        let again = create_acls(&md, &[acl("orders", 3), acl("payments", 3)]);
        assert_eq!(again.records.len(), 1);
        apply(&mut md, &again);
        assert_eq!(md.acls.len(), 3);
        let deleted = delete_acls(&md, &[acl("orders", 3), acl("unknown", 3)]);
        assert_eq!(
            deleted.response,
            ControllerResponse::AclsDeleted(vec![acl("orders", 3)])
        );
        apply(&mut md, &deleted);
        assert_eq!(md.acls.len(), 2);
        for bad in [
            acl("", 3),
            acl("orders", 1),
            acl(&"x".repeat(FIELD_LEN_MAX + 1), 3),
        ] {
            let refused = create_acls(&md, std::slice::from_ref(&bad));
            assert!(refused.records.is_empty(), "{bad:?}");
            assert!(matches!(
                refused.response,
                ControllerResponse::Refused(Refusal::InvalidAcl { .. })
            ));
        }
    }
}
