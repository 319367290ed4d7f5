//! A single node's client quotas persisted in its log directory ([`QuotaStore`]). A cluster
//! keeps them in its metadata log instead (`ClientQuotaRecord`).
//!
//! # On-disk format
//!
//! The file `client-quotas` in the store's directory is UTF-8 text, one quota per line, each
//! line ending in `\n`:
//!
//! ```text
//! laminar-client-quotas 1
//! <user>\t<client-id>\t<ip>\t<key>\t<value>
//! ```
//!
//! The first line names the format and its version (1). Each further line is one quota of one
//! entity: three entity fields, each empty when the entity has no part of that type, `*` for
//! Kafka's default (`<default>`), or `=` followed by the name percent-escaped (`%` and every
//! ASCII control character written `%XX` in upper-case hex); then Kafka's name of the quota key
//! (`producer_byte_rate`, ...) and its value as a decimal number (the shortest text that reads
//! back as the same 64-bit float). Lines are sorted by entity, then key, so the same quotas
//! always make the same bytes. The file is replaced atomically on every change; loading checks
//! every line as AlterClientQuotas does and reports a corrupt file with the line number.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::line_file;
use crate::quota::{check_alteration, ClientQuotas, EntityName, QuotaEntity, QuotaKey, QuotaOps};

/// The file name inside the store's directory.
pub const QUOTA_FILE_NAME: &str = "client-quotas";
const HEADER: &str = "laminar-client-quotas 1";
const LINE_LEN_MAX: usize = 3 * (3 * QuotaEntity::NAME_LEN_MAX + 1) + 128;

/// Why the store could not be opened or changed.
#[derive(Debug, thiserror::Error)]
pub enum QuotaStoreError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} line {line}: {reason}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("the broker holds quotas for at most {max} entities", max = ClientQuotas::ENTITIES_MAX)]
    TooManyEntities,
}

/// Every client quota of a single-node broker, in memory and in the file `client-quotas`
/// (module documentation). Changes take `&mut self`: the broker serialises them.
#[derive(Debug)]
pub struct QuotaStore {
    dir: PathBuf,
    quotas: ClientQuotas,
}

impl QuotaStore {
    /// Opens the store in `dir`, loading `client-quotas` if it exists (absent: no quota).
    pub fn open(dir: &Path) -> Result<QuotaStore, QuotaStoreError> {
        let path = dir.join(QUOTA_FILE_NAME);
        let quotas = match line_file::open_if_exists(&path) {
            Ok(Some(file)) => load(&path, file)?,
            Ok(None) => ClientQuotas::default(),
            Err(source) => return Err(QuotaStoreError::Io { path, source }),
        };
        Ok(QuotaStore {
            dir: dir.to_owned(),
            quotas,
        })
    }

    pub fn quotas(&self) -> &ClientQuotas {
        &self.quotas
    }

    /// Applies each entity's checked changes, persisted once.
    pub fn alter(&mut self, alterations: &[(QuotaEntity, QuotaOps)]) -> Result<(), QuotaStoreError> {
        let mut quotas = self.quotas.clone();
        for (entity, ops) in alterations {
            for (key, value) in ops {
                quotas.apply(entity, *key, *value);
            }
        }
        if quotas.len() > ClientQuotas::ENTITIES_MAX {
            return Err(QuotaStoreError::TooManyEntities);
        }
        if quotas == self.quotas {
            return Ok(());
        }
        line_file::replace_atomically(&self.dir, QUOTA_FILE_NAME, &encode(&quotas))
            .map_err(|(path, source)| QuotaStoreError::Io { path, source })?;
        self.quotas = quotas;
        Ok(())
    }
}

/// The file's bytes for `quotas` (module documentation, "On-disk format").
fn encode(quotas: &ClientQuotas) -> Vec<u8> {
    let field = |name: &Option<EntityName>| match name {
        None => String::new(),
        Some(EntityName::Default) => "*".to_string(),
        Some(EntityName::Named(name)) => format!("={}", line_file::escape(name)),
    };
    let mut text = format!("{HEADER}\n");
    for (entity, keys) in quotas.entries() {
        for (key, value) in keys {
            text.push_str(&format!(
                "{}\t{}\t{}\t{}\t{value}\n",
                field(&entity.user),
                field(&entity.client_id),
                field(&entity.ip),
                key.name(),
            ));
        }
    }
    text.into_bytes()
}

