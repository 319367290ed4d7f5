//! What a partition's leader knows of its followers (docs/ARCHITECTURE.md, "Replication"):
//! each follower's log end offset from its fetches, when it last caught up, the ISR the
//! controller committed and the change asked of it. The high watermark is the smallest log end
//! offset over the ISR; the ISR shrinks by followers that stayed behind for
//! `replica.lag.time.max.ms` and grows by those that caught up, through the controller
//! (Kafka's AlterPartition). Plain logic, no I/O: the shard's replication state drives it.

use std::time::Duration;

use laminar_model::{LeaderEpoch, NodeId, Offset, PartitionEpoch, UnixMillis};
use std::collections::BTreeMap;

use laminar_controller::PartitionState;

/// One follower as its leader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FollowerProgress {
    /// Its log end offset, from its latest fetch; `None` until it fetched from this leader in
    /// this epoch (the high watermark waits for it).
    log_end_offset: Option<Offset>,
    /// When it last had everything the leader had (Kafka's `lastCaughtUpTimeMs`).
    caught_up: UnixMillis,
    /// The leader's log end at the follower's previous fetch, and when that was.
    previous_fetch_leader_end: Offset,
    previous_fetch: UnixMillis,
}

/// Why a follower's fetch is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchRefusal {
    /// The fetching broker is no replica of the partition.
    NotAReplica,
    /// It names an older leader epoch than this leader's.
    FencedLeaderEpoch,
    /// It names a newer one: this broker has not seen it yet.
    UnknownLeaderEpoch,
}

/// A partition this broker leads, in one leader epoch. Owned by one shard; not Send.
#[derive(Debug, Clone)]
pub struct LeaderState {
    pub leader_epoch: LeaderEpoch,
    /// The partition epoch of the ISR below (AlterPartition names it).
    pub partition_epoch: PartitionEpoch,
    /// The ISR the controller committed.
    pub isr: Vec<NodeId>,
    followers: BTreeMap<NodeId, FollowerProgress>,
    /// The ISR asked of the controller and not yet answered: one change at a time.
    pub pending_isr: Option<Vec<NodeId>>,
    /// Members added by a change whose outcome is unknown (no answer in time, a controller lost
    /// mid-request), with the partition epoch that change was based on. The controller may have
    /// committed them, and then may elect one of them: until an answer or metadata newer than
    /// that epoch tells, they count for the high watermark as if added (Kafka keeps such a
    /// change pending and retries it).
    uncertain_additions: Option<(PartitionEpoch, Vec<NodeId>)>,
    /// After a refused or unanswered change, none is asked before this (or before newer
    /// metadata for the partition): a follower fetches many times a second, and asking again at
    /// each fetch floods the controller when its answer cannot change.
    isr_change_not_before: UnixMillis,
    /// The log end when this epoch began: a follower rejoins the ISR only once it has it.
    epoch_start_offset: Offset,
    node_id: NodeId,
}

impl LeaderState {
    /// Leadership of `state` (which names this node as leader) begins with the log at
    /// `log_end_offset`. Every ISR member gets a full `replica.lag.time.max.ms` to fetch.
    pub fn new(node_id: NodeId, state: &PartitionState, log_end_offset: Offset, now: UnixMillis) -> Self {
        assert_eq!(state.leader, node_id, "a leader state is for the leader");
        let followers = state
            .replicas
            .iter()
            .filter(|id| **id != node_id)
            .map(|id| (*id, FollowerProgress::new(now)))
            .collect();
        LeaderState {
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            isr: state.isr.clone(),
            followers,
            pending_isr: None,
            uncertain_additions: None,
            isr_change_not_before: UnixMillis::new(0),
            epoch_start_offset: log_end_offset,
            node_id,
        }
    }

