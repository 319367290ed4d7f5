//! RemoveRaftVoter (API 81, v0; KIP-853): makes a voter of the metadata quorum an observer again,
//! through the controller; a node still running keeps following the log (and serving as a
//! broker, if it is one). The last voter stays. Cluster mode only; needs Alter on the cluster.
//! A request naming another cluster is INCONSISTENT_CLUSTER_ID, a node that does not vote
//! VOTER_NOT_FOUND.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{RemoveRaftVoterRequest, RemoveRaftVoterResponse};
use kafka_protocol::protocol::StrBytes;
use laminar_model::NodeId;

use crate::broker::BrokerCtx;
use crate::quorum::admin::with_retries;

pub async fn handle(ctx: &BrokerCtx, request: RemoveRaftVoterRequest) -> RemoveRaftVoterResponse {
    let Some(link) = &ctx.state.shared.cluster else {
        return refused(
            ResponseError::InvalidRequest,
            "a single node has no quorum".into(),
        );
    };
    if let Some(message) = super::add_raft_voter::other_cluster(ctx, request.cluster_id.as_ref()) {
        return refused(ResponseError::InconsistentClusterId, message);
    }
    let voter = NodeId::new(request.voter_id);
    match with_retries(|| link.handle.remove_voter(voter)).await {
        Ok(()) => {
            tracing::info!(voter = voter.get(), "removed a voter from the metadata quorum");
            RemoveRaftVoterResponse::default()
        }
        Err(refusal) => refused(refusal.response_error(), refusal.to_string()),
    }
}

fn refused(error: ResponseError, message: String) -> RemoveRaftVoterResponse {
    RemoveRaftVoterResponse::default()
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}
