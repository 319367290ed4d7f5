//! Writes the TLS tests' certificates into a directory, for the Python and Node suites:
//!
//! ```text
//! laminar-test-certs <dir>
//!   ca.pem            the trusted CA
//!   server.pem        the broker's key and certificate chain (ssl.keystore.location)
//!   alice.crt/.key    a client certificate signed by the CA (CN=alice,OU=eng,O=Laminar Tests,C=US)
//!   expired.crt/.key  signed by the CA, expired
//!   untrusted.crt/.key signed by another CA
//! ```

#![forbid(unsafe_code)]

use anyhow::{Context, Result};

fn main() -> Result<()> {
    let dir = std::env::args()
        .nth(1)
        .context("usage: laminar-test-certs <dir>")?;
    std::fs::create_dir_all(&dir)?;
    laminar_tests::certs::TestCertificates::write(std::path::Path::new(&dir))?;
    Ok(())
}
