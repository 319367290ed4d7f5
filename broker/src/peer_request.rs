//! One request to another broker of the cluster, on its inter-broker listener with this
//! broker's inter-broker security, from a short-lived thread (the inter-broker client blocks;
//! a shard must not). For the rare calls a coordinator makes (transaction markers, a
//! transaction's verification), not for replication, which keeps its own connections.

use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::protocol::Request;
use laminar_client::{ClientConfig, ClientError, Connection};
use laminar_model::NodeId;

use crate::broker::BrokerCtx;

/// Largest answer accepted from a peer for these calls.
const ANSWER_BYTES_MAX: usize = 1 << 20;

/// Sends `request` to broker `node` at the negotiated version, or at exactly `version` when
/// given, and returns its answer; `None` when the node has no known inter-broker address, the
/// thread cannot start, or the exchange fails (logged at debug: the callers retry).
pub async fn call<R>(
    ctx: &Rc<BrokerCtx>,
    node: NodeId,
    (request, version): (R, Option<i16>),
    timeout: Duration,
) -> Option<R::Response>
where
    R: Request + Send + 'static,
    R::Response: Send + 'static,
{
    let replication = ctx.state.replication.as_ref()?;
    let address = crate::replication::fetcher::source_address(ctx, node, &replication.settings)?;
    let config = ClientConfig {
        client_id: "laminar-broker".to_owned(),
        frame_bytes_max: ANSWER_BYTES_MAX,
        connect_timeout: Duration::from_secs(5),
        io_timeout: Some(timeout),
        security: replication.fetch_security.clone(),
    };
    let (answer, answered) = futures::channel::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("laminar-peer-call".into())
        .spawn(move || {
            let exchanged: Result<R::Response, ClientError> = Connection::connect(&address, &config)
                .and_then(|mut c| match version {
                    Some(version) => c.request_at(&request, version),
                    None => c.request(&request),
                });
            let _ = answer.send(exchanged);
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot start a thread for a request to another broker");
        return None;
    }
    match answered.await {
        Ok(Ok(response)) => Some(response),
        Ok(Err(error)) => {
            tracing::debug!(node = node.get(), %error, "request to another broker failed");
            None
        }
        Err(_) => None,
    }
}
