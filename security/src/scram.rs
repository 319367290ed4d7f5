//! SCRAM (RFC 5802, RFC 7677) as Kafka's `ScramSaslServer` runs it: the stored credential, the
//! key derivations, and the parsing and checking of the client's two messages. The exchange's
//! state machine lives in [`crate::sasl`]; this module holds what it is built from.
//!
//! The server keeps `StoredKey = H(ClientKey)` and `ServerKey`, never the password: a leaked
//! store lets nobody log in (the proof needs `ClientKey`), though it allows impersonating the
//! server to clients.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use crate::protocol::Mechanism;
use crate::sasl_outcome::SaslError;

/// What the server knows to check a SCRAM proof (RFC 5802 section 3): the salt and iteration
/// count the client needs to derive its keys, and the two keys derived from the password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramCredential {
    /// SCRAM-SHA-256 or SCRAM-SHA-512: fixes the hash and the key lengths.
    pub mechanism: Mechanism,
    /// The salt of `Hi`, sent to the client in server-first.
    pub salt: Vec<u8>,
    /// The iteration count of `Hi`, sent to the client in server-first.
    pub iterations: u32,
    /// `H(HMAC(SaltedPassword, "Client Key"))`: what a client proof is checked against.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`: signs server-final so the client knows the server.
    pub server_key: Vec<u8>,
}

/// Why a SCRAM credential cannot be made or is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// The mechanism is not a SCRAM one (PLAIN has no stored credential).
    #[error("{0} is not a SCRAM mechanism")]
    NotScram(Mechanism),
    /// The iteration count is outside Kafka's bounds.
    #[error(
        "iterations {0} out of range [{min}, {max}]",
        min = ScramCredential::ITERATIONS_MIN,
        max = ScramCredential::ITERATIONS_MAX
    )]
    IterationsOutOfRange(u32),
    /// The salt is empty or longer than [`ScramCredential::SALT_LEN_MAX`].
    #[error("salt length {0} out of range [1, {max}]", max = ScramCredential::SALT_LEN_MAX)]
    SaltLength(usize),
    /// A salted password, stored key or server key does not have the hash's output length.
    #[error("{what} is {actual} bytes, but {mechanism} needs {expected}")]
    KeyLength {
        /// Which key is wrong.
        what: &'static str,
        /// The mechanism whose hash fixes the length.
        mechanism: Mechanism,
        /// The length found.
        actual: usize,
        /// The hash's output length.
        expected: usize,
    },
    /// The system's random source failed while drawing a salt.
    #[error("the system random source failed: {0}")]
    Random(String),
}

impl ScramCredential {
    /// Kafka's lower bound on iterations (`ScramMechanism.minIterations`), RFC 7677's minimum.
    pub const ITERATIONS_MIN: u32 = 4096;
    /// Kafka's upper bound on iterations (`ScramMechanism.maxIterations`): bounds the work one
    /// login costs the server.
    pub const ITERATIONS_MAX: u32 = 16384;
    /// The salt length [`ScramCredential::generate`] draws, as Kafka's `ScramFormatter`.
    pub const SALT_LEN_GENERATED: usize = 32;
    /// The longest salt accepted: the salt is sent in every server-first, which must fit in a
    /// SASL token, and no client needs more.
    pub const SALT_LEN_MAX: usize = 1024;

