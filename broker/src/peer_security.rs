//! The security of the links brokers make to each other (`config/peer_links.rs`), made usable
//! once at start: a broken key or trust file stops the broker with its name, rather than
//! failing every connection later.

use crate::config::broker::peer_links::PeerLink;

/// How a broker connects to a peer's listener on `link` with Laminar's Kafka client (a
/// follower to its leader): TLS as the listener's settings say, and the broker's SASL login.
pub fn client_security(link: &PeerLink) -> anyhow::Result<laminar_client::Security> {
    let tls = match &link.listener.tls {
        Some(tls) => Some(
            tls.peer_client_config()
                .map_err(|e| anyhow::anyhow!("listener {}: {e}", link.listener.name))?,
        ),
        None => None,
    };
    Ok(laminar_client::Security {
        tls,
        sasl: link.login.clone(),
    })
}
