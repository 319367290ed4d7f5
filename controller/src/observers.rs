//! Observers: nodes outside `controller.quorum.voters` (broker-only nodes, and controllers
//! waiting to be made voters) follow the metadata log as Raft learners. They hold the whole log and apply it as voters do, so a broker-only node has the
//! same metadata image, the same forwarding to the active controller and the same snapshots as
//! a combined one; they never vote and never lead. The leader adds one when it asks
//! ([`ControllerRequest::AddObserver`]) and then replicates to its controller listener.
//! Decision 0042 says why learners rather than a metadata fetch.
//!
//! The voter set changes here too (KIP-853's AddRaftVoter and RemoveRaftVoter): an observer
//! that has caught up becomes a voter, and a voter becomes an observer again, through
//! openraft's joint-consensus membership changes.

use std::time::Duration;

use openraft::{BasicNode, ChangeMembers, Raft};

use crate::api::{ControllerRequest, ControllerResponse};
use crate::config::{raft_id, ControllerConfig};
use crate::network::{PeerClient, RpcRequest, RpcResponse};
use crate::refusal::Refusal;
use crate::TypeConfig;

/// Longest observer address (`host:port`) the leader records.
pub const OBSERVER_ADDRESS_LEN_MAX: usize = 255;
/// How long one ask may take, and the pause between rounds over the voters.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);
const ROUND_PAUSE: Duration = Duration::from_millis(500);

/// On the leader: adds `node_id` as an observer replicated to at `address`, unless it is
/// one already at that address (a restarted observer asks again) or a voter.
pub(crate) async fn add(
    raft: &Raft<TypeConfig>,
    node_id: laminar_model::NodeId,
    address: String,
) -> ControllerResponse {
    if let Some(reason) = address_error(&address) {
        return refused(reason);
    }
    let Ok(id) = raft_id(node_id.get()) else {
        return refused(format!("node id {node_id} is negative"));
    };
    match recorded_address(raft, id) {
        // A restarted observer, or a voter that was one (it asks again at every start).
        Some(recorded) if recorded == address => return ControllerResponse::QuorumChanged(Ok(())),
        Some(recorded) => {
            return refused(format!(
                "node {id} is a member of the quorum at {recorded}, not {address}"
            ))
        }
        None => {}
    }
    let written = raft.add_learner(id, BasicNode { addr: address }, false).await;
    changed(written, "observer added", id)
}

/// Where the quorum's membership says node `id` is, if it is a member.
fn recorded_address(raft: &Raft<TypeConfig>, id: u64) -> Option<String> {
    let metrics = raft.metrics();
    let metrics = metrics.borrow();
    let membership = metrics.membership_config.membership();
    membership.get_node(&id).map(|node| node.addr.clone())
}

/// How far behind the leader an observer may be to become a voter (KIP-853 asks for one caught
/// up): a few entries in flight.
pub const VOTER_CATCH_UP_LAG_MAX: u64 = 100;

/// On the leader: makes observer `node_id` a voter (KIP-853's AddRaftVoter), once it has caught
/// up.
pub(crate) async fn add_voter(raft: &Raft<TypeConfig>, node_id: laminar_model::NodeId) -> ControllerResponse {
    let Ok(id) = raft_id(node_id.get()) else {
        return refused(format!("node id {node_id} is negative"));
    };
    let lag = {
        let metrics = raft.metrics();
        let metrics = metrics.borrow();
        let membership = metrics.membership_config.membership();
        if membership.voter_ids().any(|voter| voter == id) {
            return ControllerResponse::QuorumChanged(Err(Refusal::DuplicateVoter));
        }
        if membership.get_node(&id).is_none() {
            return refused(format!(
                "node {id} is not an observer: start it with its controller listener first"
            ));
        }
        let matched = metrics
            .replication
            .as_ref()
            .and_then(|r| r.get(&id).copied().flatten());
        let last = metrics.last_log_index.unwrap_or(0);
        matched.map_or(u64::MAX, |log_id| last.saturating_sub(log_id.index))
    };
    if lag > VOTER_CATCH_UP_LAG_MAX {
        return refused(format!(
            "node {id} is {lag} entries behind: wait until it catches up"
        ));
    }
    let voters = std::collections::BTreeSet::from([id]);
    changed(
        raft.change_membership(ChangeMembers::AddVoterIds(voters), true)
            .await,
        "voter added",
        id,
    )
}

