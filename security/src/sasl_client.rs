//! The client side of SASL PLAIN and SCRAM-SHA-256/512, for Laminar's own client (the CLI,
//! `laminar bench`, brokers fetching from each other). It builds the tokens and checks the
//! server's: a SCRAM server must prove it knows the credential too (its server-final
//! signature), and its iteration count is bounded, so that a hostile server cannot make the
//! client hash for minutes.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use crate::protocol::Mechanism;
use crate::sasl_outcome::SaslError;
use crate::scram::{ScramCredential, ScramHash};

/// One exchange from the client's side. Owned by the connection that authenticates.
pub struct SaslClient {
    mechanism: Mechanism,
    user: String,
    password: String,
    state: ClientState,
}

enum ClientState {
    Start,
    /// SCRAM: the first message sent, its bare part kept for the AuthMessage.
    SentFirst {
        bare: String,
        nonce: String,
    },
    /// SCRAM: the proof sent; the server's signature is expected.
    SentFinal {
        server_signature: Vec<u8>,
    },
    Done,
}

impl SaslClient {
    /// An exchange that will authenticate `user` with `password` by `mechanism`.
    pub fn new(mechanism: Mechanism, user: &str, password: &str) -> SaslClient {
        SaslClient {
            mechanism,
            user: user.to_string(),
            password: password.to_string(),
            state: ClientState::Start,
        }
    }

    /// The client's first token.
    pub fn first_token(&mut self) -> Result<Vec<u8>, SaslError> {
        if self.mechanism == Mechanism::Plain {
            self.state = ClientState::Done;
            return Ok(format!("\0{}\0{}", self.user, self.password).into_bytes());
        }
        let mut random = [0u8; 24];
        getrandom::fill(&mut random).map_err(|_| SaslError::Internal("no randomness for a nonce"))?;
        let nonce = STANDARD.encode(random);
        let bare = format!("n={},r={nonce}", escape_user(&self.user));
        let token = format!("n,,{bare}").into_bytes();
        self.state = ClientState::SentFirst { bare, nonce };
        Ok(token)
    }

    /// Takes the server's next token: `Some` token to send back, `None` once the exchange is
    /// complete and the server proved itself.
    pub fn step(&mut self, server_token: &[u8]) -> Result<Option<Vec<u8>>, SaslError> {
        match std::mem::replace(&mut self.state, ClientState::Done) {
            ClientState::SentFirst { bare, nonce } => {
                let (final_token, server_signature) = self.client_final(&bare, &nonce, server_token)?;
                self.state = ClientState::SentFinal { server_signature };
                Ok(Some(final_token))
            }
            ClientState::SentFinal { server_signature } => {
                let text =
                    std::str::from_utf8(server_token).map_err(|_| SaslError::Malformed("server-final"))?;
                match text.strip_prefix("v=").map(|v| STANDARD.decode(v)) {
                    Some(Ok(signature)) if signature == server_signature => Ok(None),
                    _ => Err(SaslError::InvalidCredentials(self.mechanism)),
                }
            }
            ClientState::Done if self.mechanism == Mechanism::Plain && server_token.is_empty() => Ok(None),
            ClientState::Start | ClientState::Done => Err(SaslError::ExchangeOver),
        }
    }

