//! The controller listener's security, for the quorum's own transport (`controller/`): TLS
//! as the listener's `ssl.*` settings say, then on SASL listeners a login carried in the
//! transport's frames (the transport is not Kafka's protocol, so there is no SaslHandshake):
//!
//! ```text
//! dialler -> Start { mechanism, first token }
//! accepter -> Challenge(token)        dialler -> Token(token)     (as the mechanism needs)
//! accepter -> Authenticated(last token) | Refused(reason)
//! ```
//!
//! Each frame is the transport's (`len: u32 LE | bincode body`), at most
//! [`HANDSHAKE_FRAME_LEN_MAX`] bytes before authentication. The accepting side checks PLAIN
//! passwords against the listener's JAAS users; SCRAM users are not replicated between nodes
//! yet, so the configuration refuses SCRAM on a link. The dialling side verifies a SCRAM
//! server's proof like any Laminar client.
//!
//! Runs on the controller runtime (tokio thread).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use laminar_client::SaslLogin;
use laminar_controller::network::{read_frame_within, write_frame};
use laminar_controller::transport::{SecuredStream, Securing, TransportSecurity};
use laminar_security::jaas::PlainUsers;
use laminar_security::{Mechanism, SaslClient, SaslServer, SaslStep, SASL_TOKEN_LEN_MAX};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::config::broker::peer_links::{describe, PeerLink};

/// A handshake frame holds one token (at most `SASL_TOKEN_LEN_MAX`) and a mechanism name.
pub const HANDSHAKE_FRAME_LEN_MAX: usize = SASL_TOKEN_LEN_MAX + 256;
/// Round trips a login may take: PLAIN needs one, SCRAM two.
const ROUND_TRIPS_MAX: usize = 4;

#[derive(Debug, Serialize, Deserialize)]
enum SaslFrame {
    Start {
        mechanism: String,
        token: Vec<u8>,
    },
    Token(Vec<u8>),
    Challenge(Vec<u8>),
    Authenticated(Vec<u8>),
    /// A fixed text, never anything the dialler sent.
    Refused(String),
}

/// The controller listener's TLS and SASL, both sides. Built once at start.
pub struct ControllerLinkSecurity {
    description: String,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    connector: Option<tokio_rustls::TlsConnector>,
    /// SASL listeners: the mechanisms accepted and PLAIN's users (shared by the handshakes).
    sasl: Option<Arc<(Vec<Mechanism>, PlainUsers)>>,
    login: Option<SaslLogin>,
    /// `connection.failed.authentication.delay.ms`: a refused login is answered this late.
    failure_delay: Duration,
}

impl ControllerLinkSecurity {
    /// Reads the listener's key and trust files: a broken one stops the broker here.
    pub fn for_link(link: &PeerLink, failure_delay: Duration) -> anyhow::Result<Arc<dyn TransportSecurity>> {
        let listener = &link.listener;
        let (acceptor, connector) = match &listener.tls {
            Some(tls) => {
                let named =
                    |e: laminar_security::tls::TlsError| anyhow::anyhow!("listener {}: {e}", listener.name);
                let server = tls.server_config().map_err(named)?;
                let client = tls.peer_client_config().map_err(named)?;
                (
                    Some(tokio_rustls::TlsAcceptor::from(server)),
                    Some(tokio_rustls::TlsConnector::from(client)),
                )
            }
            None => (None, None),
        };
        Ok(Arc::new(ControllerLinkSecurity {
            description: describe(link),
            acceptor,
            connector,
            sasl: listener
                .sasl
                .as_ref()
                .map(|sasl| Arc::new((sasl.mechanisms.clone(), sasl.plain_users.clone()))),
            login: link.login.clone(),
            failure_delay,
        }))
    }
}

impl TransportSecurity for ControllerLinkSecurity {
    fn connect(&self, stream: TcpStream, addr: &str) -> Securing {
        let connector = self.connector.clone();
        let login = self.login.clone();
        let host = host_of(addr).to_string();
        Box::pin(async move {
            let mut stream: SecuredStream = match connector {
                Some(connector) => {
                    let name = rustls::pki_types::ServerName::try_from(host)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                    Box::new(connector.connect(name, stream).await?)
                }
                None => Box::new(stream),
            };
            if let Some(login) = &login {
                log_in(&mut stream, login).await?;
            }
            Ok(stream)
        })
    }

    fn accept(&self, stream: TcpStream, _peer: SocketAddr) -> Securing {
        let acceptor = self.acceptor.clone();
        let sasl = self.sasl.clone();
        let failure_delay = self.failure_delay;
        Box::pin(async move {
            let mut stream: SecuredStream = match acceptor {
                Some(acceptor) => Box::new(acceptor.accept(stream).await?),
                None => Box::new(stream),
            };
            if let Some((mechanisms, users)) = sasl.as_deref() {
                if let Err(refused) = check_login(&mut stream, mechanisms, users).await {
                    tokio::time::sleep(failure_delay).await;
                    return Err(refused);
                }
            }
            Ok(stream)
        })
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}

/// The host of a voter's `host:port` (`[v6]:port` included), as its certificate names it.
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

async fn read_handshake<S: AsyncRead + Unpin>(stream: &mut S) -> io::Result<SaslFrame> {
    read_frame_within(stream, HANDSHAKE_FRAME_LEN_MAX)
        .await?
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "closed during the SASL login"))
}

fn denied(reason: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, reason.into())
}

