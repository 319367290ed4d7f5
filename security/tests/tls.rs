//! TLS listener settings end to end: a CA, server and client certificates made by rcgen at
//! test time, rustls server configurations built from them, and handshakes driven in memory
//! between a rustls client and server, checking who the server says the client is.

use std::io::Write;
use std::sync::Arc;

use laminar_security::{
    crypto_provider, principal_of, subject_dn, ClientAuth, KeyMaterial, Principal, PrincipalMappingRules,
    TlsError, TlsServerSettings, TlsVersion, TrustMaterial,
};
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, IsCa, KeyPair,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{
    ClientConfig, ClientConnection, Connection, ProtocolVersion, RootCertStore, ServerConfig,
    ServerConnection,
};

struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, as PEM and DER.
struct Leaf {
    certificate_pem: String,
    certificate_der: CertificateDer<'static>,
    key_pem: String,
    key_der: Vec<u8>,
}

impl TestCa {
    fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("ca key");
        TestCa {
            issuer: CertifiedIssuer::self_signed(params, key).expect("ca certificate"),
        }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    fn sign(&self, params: &CertificateParams) -> Leaf {
        let key = KeyPair::generate().expect("leaf key");
        let certificate = params.signed_by(&key, &self.issuer).expect("leaf certificate");
        Leaf {
            certificate_pem: certificate.pem(),
            certificate_der: certificate.der().clone(),
            key_pem: key.serialize_pem(),
            key_der: key.serialize_der(),
        }
    }

    fn server(&self) -> Leaf {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("server params");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(&params)
    }

    fn client(&self, distinguished_name: DistinguishedName) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        params.distinguished_name = distinguished_name;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(&params)
    }
}

/// C=US, O=Example Corp, OU=eng, CN=alice in certificate order: RFC 2253 reverses it.
fn alice_dn() -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(
        DnType::CountryName,
        DnValue::PrintableString("US".try_into().expect("printable")),
    );
    name.push(DnType::OrganizationName, "Example Corp");
    name.push(DnType::OrganizationalUnitName, "eng");
    name.push(DnType::CommonName, "alice");
    name
}

const ALICE: &str = "CN=alice,OU=eng,O=Example Corp,C=US";

fn inline_settings(server: &Leaf, ca: &TestCa, client_auth: ClientAuth) -> TlsServerSettings {
    let mut settings = TlsServerSettings::new(KeyMaterial::Inline {
        certificate_chain: server.certificate_pem.clone(),
        key: server.key_pem.clone(),
    });
    settings.trust = Some(TrustMaterial::Inline(ca.pem()));
    settings.client_auth = client_auth;
    settings
}

fn client_config(ca: &TestCa, client: Option<&Leaf>, versions: &[TlsVersion]) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.issuer.der().clone()).expect("ca in roots");
    let versions: Vec<_> = versions
        .iter()
        .map(|version| match version {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        })
        .collect();
    let builder = ClientConfig::builder_with_provider(crypto_provider())
        .with_protocol_versions(&versions)
        .expect("client versions")
        .with_root_certificates(roots);
    let config = match client {
        Some(leaf) => builder
            .with_client_auth_cert(
                vec![leaf.certificate_der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key_der.clone())),
            )
            .expect("client certificate"),
        None => builder.with_no_client_auth(),
    };
    Arc::new(config)
}

/// Moves TLS records from one side to the other and lets the receiver process them.
fn transfer(from: &mut Connection, to: &mut Connection) -> Result<(), rustls::Error> {
    let mut records = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut records)
            .map_err(|error| rustls::Error::General(error.to_string()))?;
    }
    let mut unread = records.as_slice();
    while !unread.is_empty() {
        to.read_tls(&mut unread)
            .map_err(|error| rustls::Error::General(error.to_string()))?;
        to.process_new_packets()?;
    }
    Ok(())
}

/// A full handshake in memory; the server side on success, the first error either side saw.
fn handshake(
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
) -> Result<ServerConnection, rustls::Error> {
    let name = ServerName::try_from("localhost").expect("server name");
    let mut client = Connection::Client(ClientConnection::new(client, name)?);
    let mut server = Connection::Server(ServerConnection::new(server)?);
    for _ in 0..16 {
        transfer(&mut client, &mut server)?;
        transfer(&mut server, &mut client)?;
        if !client.is_handshaking() && !server.is_handshaking() {
            // The client's last flight (its certificate, Finished) must reach the server too.
            transfer(&mut client, &mut server)?;
            if let Connection::Server(server) = server {
                return Ok(server);
            }
        }
    }
    Err(rustls::Error::General("handshake did not finish".to_owned()))
}

fn principal(server: &ServerConnection) -> Result<Principal, TlsError> {
    principal_of(
        server.peer_certificates(),
        &PrincipalMappingRules::default_rules(),
    )
}