    /// SCRAM's client-final message for the server-first `server_token`, and the signature the
    /// server must answer with.
    fn client_final(
        &self,
        bare: &str,
        nonce: &str,
        server_token: &[u8],
    ) -> Result<(Vec<u8>, Vec<u8>), SaslError> {
        let server_first =
            std::str::from_utf8(server_token).map_err(|_| SaslError::Malformed("server-first"))?;
        let (full_nonce, salt, iterations) = parse_server_first(server_first)?;
        if !full_nonce.starts_with(nonce) || full_nonce.len() == nonce.len() {
            return Err(SaslError::Malformed(
                "the server's nonce does not extend the client's",
            ));
        }
        let hash =
            ScramHash::of(self.mechanism).map_err(|_| SaslError::Malformed("not a SCRAM mechanism"))?;
        let salted = hash.hi(self.password.as_bytes(), &salt, iterations);
        let credential = ScramCredential::from_salted_password(self.mechanism, &salted, &salt, iterations)
            .map_err(|_| SaslError::Malformed("the server's salt or iteration count"))?;
        let without_proof = format!("c=biws,r={full_nonce}");
        let auth_message = format!("{bare},{server_first},{without_proof}");
        let client_key = hash.hmac(&salted, b"Client Key");
        let signature = hash.hmac(&credential.stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        let token = format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes();
        Ok((token, hash.hmac(&credential.server_key, auth_message.as_bytes())))
    }
}

/// `r=<nonce>,s=<salt>,i=<iterations>`, the iterations within Kafka's bounds.
fn parse_server_first(text: &str) -> Result<(&str, Vec<u8>, u32), SaslError> {
    let mut fields = text.split(',');
    let mut field = |name: &str| {
        fields
            .next()
            .and_then(|f| f.strip_prefix(name))
            .ok_or(SaslError::Malformed("server-first"))
    };
    let nonce = field("r=")?;
    let salt = STANDARD
        .decode(field("s=")?)
        .map_err(|_| SaslError::Malformed("server-first salt"))?;
    let iterations: u32 = field("i=")?
        .parse()
        .map_err(|_| SaslError::Malformed("server-first iterations"))?;
    if !(ScramCredential::ITERATIONS_MIN..=ScramCredential::ITERATIONS_MAX).contains(&iterations) {
        return Err(SaslError::Malformed(
            "the server's iteration count is out of bounds",
        ));
    }
    Ok((nonce, salt, iterations))
}

/// RFC 5802's `saslname`: `=` and `,` escaped.
fn escape_user(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::Credentials;
    use crate::sasl::{SaslServer, SaslStep};
    use crate::Principal;

    struct OneUser(ScramCredential);

    impl Credentials for OneUser {
        fn plain_password_matches(&self, user: &str, password: &str) -> bool {
            (user, password) == ("a,b=c", "secret")
        }

        fn scram_credential(&self, user: &str, mechanism: Mechanism) -> Option<ScramCredential> {
            (user == "a,b=c" && mechanism == self.0.mechanism).then(|| self.0.clone())
        }
    }

    fn exchange(mechanism: Mechanism, password: &str) -> Result<Principal, SaslError> {
        let scram = if mechanism.is_scram() {
            mechanism
        } else {
            Mechanism::ScramSha256
        };
        let credential = ScramCredential::from_password(scram, "secret", b"some salt", 4096).unwrap();
        let users = OneUser(credential);
        let (mut client, mut server) = (
            SaslClient::new(mechanism, "a,b=c", password),
            SaslServer::new(mechanism),
        );
        let mut token = client.first_token()?;
        loop {
            match server.step(&token, &users)? {
                SaslStep::Challenge(challenge) => token = client.step(&challenge)?.expect("more to say"),
                SaslStep::Authenticated {
                    principal,
                    final_token,
                } => {
                    assert_eq!(client.step(&final_token)?, None, "the server proved itself");
                    return Ok(principal);
                }
            }
        }
    }

    #[test]
    fn the_client_and_the_server_agree_for_every_mechanism() {
        for mechanism in [Mechanism::Plain, Mechanism::ScramSha256, Mechanism::ScramSha512] {
            assert_eq!(
                exchange(mechanism, "secret").unwrap(),
                Principal::user("a,b=c"),
                "{mechanism}"
            );
            assert!(exchange(mechanism, "wrong").is_err(), "{mechanism}");
        }
    }

    #[test]
    fn a_server_that_cannot_prove_itself_or_asks_too_much_is_refused() {
        let mut client = SaslClient::new(Mechanism::ScramSha256, "u", "p");
        let first = String::from_utf8(client.first_token().unwrap()).unwrap();
        let nonce = first.rsplit("r=").next().unwrap().to_string();
        let too_many = format!("r={nonce}x,s=c2FsdA==,i=100000000");
        assert!(client.step(too_many.as_bytes()).is_err());
        let mut client = SaslClient::new(Mechanism::ScramSha256, "u", "p");
        let first = String::from_utf8(client.first_token().unwrap()).unwrap();
        let nonce = first.rsplit("r=").next().unwrap().to_string();
        let server_first = format!("r={nonce}x,s=c2FsdA==,i=4096");
        assert!(client.step(server_first.as_bytes()).unwrap().is_some());
        assert!(client.step(b"v=bm90IHRoZSBzaWduYXR1cmU=").is_err());
        let mut client = SaslClient::new(Mechanism::ScramSha256, "u", "p");
        client.first_token().unwrap();
        assert!(client.step(b"r=someone-elses-nonce,s=c2FsdA==,i=4096").is_err());
    }
}
