//! Where authenticators find users ([`Credentials`]), and the broker's SCRAM credentials
//! persisted in its log directory ([`ScramCredentialStore`]).
//!
//! # On-disk format
//!
//! The file `scram-credentials` in the store's directory is UTF-8 text, one record per line,
//! each line ending in `\n`:
//!
//! ```text
//! laminar-scram-credentials 1
//! <user>\t<mechanism>\t<iterations>\t<salt>\t<stored key>\t<server key>
//! ```
//!
//! The first line names the format and its version (1). Each further line is one credential,
//! six tab-separated fields: the user name percent-escaped (`%`, and every ASCII control
//! character including tab, CR and LF, written `%XX` in upper-case hex, so no name can break a
//! line or a field; other characters as is); the mechanism (`SCRAM-SHA-256`, `SCRAM-SHA-512`);
//! the iteration count in decimal; the salt, stored key and server key in standard padded
//! base64. Lines are sorted by user, then mechanism, so the same credentials always make the
//! same bytes. A user has at most one line per mechanism.
//!
//! The file is replaced atomically on every change: written to `scram-credentials.tmp`,
//! fsynced, renamed over the old file, and the directory fsynced, so a crash leaves either the
//! old or the new file, never a mix.
//!
//! Bounds: at most [`ScramCredentialStore::USERS_MAX`] users, user names of at most
//! [`ScramCredentialStore::USER_NAME_LEN_MAX`] bytes (Kafka has no bound; this one keeps lines
//! and the file bounded), lines of at most [`ScramCredentialStore::LINE_LEN_MAX`] bytes.
//! Loading checks all of it and reports a corrupt file with the line number.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;

use crate::line_file;
use crate::protocol::Mechanism;
use crate::scram::{ScramCredential, ScramError};

/// Where authenticators find users. The broker implements it over its stores (or combines the
/// JAAS PLAIN users and the SCRAM store); this crate's stores implement it for one mechanism
/// family each.
pub trait Credentials {
    /// PLAIN: whether `password` is `user`'s. Implementations should compare in constant time
    /// so response times do not reveal how much of a guess was right.
    fn plain_password_matches(&self, user: &str, password: &str) -> bool;
    /// SCRAM: `user`'s credential for `mechanism`, if any.
    fn scram_credential(&self, user: &str, mechanism: Mechanism) -> Option<ScramCredential>;
}

/// The file name inside the store's directory.
pub const STORE_FILE_NAME: &str = "scram-credentials";
const HEADER: &str = "laminar-scram-credentials 1";

/// Why the store could not be opened or changed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// The file does not follow the format; `line` counts from 1.
    #[error("{path} line {line}: {reason}")]
    Corrupt {
        /// The store file.
        path: PathBuf,
        /// The offending line, from 1.
        line: usize,
        /// What is wrong, as a fixed text (the line is not repeated: it holds key material).
        reason: &'static str,
    },
    /// The user name is empty or longer than [`ScramCredentialStore::USER_NAME_LEN_MAX`].
    #[error("user name length {0} out of range [1, {max}]", max = ScramCredentialStore::USER_NAME_LEN_MAX)]
    UserNameLength(usize),
    /// Adding the user would exceed [`ScramCredentialStore::USERS_MAX`].
    #[error("the store already holds the maximum of {max} users", max = ScramCredentialStore::USERS_MAX)]
    TooManyUsers,
    /// The credential is not valid (mechanism, salt, iterations, key lengths).
    #[error("invalid credential: {0}")]
    InvalidCredential(#[from] ScramError),
}

/// The broker's SCRAM credentials, kept in memory and persisted in `scram-credentials` in a
/// directory (the broker's log directory); see the module documentation for the format.
/// Changes take `&mut self`: the broker serialises them, as AlterUserScramCredentials does.
#[derive(Debug)]
pub struct ScramCredentialStore {
    dir: PathBuf,
    users: BTreeMap<String, BTreeMap<Mechanism, ScramCredential>>,
}

impl ScramCredentialStore {
    /// The most users the store holds: bounds the file and the memory it takes.
    pub const USERS_MAX: usize = 100_000;
    /// The longest user name, in bytes. Kafka sets no bound; names are user ids, never near it.
    pub const USER_NAME_LEN_MAX: usize = 1024;
    /// The longest line loading accepts: a fully escaped longest name plus the other fields.
    pub const LINE_LEN_MAX: usize = 3 * Self::USER_NAME_LEN_MAX + 4096;

