//! Replication in cluster mode (docs/ARCHITECTURE.md, "Replication"): every partition lives on
//! each of its replicas; the leader takes produces, followers copy its log unchanged with
//! Kafka's Fetch (replica id set), and the leader's high watermark — what consumers may read
//! and acks=all waits for — is the smallest log end over the in-sync replicas.
//!
//! - `leader.rs`: what a leader knows of its followers, the high watermark, ISR changes.
//! - `follower.rs`: a followed partition's phase (truncate, then fetch) and what the shard does
//!   with what its fetchers bring.
//! - `fetcher.rs`: the fetcher threads, one per source broker per shard, on `laminar-client`.
//! - `manager.rs`: each shard's task that follows the metadata (who leads what) and keeps the
//!   ISR and the high-watermark checkpoint.
//!
//! Everything here is owned by one shard: a shard replicates exactly the partitions it owns.

pub mod fetcher;
pub mod follower;
pub mod leader;
pub mod manager;
pub mod throttle;

use laminar_model::{LeaderEpoch, NodeId, Offset, PartitionEpoch, UnixMillis};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use laminar_controller::api::AlterPartitionResult;
use laminar_controller::PartitionState;
use laminar_engine::partition::high_watermarks::ShardHighWatermarks;
use laminar_engine::partition::Partition;

use crate::config::ReplicationSettings;
use crate::quorum::membership::SessionLease;
use crate::topic_partition::{PartitionAccessError, TopicPartition};
use follower::{FollowState, Phase};
use leader::{FetchRefusal, LeaderState};

/// How often an acks=all waiter looks whether this broker still leads its partition.
const LEADERSHIP_RECHECK: std::time::Duration = std::time::Duration::from_millis(200);
/// How long a leader waits after the controller refused (or did not answer) an ISR change
/// before it asks for one again, unless newer metadata for the partition comes first.
const ISR_CHANGE_RETRY_BACKOFF: Duration = Duration::from_millis(500);

/// One shard's replication state: the partitions it leads and follows, and its fetchers.
/// Owned by one shard; not Send. Bounded by the shard's partitions (one entry each) and the
/// cluster's brokers (one fetcher each).
pub struct ShardReplication {
    pub node_id: NodeId,
    pub settings: ReplicationSettings,
    /// How fetchers connect to leaders: the inter-broker listener's TLS and SASL login.
    pub fetch_security: laminar_client::Security,
    led: RefCell<HashMap<TopicPartition, LeaderState>>,
    followed: RefCell<HashMap<TopicPartition, FollowState>>,
    /// Source brokers with a fetcher serving this shard.
    fetchers: RefCell<std::collections::BTreeSet<NodeId>>,
    /// The brokers the metadata shows unfenced: only they may be proposed into an ISR.
    unfenced: RefCell<std::collections::BTreeSet<NodeId>>,
    /// The replicas' high watermarks, written to this shard's `replication-offset-checkpoint`.
    pub high_watermarks: ShardHighWatermarks,
    /// Notified when the followed partitions change: an idle fetcher waits on it.
    followed_changed: event_listener::Event,
    /// This shard's share of `leader.replication.throttled.rate`.
    pub leader_throttle: throttle::Throttle,
    /// This shard's share of `follower.replication.throttled.rate`.
    pub follower_throttle: throttle::Throttle,
    /// This broker's session with the quorum: an acks=all waiter gives up when it lapses.
    session: std::sync::Arc<SessionLease>,
}

impl ShardReplication {
    /// `shard` of `shard_count`.
    pub fn new(
        node_id: NodeId,
        (settings, fetch_security): (ReplicationSettings, laminar_client::Security),
        log_dir: &std::path::Path,
        (shard, shard_count): (usize, usize),
        session: std::sync::Arc<SessionLease>,
    ) -> Self {
        ShardReplication {
            leader_throttle: throttle::Throttle::new(settings.leader_throttled_rate, shard_count),
            follower_throttle: throttle::Throttle::new(settings.follower_throttled_rate, shard_count),
            node_id,
            settings,
            fetch_security,
            led: RefCell::default(),
            followed: RefCell::default(),
            fetchers: RefCell::default(),
            unfenced: RefCell::default(),
            high_watermarks: ShardHighWatermarks::new(log_dir, shard),
            followed_changed: event_listener::Event::new(),
            session,
        }
    }