    /// Derives the credential from the password (`SaltedPassword = Hi(password, salt, i)`).
    pub fn from_password(
        mechanism: Mechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Result<ScramCredential, ScramError> {
        let hash = ScramHash::of(mechanism)?;
        check_salt_and_iterations(salt, iterations)?;
        let salted_password = hash.hi(password.as_bytes(), salt, iterations);
        Self::from_salted_password(mechanism, &salted_password, salt, iterations)
    }

    /// Derives the credential from the password with a fresh random salt of
    /// [`ScramCredential::SALT_LEN_GENERATED`] bytes.
    pub fn generate(
        mechanism: Mechanism,
        password: &str,
        iterations: u32,
    ) -> Result<ScramCredential, ScramError> {
        Self::from_password(mechanism, password, &Self::random_salt()?, iterations)
    }

    /// A fresh salt of [`Self::SALT_LEN_GENERATED`] random bytes.
    pub fn random_salt() -> Result<Vec<u8>, ScramError> {
        let mut salt = vec![0; Self::SALT_LEN_GENERATED];
        getrandom::fill(&mut salt).map_err(|error| ScramError::Random(error.to_string()))?;
        Ok(salt)
    }

    /// RFC 5802's SaltedPassword, `Hi(password, salt, iterations)`: what a client computes and
    /// sends in AlterUserScramCredentials, so that the password never leaves it.
    pub fn salted_password(
        mechanism: Mechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Result<Vec<u8>, ScramError> {
        Ok(ScramHash::of(mechanism)?.hi(password.as_bytes(), salt, iterations))
    }

    /// Kafka's AlterUserScramCredentials sends the salt and the salted password (the client
    /// ran `Hi`, so the password never reaches the broker): derives the keys from those.
    pub fn from_salted_password(
        mechanism: Mechanism,
        salted_password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Result<ScramCredential, ScramError> {
        let hash = ScramHash::of(mechanism)?;
        check_salt_and_iterations(salt, iterations)?;
        check_key_length(mechanism, hash, "salted password", salted_password)?;
        let client_key = hash.hmac(salted_password, b"Client Key");
        Ok(ScramCredential {
            mechanism,
            salt: salt.to_vec(),
            iterations,
            stored_key: hash.digest(&client_key),
            server_key: hash.hmac(salted_password, b"Server Key"),
        })
    }

    /// Checks what the constructors guarantee, for credentials built field by field or read
    /// back from storage: a SCRAM mechanism, bounded salt and iterations, keys of the hash's
    /// length.
    pub fn validate(&self) -> Result<(), ScramError> {
        let hash = ScramHash::of(self.mechanism)?;
        check_salt_and_iterations(&self.salt, self.iterations)?;
        check_key_length(self.mechanism, hash, "stored key", &self.stored_key)?;
        check_key_length(self.mechanism, hash, "server key", &self.server_key)
    }
}

fn check_salt_and_iterations(salt: &[u8], iterations: u32) -> Result<(), ScramError> {
    if salt.is_empty() || salt.len() > ScramCredential::SALT_LEN_MAX {
        return Err(ScramError::SaltLength(salt.len()));
    }
    if !(ScramCredential::ITERATIONS_MIN..=ScramCredential::ITERATIONS_MAX).contains(&iterations) {
        return Err(ScramError::IterationsOutOfRange(iterations));
    }
    Ok(())
}

fn check_key_length(
    mechanism: Mechanism,
    hash: ScramHash,
    what: &'static str,
    key: &[u8],
) -> Result<(), ScramError> {
    if key.len() == hash.output_len() {
        Ok(())
    } else {
        Err(ScramError::KeyLength {
            what,
            mechanism,
            actual: key.len(),
            expected: hash.output_len(),
        })
    }
}

/// The hash a SCRAM mechanism is built on; a separate type so PLAIN cannot reach the crypto.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScramHash {
    Sha256,
    Sha512,
}

impl ScramHash {
    pub(crate) fn of(mechanism: Mechanism) -> Result<ScramHash, ScramError> {
        match mechanism {
            Mechanism::ScramSha256 => Ok(Self::Sha256),
            Mechanism::ScramSha512 => Ok(Self::Sha512),
            Mechanism::Plain => Err(ScramError::NotScram(mechanism)),
        }
    }

    pub(crate) fn output_len(self) -> usize {
        match self {
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }

    pub(crate) fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha256 => Sha256::digest(data).to_vec(),
            Self::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    pub(crate) fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha256 => hmac_with::<Hmac<Sha256>>(key, data),
            Self::Sha512 => hmac_with::<Hmac<Sha512>>(key, data),
        }
    }

    /// RFC 5802's `Hi`: PBKDF2 with HMAC, one output block.
    pub(crate) fn hi(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut salted_password = vec![0; self.output_len()];
        match self {
            Self::Sha256 => pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut salted_password),
            Self::Sha512 => pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut salted_password),
        }
        salted_password
    }
}