    /// Opens the store in `dir`, loading `scram-credentials` if it exists (an absent file is an
    /// empty store; the file is created at the first change).
    pub fn open(dir: &Path) -> Result<ScramCredentialStore, StoreError> {
        let path = dir.join(STORE_FILE_NAME);
        let users = match File::open(&path) {
            Ok(file) => load(&path, file)?,
            Err(error) if error.kind() == io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        Ok(ScramCredentialStore {
            dir: dir.to_owned(),
            users,
        })
    }

    /// Adds or replaces `user`'s credential for its mechanism, persisting before returning.
    /// On error the store is unchanged.
    pub fn upsert(&mut self, user: &str, credential: ScramCredential) -> Result<(), StoreError> {
        check_user_name(user)?;
        credential.validate()?;
        if !self.users.contains_key(user) && self.users.len() >= Self::USERS_MAX {
            return Err(StoreError::TooManyUsers);
        }
        let mut users = self.users.clone();
        users
            .entry(user.to_owned())
            .or_default()
            .insert(credential.mechanism, credential);
        self.persist(&users)?;
        self.users = users;
        Ok(())
    }

    /// Removes `user`'s credential for `mechanism`, persisting before returning; whether there
    /// was one. On error the store is unchanged.
    pub fn delete(&mut self, user: &str, mechanism: Mechanism) -> Result<bool, StoreError> {
        let present = self
            .users
            .get(user)
            .is_some_and(|credentials| credentials.contains_key(&mechanism));
        if !present {
            return Ok(false);
        }
        let mut users = self.users.clone();
        if let Some(credentials) = users.get_mut(user) {
            credentials.remove(&mechanism);
            if credentials.is_empty() {
                users.remove(user);
            }
        }
        self.persist(&users)?;
        self.users = users;
        Ok(true)
    }

    /// `user`'s credential for `mechanism`, if any.
    pub fn get(&self, user: &str, mechanism: Mechanism) -> Option<&ScramCredential> {
        self.users.get(user)?.get(&mechanism)
    }

    /// Every credential as `(user, mechanism, iterations)`, sorted by user then mechanism: what
    /// DescribeUserScramCredentials reports (never salts or keys).
    pub fn describe(&self) -> impl Iterator<Item = (&str, Mechanism, u32)> + '_ {
        self.users.iter().flat_map(|(user, credentials)| {
            credentials
                .values()
                .map(move |credential| (user.as_str(), credential.mechanism, credential.iterations))
        })
    }

    /// How many users have at least one credential.
    pub fn user_count(&self) -> usize {
        self.users.len()
    }

    /// The file the store persists to.
    pub fn path(&self) -> PathBuf {
        self.dir.join(STORE_FILE_NAME)
    }

    fn persist(
        &self,
        users: &BTreeMap<String, BTreeMap<Mechanism, ScramCredential>>,
    ) -> Result<(), StoreError> {
        line_file::replace_atomically(&self.dir, STORE_FILE_NAME, &encode(users))
            .map_err(|(path, source)| StoreError::Io { path, source })
    }
}

impl Credentials for ScramCredentialStore {
    /// The store holds no PLAIN passwords.
    fn plain_password_matches(&self, _user: &str, _password: &str) -> bool {
        false
    }

    fn scram_credential(&self, user: &str, mechanism: Mechanism) -> Option<ScramCredential> {
        self.get(user, mechanism).cloned()
    }
}

fn check_user_name(user: &str) -> Result<(), StoreError> {
    if user.is_empty() || user.len() > ScramCredentialStore::USER_NAME_LEN_MAX {
        return Err(StoreError::UserNameLength(user.len()));
    }
    Ok(())
}

/// The file's bytes for `users` (module documentation, "On-disk format").
fn encode(users: &BTreeMap<String, BTreeMap<Mechanism, ScramCredential>>) -> Vec<u8> {
    let mut text = format!("{HEADER}\n");
    for (user, credentials) in users {
        for credential in credentials.values() {
            text.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\t{}\n",
                escape_user(user),
                credential.mechanism,
                credential.iterations,
                BASE64.encode(&credential.salt),
                BASE64.encode(&credential.stored_key),
                BASE64.encode(&credential.server_key),
            ));
        }
    }
    text.into_bytes()
}

fn escape_user(user: &str) -> String {
    line_file::escape(user)
}

fn unescape_user(escaped: &str) -> Result<String, &'static str> {
    line_file::unescape(escaped)
}

type UserMap = BTreeMap<String, BTreeMap<Mechanism, ScramCredential>>;

