//! Kafka's JAAS configuration strings (`sasl.jaas.config`,
//! `listener.name.<listener>.plain.sasl.jaas.config`), as the broker's PLAIN users are
//! configured:
//!
//! ```text
//! org.apache.kafka.common.security.plain.PlainLoginModule required
//!     username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";
//! ```
//!
//! One login module, a control flag, `key=value` options and a closing `;`. Values are bare
//! words or double-quoted strings in which `\` escapes the next character (`\"`, `\\`).
//! `user_<name>="<password>"` options are the PLAIN users; `username` and `password` are the
//! broker's own identity as a client. Errors name the byte position and never repeat a value,
//! since values are passwords.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::credentials::Credentials;
use crate::protocol::Mechanism;
use crate::scram::ScramCredential;

/// The prefix of options that define PLAIN users, as Kafka's `PlainServerCallbackHandler`.
pub const USER_OPTION_PREFIX: &str = "user_";
/// The JAAS control flags Java accepts; Kafka uses only one module, so the flag has no effect.
const CONTROL_FLAGS: [&str; 4] = ["required", "requisite", "sufficient", "optional"];

/// Why a JAAS configuration string was refused: where, and a fixed reason (never the text
/// found there, which may be a password).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid JAAS configuration at byte {position}: {reason}")]
pub struct JaasError {
    /// Byte offset into the configuration string.
    pub position: usize,
    /// What was expected or wrong there.
    pub reason: &'static str,
}

/// One parsed login-module entry: the module's class name and its options. `Debug` hides the
/// values of `password` and `user_*` options.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct JaasOptions {
    /// The login module's class, e.g. `org.apache.kafka.common.security.plain.PlainLoginModule`.
    pub module: String,
    /// The options in key order.
    pub options: BTreeMap<String, String>,
}

impl JaasOptions {
    /// Parses a configuration string holding exactly one login module entry.
    pub fn parse(config: &str) -> Result<JaasOptions, JaasError> {
        Parser {
            text: config,
            position: 0,
        }
        .entry()
    }

    /// The PLAIN users defined by `user_<name>="<password>"` options.
    pub fn plain_users(&self) -> PlainUsers {
        let mut users = PlainUsers::new();
        for (key, password) in &self.options {
            if let Some(user) = key.strip_prefix(USER_OPTION_PREFIX) {
                users.insert(user, password);
            }
        }
        users
    }

    /// The `username` option: the broker's own user when it connects as a client.
    pub fn username(&self) -> Option<&str> {
        self.options.get("username").map(String::as_str)
    }

    /// The `password` option, for the broker's own connections as a client.
    pub fn password(&self) -> Option<&str> {
        self.options.get("password").map(String::as_str)
    }
}

/// Whether an option's value is a secret that `Debug` must hide.
fn is_secret_option(key: &str) -> bool {
    key == "password" || key.starts_with(USER_OPTION_PREFIX)
}

impl fmt::Debug for JaasOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let options: BTreeMap<&str, &str> = self
            .options
            .iter()
            .map(|(key, value)| {
                (
                    key.as_str(),
                    if is_secret_option(key) {
                        "<redacted>"
                    } else {
                        value.as_str()
                    },
                )
            })
            .collect();
        f.debug_struct("JaasOptions")
            .field("module", &self.module)
            .field("options", &options)
            .finish()
    }
}

impl FromStr for JaasOptions {
    type Err = JaasError;

    fn from_str(config: &str) -> Result<Self, Self::Err> {
        Self::parse(config)
    }
}

/// A cursor over the configuration string; positions are byte offsets.
struct Parser<'a> {
    text: &'a str,
    position: usize,
}

impl Parser<'_> {
    fn entry(mut self) -> Result<JaasOptions, JaasError> {
        self.skip_whitespace();
        let module = self.word("expected the login module class name")?;
        if !module
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '$'))
        {
            return Err(self.error_at(self.position - module.len(), "invalid login module class name"));
        }
        self.skip_whitespace();
        let flag_position = self.position;
        let flag = self.word("expected a control flag (required, requisite, sufficient, optional)")?;
        if !CONTROL_FLAGS
            .iter()
            .any(|known| known.eq_ignore_ascii_case(&flag))
        {
            return Err(self.error_at(flag_position, "unknown control flag"));
        }
        let options = self.options()?;
        self.skip_whitespace();
        if self.position != self.text.len() {
            return Err(self.error("only one login module entry is supported"));
        }
        Ok(JaasOptions { module, options })
    }

    /// `key=value` pairs up to and including the closing `;`.
    fn options(&mut self) -> Result<BTreeMap<String, String>, JaasError> {
        let mut options = BTreeMap::new();
        loop {
            self.skip_whitespace();
            match self.peek() {
                None => return Err(self.error("entry not terminated by ';'")),
                Some(';') => {
                    self.position += 1;
                    return Ok(options);
                }
                Some(_) => {}
            }
            let key_position = self.position;
            let key = self.word("expected an option name")?;
            if !key
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-'))
            {
                return Err(self.error_at(key_position, "invalid option name"));
            }
            if key == USER_OPTION_PREFIX {
                return Err(self.error_at(key_position, "user_ option without a user name"));
            }
            self.skip_whitespace();
            if self.peek() != Some('=') {
                return Err(self.error("expected '=' after the option name"));
            }
            self.position += 1;
            self.skip_whitespace();
            let value = self.value()?;
            if options.insert(key, value).is_some() {
                return Err(self.error_at(key_position, "option given twice"));
            }
        }
    }

    /// A double-quoted string or a bare word.
    fn value(&mut self) -> Result<String, JaasError> {
        if self.peek() != Some('"') {
            return self.word("expected an option value");
        }
        let opening = self.position;
        self.position += 1;
        let mut value = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((offset, character)) = chars.next() {
            match character {
                '"' => {
                    self.position += offset + 1;
                    return Ok(value);
                }
                '\\' => match chars.next() {
                    Some((_, escaped)) => value.push(escaped),
                    None => break,
                },
                _ => value.push(character),
            }
        }
        Err(self.error_at(opening, "unterminated quoted value"))
    }

    /// A run of characters other than whitespace, `=`, `;` and `"`; empty is an error.
    fn word(&mut self, expected: &'static str) -> Result<String, JaasError> {
        let rest = self.rest();
        let len = rest
            .find(|c: char| c.is_whitespace() || matches!(c, '=' | ';' | '"'))
            .unwrap_or(rest.len());
        if len == 0 {
            return Err(self.error(expected));
        }
        let word = rest.get(..len).unwrap_or_default().to_owned();
        self.position += len;
        Ok(word)
    }

    fn rest(&self) -> &str {
        self.text.get(self.position..).unwrap_or_default()
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn skip_whitespace(&mut self) {
        let rest = self.rest();
        self.position += rest.len() - rest.trim_start().len();
    }

    fn error(&self, reason: &'static str) -> JaasError {
        self.error_at(self.position, reason)
    }

    fn error_at(&self, position: usize, reason: &'static str) -> JaasError {
        JaasError { position, reason }
    }
}