fn hmac_with<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC hashes over-long keys and pads short ones: every key length is valid.
    let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key).expect("HMAC accepts keys of any length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// The client's first message, validated. Usernames and nonces are kept decoded; the raw
/// `client-first-message-bare` is kept because the AuthMessage signs it byte for byte.
#[derive(Debug)]
pub(crate) struct ClientFirst {
    /// The GS2 header as sent (`n,,`, `y,,`, `n,a=alice,`): client-final's `c=` must echo it.
    pub(crate) gs2_header: String,
    pub(crate) username: String,
    pub(crate) client_nonce: String,
    pub(crate) bare: String,
}

/// Kafka's SCRAM extension asking for delegation-token authentication, which Laminar lacks.
const TOKEN_AUTH_EXTENSION: &str = "tokenauth";

impl ClientFirst {
    /// Parses `gs2-header client-first-message-bare` (RFC 5802 section 7).
    pub(crate) fn parse(token: &[u8]) -> Result<ClientFirst, SaslError> {
        let text =
            std::str::from_utf8(token).map_err(|_| SaslError::Malformed("client-first is not UTF-8"))?;
        let (gs2_header, authzid, bare) = split_gs2_header(text)?;
        let mut fields = bare.split(',');
        let mut first = fields.next().unwrap_or_default();
        if first.starts_with("m=") {
            return Err(SaslError::Unsupported(
                "mandatory SCRAM extensions (m=) are not supported",
            ));
        }
        let username = decode_saslname(
            first
                .strip_prefix("n=")
                .ok_or(SaslError::Malformed("client-first has no username (n=)"))?,
        )?;
        first = fields.next().unwrap_or_default();
        let client_nonce = first
            .strip_prefix("r=")
            .ok_or(SaslError::Malformed("client-first has no nonce (r=)"))?;
        check_nonce(client_nonce)?;
        for extension in fields {
            check_client_first_extension(extension)?;
        }
        if authzid.as_ref().is_some_and(|authzid| *authzid != username) {
            return Err(SaslError::Unsupported(
                "an authorization id different from the username is not supported",
            ));
        }
        Ok(ClientFirst {
            gs2_header: gs2_header.to_owned(),
            username,
            client_nonce: client_nonce.to_owned(),
            bare: bare.to_owned(),
        })
    }
}

/// Splits `cbind-flag "," [authzid] ","` from the rest, refusing channel binding (`p=`):
/// Laminar's TLS does not export channel-binding data.
fn split_gs2_header(text: &str) -> Result<(&str, Option<String>, &str), SaslError> {
    let (flag, rest) = text
        .split_once(',')
        .ok_or(SaslError::Malformed("client-first has no GS2 header"))?;
    match flag {
        "n" | "y" => {}
        _ if flag.starts_with("p=") => {
            return Err(SaslError::Unsupported("channel binding is not supported"))
        }
        _ => return Err(SaslError::Malformed("invalid GS2 channel-binding flag")),
    }
    let (authzid_field, bare) = rest
        .split_once(',')
        .ok_or(SaslError::Malformed("client-first has no GS2 header"))?;
    let authzid = match authzid_field {
        "" => None,
        _ => Some(decode_saslname(
            authzid_field
                .strip_prefix("a=")
                .ok_or(SaslError::Malformed("invalid GS2 authorization id"))?,
        )?),
    };
    let header_len = flag.len() + authzid_field.len() + 2;
    let gs2_header = text
        .get(..header_len)
        .ok_or(SaslError::Malformed("client-first has no GS2 header"))?;
    Ok((gs2_header, authzid, bare))
}

/// Decodes RFC 5802's `saslname`: `=2C` is `,`, `=3D` is `=`, any other `=` is an error.
fn decode_saslname(encoded: &str) -> Result<String, SaslError> {
    if encoded.is_empty() {
        return Err(SaslError::Malformed("empty username"));
    }
    let mut decoded = String::with_capacity(encoded.len());
    let mut rest = encoded;
    while let Some(position) = rest.find('=') {
        decoded.push_str(rest.get(..position).unwrap_or_default());
        let escape = rest.get(position..position + 3);
        match escape {
            Some("=2C") => decoded.push(','),
            Some("=3D") => decoded.push('='),
            _ => return Err(SaslError::Malformed("invalid '=' escape in username")),
        }
        rest = rest.get(position + 3..).unwrap_or_default();
    }
    decoded.push_str(rest);
    Ok(decoded)
}

/// RFC 5802's nonce: one or more printable ASCII characters other than `,`.
fn check_nonce(nonce: &str) -> Result<(), SaslError> {
    if nonce.is_empty()
        || !nonce
            .bytes()
            .all(|byte| (0x21..=0x7e).contains(&byte) && byte != b',')
    {
        return Err(SaslError::Malformed("invalid nonce"));
    }
    Ok(())
}

/// An extension is `attr=value`; Kafka's `tokenauth=true` asks for delegation tokens, which
/// are refused rather than ignored so such a client learns why it fails.
fn check_client_first_extension(extension: &str) -> Result<(), SaslError> {
    let (name, value) = extension
        .split_once('=')
        .ok_or(SaslError::Malformed("invalid SCRAM extension"))?;
    if name.is_empty() || !name.bytes().all(|byte| byte.is_ascii_alphanumeric()) {
        return Err(SaslError::Malformed("invalid SCRAM extension"));
    }
    if name == TOKEN_AUTH_EXTENSION && value.eq_ignore_ascii_case("true") {
        return Err(SaslError::Unsupported(
            "delegation-token authentication is not supported",
        ));
    }
    Ok(())
}

/// The client's final message, validated in form; whether it proves anything is
/// [`verify_proof`]'s question.
#[derive(Debug)]
pub(crate) struct ClientFinal<'a> {
    pub(crate) channel_binding: Vec<u8>,
    pub(crate) nonce: &'a str,
    pub(crate) proof: Vec<u8>,
    /// `client-final-message-without-proof`, signed by the AuthMessage.
    pub(crate) without_proof: &'a str,
}