/// Reads and validates the whole file; any fault names its line.
fn load(path: &Path, file: File) -> Result<UserMap, StoreError> {
    let mut reader = BufReader::new(file);
    let mut users = UserMap::new();
    let lines_max = ScramCredentialStore::USERS_MAX * Mechanism::SCRAM.len() + 1;
    let corrupt = |line, reason| StoreError::Corrupt {
        path: path.to_owned(),
        line,
        reason,
    };
    for line_number in 1.. {
        let Some(line) = read_line(&mut reader).map_err(|source| StoreError::Io {
            path: path.to_owned(),
            source,
        })?
        else {
            if line_number == 1 {
                return Err(corrupt(1, "empty file: missing header"));
            }
            break;
        };
        let line = line.map_err(|reason| corrupt(line_number, reason))?;
        if line_number == 1 {
            if line != HEADER {
                return Err(corrupt(1, "unknown header or format version"));
            }
            continue;
        }
        if line_number > lines_max {
            return Err(corrupt(line_number, "more credentials than the store's maximum"));
        }
        let (user, credential) = parse_record(&line).map_err(|reason| corrupt(line_number, reason))?;
        insert_loaded(&mut users, user, credential).map_err(|reason| corrupt(line_number, reason))?;
    }
    Ok(users)
}

fn read_line(reader: &mut impl BufRead) -> io::Result<Option<Result<String, &'static str>>> {
    line_file::read_line(reader, ScramCredentialStore::LINE_LEN_MAX)
}

fn parse_record(line: &str) -> Result<(String, ScramCredential), &'static str> {
    let fields: Vec<&str> = line.split('\t').collect();
    let [user, mechanism, iterations, salt, stored_key, server_key] = fields.as_slice() else {
        return Err("expected 6 tab-separated fields");
    };
    let user = unescape_user(user)?;
    if user.is_empty() || user.len() > ScramCredentialStore::USER_NAME_LEN_MAX {
        return Err("user name empty or too long");
    }
    let mechanism: Mechanism = mechanism.parse().map_err(|_| "unknown mechanism")?;
    let decode = |field: &str, reason| BASE64.decode(field).map_err(|_| reason);
    let credential = ScramCredential {
        mechanism,
        iterations: iterations.parse().map_err(|_| "iterations is not a number")?,
        salt: decode(salt, "salt is not base64")?,
        stored_key: decode(stored_key, "stored key is not base64")?,
        server_key: decode(server_key, "server key is not base64")?,
    };
    credential
        .validate()
        .map_err(|_| "invalid credential (mechanism, iterations, salt or key lengths)")?;
    Ok((user, credential))
}