    /// Takes a newer partition state of the same leader epoch (the ISR or the replicas
    /// changed): the controller's ISR is the truth; an answered change is no longer pending.
    pub fn update(&mut self, state: &PartitionState, now: UnixMillis) {
        assert_eq!(
            state.leader_epoch, self.leader_epoch,
            "a new epoch is a new leader state"
        );
        if state.partition_epoch >= self.partition_epoch {
            if state.partition_epoch > self.partition_epoch {
                // The truth changed: a change refused against the old state may pass now.
                self.isr_change_not_before = UnixMillis::new(0);
            }
            self.partition_epoch = state.partition_epoch;
            self.isr = state.isr.clone();
            if self.pending_isr.as_ref() == Some(&state.isr) {
                self.pending_isr = None;
            }
            if self
                .uncertain_additions
                .as_ref()
                .is_some_and(|(based_on, _)| state.partition_epoch > *based_on)
            {
                // Any change based on that epoch is in this state, or can never be.
                self.uncertain_additions = None;
            }
        }
        self.followers.retain(|id, _| state.replicas.contains(id));
        for id in state.replicas.iter().filter(|id| **id != self.node_id) {
            self.followers
                .entry(*id)
                .or_insert_with(|| FollowerProgress::new(now));
        }
    }

    /// Checks a follower's fetch against this leadership: `replica_id` must be a follower,
    /// and `current_leader_epoch` (-1: not given) this epoch.
    pub fn check_fetch(
        &self,
        replica_id: NodeId,
        current_leader_epoch: LeaderEpoch,
    ) -> Result<(), FetchRefusal> {
        if !self.followers.contains_key(&replica_id) {
            return Err(FetchRefusal::NotAReplica);
        }
        match current_leader_epoch.stale_or_ahead_of(self.leader_epoch) {
            None => Ok(()),
            Some(std::cmp::Ordering::Less) => Err(FetchRefusal::FencedLeaderEpoch),
            Some(_) => Err(FetchRefusal::UnknownLeaderEpoch),
        }
    }

    /// Records a follower's fetch from `fetch_offset` (its log end, everything below it durable
    /// there) while the leader's log ends at `leader_end` (Kafka's caught-up rule: it caught up
    /// now if it has everything, or at its previous fetch if it had all the leader had then).
    /// Call after [`check_fetch`](Self::check_fetch) accepted it.
    pub fn record_fetch(
        &mut self,
        replica_id: NodeId,
        fetch_offset: Offset,
        leader_end: Offset,
        now: UnixMillis,
    ) {
        let Some(progress) = self.followers.get_mut(&replica_id) else {
            return;
        };
        if fetch_offset > leader_end {
            // Past this leader's log: not a prefix of it (the read answers OFFSET_OUT_OF_RANGE
            // and the follower truncates); it counts for nothing.
            return;
        }
        if fetch_offset >= leader_end {
            progress.caught_up = now;
        } else if fetch_offset >= progress.previous_fetch_leader_end {
            progress.caught_up = progress.caught_up.max(progress.previous_fetch);
        }
        progress.previous_fetch_leader_end = leader_end;
        progress.previous_fetch = now;
        progress.log_end_offset = Some(fetch_offset);
    }

    /// The ISR the high watermark is computed over: the committed one plus members being added
    /// or perhaps added (KIP-841's maximal ISR: a removal counts once committed, an addition at
    /// once).
    fn maximal_isr(&self) -> Vec<NodeId> {
        let mut isr = self.isr.clone();
        let uncertain = self.uncertain_additions.iter().flat_map(|(_, ids)| ids);
        for id in self.pending_isr.iter().flatten().chain(uncertain) {
            if !isr.contains(id) {
                isr.push(*id);
            }
        }
        isr
    }

    /// The smallest log end offset over the maximal ISR, the leader's being `leader_end`;
    /// `None` while a member has not fetched in this epoch.
    pub fn high_watermark(&self, leader_end: Offset) -> Option<Offset> {
        self.maximal_isr()
            .iter()
            .map(|id| match *id == self.node_id {
                true => Some(leader_end),
                false => self.followers.get(id).and_then(|f| f.log_end_offset),
            })
            .try_fold(leader_end, |low, end| end.map(|end| low.min(end)))
    }

    /// The controller answered the change asked (`isr` at `partition_epoch`, decided on
    /// everything it had committed): that is the truth, whatever an unanswered change did.
    pub fn isr_change_committed(&mut self, partition_epoch: PartitionEpoch, isr: &[NodeId]) {
        if partition_epoch >= self.partition_epoch {
            self.partition_epoch = partition_epoch;
            self.isr = isr.to_vec();
            self.pending_isr = None;
            self.uncertain_additions = None;
        }
    }

