//! AddRaftVoter (API 80, v0; KIP-853): makes an observer of the metadata quorum a voter, through
//! the controller (`laminar_controller` observers). The node must already follow the quorum as
//! an observer (started outside `controller.quorum.voters`) and have caught up; it is reached
//! at the controller address it registered as an observer, so the request's listeners are not
//! used. Cluster mode only; needs Alter on the cluster. A request naming another cluster is
//! INCONSISTENT_CLUSTER_ID, a voter already DUPLICATE_VOTER.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{AddRaftVoterRequest, AddRaftVoterResponse};
use kafka_protocol::protocol::StrBytes;
use laminar_model::NodeId;

use crate::broker::BrokerCtx;
use crate::quorum::admin::with_retries;

pub async fn handle(ctx: &BrokerCtx, request: AddRaftVoterRequest) -> AddRaftVoterResponse {
    let Some(link) = &ctx.state.shared.cluster else {
        return refused(
            ResponseError::InvalidRequest,
            "a single node has no quorum".into(),
        );
    };
    if let Some(message) = other_cluster(ctx, request.cluster_id.as_ref()) {
        return refused(ResponseError::InconsistentClusterId, message);
    }
    let voter = NodeId::new(request.voter_id);
    match with_retries(|| link.handle.add_voter(voter)).await {
        Ok(()) => {
            tracing::info!(voter = voter.get(), "added a voter to the metadata quorum");
            AddRaftVoterResponse::default()
        }
        Err(refusal) => refused(refusal.response_error(), refusal.to_string()),
    }
}

/// Why a request naming `cluster_id` is for another cluster, if it is (null or empty: it names
/// none).
pub(super) fn other_cluster(ctx: &BrokerCtx, cluster_id: Option<&StrBytes>) -> Option<String> {
    let ours = &ctx.state.shared.cluster_id;
    let named = cluster_id
        .map(StrBytes::as_str)
        .filter(|named| !named.is_empty())?;
    (named != ours.as_str()).then(|| format!("this is cluster {ours}, not {named}"))
}

fn refused(error: ResponseError, message: String) -> AddRaftVoterResponse {
    AddRaftVoterResponse::default()
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}
