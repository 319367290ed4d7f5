//! DescribeQuorum (API 55, KIP-595): the quorum as its leader sees it, for Kafka's tools.
//! Only the leader knows how far each voter has replicated, so a request that reaches another
//! node is forwarded there like any controller request (`active.rs`).
//!
//! Raft indexes are reported in Kafka's end-offset convention, one past the last entry: a
//! voter that has the entry at index 41 has a log end offset of 42, and the high watermark is
//! one past the last entry the leader applied (applied entries are committed).

use openraft::{BasicNode, RaftMetrics};
use serde::{Deserialize, Serialize};

/// The quorum as its leader sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumDescription {
    pub leader_id: u64,
    /// The leader's term (Kafka's leader epoch of the metadata partition).
    pub leader_epoch: u64,
    pub high_watermark: u64,
    /// In node id order.
    pub voters: Vec<ReplicaProgress>,
    /// Members that replicate without voting (openraft's learners).
    pub observers: Vec<ReplicaProgress>,
    /// Every member's controller listener (`host:port`) as the membership records it, by id.
    pub addresses: Vec<(u64, String)>,
}

/// How far one member has replicated the metadata log: `None` when the leader has not heard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaProgress {
    pub replica_id: u64,
    pub log_end_offset: Option<u64>,
}

/// The description from the leader's metrics; `None` on a node that does not lead.
pub fn describe(metrics: &RaftMetrics<u64, BasicNode>) -> Option<QuorumDescription> {
    let replication = metrics.replication.as_ref()?;
    if metrics.current_leader != Some(metrics.id) {
        return None;
    }
    let progress = |replica_id: u64| {
        let log_end_offset = match replica_id == metrics.id {
            true => metrics.last_log_index.map(|index| index + 1),
            false => replication
                .get(&replica_id)
                .copied()
                .flatten()
                .map(|log_id| log_id.index + 1),
        };
        ReplicaProgress {
            replica_id,
            log_end_offset,
        }
    };
    let membership = metrics.membership_config.membership();
    let mut voters: Vec<u64> = membership.voter_ids().collect();
    voters.sort_unstable();
    let mut observers: Vec<u64> = membership.learner_ids().collect();
    observers.sort_unstable();
    Some(QuorumDescription {
        leader_id: metrics.id,
        leader_epoch: metrics.current_term,
        high_watermark: metrics.last_applied.map_or(0, |log_id| log_id.index + 1),
        voters: voters.into_iter().map(progress).collect(),
        observers: observers.into_iter().map(progress).collect(),
        addresses: membership
            .nodes()
            .map(|(id, node)| (*id, node.addr.clone()))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, LogId, Membership, StoredMembership};
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    fn log_id(index: u64) -> LogId<u64> {
        LogId::new(CommittedLeaderId::new(4, 1), index)
    }

    /// Node 1 leading voters 1-3 in term 4 with learner 9; node 3 not heard from yet.
    fn leader_metrics() -> RaftMetrics<u64, BasicNode> {
        let mut metrics = RaftMetrics::new_initial(1);
        metrics.current_term = 4;
        metrics.current_leader = Some(1);
        metrics.last_log_index = Some(41);
        metrics.last_applied = Some(log_id(40));
        let learners: BTreeMap<u64, BasicNode> = [1, 2, 3, 9].map(|id| (id, BasicNode::default())).into();
        let membership = Membership::new(vec![BTreeSet::from([1, 2, 3])], learners);
        metrics.membership_config = Arc::new(StoredMembership::new(None, membership));
        metrics.replication = Some(BTreeMap::from([
            (1, Some(log_id(41))),
            (2, Some(log_id(39))),
            (3, None),
            (9, Some(log_id(7))),
        ]));
        metrics
    }

    #[test]
    fn the_leader_reports_each_members_log_end_one_past_its_last_entry() {
        let described = describe(&leader_metrics()).expect("node 1 leads");
        let ends = |members: &[ReplicaProgress]| {
            members
                .iter()
                .map(|m| (m.replica_id, m.log_end_offset))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            (
                described.leader_id,
                described.leader_epoch,
                described.high_watermark
            ),
            (1, 4, 41)
        );
        assert_eq!(ends(&described.voters), [(1, Some(42)), (2, Some(40)), (3, None)]);
        assert_eq!(ends(&described.observers), [(9, Some(8))]);
    }

    #[test]
    fn a_node_that_does_not_lead_describes_nothing() {
        let mut metrics = leader_metrics();
        metrics.current_leader = Some(2);
        assert!(describe(&metrics).is_none());
        metrics.current_leader = Some(1);
        metrics.replication = None;
        assert!(describe(&metrics).is_none());
    }
}