    /// The controller refused the change asked, or did not answer it (`outcome_unknown`: it may
    /// still commit it): it is no longer pending, and the next is asked no sooner than `backoff`
    /// from `now`, unless newer metadata for the partition comes first. The members it added
    /// stay counted for the high watermark while its outcome is unknown.
    pub fn isr_change_failed(&mut self, now: UnixMillis, backoff: Duration, outcome_unknown: bool) {
        let asked = self.pending_isr.take().unwrap_or_default();
        let added: Vec<NodeId> = asked.into_iter().filter(|id| !self.isr.contains(id)).collect();
        if outcome_unknown && !added.is_empty() {
            let (_, uncertain) = self
                .uncertain_additions
                .get_or_insert_with(|| (self.partition_epoch, Vec::new()));
            for id in added {
                if !uncertain.contains(&id) {
                    uncertain.push(id);
                }
            }
        }
        self.isr_change_not_before = now.after(backoff);
    }

    /// The ISR to ask the controller for, if it should change: without the followers that did
    /// not catch up for `lag_time_max` (`replica.lag.time.max.ms`), with those that now have the
    /// high watermark and this epoch's first offset, fetched within it and are `eligible`
    /// (unfenced in the metadata, KIP-841: a fenced broker, which the controller took out of the
    /// ISR when it fenced it, is refused with INELIGIBLE_REPLICA until its heartbeat unfences
    /// it; a follower that stopped fetching keeps the log end of its last fetch). `None` while
    /// a change is pending, after a refusal until its backoff passed, or when nothing changes.
    pub fn isr_change(
        &self,
        high_watermark: Offset,
        now: UnixMillis,
        lag_time_max: Duration,
        eligible: impl Fn(NodeId) -> bool,
    ) -> Option<Vec<NodeId>> {
        if self.pending_isr.is_some() || now < self.isr_change_not_before {
            return None;
        }
        let mut isr: Vec<NodeId> = self
            .isr
            .iter()
            .copied()
            .filter(|id| match self.followers.get(id) {
                Some(f) => now.since(f.caught_up) <= lag_time_max,
                None => *id == self.node_id,
            })
            .collect();
        for (id, progress) in &self.followers {
            let fetching = now.since(progress.previous_fetch) <= lag_time_max;
            let caught_up = fetching
                && progress
                    .log_end_offset
                    .is_some_and(|end| end >= high_watermark && end >= self.epoch_start_offset);
            // Only followers out of the committed ISR rejoin: one being dropped for lagging
            // has the high watermark it holds back, and must not come straight back.
            if caught_up && eligible(*id) && !self.isr.contains(id) && !isr.contains(id) {
                isr.push(*id);
            }
        }
        if !isr.contains(&self.node_id) {
            isr.insert(0, self.node_id);
        }
        let mut sorted_new = isr.clone();
        let mut sorted_old = self.isr.clone();
        sorted_new.sort_unstable();
        sorted_old.sort_unstable();
        // An unanswered change is asked about again even when nothing else changes: the
        // answer, or its refusal at a newer partition epoch, settles it.
        (sorted_new != sorted_old || self.uncertain_additions.is_some()).then_some(isr)
    }

    /// Whether a replica is out of the ISR.
    pub fn is_under_replicated(&self) -> bool {
        self.isr.len() < self.followers.len() + 1
    }

    /// Each follower's log end offset as last fetched (`None`: not yet in this epoch).
    pub fn follower_ends(&self) -> impl Iterator<Item = (NodeId, Option<Offset>)> + '_ {
        self.followers.iter().map(|(id, f)| (*id, f.log_end_offset))
    }
}