impl<'a> ClientFinal<'a> {
    /// Parses `c=<base64>,r=<nonce>[,extensions],p=<base64>` (RFC 5802 section 7).
    pub(crate) fn parse(token: &'a [u8]) -> Result<ClientFinal<'a>, SaslError> {
        let text =
            std::str::from_utf8(token).map_err(|_| SaslError::Malformed("client-final is not UTF-8"))?;
        let (without_proof, proof_field) = text
            .rsplit_once(',')
            .ok_or(SaslError::Malformed("client-final has no proof (p=)"))?;
        let proof_base64 = proof_field
            .strip_prefix("p=")
            .ok_or(SaslError::Malformed("client-final has no proof (p=)"))?;
        let mut fields = without_proof.split(',');
        let channel_binding_base64 = fields
            .next()
            .and_then(|field| field.strip_prefix("c="))
            .ok_or(SaslError::Malformed("client-final has no channel binding (c=)"))?;
        let nonce = fields
            .next()
            .and_then(|field| field.strip_prefix("r="))
            .ok_or(SaslError::Malformed("client-final has no nonce (r=)"))?;
        if fields.any(|extension| !extension.contains('=')) {
            return Err(SaslError::Malformed("invalid SCRAM extension"));
        }
        Ok(ClientFinal {
            channel_binding: decode_base64(channel_binding_base64, "channel binding is not base64")?,
            nonce,
            proof: decode_base64(proof_base64, "proof is not base64")?,
            without_proof,
        })
    }
}

fn decode_base64(text: &str, reason: &'static str) -> Result<Vec<u8>, SaslError> {
    BASE64.decode(text).map_err(|_| SaslError::Malformed(reason))
}

/// Checks `proof` against `credential` (RFC 5802 section 3): `ClientKey = proof XOR
/// HMAC(StoredKey, AuthMessage)` must hash to `StoredKey`. Compared in constant time so the
/// comparison leaks nothing about how much of the key was right.
pub(crate) fn verify_proof(
    credential: &ScramCredential,
    auth_message: &[u8],
    proof: &[u8],
) -> Result<bool, ScramError> {
    let hash = ScramHash::of(credential.mechanism)?;
    if proof.len() != hash.output_len() {
        return Ok(false);
    }
    let client_signature = hash.hmac(&credential.stored_key, auth_message);
    let client_key: Vec<u8> = proof
        .iter()
        .zip(&client_signature)
        .map(|(left, right)| left ^ right)
        .collect();
    Ok(bool::from(hash.digest(&client_key).ct_eq(&credential.stored_key)))
}

/// `v=<base64 HMAC(ServerKey, AuthMessage)>`: server-final, proving the server knew the
/// credential.
pub(crate) fn server_final(credential: &ScramCredential, auth_message: &[u8]) -> Result<Vec<u8>, ScramError> {
    let hash = ScramHash::of(credential.mechanism)?;
    let signature = hash.hmac(&credential.server_key, auth_message);
    Ok(format!("v={}", BASE64.encode(signature)).into_bytes())
}

/// `r=<nonce>,s=<base64 salt>,i=<iterations>`: server-first.
pub(crate) fn server_first(nonce: &str, credential: &ScramCredential) -> String {
    format!(
        "r={nonce},s={},i={}",
        BASE64.encode(&credential.salt),
        credential.iterations
    )
}

/// Whether `nonce` may be a server nonce: RFC 5802's printable characters without `,`.
pub(crate) fn is_valid_nonce(nonce: &str) -> bool {
    check_nonce(nonce).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_refuse_out_of_bounds_inputs() {
        let salt = b"salt";
        assert_eq!(
            ScramCredential::from_password(Mechanism::Plain, "p", salt, 4096),
            Err(ScramError::NotScram(Mechanism::Plain))
        );
        assert_eq!(
            ScramCredential::from_password(Mechanism::ScramSha256, "p", salt, 4095),
            Err(ScramError::IterationsOutOfRange(4095))
        );
        assert_eq!(
            ScramCredential::from_password(Mechanism::ScramSha256, "p", salt, 16385),
            Err(ScramError::IterationsOutOfRange(16385))
        );
        assert_eq!(
            ScramCredential::from_password(Mechanism::ScramSha256, "p", b"", 4096),
            Err(ScramError::SaltLength(0))
        );
        assert!(matches!(
            ScramCredential::from_salted_password(Mechanism::ScramSha512, &[0; 32], salt, 4096),
            Err(ScramError::KeyLength {
                actual: 32,
                expected: 64,
                ..
            })
        ));
    }

    #[test]
    fn salted_password_and_password_paths_agree() {
        let salt = b"0123456789abcdef";
        for mechanism in Mechanism::SCRAM {
            let hash = ScramHash::of(mechanism).expect("SCRAM mechanism");
            let salted = hash.hi(b"secret", salt, 4096);
            let from_salted = ScramCredential::from_salted_password(mechanism, &salted, salt, 4096);
            let from_password = ScramCredential::from_password(mechanism, "secret", salt, 4096);
            assert_eq!(from_salted, from_password);
            assert_eq!(from_password.map(|credential| credential.validate()), Ok(Ok(())));
        }
        let generated =
            ScramCredential::generate(Mechanism::ScramSha256, "secret", 4096).expect("random works");
        assert_eq!(generated.salt.len(), ScramCredential::SALT_LEN_GENERATED);
    }

    #[test]
    fn saslnames_decode_only_the_two_escapes() {
        assert_eq!(decode_saslname("a=2Cb=3Dc").ok().as_deref(), Some("a,b=c"));
        assert!(decode_saslname("a=2").is_err());
        assert!(decode_saslname("a=41").is_err());
        assert!(decode_saslname("").is_err());
    }

    #[test]
    fn client_first_parses_headers_and_extensions() {
        let parsed = ClientFirst::parse(b"n,a=bob,n=bob,r=abc,ext=1").expect("valid client-first");
        assert_eq!(
            (parsed.gs2_header.as_str(), parsed.username.as_str()),
            ("n,a=bob,", "bob")
        );
        assert_eq!(
            (parsed.client_nonce.as_str(), parsed.bare.as_str()),
            ("abc", "n=bob,r=abc,ext=1")
        );
        for refused in [
            &b"p=tls-unique,,n=bob,r=abc"[..],
            b"n,a=eve,n=bob,r=abc",
            b"n,,n=bob,r=abc,tokenauth=true",
            b"n,,m=x,n=bob,r=abc",
            b"n,,n=bob,r=a,b",
            b"n,,n=bob,r=",
            b"x,,n=bob,r=abc",
            b"n,,r=abc,n=bob",
            b"n,,n=bob",
        ] {
            assert!(
                ClientFirst::parse(refused).is_err(),
                "{:?}",
                String::from_utf8_lossy(refused)
            );
        }
    }
}