fn load(path: &Path, file: File) -> Result<ClientQuotas, QuotaStoreError> {
    let mut quotas = ClientQuotas::default();
    let keep = |(entity, key, value): (QuotaEntity, QuotaKey, f64)| {
        let known = quotas
            .entries()
            .any(|(e, keys)| *e == entity && keys.contains_key(&key));
        if known {
            return Err(format!("{entity} {} written twice", key.name()));
        }
        quotas.apply(&entity, key, Some(value));
        match quotas.len() > ClientQuotas::ENTITIES_MAX {
            true => Err("more entities than the store's maximum".to_string()),
            false => Ok(()),
        }
    };
    line_file::load_records(file, (HEADER, LINE_LEN_MAX), parse_record, keep).map_err(|e| match e {
        line_file::LoadError::Io(source) => QuotaStoreError::Io {
            path: path.to_owned(),
            source,
        },
        line_file::LoadError::Corrupt { line, reason } => QuotaStoreError::Corrupt {
            path: path.to_owned(),
            line,
            reason,
        },
    })?;
    Ok(quotas)
}

fn parse_record(line: &str) -> Result<(QuotaEntity, QuotaKey, f64), String> {
    let fields: Vec<&str> = line.split('\t').collect();
    let [user, client_id, ip, key, value] = fields.as_slice() else {
        return Err("expected 5 tab-separated fields".into());
    };
    let mut names = Vec::new();
    for (entity_type, field) in [("user", user), ("client-id", client_id), ("ip", ip)] {
        match *field {
            "" => {}
            "*" => names.push((entity_type, None)),
            named => {
                let escaped = named
                    .strip_prefix('=')
                    .ok_or("an entity field is empty, * or =name")?;
                names.push((entity_type, Some(line_file::unescape(escaped)?)));
            }
        }
    }
    let parts = names.iter().map(|(kind, name)| (*kind, name.as_deref()));
    let entity = QuotaEntity::from_parts(parts).map_err(|e| e.0)?;
    let value: f64 = value.parse().map_err(|_| format!("{value:?} is not a number"))?;
    let checked = check_alteration(&entity, [(*key, Some(value))]).map_err(|e| e.0)?;
    let (key, _) = checked[0];
    Ok((entity, key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(parts: &[(&str, Option<&str>)]) -> QuotaEntity {
        QuotaEntity::from_parts(parts.iter().copied()).unwrap()
    }

    #[test]
    fn golden_file_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = QuotaStore::open(dir.path()).unwrap();
        let alice_app = entity(&[("user", Some("alice")), ("client-id", Some("app\t1"))]);
        let default_user = entity(&[("user", None)]);
        let ip = entity(&[("ip", Some("10.0.0.1"))]);
        store
            .alter(&[
                (
                    alice_app.clone(),
                    vec![
                        (QuotaKey::ProducerByteRate, Some(1048576.0)),
                        (QuotaKey::RequestPercentage, Some(12.5)),
                    ],
                ),
                (default_user, vec![(QuotaKey::ConsumerByteRate, Some(2048.0))]),
                (ip, vec![(QuotaKey::ConnectionCreationRate, Some(10.0))]),
            ])
            .unwrap();
        let bytes = std::fs::read(dir.path().join(QUOTA_FILE_NAME)).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "laminar-client-quotas 1\n\
             \t\t=10.0.0.1\tconnection_creation_rate\t10\n\
             *\t\t\tconsumer_byte_rate\t2048\n\
             =alice\t=app%091\t\tproducer_byte_rate\t1048576\n\
             =alice\t=app%091\t\trequest_percentage\t12.5\n"
        );
        let reopened = QuotaStore::open(dir.path()).unwrap();
        assert_eq!(reopened.quotas(), store.quotas());
        store
            .alter(&[(alice_app, vec![(QuotaKey::ProducerByteRate, None)])])
            .unwrap();
        assert_eq!(QuotaStore::open(dir.path()).unwrap().quotas().len(), 3);
    }

    #[test]
    fn a_corrupt_file_is_reported_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let lines = [
            "laminar-client-quotas 1\n=a\t\t\tproducer_byte_rate\t1.5\n",
            "laminar-client-quotas 1\n=a\t\t=1.2.3.4\tproducer_byte_rate\t1\n",
            "laminar-client-quotas 1\nx\t\t\tproducer_byte_rate\t1\n",
            "laminar-client-quotas 1\n=a\t\t\tproducer_byte_rate\t1\n=a\t\t\tproducer_byte_rate\t2\n",
            "laminar-client-quotas 2\n",
        ];
        for text in lines {
            std::fs::write(dir.path().join(QUOTA_FILE_NAME), text).unwrap();
            let error = QuotaStore::open(dir.path()).unwrap_err();
            assert!(
                matches!(error, QuotaStoreError::Corrupt { .. }),
                "{text:?}: {error}"
            );
        }
    }
}
