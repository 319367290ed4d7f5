//! The broker's ACLs persisted in its log directory ([`AclStore`]).
//!
//! # On-disk format
//!
//! The file `acls` in the store's directory is UTF-8 text, one record per line, each line
//! ending in `\n`:
//!
//! ```text
//! laminar-acls 1
//! <resource type>\t<pattern type>\t<resource name>\t<principal>\t<host>\t<operation>\t<permission>
//! ```
//!
//! The first line names the format and its version (1). Each further line is one ACL, seven
//! tab-separated fields: Kafka's names of the resource type (`TOPIC`, `GROUP`, `CLUSTER`,
//! `TRANSACTIONAL_ID`) and pattern type (`LITERAL`, `PREFIXED`); the resource name, the
//! principal (`kind:name`) and the host, each percent-escaped (`%` and every ASCII control
//! character written `%XX` in upper-case hex); Kafka's names of the operation (`READ`,
//! `ALTER_CONFIGS`, ...) and the permission (`ALLOW`, `DENY`). Lines are sorted (by resource
//! type, then resource name, then the other fields), so the same ACLs always make the same
//! bytes, and no ACL appears twice.
//!
//! The file is replaced atomically on every change (written to `acls.tmp`, fsynced, renamed,
//! the directory fsynced). Bounds: at most [`AclStore::ACLS_MAX`] ACLs, fields of at most
//! [`AclBinding::FIELD_LEN_MAX`] bytes; loading checks every field as CreateAcls does and
//! reports a corrupt file with the line number.

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::acl::{AclBinding, AclError, AclFilter};
use crate::line_file;

/// The file name inside the store's directory.
pub const ACL_FILE_NAME: &str = "acls";
const HEADER: &str = "laminar-acls 1";

/// Why the store could not be opened or changed.
#[derive(Debug, thiserror::Error)]
pub enum AclStoreError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// The file does not follow the format; `line` counts from 1.
    #[error("{path} line {line}: {reason}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("the store already holds the maximum of {max} ACLs", max = AclStore::ACLS_MAX)]
    TooManyAcls,
}

/// Every ACL of a single-node broker, in memory and in the file `acls` (module
/// documentation). Changes take `&mut self`: the broker serialises them.
#[derive(Debug)]
pub struct AclStore {
    dir: PathBuf,
    acls: BTreeSet<AclBinding>,
}

impl AclStore {
    /// The most ACLs the store holds: bounds the file and the memory of every shard's set.
    pub const ACLS_MAX: usize = 100_000;
    const LINE_LEN_MAX: usize = 3 * 3 * AclBinding::FIELD_LEN_MAX + 128;

    /// Opens the store in `dir`, loading `acls` if it exists (an absent file is no ACL).
    pub fn open(dir: &Path) -> Result<AclStore, AclStoreError> {
        let path = dir.join(ACL_FILE_NAME);
        let acls = match line_file::open_if_exists(&path) {
            Ok(Some(file)) => load(&path, file)?,
            Ok(None) => BTreeSet::new(),
            Err(source) => return Err(AclStoreError::Io { path, source }),
        };
        Ok(AclStore {
            dir: dir.to_owned(),
            acls,
        })
    }

    pub fn acls(&self) -> &BTreeSet<AclBinding> {
        &self.acls
    }

    /// Adds `new` (each validated by the caller), keeping those already there; persisted once.
    pub fn create(&mut self, new: &[AclBinding]) -> Result<(), AclStoreError> {
        let mut acls = self.acls.clone();
        acls.extend(new.iter().cloned());
        if acls.len() > Self::ACLS_MAX {
            return Err(AclStoreError::TooManyAcls);
        }
        self.replace(acls)
    }

    /// Removes every ACL a filter matches; returns, per filter, the ACLs it removed (an ACL
    /// two filters match is reported under the first).
    pub fn delete(&mut self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>, AclStoreError> {
        let mut acls = self.acls.clone();
        let mut removed = Vec::with_capacity(filters.len());
        for filter in filters {
            let matched: Vec<AclBinding> = acls.iter().filter(|acl| filter.matches(acl)).cloned().collect();
            for acl in &matched {
                acls.remove(acl);
            }
            removed.push(matched);
        }
        if removed.iter().any(|r| !r.is_empty()) {
            self.replace(acls)?;
        }
        Ok(removed)
    }

    fn replace(&mut self, acls: BTreeSet<AclBinding>) -> Result<(), AclStoreError> {
        line_file::replace_atomically(&self.dir, ACL_FILE_NAME, &encode(&acls))
            .map_err(|(path, source)| AclStoreError::Io { path, source })?;
        self.acls = acls;
        Ok(())
    }
}

/// The file's bytes for `acls` (module documentation, "On-disk format").
fn encode(acls: &BTreeSet<AclBinding>) -> Vec<u8> {
    let mut text = format!("{HEADER}\n");
    for acl in acls {
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            acl.resource_type,
            acl.pattern_type,
            line_file::escape(&acl.resource_name),
            line_file::escape(&acl.principal.to_string()),
            line_file::escape(&acl.host),
            acl.operation,
            acl.permission,
        ));
    }
    text.into_bytes()
}