fn insert_loaded(users: &mut UserMap, user: String, credential: ScramCredential) -> Result<(), &'static str> {
    if !users.contains_key(&user) && users.len() >= ScramCredentialStore::USERS_MAX {
        return Err("more users than the store's maximum");
    }
    let credentials = users.entry(user).or_default();
    if credentials.insert(credential.mechanism, credential).is_some() {
        return Err("duplicate credential for this user and mechanism");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed_credential(mechanism: Mechanism, salt: &[u8], key_byte: u8, key_len: usize) -> ScramCredential {
        ScramCredential {
            mechanism,
            salt: salt.to_vec(),
            iterations: 4096,
            stored_key: vec![key_byte; key_len],
            server_key: vec![key_byte + 1; key_len],
        }
    }

    const GOLDEN: &str = "laminar-scram-credentials 1\n\
a%09b%25\tSCRAM-SHA-512\t4096\tcGVwcGVy\t\
AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAw==\t\
BAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBA==\n\
alice\tSCRAM-SHA-256\t4096\tc2FsdA==\tAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\t\
AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=\n";

    #[test]
    fn golden_file_bytes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut store = ScramCredentialStore::open(dir.path()).expect("empty store");
        store
            .upsert("alice", fixed_credential(Mechanism::ScramSha256, b"salt", 1, 32))
            .expect("upsert");
        store
            .upsert(
                "a\tb%",
                fixed_credential(Mechanism::ScramSha512, b"pepper", 3, 64),
            )
            .expect("upsert");
        let bytes = std::fs::read(dir.path().join(STORE_FILE_NAME)).expect("file written");
        assert_eq!(String::from_utf8(bytes).expect("UTF-8"), GOLDEN);
        assert!(!dir.path().join(format!("{STORE_FILE_NAME}.tmp")).exists());
    }

    #[test]
    fn round_trip_through_the_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut store = ScramCredentialStore::open(dir.path()).expect("empty store");
        let alice_256 = ScramCredential::generate(Mechanism::ScramSha256, "a", 4096).expect("valid");
        let alice_512 = ScramCredential::generate(Mechanism::ScramSha512, "a", 8192).expect("valid");
        let bob = ScramCredential::generate(Mechanism::ScramSha256, "b", 4096).expect("valid");
        store.upsert("alice", alice_256.clone()).expect("upsert");
        store.upsert("alice", alice_512.clone()).expect("upsert");
        store.upsert("bob\n", bob.clone()).expect("upsert");
        let replacement = ScramCredential::generate(Mechanism::ScramSha256, "b2", 4096).expect("valid");
        store.upsert("bob\n", replacement.clone()).expect("replace");
        assert_eq!(store.delete("alice", Mechanism::ScramSha256).ok(), Some(true));
        assert_eq!(store.delete("alice", Mechanism::ScramSha256).ok(), Some(false));
        let reopened = ScramCredentialStore::open(dir.path()).expect("reload");
        assert_eq!(reopened.get("alice", Mechanism::ScramSha512), Some(&alice_512));
        assert_eq!(reopened.get("alice", Mechanism::ScramSha256), None);
        assert_eq!(
            reopened.scram_credential("bob\n", Mechanism::ScramSha256),
            Some(replacement)
        );
        assert!(!reopened.plain_password_matches("alice", "a"));
        let described: Vec<_> = reopened.describe().collect();
        assert_eq!(
            described,
            [
                ("alice", Mechanism::ScramSha512, 8192),
                ("bob\n", Mechanism::ScramSha256, 4096)
            ]
        );
        assert_eq!(reopened.user_count(), 2);
    }

    #[test]
    fn upsert_refuses_invalid_input_and_leaves_the_store_unchanged() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut store = ScramCredentialStore::open(dir.path()).expect("empty store");
        let valid = fixed_credential(Mechanism::ScramSha256, b"salt", 1, 32);
        assert!(matches!(
            store.upsert("", valid.clone()),
            Err(StoreError::UserNameLength(0))
        ));
        let long_name = "x".repeat(ScramCredentialStore::USER_NAME_LEN_MAX + 1);
        assert!(matches!(
            store.upsert(&long_name, valid),
            Err(StoreError::UserNameLength(_))
        ));
        let short_key = fixed_credential(Mechanism::ScramSha256, b"salt", 1, 31);
        assert!(matches!(
            store.upsert("alice", short_key),
            Err(StoreError::InvalidCredential(_))
        ));
        let plain = fixed_credential(Mechanism::Plain, b"salt", 1, 32);
        assert!(matches!(
            store.upsert("alice", plain),
            Err(StoreError::InvalidCredential(_))
        ));
        assert_eq!(store.describe().count(), 0);
        assert!(!dir.path().join(STORE_FILE_NAME).exists());
    }

    fn load_error(contents: &[u8]) -> (usize, &'static str) {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join(STORE_FILE_NAME), contents).expect("write");
        match ScramCredentialStore::open(dir.path()) {
            Err(StoreError::Corrupt { line, reason, .. }) => (line, reason),
            other => panic!("expected a corrupt-file error, got {other:?}"),
        }
    }

    #[test]
    fn corrupt_files_are_errors_naming_the_line() {
        let header = "laminar-scram-credentials 1\n";
        let good = GOLDEN.lines().nth(2).expect("alice line");
        assert_eq!(load_error(b"").0, 1);
        assert_eq!(load_error(b"laminar-scram-credentials 2\n").0, 1);
        assert_eq!(
            load_error(format!("{header}{good}").as_bytes()),
            (2, "truncated line")
        );
        assert_eq!(load_error(format!("{header}{good}\n{good}\n").as_bytes()).0, 3);
        assert_eq!(load_error(format!("{header}{good}\nx\n").as_bytes()).0, 3);
        for (from, to) in [
            ("SCRAM-SHA-256", "PLAIN"),
            ("4096", "4095"),
            ("4096", "x"),
            ("c2FsdA==", "c2FsdA"),
            ("c2FsdA==", ""),
            ("alice", "al%ZZice"),
            ("alice", ""),
            ("AQEBAQ", "AQEB"),
        ] {
            let line = good.replacen(from, to, 1);
            assert_eq!(
                load_error(format!("{header}{line}\n").as_bytes()).0,
                2,
                "{from} -> {to}"
            );
        }
        let long = "x".repeat(ScramCredentialStore::LINE_LEN_MAX + 10);
        assert_eq!(
            load_error(format!("{header}{long}\n").as_bytes()),
            (2, "line too long")
        );
        assert_eq!(
            load_error(b"laminar-scram-credentials 1\n\xff\n"),
            (2, "line is not UTF-8")
        );
    }

    #[test]
    fn user_names_escape_and_unescape() {
        for name in ["alice", "a\tb\nc\rd", "100%", "ünïcode", "\u{7f}"] {
            let escaped = escape_user(name);
            assert!(!escaped.contains(['\t', '\n', '\r']));
            assert_eq!(unescape_user(&escaped).as_deref(), Ok(name));
        }
        assert_eq!(escape_user("a\tb%"), "a%09b%25");
        assert!(unescape_user("a%").is_err());
        assert!(unescape_user("a%G0").is_err());
        assert!(unescape_user("%FF").is_err());
    }
}