    pub fn throttle(&self, side: throttle::ThrottleSide) -> &throttle::Throttle {
        match side {
            throttle::ThrottleSide::Leader => &self.leader_throttle,
            throttle::ThrottleSide::Follower => &self.follower_throttle,
        }
    }

    /// A partition just opened on this shard in cluster mode: its high watermark starts at the
    /// checkpointed one (0 without), never at the log end, so that nothing uncommitted shows.
    pub fn on_open(&self, tp: &TopicPartition, partition: &Partition) {
        if !partition.is_replicated() {
            let checkpointed = self.high_watermarks.get(tp);
            partition.set_high_watermark(checkpointed.unwrap_or(Offset::ZERO));
        }
    }

    /// The committed ISR of a partition this shard leads, if it leads it.
    pub fn isr_of(&self, tp: &TopicPartition) -> Option<Vec<NodeId>> {
        self.led.borrow().get(tp).map(|l| l.isr.clone())
    }

    /// acks=all's precondition (`min.insync.replicas`): NOT_ENOUGH_REPLICAS while the
    /// committed ISR of a led partition is smaller.
    pub fn check_min_isr(
        &self,
        tp: &TopicPartition,
        min_insync_replicas: i32,
    ) -> Result<(), PartitionAccessError> {
        let isr = self.isr_of(tp).ok_or(PartitionAccessError::NotLeader)?;
        if (isr.len() as i64) < i64::from(min_insync_replicas) {
            return Err(PartitionAccessError::Refused(ResponseError::NotEnoughReplicas));
        }
        Ok(())
    }

