//! SASL exchanges end to end through `SaslServer`: the RFC 7677 test vector, SCRAM round trips
//! with a client written here from RFC 5802, PLAIN, and malformed or hostile input.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use laminar_security::{
    Credentials, Mechanism, PlainUsers, Principal, SaslError, SaslErrorKind, SaslServer, SaslStep,
    ScramCredential, SASL_TOKEN_LEN_MAX,
};
use sha2::{Digest, Sha256, Sha512};

/// Users with SCRAM credentials, for the server side of the tests.
#[derive(Default)]
struct ScramUsers(Vec<(String, ScramCredential)>);

impl Credentials for ScramUsers {
    fn plain_password_matches(&self, _user: &str, _password: &str) -> bool {
        false
    }

    fn scram_credential(&self, user: &str, mechanism: Mechanism) -> Option<ScramCredential> {
        self.0
            .iter()
            .find(|(name, credential)| name == user && credential.mechanism == mechanism)
            .map(|(_, credential)| credential.clone())
    }
}

fn users_with(user: &str, password: &str, mechanism: Mechanism) -> ScramUsers {
    let credential = ScramCredential::generate(mechanism, password, 4096).expect("valid credential");
    ScramUsers(vec![(user.to_owned(), credential)])
}

fn hmac(mechanism: Mechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    match mechanism {
        Mechanism::ScramSha512 => {
            let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("any key length");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        _ => {
            let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
    }
}

fn digest(mechanism: Mechanism, data: &[u8]) -> Vec<u8> {
    match mechanism {
        Mechanism::ScramSha512 => Sha512::digest(data).to_vec(),
        _ => Sha256::digest(data).to_vec(),
    }
}

/// The client side of SCRAM (RFC 5802 section 3), enough to drive the server.
struct ScramClient {
    mechanism: Mechanism,
    password: String,
    gs2_header: String,
    client_first_bare: String,
    client_nonce: String,
}

/// What the client computed for client-final, kept to check server-final.
struct ClientFinal {
    message: String,
    expected_server_final: String,
}

impl ScramClient {
    fn new(mechanism: Mechanism, user: &str, password: &str, client_nonce: &str) -> ScramClient {
        let escaped = user.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            mechanism,
            password: password.to_owned(),
            gs2_header: "n,,".to_owned(),
            client_first_bare: format!("n={escaped},r={client_nonce}"),
            client_nonce: client_nonce.to_owned(),
        }
    }

    fn first(&self) -> Vec<u8> {
        format!("{}{}", self.gs2_header, self.client_first_bare).into_bytes()
    }

    fn final_message(&self, server_first: &[u8]) -> ClientFinal {
        let server_first = std::str::from_utf8(server_first).expect("server-first is UTF-8");
        let fields: Vec<&str> = server_first.split(',').collect();
        let nonce = fields[0].strip_prefix("r=").expect("r= first");
        assert!(
            nonce.starts_with(&self.client_nonce),
            "server nonce extends the client's"
        );
        let salt = BASE64
            .decode(fields[1].strip_prefix("s=").expect("s= second"))
            .expect("base64 salt");
        let iterations: u32 = fields[2]
            .strip_prefix("i=")
            .expect("i= third")
            .parse()
            .expect("number");
        let mut salted = vec![0; digest(self.mechanism, b"").len()];
        match self.mechanism {
            Mechanism::ScramSha512 => {
                pbkdf2::pbkdf2_hmac::<Sha512>(self.password.as_bytes(), &salt, iterations, &mut salted)
            }
            _ => pbkdf2::pbkdf2_hmac::<Sha256>(self.password.as_bytes(), &salt, iterations, &mut salted),
        }
        let without_proof = format!("c={},r={nonce}", BASE64.encode(&self.gs2_header));
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_key = hmac(self.mechanism, &salted, b"Client Key");
        let stored_key = digest(self.mechanism, &client_key);
        let signature = hmac(self.mechanism, &stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        let server_key = hmac(self.mechanism, &salted, b"Server Key");
        ClientFinal {
            message: format!("{without_proof},p={}", BASE64.encode(proof)),
            expected_server_final: format!(
                "v={}",
                BASE64.encode(hmac(self.mechanism, &server_key, auth_message.as_bytes()))
            ),
        }
    }
}

fn challenge(step: Result<SaslStep, SaslError>) -> Vec<u8> {
    match step {
        Ok(SaslStep::Challenge(bytes)) => bytes,
        other => panic!("expected a challenge, got {other:?}"),
    }
}

#[test]
fn rfc7677_scram_sha256_example() {
    let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("RFC salt");
    let credential =
        ScramCredential::from_password(Mechanism::ScramSha256, "pencil", &salt, 4096).expect("valid");
    let users = ScramUsers(vec![("user".to_owned(), credential)]);
    let mut server = SaslServer::with_server_nonce(Mechanism::ScramSha256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
        .expect("valid nonce");
    let server_first = challenge(server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", &users));
    assert_eq!(
        server_first,
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    );
    let client_final = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    assert_eq!(
        server.step(client_final, &users),
        Ok(SaslStep::Authenticated {
            principal: Principal::user("user"),
            final_token: b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec(),
        })
    );
    assert!(server.is_over());
    assert_eq!(server.step(client_final, &users), Err(SaslError::ExchangeOver));
}

#[test]
fn scram_round_trips_for_both_mechanisms() {
    for mechanism in Mechanism::SCRAM {
        let users = users_with("al,i=ce", "secret", mechanism);
        let client = ScramClient::new(mechanism, "al,i=ce", "secret", "fyko+d2lbbFgONRv9qkxdawL");
        let mut server = SaslServer::new(mechanism);
        assert_eq!(server.mechanism(), mechanism);
        let server_first = challenge(server.step(&client.first(), &users));
        let client_final = client.final_message(&server_first);
        assert_eq!(
            server.step(client_final.message.as_bytes(), &users),
            Ok(SaslStep::Authenticated {
                principal: Principal::user("al,i=ce"),
                final_token: client_final.expected_server_final.into_bytes(),
            })
        );
    }
}

#[test]
fn server_nonces_are_fresh() {
    let users = users_with("alice", "secret", Mechanism::ScramSha256);
    let client = ScramClient::new(Mechanism::ScramSha256, "alice", "secret", "abc");
    let first = challenge(SaslServer::new(Mechanism::ScramSha256).step(&client.first(), &users));
    let second = challenge(SaslServer::new(Mechanism::ScramSha256).step(&client.first(), &users));
    assert_ne!(first, second);
}

fn scram_failure(users: &ScramUsers, client: &ScramClient, tamper: impl Fn(String) -> String) -> SaslError {
    let mut server = SaslServer::new(client.mechanism);
    let server_first = challenge(server.step(&client.first(), users));
    let message = tamper(client.final_message(&server_first).message);
    let error = server
        .step(message.as_bytes(), users)
        .expect_err("the exchange must fail");
    assert_eq!(
        server.step(message.as_bytes(), users),
        Err(SaslError::ExchangeOver)
    );
    error
}

#[test]
fn wrong_password_and_unknown_user_fail_alike_at_the_final_step() {
    let users = users_with("alice", "secret", Mechanism::ScramSha256);
    let wrong_password = ScramClient::new(Mechanism::ScramSha256, "alice", "guess", "abc");
    let unknown_user = ScramClient::new(Mechanism::ScramSha256, "mallory", "secret", "abc");
    let wrong = scram_failure(&users, &wrong_password, |message| message);
    let unknown = scram_failure(&users, &unknown_user, |message| message);
    assert_eq!(wrong, unknown);
    assert!(wrong.is_bad_credentials());
    assert_eq!(
        wrong.client_message(),
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
    );
    assert!(!wrong.to_string().contains("guess") && !wrong.client_message().contains("guess"));
}

#[test]
fn unknown_users_get_a_stable_plausible_server_first() {
    let users = ScramUsers::default();
    let client = ScramClient::new(Mechanism::ScramSha512, "mallory", "x", "abc");
    let salt_of = |server_first: Vec<u8>| {
        let text = String::from_utf8(server_first).expect("UTF-8");
        let fields: Vec<String> = text.split(',').skip(1).map(str::to_owned).collect();
        fields
    };
    let first = salt_of(challenge(
        SaslServer::new(Mechanism::ScramSha512).step(&client.first(), &users),
    ));
    let second = salt_of(challenge(
        SaslServer::new(Mechanism::ScramSha512).step(&client.first(), &users),
    ));
    assert_eq!(first, second, "same unknown user, same salt and iterations");
    assert_eq!(first[1], "i=4096");
    let other = ScramClient::new(Mechanism::ScramSha512, "trudy", "x", "abc");
    let third = salt_of(challenge(
        SaslServer::new(Mechanism::ScramSha512).step(&other.first(), &users),
    ));
    assert_ne!(first[0], third[0], "different unknown users, different salts");
}

#[test]
fn tampered_nonce_channel_binding_or_proof_is_refused() {
    let users = users_with("alice", "secret", Mechanism::ScramSha256);
    let client = ScramClient::new(Mechanism::ScramSha256, "alice", "secret", "abc");
    let nonce = scram_failure(&users, &client, |message| message.replacen(",r=abc", ",r=abd", 1));
    assert_eq!(nonce.kind(), SaslErrorKind::Malformed);
    let binding = scram_failure(&users, &client, |message| message.replacen("c=biws", "c=eSws", 1));
    assert_eq!(binding.kind(), SaslErrorKind::Malformed);
    let proof = scram_failure(&users, &client, |message| {
        let (head, proof) = message.rsplit_once(",p=").expect("has a proof");
        let mut bytes = BASE64.decode(proof).expect("base64");
        bytes[0] ^= 1;
        format!("{head},p={}", BASE64.encode(bytes))
    });
    assert!(proof.is_bad_credentials());
    let short_proof = scram_failure(&users, &client, |message| {
        let (head, _) = message.rsplit_once(",p=").expect("has a proof");
        format!("{head},p=AAAA")
    });
    assert!(short_proof.is_bad_credentials());
}

#[test]
fn scram_client_first_refusals() {
    let users = users_with("alice", "secret", Mechanism::ScramSha256);
    for (token, kind) in [
        (
            &b"p=tls-server-end-point,,n=alice,r=abc"[..],
            SaslErrorKind::Unsupported,
        ),
        (b"n,a=bob,n=alice,r=abc", SaslErrorKind::Unsupported),
        (b"n,,n=alice,r=abc,tokenauth=true", SaslErrorKind::Unsupported),
        (b"n,,n=al=41ice,r=abc", SaslErrorKind::Malformed),
        (b"n,,n=alice,r=a\x01c", SaslErrorKind::Malformed),
        (b"n,,n=alice", SaslErrorKind::Malformed),
        (b"", SaslErrorKind::Malformed),
        (b"\xff\xfe", SaslErrorKind::Malformed),
    ] {
        let mut server = SaslServer::new(Mechanism::ScramSha256);
        let error = server.step(token, &users).expect_err("refused");
        assert_eq!(error.kind(), kind, "{:?}", String::from_utf8_lossy(token));
        assert_eq!(
            server.step(b"n,,n=alice,r=abc", &users),
            Err(SaslError::ExchangeOver)
        );
    }
    let accepted = [
        &b"y,,n=alice,r=abc"[..],
        b"n,a=alice,n=alice,r=abc",
        b"n,,n=alice,r=abc,tokenauth=false,x=y",
    ];
    for token in accepted {
        challenge(SaslServer::new(Mechanism::ScramSha256).step(token, &users));
    }
}

#[test]
fn yes_flag_must_be_echoed_in_channel_binding() {
    let users = users_with("alice", "secret", Mechanism::ScramSha256);
    let mut client = ScramClient::new(Mechanism::ScramSha256, "alice", "secret", "abc");
    client.gs2_header = "y,,".to_owned();
    let mut server = SaslServer::new(Mechanism::ScramSha256);
    let server_first = challenge(server.step(&client.first(), &users));
    let message = client.final_message(&server_first).message;
    assert!(matches!(
        server.step(message.as_bytes(), &users),
        Ok(SaslStep::Authenticated { .. })
    ));
}

fn plain_users() -> PlainUsers {
    let mut users = PlainUsers::new();
    users.insert("alice", "alice-secret");
    users
}

#[test]
fn plain_accepts_the_right_password_only() {
    let users = plain_users();
    for token in [&b"\0alice\0alice-secret"[..], b"alice\0alice\0alice-secret"] {
        assert_eq!(
            SaslServer::new(Mechanism::Plain).step(token, &users),
            Ok(SaslStep::Authenticated {
                principal: Principal::user("alice"),
                final_token: Vec::new()
            })
        );
    }
    for token in [
        &b"\0alice\0wrong"[..],
        b"\0bob\0alice-secret",
        b"\0alice\0alice-secre",
    ] {
        let mut server = SaslServer::new(Mechanism::Plain);
        let error = server.step(token, &users).expect_err("refused");
        assert_eq!(error, SaslError::InvalidCredentials(Mechanism::Plain));
        assert_eq!(
            error.client_message(),
            "Authentication failed: Invalid username or password"
        );
        assert_eq!(
            server.step(b"\0alice\0alice-secret", &users),
            Err(SaslError::ExchangeOver)
        );
    }
}

#[test]
fn plain_refuses_malformed_tokens_without_echoing_the_password() {
    let users = plain_users();
    for token in [
        &b"alice\0alice-secret"[..],
        b"\0\0alice-secret",
        b"\0alice\0",
        b"\0alice\0alice-secret\0",
        b"bob\0alice\0alice-secret",
        b"\0alice\0\xffalice-secret",
        b"",
    ] {
        let error = SaslServer::new(Mechanism::Plain)
            .step(token, &users)
            .expect_err("refused");
        assert!(
            !error.is_bad_credentials(),
            "{:?}",
            String::from_utf8_lossy(token)
        );
        assert!(
            !error.client_message().contains("alice-secret") && !error.to_string().contains("alice-secret")
        );
    }
}

#[test]
fn oversized_tokens_are_refused() {
    let users = plain_users();
    let mut token = b"\0alice\0".to_vec();
    token.resize(SASL_TOKEN_LEN_MAX + 1, b'x');
    for mechanism in Mechanism::ALL {
        let error = SaslServer::new(mechanism)
            .step(&token, &users)
            .expect_err("too large");
        assert_eq!(error, SaslError::TokenTooLarge(SASL_TOKEN_LEN_MAX + 1));
    }
}

/// xorshift64*: reproducible pseudo-random input without another dependency.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: usize) -> usize {
        usize::try_from(self.next() % bound as u64).expect("fits")
    }

    fn bytes(&mut self, len_max: usize) -> Vec<u8> {
        let len = self.below(len_max + 1);
        // Mostly printable, with commas, '=' and NUL, so the parsers get past their first checks.
        let alphabet = b",=\0nrcpaNy2C3D+/AZaz09\xff";
        (0..len)
            .map(|_| {
                if self.below(2) == 0 {
                    alphabet[self.below(alphabet.len())]
                } else {
                    self.next() as u8
                }
            })
            .collect()
    }

    fn mutate(&mut self, token: &[u8]) -> Vec<u8> {
        let mut mutated = token.to_vec();
        for _ in 0..=self.below(3) {
            match self.below(3) {
                0 if !mutated.is_empty() => {
                    let at = self.below(mutated.len());
                    mutated[at] = self.next() as u8;
                }
                1 if !mutated.is_empty() => {
                    mutated.truncate(self.below(mutated.len()));
                }
                _ => mutated.extend(self.bytes(8)),
            }
        }
        mutated
    }
}

#[test]
fn random_tokens_give_errors_never_panics() {
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let scram_users = users_with("alice", "secret", Mechanism::ScramSha256);
    let plain = plain_users();
    for _ in 0..2000 {
        for mechanism in Mechanism::ALL {
            let users: &dyn Credentials = if mechanism == Mechanism::Plain {
                &plain
            } else {
                &scram_users
            };
            let mut server = SaslServer::new(mechanism);
            let _ = server.step(&random.bytes(300), users);
            let _ = server.step(&random.bytes(300), users);
        }
        let mut server = SaslServer::new(Mechanism::ScramSha256);
        challenge(server.step(b"n,,n=alice,r=abc", &scram_users));
        assert!(server.step(&random.bytes(300), &scram_users).is_err());
    }
}

#[test]
fn mutated_valid_tokens_give_errors_never_panics() {
    let mut random = Random(42);
    let users = users_with("alice", "secret", Mechanism::ScramSha256);
    let client = ScramClient::new(Mechanism::ScramSha256, "alice", "secret", "abc");
    for _ in 0..300 {
        let mut server = SaslServer::new(Mechanism::ScramSha256);
        let Ok(SaslStep::Challenge(server_first)) = server.step(&random.mutate(&client.first()), &users)
        else {
            continue;
        };
        if std::str::from_utf8(&server_first).is_ok_and(|text| text.starts_with("r=abc")) {
            let message = client.final_message(&server_first).message;
            let mutated = random.mutate(message.as_bytes());
            let outcome = server.step(&mutated, &users);
            assert!(outcome.is_err() || mutated == message.as_bytes());
        }
    }
    let plain = plain_users();
    for _ in 0..300 {
        let token = random.mutate(b"\0alice\0alice-secret");
        let _ = SaslServer::new(Mechanism::Plain).step(&token, &plain);
    }
}
