//! The certificates TLS tests use, made fresh by each run (no key of any value is committed):
//! a CA, a server certificate for 127.0.0.1 and localhost, client certificates signed by the CA
//! (one expired), and one signed by a CA the broker does not trust.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair, SanType,
};

/// The subject of [`TestCertificates::alice`], as a certificate's DN in RFC 2253 form (the
/// principal `User:<this>` under `ssl.principal.mapping.rules=DEFAULT`).
pub const ALICE_DN: &str = "CN=alice,OU=eng,O=Laminar Tests,C=US";

/// Paths of the PEM files [`TestCertificates::write`] made.
pub struct TestCertificates {
    /// The trusted CA's certificate (`ssl.truststore.location`, a client's `ssl.ca.location`).
    pub ca: PathBuf,
    /// The server's key and certificate in one file (`ssl.keystore.location`).
    pub server_keystore: PathBuf,
    /// A client certificate and key signed by the CA, subject [`ALICE_DN`].
    pub alice: (PathBuf, PathBuf),
    /// Signed by the CA but expired.
    pub expired: (PathBuf, PathBuf),
    /// Signed by another CA.
    pub untrusted: (PathBuf, PathBuf),
}

impl TestCertificates {
    /// Makes every certificate and writes them under `dir`.
    pub fn write(dir: &Path) -> Result<TestCertificates> {
        let ca = certificate_authority("Laminar Test CA")?;
        let stranger = certificate_authority("Someone Else's CA")?;
        let (server_cert, server_key) = server(&ca)?;
        let write = |name: &str, text: &str| -> Result<PathBuf> {
            let path = dir.join(name);
            fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            Ok(path)
        };
        let client = |issuer: &CertifiedIssuer<'_, KeyPair>,
                      name: &str,
                      expired: bool|
         -> Result<(PathBuf, PathBuf)> {
            let (cert, key) = client(issuer, expired)?;
            Ok((
                write(&format!("{name}.crt"), &cert)?,
                write(&format!("{name}.key"), &key)?,
            ))
        };
        Ok(TestCertificates {
            ca: write("ca.pem", &ca.pem())?,
            server_keystore: write("server.pem", &format!("{server_key}{server_cert}{}", ca.pem()))?,
            alice: client(&ca, "alice", false)?,
            expired: client(&ca, "expired", true)?,
            untrusted: client(&stranger, "untrusted", false)?,
        })
    }
}

fn certificate_authority(name: &str) -> Result<CertifiedIssuer<'static, KeyPair>> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    Ok(CertifiedIssuer::self_signed(params, KeyPair::generate()?)?)
}

/// The server's certificate and key (PEM), for 127.0.0.1 and localhost.
fn server(ca: &CertifiedIssuer<'_, KeyPair>) -> Result<(String, String)> {
    let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, "laminar-test-broker");
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, ca)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A client certificate and key (PEM) with subject [`ALICE_DN`].
fn client(issuer: &CertifiedIssuer<'_, KeyPair>, expired: bool) -> Result<(String, String)> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CountryName, "US");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Laminar Tests");
    params
        .distinguished_name
        .push(DnType::OrganizationalUnitName, "eng");
    params.distinguished_name.push(DnType::CommonName, "alice");
    if expired {
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    }
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}