fn load(path: &Path, file: File) -> Result<BTreeSet<AclBinding>, AclStoreError> {
    let mut acls = BTreeSet::new();
    let parse = |line: &str| parse_record(line).map_err(|e| e.to_string());
    let keep = |acl| {
        if acls.len() >= AclStore::ACLS_MAX {
            return Err("more ACLs than the store's maximum".to_string());
        }
        match acls.insert(acl) {
            true => Ok(()),
            false => Err("an ACL written twice".to_string()),
        }
    };
    line_file::load_records(file, (HEADER, AclStore::LINE_LEN_MAX), parse, keep).map_err(|e| match e {
        line_file::LoadError::Io(source) => AclStoreError::Io {
            path: path.to_owned(),
            source,
        },
        line_file::LoadError::Corrupt { line, reason } => AclStoreError::Corrupt {
            path: path.to_owned(),
            line,
            reason,
        },
    })?;
    Ok(acls)
}

fn parse_record(line: &str) -> Result<AclBinding, AclError> {
    let fields: Vec<&str> = line.split('\t').collect();
    let [resource_type, pattern_type, name, principal, host, operation, permission] = fields.as_slice()
    else {
        return Err(AclError("expected 7 tab-separated fields".into()));
    };
    let text = |field: &str| line_file::unescape(field).map_err(|reason| AclError(reason.into()));
    let principal = text(principal)?;
    let acl = AclBinding {
        resource_type: resource_type.parse()?,
        pattern_type: pattern_type.parse()?,
        resource_name: text(name)?,
        principal: principal.parse().map_err(|e| AclError(format!("{e}")))?,
        host: text(host)?,
        operation: operation.parse()?,
        permission: permission.parse()?,
    };
    acl.validate()?;
    Ok(acl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{Operation, PatternFilter, PatternType, Permission, ResourceType};

    fn acl(name: &str, pattern_type: PatternType, principal: &str, operation: Operation) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern_type,
            principal: principal.parse().unwrap(),
            host: "*".into(),
            operation,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn golden_file_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = AclStore::open(dir.path()).unwrap();
        store
            .create(&[
                acl("orders", PatternType::Literal, "User:alice", Operation::Read),
                acl(
                    "logs-",
                    PatternType::Prefixed,
                    "User:tab\there",
                    Operation::AlterConfigs,
                ),
            ])
            .unwrap();
        let bytes = std::fs::read(dir.path().join(ACL_FILE_NAME)).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "laminar-acls 1\n\
             TOPIC\tPREFIXED\tlogs-\tUser:tab%09here\t*\tALTER_CONFIGS\tALLOW\n\
             TOPIC\tLITERAL\torders\tUser:alice\t*\tREAD\tALLOW\n"
        );
        let reopened = AclStore::open(dir.path()).unwrap();
        assert_eq!(reopened.acls(), store.acls());
    }

    #[test]
    fn delete_removes_what_each_filter_matches_and_persists_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = AclStore::open(dir.path()).unwrap();
        let orders = acl("orders", PatternType::Literal, "User:alice", Operation::Read);
        let logs = acl("logs-", PatternType::Prefixed, "User:bob", Operation::Write);
        store
            .create(&[orders.clone(), logs.clone(), orders.clone()])
            .unwrap();
        assert_eq!(store.acls().len(), 2, "an ACL is kept once");
        let by_bob = AclFilter {
            principal: Some("User:bob".parse().unwrap()),
            ..AclFilter::default()
        };
        let prefixed = AclFilter {
            pattern_type: PatternFilter::Exactly(PatternType::Prefixed),
            ..AclFilter::default()
        };
        let removed = store.delete(&[by_bob, prefixed]).unwrap();
        assert_eq!(removed, vec![vec![logs], vec![]]);
        assert_eq!(
            AclStore::open(dir.path())
                .unwrap()
                .acls()
                .iter()
                .collect::<Vec<_>>(),
            [&orders]
        );
    }

    #[test]
    fn corrupt_files_are_errors_naming_the_line() {
        let cases: [(&[u8], usize); 6] = [
            (b"", 1),
            (b"laminar-acls 2\n", 1),
            (b"laminar-acls 1\nTOPIC\tLITERAL\torders\n", 2),
            (b"laminar-acls 1\nTOPIC\tLITERAL\torders\tUser:a\t*\tCLUSTER_ACTION\tALLOW\n", 2),
            (b"laminar-acls 1\nTOPIC\tLITERAL\torders\tUser:a\t*\tREAD\tALLOW", 2),
            (
                b"laminar-acls 1\nTOPIC\tLITERAL\to\tUser:a\t*\tREAD\tALLOW\nTOPIC\tLITERAL\to\tUser:a\t*\tREAD\tALLOW\n",
                3,
            ),
        ];
        for (contents, expected_line) in cases {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(ACL_FILE_NAME), contents).unwrap();
            match AclStore::open(dir.path()) {
                Err(AclStoreError::Corrupt { line, .. }) => assert_eq!(line, expected_line, "{contents:?}"),
                other => panic!("{contents:?}: {other:?}"),
            }
        }
    }
}