    /// acks=all: waits until `partition`'s high watermark passes `last_offset` (every ISR
    /// member has it), then checks the ISR is still at least `min_insync_replicas`
    /// (NOT_ENOUGH_REPLICAS_AFTER_APPEND otherwise). REQUEST_TIMED_OUT after `timeout`;
    /// NOT_LEADER_OR_FOLLOWER once this broker no longer leads `tp`, its session lapsed or the
    /// batch is gone.
    pub async fn wait_replicated(
        &self,
        tp: &TopicPartition,
        partition: &Rc<Partition>,
        (last_offset, min_insync_replicas): (Offset, i32),
        timeout: std::time::Duration,
    ) -> Result<(), PartitionAccessError> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let moved = partition.appended();
            if partition.high_watermark() > last_offset {
                return match self.check_min_isr(tp, min_insync_replicas) {
                    Err(PartitionAccessError::Refused(_)) => Err(PartitionAccessError::Refused(
                        ResponseError::NotEnoughReplicasAfterAppend,
                    )),
                    other => other,
                };
            }
            let leads = self.isr_of(tp).is_some() && self.session.is_held();
            if !leads || partition.log_end_offset() <= last_offset {
                return Err(PartitionAccessError::NotLeader);
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(PartitionAccessError::Refused(ResponseError::RequestTimedOut));
            }
            // Nothing wakes a waiter when leadership moves away: look again now and then.
            let nap = glommio::timer::sleep(left.min(LEADERSHIP_RECHECK));
            futures::future::select(moved, std::pin::pin!(nap)).await;
        }
    }

    /// A follower fetched `tp` from `fetch_offset`: checks it against the leadership, records
    /// its progress and moves the high watermark (and asks for an ISR change if one is due).
    pub fn follower_fetched(
        &self,
        tp: &TopicPartition,
        fetch: FollowerFetch,
        partition: Option<&Rc<Partition>>,
        now: UnixMillis,
    ) -> Result<Option<IsrChange>, PartitionAccessError> {
        let mut led = self.led.borrow_mut();
        let leader = led.get_mut(tp).ok_or(PartitionAccessError::NotLeader)?;
        leader
            .check_fetch(fetch.replica_id, fetch.current_leader_epoch)
            .map_err(|refusal| PartitionAccessError::Refused(refusal_code(refusal)))?;
        let leader_end = partition.map_or(Offset::ZERO, |p| p.log_end_offset());
        leader.record_fetch(fetch.replica_id, fetch.fetch_offset, leader_end, now);
        drop(led);
        Ok(self.advance_led(tp, partition, now))
    }

    /// After this leader appended to `tp`: with the leader alone in the ISR, that moves the
    /// high watermark.
    pub fn leader_appended(&self, tp: &TopicPartition, partition: &Rc<Partition>) {
        self.raise_high_watermark(tp, partition);
    }

    /// Moves the high watermark of a led partition up to its ISR's smallest log end.
    fn raise_high_watermark(&self, tp: &TopicPartition, partition: &Rc<Partition>) {
        let led = self.led.borrow();
        let Some(leader) = led.get(tp) else {
            return;
        };
        if let Some(hw) = leader.high_watermark(partition.log_end_offset()) {
            if hw > partition.high_watermark() {
                partition.set_high_watermark(hw);
                self.high_watermarks.report(tp, hw);
            }
        }
    }

    /// Moves the high watermark of a led partition, and returns the ISR change to ask the
    /// controller for, if one is due (marked pending here).
    pub fn advance_led(
        &self,
        tp: &TopicPartition,
        partition: Option<&Rc<Partition>>,
        now: UnixMillis,
    ) -> Option<IsrChange> {
        if let Some(partition) = partition {
            self.raise_high_watermark(tp, partition);
        }
        let high_watermark = partition.map_or(Offset::ZERO, |p| p.high_watermark());
        let mut led = self.led.borrow_mut();
        let leader = led.get_mut(tp)?;
        let lag_time_max = Duration::from_millis(self.settings.lag_time_max_ms);
        let unfenced = self.unfenced.borrow();
        let eligible = |id: NodeId| unfenced.contains(&id);
        let new_isr = leader.isr_change(high_watermark, now, lag_time_max, eligible)?;
        leader.pending_isr = Some(new_isr.clone());
        Some(IsrChange {
            tp: tp.clone(),
            leader_epoch: leader.leader_epoch,
            partition_epoch: leader.partition_epoch,
            new_isr,
        })
    }

    /// Follows `tp` as `state` says (its leader, or none); a new leader or epoch starts with
    /// truncation. Stops leading it.
    pub fn follow(&self, tp: &TopicPartition, state: &PartitionState) {
        self.led.borrow_mut().remove(tp);
        let mut followed = self.followed.borrow_mut();
        let leader_epoch = state.leader_epoch;
        let same = followed
            .get(tp)
            .is_some_and(|f| f.leader == state.leader && f.leader_epoch == leader_epoch);
        if !same {
            followed.insert(
                tp.clone(),
                FollowState {
                    leader: state.leader,
                    leader_epoch,
                    phase: Phase::Truncating,
                    retry_at_ms: 0,
                },
            );
            self.followed_changed.notify(usize::MAX);
        }
    }

    /// Takes a newer state of a partition led in the same epoch; false when this shard does not
    /// lead it in that epoch (then [`become_leader`](Self::become_leader) is due).
    pub fn update_leadership(&self, tp: &TopicPartition, state: &PartitionState, now: UnixMillis) -> bool {
        let mut led = self.led.borrow_mut();
        match led.get_mut(tp) {
            Some(leader) if leader.leader_epoch == state.leader_epoch => {
                leader.update(state, now);
                true
            }
            _ => false,
        }
    }

    /// Leads `tp` as `state` says, from now if not yet (the first request to a new leader may
    /// come before the shard's replication task took up the metadata that made it one).
    pub fn ensure_leading(&self, tp: &TopicPartition, state: &PartitionState, partition: &Rc<Partition>) {
        let now = UnixMillis::now();
        if !self.update_leadership(tp, state, now) {
            self.become_leader(tp, state, partition.log_end_offset(), now);
            self.raise_high_watermark(tp, partition);
        }
    }

    /// Starts leading `tp` in the epoch of `state`, with the log ending at `log_end`.
    pub fn become_leader(
        &self,
        tp: &TopicPartition,
        state: &PartitionState,
        log_end: Offset,
        now: UnixMillis,
    ) {
        if self.followed.borrow_mut().remove(tp).is_some() {
            self.followed_changed.notify(usize::MAX);
        }
        let leader = LeaderState::new(self.node_id, state, log_end, now);
        tracing::info!(
            topic = &*tp.topic,
            partition = tp.partition,
            leader_epoch = state.leader_epoch.get(),
            %log_end,
            "leading"
        );
        self.led.borrow_mut().insert(tp.clone(), leader);
    }

    /// Drops every role for partitions not in `assigned` (deleted, or moved off this broker);
    /// returns the partitions that lost their role.
    pub fn forget_unassigned<V>(&self, assigned: &HashMap<TopicPartition, V>) -> Vec<TopicPartition> {
        let mut dropped = Vec::new();
        self.led.borrow_mut().retain(|key, _| {
            let keep = assigned.contains_key(key);
            if !keep {
                dropped.push(key.clone());
            }
            keep
        });
        let mut followed = self.followed.borrow_mut();
        followed.retain(|key, _| {
            let keep = assigned.contains_key(key);
            if !keep {
                dropped.push(key.clone());
            }
            keep
        });
        if !dropped.is_empty() {
            self.followed_changed.notify(usize::MAX);
        }
        for tp in &dropped {
            self.high_watermarks.remove(tp);
        }
        dropped
    }

    /// Leaders this shard follows partitions from but has no fetcher for yet.
    pub fn sources_without_fetcher(&self) -> Vec<NodeId> {
        let fetchers = self.fetchers.borrow();
        let mut sources: Vec<NodeId> = self
            .followed
            .borrow()
            .values()
            .map(|f| f.leader)
            .filter(|l| l.get() >= 0 && *l != self.node_id && !fetchers.contains(l))
            .collect();
        sources.sort_unstable();
        sources.dedup();
        sources
    }

    pub fn fetcher_started(&self, source: NodeId) {
        self.fetchers.borrow_mut().insert(source);
    }

    /// The partitions this shard leads.
    pub fn led_partitions(&self) -> Vec<TopicPartition> {
        let led = self.led.borrow();
        led.keys().cloned().collect()
    }

    /// The controller committed an ISR change.
    pub fn isr_committed(&self, tp: &TopicPartition, result: &AlterPartitionResult) {
        let mut led = self.led.borrow_mut();
        if let Some(leader) = led.get_mut(tp) {
            if leader.leader_epoch == result.leader_epoch {
                leader.isr_change_committed(result.partition_epoch, &result.isr);
            }
        }
    }

    /// The controller refused or lost an ISR change (`outcome_unknown`: it may still commit
    /// it): it is no longer pending (the metadata brings the truth; a check after the backoff
    /// may ask again).
    pub fn isr_change_failed(
        &self,
        tp: &TopicPartition,
        leader_epoch: LeaderEpoch,
        now: UnixMillis,
        outcome_unknown: bool,
    ) {
        if let Some(leader) = self.led.borrow_mut().get_mut(tp) {
            if leader.leader_epoch == leader_epoch {
                leader.isr_change_failed(now, ISR_CHANGE_RETRY_BACKOFF, outcome_unknown);
            }
        }
    }

    /// Takes up which brokers the metadata shows unfenced.
    pub fn set_unfenced(&self, brokers: impl IntoIterator<Item = NodeId>) {
        *self.unfenced.borrow_mut() = brokers.into_iter().collect();
    }

    /// Each follower's log end offset on a partition this shard leads (for DescribeLogDirs and
    /// the status page).
    pub fn follower_ends(&self, tp: &TopicPartition) -> Vec<(NodeId, Option<Offset>)> {
        let led = self.led.borrow();
        led.get(tp).map_or_else(Vec::new, |l| l.follower_ends().collect())
    }

    /// The followed partitions whose leader is `source` and that are due for a request now;
    /// `None` when none is led from there.
    pub fn followed_from(&self, source: NodeId, now_ms: i64) -> Option<Vec<(TopicPartition, FollowState)>> {
        let followed = self.followed.borrow();
        let mut any = false;
        let mut due = Vec::new();
        for (tp, state) in followed.iter() {
            if state.leader != source {
                continue;
            }
            any = true;
            if state.retry_at_ms <= now_ms {
                due.push((tp.clone(), state.clone()));
            }
        }
        any.then_some(due)
    }

    /// The state of `tp` if it is still followed from `source` in `phase` (an answer for a
    /// partition whose leader changed meanwhile is dropped).
    pub fn following(&self, tp: &TopicPartition, source: NodeId, phase: Phase) -> Option<FollowState> {
        let followed = self.followed.borrow();
        followed
            .get(tp)
            .filter(|s| s.leader == source && s.phase == phase)
            .cloned()
    }

    fn with_followed(
        &self,
        tp: &TopicPartition,
        leader_epoch: LeaderEpoch,
        change: impl FnOnce(&mut FollowState),
    ) {
        if let Some(state) = self.followed.borrow_mut().get_mut(tp) {
            if state.leader_epoch == leader_epoch {
                change(state);
            }
        }
    }

    pub fn set_phase(&self, tp: &TopicPartition, leader_epoch: LeaderEpoch, phase: Phase) {
        self.with_followed(tp, leader_epoch, |s| s.phase = phase);
    }

    /// No request for `tp` for `replica.fetch.backoff.ms`.
    pub fn retry_later(&self, tp: &TopicPartition, leader_epoch: LeaderEpoch, now_ms: i64) {
        let backoff = i64::try_from(self.settings.fetch_backoff_ms).unwrap_or(i64::MAX);
        self.with_followed(tp, leader_epoch, |s| {
            s.retry_at_ms = now_ms.saturating_add(backoff)
        });
    }

    /// Resolves at the next change of the followed partitions.
    pub fn followed_changed(&self) -> event_listener::EventListener {
        self.followed_changed.listen()
    }

    pub fn fetcher_stopped(&self, source: NodeId) {
        self.fetchers.borrow_mut().remove(&source);
    }

    /// Counts for `/metrics`: partitions led, followed, and led with a shrunk ISR.
    pub fn counts(&self) -> ReplicaCounts {
        let led = self.led.borrow();
        ReplicaCounts {
            led: led.len(),
            followed: self.followed.borrow().len(),
            under_replicated: led.values().filter(|l| l.is_under_replicated()).count(),
        }
    }
}

/// A follower's fetch of one partition, as its request says.
#[derive(Debug, Clone, Copy)]
pub struct FollowerFetch {
    pub replica_id: NodeId,
    pub current_leader_epoch: LeaderEpoch,
    pub fetch_offset: Offset,
}

/// An ISR change a leader asks the controller for.
#[derive(Debug, Clone)]
pub struct IsrChange {
    pub tp: TopicPartition,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
    pub new_isr: Vec<NodeId>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct ReplicaCounts {
    pub led: usize,
    pub followed: usize,
    pub under_replicated: usize,
}

fn refusal_code(refusal: FetchRefusal) -> ResponseError {
    match refusal {
        FetchRefusal::NotAReplica => ResponseError::NotLeaderOrFollower,
        FetchRefusal::FencedLeaderEpoch => ResponseError::FencedLeaderEpoch,
        FetchRefusal::UnknownLeaderEpoch => ResponseError::UnknownLeaderEpoch,
    }
}