#[test]
fn server_config_from_a_key_file_with_key_and_chain() {
    let ca = TestCa::new("Test CA");
    let server = ca.server();
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    write!(file, "{}{}{}", server.key_pem, server.certificate_pem, ca.pem()).expect("write keystore");
    let settings = TlsServerSettings::new(KeyMaterial::File(file.path().to_owned()));
    let config = settings.server_config().expect("server config from file");
    let connection = handshake(client_config(&ca, None, &TlsVersion::ALL), config).expect("handshake");
    assert_eq!(connection.protocol_version(), Some(ProtocolVersion::TLSv1_3));
    assert_eq!(principal(&connection).expect("principal"), Principal::anonymous());
}

#[test]
fn server_config_from_inline_pem_and_tls12_only() {
    let ca = TestCa::new("Test CA");
    let server = ca.server();
    let mut settings = inline_settings(&server, &ca, ClientAuth::None);
    settings.protocols = vec![TlsVersion::Tls12];
    let config = settings.server_config().expect("server config inline");
    let connection = handshake(client_config(&ca, None, &TlsVersion::ALL), config).expect("handshake");
    assert_eq!(connection.protocol_version(), Some(ProtocolVersion::TLSv1_2));
    let tls13_only = client_config(&ca, None, &[TlsVersion::Tls13]);
    assert!(handshake(tls13_only, settings.server_config().expect("config")).is_err());
}

#[test]
fn required_client_certificate_names_the_principal() {
    let ca = TestCa::new("Test CA");
    let settings = inline_settings(&ca.server(), &ca, ClientAuth::Required);
    let alice = ca.client(alice_dn());
    for versions in [&[TlsVersion::Tls13][..], &[TlsVersion::Tls12][..]] {
        let config = settings.server_config().expect("server config");
        let connection = handshake(client_config(&ca, Some(&alice), versions), config).expect("handshake");
        assert_eq!(
            principal(&connection).expect("principal").to_string(),
            format!("User:{ALICE}")
        );
    }
    let config = settings.server_config().expect("server config");
    let connection =
        handshake(client_config(&ca, Some(&alice), &TlsVersion::ALL), config).expect("handshake");
    let rules =
        PrincipalMappingRules::parse("RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/U").expect("rules");
    let mapped = principal_of(connection.peer_certificates(), &rules).expect("mapped principal");
    assert_eq!(mapped, Principal::user("ALICE@ENG"));
    let unmatched = PrincipalMappingRules::parse("RULE:^CN=bob,.*$/bob/").expect("rules");
    assert!(matches!(
        principal_of(connection.peer_certificates(), &unmatched),
        Err(TlsError::NoMatchingRule { distinguished_name }) if distinguished_name == ALICE
    ));
}

#[test]
fn required_client_auth_refuses_missing_untrusted_and_expired_certificates() {
    let ca = TestCa::new("Test CA");
    let settings = inline_settings(&ca.server(), &ca, ClientAuth::Required);
    let config = || settings.server_config().expect("server config");
    assert!(handshake(client_config(&ca, None, &TlsVersion::ALL), config()).is_err());

    let stranger = TestCa::new("Other CA").client(alice_dn());
    assert!(handshake(client_config(&ca, Some(&stranger), &TlsVersion::ALL), config()).is_err());

    let mut expired_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    expired_params.distinguished_name = alice_dn();
    expired_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    expired_params.not_before = date_time_ymd(2020, 1, 1);
    expired_params.not_after = date_time_ymd(2021, 1, 1);
    let expired = ca.sign(&expired_params);
    let error = handshake(client_config(&ca, Some(&expired), &TlsVersion::ALL), config());
    assert!(
        matches!(
            error,
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::Expired | rustls::CertificateError::ExpiredContext { .. }
            ))
        ),
        "{error:?}"
    );
}

#[test]
fn requested_client_auth_allows_anonymous_and_verifies_certificates_sent() {
    let ca = TestCa::new("Test CA");
    let settings = inline_settings(&ca.server(), &ca, ClientAuth::Requested);
    let config = || settings.server_config().expect("server config");
    let anonymous = handshake(client_config(&ca, None, &TlsVersion::ALL), config()).expect("handshake");
    assert_eq!(
        principal(&anonymous).expect("principal").to_string(),
        "User:ANONYMOUS"
    );
    let alice = ca.client(alice_dn());
    let named = handshake(client_config(&ca, Some(&alice), &TlsVersion::ALL), config()).expect("handshake");
    assert_eq!(principal(&named).expect("principal"), Principal::user(ALICE));
    let stranger = TestCa::new("Other CA").client(alice_dn());
    assert!(handshake(client_config(&ca, Some(&stranger), &TlsVersion::ALL), config()).is_err());
}

#[test]
fn trust_store_from_a_file() {
    let ca = TestCa::new("Test CA");
    let mut settings = inline_settings(&ca.server(), &ca, ClientAuth::Required);
    let mut truststore = tempfile::NamedTempFile::new().expect("temp file");
    write!(truststore, "{}", ca.pem()).expect("write truststore");
    settings.trust = Some(TrustMaterial::File(truststore.path().to_owned()));
    let alice = ca.client(alice_dn());
    let config = settings.server_config().expect("server config");
    assert!(handshake(client_config(&ca, Some(&alice), &TlsVersion::ALL), config).is_ok());
}