/// The dialling side: logs in as `login`; the accepter's refusal is an error.
async fn log_in<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, login: &SaslLogin) -> io::Result<()> {
    let mut client = SaslClient::new(login.mechanism, &login.user, &login.password);
    let token = client.first_token().map_err(|e| denied(e.to_string()))?;
    let start = SaslFrame::Start {
        mechanism: login.mechanism.name().to_string(),
        token,
    };
    write_frame(stream, &start).await?;
    for _ in 0..ROUND_TRIPS_MAX {
        let server_token = match read_handshake(stream).await? {
            SaslFrame::Challenge(token) | SaslFrame::Authenticated(token) => token,
            SaslFrame::Refused(reason) => return Err(denied(format!("controller login refused: {reason}"))),
            SaslFrame::Start { .. } | SaslFrame::Token(_) => {
                return Err(denied("a client frame from the server"))
            }
        };
        match client.step(&server_token).map_err(|e| denied(e.to_string()))? {
            Some(next) => write_frame(stream, &SaslFrame::Token(next)).await?,
            None => return Ok(()),
        }
    }
    Err(denied("too many SASL round trips"))
}

/// The accepting side: the dialler's login, checked against `users`; refused with a reason
/// the dialler is sent (never its own text back).
async fn check_login<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    mechanisms: &[Mechanism],
    users: &PlainUsers,
) -> io::Result<()> {
    let SaslFrame::Start { mechanism, mut token } = read_handshake(stream).await? else {
        return Err(denied("the first frame is not a SASL start"));
    };
    let mechanism = match mechanism.parse::<Mechanism>() {
        Ok(mechanism) if mechanisms.contains(&mechanism) => mechanism,
        _ => {
            let reason = "mechanism not enabled on the controller listener";
            write_frame(stream, &SaslFrame::Refused(reason.to_string())).await?;
            return Err(denied(reason));
        }
    };
    let mut server = SaslServer::new(mechanism);
    for _ in 0..ROUND_TRIPS_MAX {
        match server.step(&token, users) {
            Ok(SaslStep::Challenge(challenge)) => {
                write_frame(stream, &SaslFrame::Challenge(challenge)).await?;
                let SaslFrame::Token(next) = read_handshake(stream).await? else {
                    return Err(denied("expected a SASL token"));
                };
                token = next;
            }
            Ok(SaslStep::Authenticated { final_token, .. }) => {
                return write_frame(stream, &SaslFrame::Authenticated(final_token)).await;
            }
            Err(error) => {
                write_frame(stream, &SaslFrame::Refused(error.client_message())).await?;
                return Err(denied(error.to_string()));
            }
        }
    }
    Err(denied("too many SASL round trips"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAAS: &str =
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_voter="v-secret";"#;

    fn users() -> PlainUsers {
        laminar_security::JaasOptions::parse(JAAS).unwrap().plain_users()
    }

    fn login(password: &str) -> SaslLogin {
        SaslLogin {
            mechanism: Mechanism::Plain,
            user: "voter".to_string(),
            password: password.to_string(),
        }
    }

    /// Runs a login against the check over an in-memory pipe: (dialler's, accepter's) outcome.
    fn exchange(login: SaslLogin, enabled: &[Mechanism]) -> (io::Result<()>, io::Result<()>) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let enabled = enabled.to_vec();
        runtime.block_on(async move {
            let (mut dialler, mut accepter) = tokio::io::duplex(64 << 10);
            let users = users();
            tokio::join!(
                log_in(&mut dialler, &login),
                check_login(&mut accepter, &enabled, &users)
            )
        })
    }

    #[test]
    fn the_right_password_is_accepted_and_a_wrong_one_refused_on_both_sides() {
        let (dialled, accepted) = exchange(login("v-secret"), &[Mechanism::Plain]);
        assert!(dialled.is_ok() && accepted.is_ok(), "{dialled:?} {accepted:?}");
        let (dialled, accepted) = exchange(login("guess"), &[Mechanism::Plain]);
        let refused = dialled.unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied);
        assert!(
            refused.to_string().contains("controller login refused"),
            "{refused}"
        );
        assert!(!refused.to_string().contains("guess"), "{refused}");
        assert_eq!(accepted.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
    }

    #[test]
    fn a_voters_host_is_its_address_without_the_port_or_brackets() {
        assert_eq!(host_of("controller-1.example:9093"), "controller-1.example");
        assert_eq!(host_of("10.0.0.1:9093"), "10.0.0.1");
        assert_eq!(host_of("[::1]:9093"), "::1");
    }

    #[test]
    fn a_mechanism_the_listener_does_not_enable_is_refused() {
        let (dialled, accepted) = exchange(login("v-secret"), &[Mechanism::ScramSha512]);
        assert!(dialled.unwrap_err().to_string().contains("not enabled"));
        assert!(accepted.is_err());
    }

    #[test]
    fn garbage_and_oversized_first_frames_are_refused_without_buffering_them() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            use tokio::io::AsyncWriteExt;
            for frame in [
                vec![4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff],
                (u32::MAX).to_le_bytes().to_vec(),
                ((HANDSHAKE_FRAME_LEN_MAX + 1) as u32).to_le_bytes().to_vec(),
            ] {
                let (mut dialler, mut accepter) = tokio::io::duplex(1 << 10);
                dialler.write_all(&frame).await.unwrap();
                let refused = check_login(&mut accepter, &[Mechanism::Plain], &users()).await;
                assert!(refused.is_err(), "{frame:?}");
            }
        });
    }
}