/// On the leader: makes voter `node_id` an observer again (KIP-853's RemoveRaftVoter); the last
/// voter stays.
pub(crate) async fn remove_voter(
    raft: &Raft<TypeConfig>,
    node_id: laminar_model::NodeId,
) -> ControllerResponse {
    let Ok(id) = raft_id(node_id.get()) else {
        return refused(format!("node id {node_id} is negative"));
    };
    let voters: Vec<u64> = {
        let metrics = raft.metrics();
        let voters = metrics
            .borrow()
            .membership_config
            .membership()
            .voter_ids()
            .collect();
        voters
    };
    if !voters.contains(&id) {
        return ControllerResponse::QuorumChanged(Err(Refusal::VoterNotFound));
    }
    if voters.len() == 1 {
        return refused(format!("node {id} is the last voter"));
    }
    let removed = std::collections::BTreeSet::from([id]);
    changed(
        raft.change_membership(ChangeMembers::RemoveVoters(removed), true)
            .await,
        "voter removed",
        id,
    )
}

fn refused(reason: String) -> ControllerResponse {
    ControllerResponse::QuorumChanged(Err(Refusal::QuorumChangeRefused { reason }))
}

type MembershipWrite = Result<
    openraft::raft::ClientWriteResponse<TypeConfig>,
    openraft::error::RaftError<u64, openraft::error::ClientWriteError<u64, BasicNode>>,
>;

/// The answer to a membership change openraft made (or refused).
fn changed(written: MembershipWrite, what: &str, id: u64) -> ControllerResponse {
    match written {
        Ok(_) => {
            tracing::info!(node_id = id, "controller: {what}");
            ControllerResponse::QuorumChanged(Ok(()))
        }
        Err(e) => match e.forward_to_leader() {
            Some(forward) => ControllerResponse::not_controller(forward.leader_id),
            None => refused(e.to_string()),
        },
    }
}

/// Why `address` cannot be an observer's (`host:port`, bounded), if it cannot.
fn address_error(address: &str) -> Option<String> {
    let port = address
        .rsplit_once(':')
        .map(|(host, port)| (host, port.parse::<u16>()));
    match port {
        _ if address.len() > OBSERVER_ADDRESS_LEN_MAX => Some(format!(
            "an observer address is at most {OBSERVER_ADDRESS_LEN_MAX} bytes"
        )),
        Some((host, Ok(port))) if !host.is_empty() && port > 0 => None,
        _ => Some(format!("observer address {address:?} is not host:port")),
    }
}

/// On an observer: asks the voters, in turn, until one that leads has added this node, then
/// returns. Runs until then (the node's shutdown aborts it).
pub(crate) async fn join(config: ControllerConfig, address: String) {
    let node_id = laminar_model::NodeId::new(config.node_id);
    let request = RpcRequest::Controller(ControllerRequest::AddObserver { node_id, address });
    let mut leader: Option<u64> = None;
    loop {
        // The leader named by the last answer first, then every voter, then the bootstrap
        // servers (whose ids are unknown).
        let voters = config.voters.iter().map(|(id, addr)| (raft_id(*id).ok(), addr));
        let bootstrap = config.bootstrap_servers.iter().map(|addr| (None, addr));
        let mut order: Vec<(Option<u64>, &String)> = voters.chain(bootstrap).collect();
        order.sort_by_key(|(id, _)| *id != leader);
        for (_, address) in order {
            let mut client = PeerClient::new(address.clone(), config.transport_security.clone());
            match client.call(&request, ASK_TIMEOUT).await {
                Ok(RpcResponse::Controller(ControllerResponse::QuorumChanged(Ok(())))) => {
                    tracing::info!(%address, "controller: following the metadata log as an observer");
                    return;
                }
                Ok(RpcResponse::Controller(ControllerResponse::Refused(Refusal::NotController {
                    leader_id,
                }))) => leader = leader_id.or(leader),
                Ok(RpcResponse::Controller(ControllerResponse::QuorumChanged(Err(refusal)))) => {
                    tracing::error!(%refusal, "controller: the quorum refused this node as an observer");
                }
                Ok(other) => tracing::debug!(?other, "controller: unexpected answer to AddObserver"),
                Err(e) => tracing::debug!(%address, error = %e, "controller: voter unreachable"),
            }
        }
        tokio::time::sleep(ROUND_PAUSE).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observer_addresses_are_bounded_host_port_pairs() {
        assert_eq!(address_error("10.0.0.4:9093"), None);
        assert_eq!(address_error("broker-4.example:9093"), None);
        for bad in ["10.0.0.4", ":9093", "host:0", "host:port", "host:70000"] {
            assert!(address_error(bad).is_some(), "{bad}");
        }
        let long = format!("{}:9093", "h".repeat(OBSERVER_ADDRESS_LEN_MAX));
        assert!(address_error(&long).is_some());
    }
}