#[test]
fn client_auth_without_a_trust_store_is_refused() {
    let ca = TestCa::new("Test CA");
    for client_auth in [ClientAuth::Requested, ClientAuth::Required] {
        let mut settings = inline_settings(&ca.server(), &ca, client_auth);
        settings.trust = None;
        assert!(
            matches!(settings.server_config(), Err(TlsError::TrustStoreNeeded(mode)) if mode == client_auth.name())
        );
    }
}

#[test]
fn unusable_key_material_is_refused() {
    let ca = TestCa::new("Test CA");
    let server = ca.server();
    let missing = std::path::PathBuf::from("/nonexistent/laminar/keystore.pem");
    let error = TlsServerSettings::new(KeyMaterial::File(missing.clone()))
        .server_config()
        .expect_err("missing file");
    assert!(matches!(&error, TlsError::Io { path, .. } if *path == missing));
    assert!(error.to_string().contains("/nonexistent/laminar/keystore.pem"));

    let inline = |chain: &str, key: &str| {
        TlsServerSettings::new(KeyMaterial::Inline {
            certificate_chain: chain.to_owned(),
            key: key.to_owned(),
        })
        .server_config()
        .expect_err("refused")
    };
    assert!(matches!(
        inline(&server.certificate_pem, &server.certificate_pem),
        TlsError::NoPrivateKey { .. }
    ));
    assert!(matches!(
        inline(&server.key_pem, &server.key_pem),
        TlsError::NoCertificate { .. }
    ));
    let encrypted = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----\n";
    let error = inline(&server.certificate_pem, encrypted);
    assert!(matches!(&error, TlsError::EncryptedKey { .. }));
    assert!(error.to_string().contains("ssl.key.password"));
    assert!(matches!(
        inline("garbage", "more garbage"),
        TlsError::NoCertificate { .. }
    ));
    let broken = "-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n";
    assert!(matches!(
        inline(&server.certificate_pem, broken),
        TlsError::BadPem { .. }
    ));
    let other_key = ca.server().key_pem;
    assert!(matches!(
        inline(&server.certificate_pem, &other_key),
        TlsError::Rustls(_)
    ));
    let two_keys = format!("{}{}", server.key_pem, other_key);
    assert!(matches!(
        inline(&server.certificate_pem, &two_keys),
        TlsError::SeveralPrivateKeys { count: 2, .. }
    ));

    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(&[0x30, 0x82, 0x01, 0xff, 0x00, 0x13])
        .expect("write garbage");
    let error = TlsServerSettings::new(KeyMaterial::File(file.path().to_owned()))
        .server_config()
        .expect_err("garbage file");
    assert!(
        matches!(
            error,
            TlsError::NoCertificate { .. } | TlsError::NoPrivateKey { .. }
        ),
        "{error:?}"
    );
}

#[test]
fn subject_dn_is_written_as_java_writes_it() {
    let ca = TestCa::new("Test CA");
    let dn_of =
        |name: DistinguishedName| subject_dn(ca.client(name).certificate_der.as_ref()).expect("subject");
    assert_eq!(dn_of(alice_dn()), ALICE);

    let mut special = DistinguishedName::new();
    special.push(DnType::OrganizationName, "Doe, Smith + Co <\"x\">; #1=2\\");
    special.push(DnType::CommonName, " #padded ");
    assert_eq!(
        dn_of(special),
        r#"CN=\ \#padded\ ,O=Doe\, Smith \+ Co \<\"x\"\>\; \#1\=2\\"#
    );

    let mut typed = DistinguishedName::new();
    typed.push(
        DnType::CustomDnType(vec![0, 9, 2342, 19200300, 100, 1, 25]),
        "com",
    );
    typed.push(DnType::LocalityName, "Zürich");
    typed.push(DnType::StateOrProvinceName, "ZH");
    typed.push(DnType::CustomDnType(vec![0, 9, 2342, 19200300, 100, 1, 1]), "u42");
    typed.push(
        DnType::CustomDnType(vec![1, 2, 840, 113549, 1, 9, 1]),
        DnValue::Ia5String("a@b.c".try_into().expect("ia5")),
    );
    typed.push(
        DnType::CommonName,
        DnValue::BmpString("bmp".try_into().expect("bmp")),
    );
    assert_eq!(
        dn_of(typed),
        "CN=bmp,1.2.840.113549.1.9.1=#16056140622e63,UID=u42,ST=ZH,L=Zürich,DC=com"
    );
}

#[test]
fn certificates_that_are_not_der_are_refused() {
    assert!(matches!(
        subject_dn(b"not a certificate"),
        Err(TlsError::BadSubject(_))
    ));
    let garbage = [CertificateDer::from(b"junk".to_vec())];
    let rules = PrincipalMappingRules::default_rules();
    assert!(matches!(
        principal_of(Some(&garbage), &rules),
        Err(TlsError::BadSubject(_))
    ));
    assert_eq!(
        principal_of(Some(&[]), &rules).expect("anonymous"),
        Principal::anonymous()
    );
    assert_eq!(
        principal_of(None, &rules).expect("anonymous"),
        Principal::anonymous()
    );
}
