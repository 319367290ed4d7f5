//! Bearer tokens for the admin HTTP API ([`BearerTokens`]): who holds a token, and with what
//! role.
//!
//! # File format
//!
//! UTF-8 text, one token per line: `<role> <name> <token>`, separated by spaces or tabs. The
//! role is `admin` (may change state) or `read-only` (may only read). The name says who holds
//! the token in audit lines; it is never the secret. The token is at least
//! [`BearerTokens::TOKEN_LEN_MIN`] printable ASCII characters. Blank lines and lines starting
//! with `#` are skipped. At most [`BearerTokens::TOKENS_MAX`] tokens, lines of at most 4 KiB.
//!
//! Only SHA-256 digests of the tokens are kept in memory, and a presented token is compared
//! with every one of them in constant time, so the time an answer takes tells nothing of how
//! close a guess was.

use std::path::Path;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// What a token's holder may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Reads only (GET).
    ReadOnly,
    /// Reads and changes state.
    Admin,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::ReadOnly => "read-only",
            Role::Admin => "admin",
        }
    }

    fn parse(text: &str) -> Option<Role> {
        [Role::ReadOnly, Role::Admin]
            .into_iter()
            .find(|role| role.name() == text)
    }
}

/// The tokens of a tokens file, as digests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerTokens {
    tokens: Vec<(String, Role, [u8; 32])>,
}

/// Why a tokens file cannot be used; `line` counts from 1.
#[derive(Debug, thiserror::Error)]
pub enum BearerTokensError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path} line {line}: {reason}")]
    Invalid {
        path: String,
        line: usize,
        reason: String,
    },
}

impl BearerTokens {
    /// The shortest token taken: guessing 24 characters is out of reach.
    pub const TOKEN_LEN_MIN: usize = 24;
    pub const TOKENS_MAX: usize = 1000;
    const LINE_LEN_MAX: usize = 4096;

    /// Reads the tokens file at `path` (module documentation).
    pub fn load(path: &Path) -> Result<BearerTokens, BearerTokensError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| BearerTokensError::Io {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&text).map_err(|(line, reason)| BearerTokensError::Invalid {
            path: shown,
            line,
            reason,
        })
    }

    /// The tokens of a file's text; the error is the line and why.
    pub fn parse(text: &str) -> Result<BearerTokens, (usize, String)> {
        let mut tokens = BearerTokens::default();
        for (index, line) in text.lines().enumerate() {
            let line_number = index + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let refuse = |reason: &str| Err((line_number, reason.to_string()));
            if line.len() > Self::LINE_LEN_MAX {
                return refuse("line too long");
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [role, name, token] = fields.as_slice() else {
                return refuse("expected <role> <name> <token>");
            };
            let Some(role) = Role::parse(role) else {
                return refuse("the role is admin or read-only");
            };
            if token.len() < Self::TOKEN_LEN_MIN || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return refuse("a token is at least 24 printable ASCII characters");
            }
            if tokens.tokens.len() == Self::TOKENS_MAX {
                return refuse("more than 1000 tokens");
            }
            tokens
                .tokens
                .push((name.to_string(), role, Sha256::digest(token.as_bytes()).into()));
        }
        Ok(tokens)
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The holder and role of `presented`, if it is one of the tokens. Every token is
    /// compared, each in constant time.
    pub fn holder_of(&self, presented: &str) -> Option<(&str, Role)> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for (name, role, expected) in &self.tokens {
            if bool::from(expected.ct_eq(&digest)) && found.is_none() {
                found = Some((name.as_str(), *role));
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADMIN_TOKEN: &str = "a-very-long-admin-token-0123456789";
    const READER_TOKEN: &str = "a-very-long-reader-token-0123456789";

    #[test]
    fn a_token_names_its_holder_and_role() {
        let text = format!("# ops\nadmin ops {ADMIN_TOKEN}\n\nread-only grafana\t{READER_TOKEN}\n");
        let tokens = BearerTokens::parse(&text).unwrap();
        assert_eq!(tokens.holder_of(ADMIN_TOKEN), Some(("ops", Role::Admin)));
        assert_eq!(tokens.holder_of(READER_TOKEN), Some(("grafana", Role::ReadOnly)));
        assert_eq!(tokens.holder_of("a-very-long-admin-token-012345678"), None);
        assert_eq!(tokens.holder_of(""), None);
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        for (text, line) in [
            ("admin ops short\n", 1),
            ("\nroot ops a-very-long-admin-token-0123456789\n", 2),
            ("admin a-very-long-admin-token-0123456789\n", 1),
            ("admin ops a-very-long-admin-token-0123456789 extra\n", 1),
        ] {
            let refused = BearerTokens::parse(text).unwrap_err();
            assert_eq!(refused.0, line, "{text:?}: {refused:?}");
        }
    }
}