/// The broker's PLAIN users, user name → password, from the JAAS `user_<name>` options.
/// `Debug` lists the names only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PlainUsers {
    passwords: BTreeMap<String, String>,
}

impl PlainUsers {
    /// No users: every PLAIN attempt fails.
    pub fn new() -> PlainUsers {
        PlainUsers::default()
    }

    /// Adds or replaces `user`'s password.
    pub fn insert(&mut self, user: &str, password: &str) {
        self.passwords.insert(user.to_owned(), password.to_owned());
    }

    /// The user names, sorted.
    pub fn users(&self) -> impl Iterator<Item = &str> + '_ {
        self.passwords.keys().map(String::as_str)
    }

    /// Whether `user` is defined.
    pub fn contains(&self, user: &str) -> bool {
        self.passwords.contains_key(user)
    }

    /// How many users are defined.
    pub fn len(&self) -> usize {
        self.passwords.len()
    }

    /// Whether no users are defined.
    pub fn is_empty(&self) -> bool {
        self.passwords.is_empty()
    }
}

impl fmt::Debug for PlainUsers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainUsers")
            .field("users", &self.passwords.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Credentials for PlainUsers {
    /// Compares SHA-256 digests in constant time, so neither the length nor the common prefix
    /// of a guess shows in the response time; unknown users are compared against an empty
    /// digest so they take as long as known ones.
    fn plain_password_matches(&self, user: &str, password: &str) -> bool {
        let expected = self.passwords.get(user);
        let expected_digest = Sha256::digest(expected.map(String::as_bytes).unwrap_or_default());
        let given_digest = Sha256::digest(password.as_bytes());
        bool::from(expected_digest.ct_eq(&given_digest)) && expected.is_some()
    }

    /// PLAIN users have no SCRAM credentials.
    fn scram_credential(&self, _user: &str, _mechanism: Mechanism) -> Option<ScramCredential> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KAFKA_EXAMPLE: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin"
        password="admin-secret"
        user_admin="admin-secret"
        user_alice="alice-secret";"#;

    #[test]
    fn parses_kafkas_plain_example() {
        let options = JaasOptions::parse(KAFKA_EXAMPLE).expect("valid config");
        assert_eq!(
            options.module,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(
            (options.username(), options.password()),
            (Some("admin"), Some("admin-secret"))
        );
        let users = options.plain_users();
        assert_eq!(users.users().collect::<Vec<_>>(), ["admin", "alice"]);
        assert!(users.plain_password_matches("alice", "alice-secret"));
        assert!(!users.plain_password_matches("alice", "admin-secret"));
        assert!(!users.plain_password_matches("admin", "admin-secre"));
        assert!(!users.plain_password_matches("bob", ""));
        assert_eq!(users.scram_credential("alice", Mechanism::ScramSha256), None);
        for debug in [format!("{options:?}"), format!("{users:?}")] {
            assert!(!debug.contains("secret"), "{debug}");
        }
        assert!(format!("{users:?}").contains("alice"));
    }

    #[test]
    fn handles_quoting_bare_words_and_whitespace() {
        let config = "Module  OPTIONAL  a = bare user_x=\"q\\\"uo\\\\te;d\" user_y=\"\"\t;  \n";
        let options: JaasOptions = config.parse().expect("valid config");
        assert_eq!(options.options.get("a").map(String::as_str), Some("bare"));
        let users = options.plain_users();
        assert!(users.plain_password_matches("x", "q\"uo\\te;d"));
        assert_eq!(users.len(), 2);
        let empty = JaasOptions::parse("M required;").expect("no options");
        assert!(empty.options.is_empty() && empty.plain_users().is_empty());
    }

    #[test]
    fn refuses_malformed_configs_naming_the_position() {
        for (config, position) in [
            ("", 0),
            ("M", 1),
            ("M required", 10),
            ("M mandatory;", 2),
            ("M required user_a=\"secret", 18),
            ("M required user_a=\"secret\\\"", 18),
            ("M required user_a;", 17),
            ("M required user_a=;", 18),
            ("M required user_=\"s\";", 11),
            ("M required a=1 a=2;", 15),
            ("M required a=1; N required;", 16),
            ("M required =1;", 11),
            ("M@x required;", 0),
        ] {
            let error = JaasOptions::parse(config).expect_err(config);
            assert_eq!(error.position, position, "{config}: {error}");
            assert!(!error.to_string().contains("secret"));
        }
    }
}