impl FollowerProgress {
    fn new(now: UnixMillis) -> Self {
        FollowerProgress {
            log_end_offset: None,
            caught_up: now,
            // Above any offset: no fetch before the first counts as caught up.
            previous_fetch_leader_end: Offset::new(i64::MAX),
            previous_fetch: now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(value: i64) -> Offset {
        Offset::new(value)
    }

    fn at(ms: i64) -> UnixMillis {
        UnixMillis::new(ms)
    }

    fn lag(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    /// Every follower eligible (unfenced).
    fn any(_: NodeId) -> bool {
        true
    }

    fn node(id: i32) -> NodeId {
        NodeId::new(id)
    }

    fn nodes(ids: &[i32]) -> Vec<NodeId> {
        ids.iter().copied().map(NodeId::new).collect()
    }

    fn state(replicas: &[i32], isr: &[i32], epoch: i32, partition_epoch: i32) -> PartitionState {
        PartitionState {
            replicas: nodes(replicas),
            isr: nodes(isr),
            leader: node(1),
            leader_epoch: LeaderEpoch::new(epoch),
            partition_epoch: PartitionEpoch::new(partition_epoch),
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        }
    }

    #[test]
    fn the_high_watermark_waits_for_every_isr_member_and_is_their_smallest_end() {
        let mut leader = LeaderState::new(node(1), &state(&[1, 2, 3], &[1, 2, 3], 4, 7), offset(10), at(0));
        assert_eq!(
            leader.high_watermark(offset(10)),
            None,
            "followers have not fetched"
        );
        leader.record_fetch(node(2), offset(10), offset(10), at(5));
        assert_eq!(leader.high_watermark(offset(10)), None);
        leader.record_fetch(node(3), offset(8), offset(12), at(6));
        assert_eq!(leader.high_watermark(offset(12)), Some(offset(8)));
        leader.record_fetch(node(3), offset(12), offset(12), at(7));
        assert_eq!(leader.high_watermark(offset(12)), Some(offset(10)));
        leader.record_fetch(node(2), offset(12), offset(12), at(8));
        assert_eq!(leader.high_watermark(offset(15)), Some(offset(12)));
    }

    #[test]
    fn a_fetch_past_the_leaders_log_end_counts_for_nothing() {
        let mut leader = LeaderState::new(node(1), &state(&[1, 2], &[1, 2], 4, 7), offset(10), at(0));
        leader.record_fetch(node(2), offset(15), offset(10), at(5));
        assert_eq!(
            leader.high_watermark(offset(10)),
            None,
            "follower 2 has not shown a prefix of the log"
        );
        leader.record_fetch(node(2), offset(10), offset(10), at(6));
        assert_eq!(leader.high_watermark(offset(10)), Some(offset(10)));
    }

    #[test]
    fn fetches_are_checked_against_the_replicas_and_the_epoch() {
        let leader = LeaderState::new(node(1), &state(&[1, 2, 3], &[1, 2, 3], 4, 7), offset(0), at(0));
        assert_eq!(leader.check_fetch(node(2), LeaderEpoch::new(4)), Ok(()));
        assert_eq!(leader.check_fetch(node(2), LeaderEpoch::new(-1)), Ok(()));
        assert_eq!(
            leader.check_fetch(node(2), LeaderEpoch::new(3)),
            Err(FetchRefusal::FencedLeaderEpoch)
        );
        assert_eq!(
            leader.check_fetch(node(3), LeaderEpoch::new(5)),
            Err(FetchRefusal::UnknownLeaderEpoch)
        );
        assert_eq!(
            leader.check_fetch(node(4), LeaderEpoch::new(4)),
            Err(FetchRefusal::NotAReplica)
        );
        assert_eq!(
            leader.check_fetch(node(1), LeaderEpoch::new(4)),
            Err(FetchRefusal::NotAReplica),
            "not itself"
        );
    }

    #[test]
    fn a_follower_behind_for_the_lag_time_leaves_and_rejoins_once_caught_up() {
        let mut leader = LeaderState::new(node(1), &state(&[1, 2, 3], &[1, 2, 3], 1, 1), offset(0), at(0));
        leader.record_fetch(node(2), offset(0), offset(0), at(100));
        leader.record_fetch(node(3), offset(0), offset(0), at(100));
        // 2 keeps up; 3 stops fetching at offset 0 while the leader grows.
        for t in [200, 400, 600, 800, 1000] {
            leader.record_fetch(node(2), offset(t), offset(t), at(t));
        }
        assert_eq!(
            leader.isr_change(offset(0), at(1000), lag(1000), any),
            None,
            "3 caught up at 100: not yet"
        );
        let shrunk = leader
            .isr_change(offset(0), at(1101), lag(1000), any)
            .expect("3 is out");
        assert_eq!(shrunk, nodes(&[1, 2]));
        leader.pending_isr = Some(shrunk.clone());
        assert_eq!(
            leader.isr_change(offset(0), at(2000), lag(1000), any),
            None,
            "one change at a time"
        );
        leader.update(&state(&[1, 2, 3], &[1, 2], 1, 2), at(1200));
        assert_eq!(leader.pending_isr, None);
        assert_eq!(
            leader.high_watermark(offset(1000)),
            Some(offset(1000)),
            "3 no longer holds it back"
        );
        // 3 fetches again, behind the high watermark: not yet; at it: back in.
        leader.record_fetch(node(3), offset(500), offset(1000), at(1300));
        assert_eq!(leader.isr_change(offset(1000), at(1300), lag(1000), any), None);
        leader.record_fetch(node(3), offset(1000), offset(1000), at(1400));
        assert_eq!(
            leader.isr_change(offset(1000), at(1400), lag(1000), any),
            Some(nodes(&[1, 2, 3]))
        );
    }

    #[test]
    fn a_follower_that_stopped_fetching_is_not_proposed_back_once_the_lag_time_passed() {
        let mut leader = LeaderState::new(node(1), &state(&[1, 2, 3], &[1, 2, 3], 1, 1), offset(10), at(0));
        leader.record_fetch(node(2), offset(10), offset(10), at(100));
        leader.record_fetch(node(3), offset(10), offset(10), at(100));
        // 3 stops (and is fenced: the controller takes it out of the ISR); nothing is written
        // since, so the log end of its last fetch still has the high watermark.
        leader.update(&state(&[1, 2, 3], &[1, 2], 1, 2), at(200));
        leader.record_fetch(node(2), offset(10), offset(10), at(1000));
        assert_eq!(
            leader.isr_change(offset(10), at(1000), lag(1000), any),
            Some(nodes(&[1, 2, 3])),
            "fetched 900 ms ago"
        );
        assert_eq!(
            leader.isr_change(offset(10), at(1101), lag(1000), any),
            None,
            "no fetch for the lag time"
        );
        leader.record_fetch(node(3), offset(10), offset(10), at(1200));
        assert_eq!(
            leader.isr_change(offset(10), at(1200), lag(1000), any),
            Some(nodes(&[1, 2, 3])),
            "fetching again"
        );
    }

    #[test]
    fn a_follower_rejoins_only_past_the_start_of_the_leaders_epoch() {
        let mut leader = LeaderState::new(node(1), &state(&[1, 2], &[1], 3, 5), offset(50), at(0));
        leader.record_fetch(node(2), offset(40), offset(50), at(10));
        assert_eq!(
            leader.high_watermark(offset(50)),
            Some(offset(50)),
            "the ISR is the leader alone"
        );
        assert_eq!(
            leader.isr_change(offset(40), at(10), lag(1000), any),
            None,
            "below the epoch start"
        );
        leader.record_fetch(node(2), offset(50), offset(50), at(20));
        assert_eq!(
            leader.isr_change(offset(50), at(20), lag(1000), any),
            Some(nodes(&[1, 2]))
        );
    }

    #[test]
    fn an_addition_counts_for_the_high_watermark_before_it_is_committed() {
        let mut leader = LeaderState::new(node(1), &state(&[1, 2], &[1], 3, 5), offset(0), at(0));
        leader.record_fetch(node(2), offset(10), offset(10), at(1));
        leader.pending_isr = leader.isr_change(offset(10), at(1), lag(1000), any);
        assert_eq!(leader.pending_isr, Some(nodes(&[1, 2])));
        assert_eq!(leader.high_watermark(offset(20)), Some(offset(10)));
        // A stale answer (older partition epoch) changes nothing.
        leader.update(&state(&[1, 2], &[1], 3, 4), at(2));
        assert_eq!(leader.isr, nodes(&[1]));
        assert!(leader.pending_isr.is_some());
    }

    /// Follower 3 caught up and was asked into the ISR [1, 2]; follower 2 then moves on to 20
    /// while 3 stays at 10.
    fn addition_of_3_asked(outcome_unknown: bool) -> LeaderState {
        let mut leader = LeaderState::new(node(1), &state(&[1, 2, 3], &[1, 2], 2, 3), offset(10), at(0));
        leader.record_fetch(node(2), offset(10), offset(10), at(100));
        leader.record_fetch(node(3), offset(10), offset(10), at(100));
        leader.pending_isr = leader.isr_change(offset(10), at(100), lag(1000), any);
        assert_eq!(leader.pending_isr, Some(nodes(&[1, 2, 3])));
        leader.isr_change_failed(at(110), lag(500), outcome_unknown);
        leader.record_fetch(node(2), offset(20), offset(20), at(200));
        leader
    }

    #[test]
    fn an_addition_whose_outcome_is_unknown_holds_the_high_watermark_until_the_truth_is_known() {
        let mut leader = addition_of_3_asked(true);
        assert_eq!(
            leader.high_watermark(offset(20)),
            Some(offset(10)),
            "the controller may have put 3 in the ISR and may elect it: 3 must have what is committed"
        );
        assert_eq!(
            leader.isr_change(offset(10), at(1_150), lag(1000), any),
            Some(nodes(&[1, 2])),
            "asked again although 3 stopped fetching: only an answer settles it"
        );
        leader.update(&state(&[1, 2, 3], &[1, 2], 2, 3), at(300));
        assert_eq!(
            leader.high_watermark(offset(20)),
            Some(offset(10)),
            "same epoch: still unknown"
        );
        leader.update(&state(&[1, 2, 3], &[1, 2], 2, 4), at(300));
        assert_eq!(
            leader.high_watermark(offset(20)),
            Some(offset(20)),
            "a newer epoch is the truth"
        );
        assert_eq!(leader.isr_change(offset(20), at(5_000), lag(10_000), any), None);
    }

    #[test]
    fn an_answer_settles_an_unknown_outcome_and_a_refusal_leaves_none() {
        let mut answered = addition_of_3_asked(true);
        answered.isr_change_committed(PartitionEpoch::new(3), &nodes(&[1, 2]));
        assert_eq!(answered.high_watermark(offset(20)), Some(offset(20)));
        let refused = addition_of_3_asked(false);
        assert_eq!(refused.high_watermark(offset(20)), Some(offset(20)));
    }

    #[test]
    fn a_caught_up_follower_is_not_proposed_back_while_the_metadata_shows_it_fenced() {
        let mut leader = LeaderState::new(node(1), &state(&[1, 2, 3], &[1, 2], 2, 3), offset(10), at(0));
        leader.record_fetch(node(2), offset(10), offset(10), at(100));
        leader.record_fetch(node(3), offset(10), offset(10), at(100));
        let fenced_3 = |id: NodeId| id != node(3);
        assert_eq!(
            leader.isr_change(offset(10), at(100), lag(1000), fenced_3),
            None,
            "3 has everything but is fenced: the controller would refuse it"
        );
        assert_eq!(
            leader.isr_change(offset(10), at(100), lag(1000), any),
            Some(nodes(&[1, 2, 3])),
            "unfenced: back in"
        );
    }

    #[test]
    fn a_refused_change_is_not_asked_again_before_its_backoff_or_newer_metadata() {
        let mut leader = LeaderState::new(node(1), &state(&[1, 2, 3], &[1, 2], 2, 3), offset(10), at(0));
        leader.record_fetch(node(2), offset(10), offset(10), at(100));
        leader.record_fetch(node(3), offset(10), offset(10), at(100));
        leader.pending_isr = leader.isr_change(offset(10), at(100), lag(1000), any);
        assert_eq!(leader.pending_isr, Some(nodes(&[1, 2, 3])));
        leader.isr_change_failed(at(110), lag(500), false);
        assert_eq!(leader.pending_isr, None);
        leader.record_fetch(node(3), offset(10), offset(10), at(200));
        assert_eq!(
            leader.isr_change(offset(10), at(200), lag(1000), any),
            None,
            "not at every fetch"
        );
        assert_eq!(
            leader.isr_change(offset(10), at(610), lag(1000), any),
            Some(nodes(&[1, 2, 3])),
            "once the backoff passed"
        );
        leader.isr_change_failed(at(620), lag(500), false);
        leader.update(&state(&[1, 2, 3], &[1, 2], 2, 4), at(630));
        assert_eq!(
            leader.isr_change(offset(10), at(630), lag(1000), any),
            Some(nodes(&[1, 2, 3])),
            "newer metadata: at once"
        );
    }
}
