//! The groups and committed offsets one shard coordinates: the groups whose
//! `__consumer_offsets` partition this shard owns. Every method is synchronous and runs on that
//! shard, so group state needs no lock; writing records is [`super::store`]'s job.

use laminar_model::{LeaderEpoch, Offset};
use std::cell::{Cell, RefCell};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use kafka_protocol::error::ResponseError;
use laminar_engine::partition::TxnResult;

use super::consumer::{ConsumerGroup, ConsumerGroupSettings};
use super::records::ReplayedBatch;
use super::records::{GroupRecord, GroupValue, MemberRecord, OffsetKey, OffsetValue};
use super::state::{Group, GroupSettings, GroupState};

#[path = "coordinator_consumer.rs"]
mod consumer;
use super::transactions::{PendingOffset, PendingTxnOffsets};

/// Committed offsets of one group, by (topic, partition).
pub type GroupOffsets = BTreeMap<(String, i32), OffsetValue>;

/// A committed offset and the log position of the batch that wrote it: a value replaces
/// another only if the log holds it later (see [`super::transactions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct CommittedOffset {
    value: OffsetValue,
    position: Offset,
}

/// Committed offsets of one group with their positions, by (topic, partition).
type PositionedOffsets = BTreeMap<(String, i32), CommittedOffset>;

/// Batches appended to `__consumer_offsets` and not yet applied, by (partition, base offset):
/// the load of the partition they were appended in, and their records once committed (`None`
/// while they wait).
type Committing = BTreeMap<(i32, Offset), (u64, Option<Vec<GroupRecord>>)>;

/// A batch waiting in [`GroupCoordinator`]'s commit order: where it is, and in which load of its
/// partition it was appended (a settle from an earlier load is stale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitTicket {
    partition: i32,
    base_offset: Offset,
    load: u64,
}

/// A transactional batch whose offsets are pending while it becomes committed: where it is,
/// whose it is, and in which load of its partition it was appended. Held by the request that
/// appended it, on the coordinator shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnBatchTicket {
    partition: i32,
    producer_id: i64,
    base_offset: Offset,
    load: u64,
}

/// Owned by one shard; not Send.
pub struct GroupCoordinator {
    pub settings: GroupSettings,
    /// Partitions of `__consumer_offsets`, fixed at start (a group's home must not move).
    pub offsets_partition_count: i32,
    groups: RefCell<HashMap<String, Group>>,
    /// Consumer groups (KIP-848's protocol), by id: an id names a classic or a consumer group,
    /// never both. At most `consumer_groups_max` of them.
    consumer_groups: RefCell<HashMap<String, ConsumerGroup>>,
    /// How consumer groups run (`group.consumer.*`).
    pub consumer_settings: ConsumerGroupSettings,
    /// This shard's share of `laminar.group.consumer.groups.max`.
    consumer_groups_max: usize,
    offsets: RefCell<HashMap<String, PositionedOffsets>>,
    /// Offsets written by transactions still open, bounded as [`super::transactions`] says.
    pending: RefCell<PendingTxnOffsets>,
    /// Set once this shard has replayed its `__consumer_offsets` partitions (single node), or
    /// is ready to load them as it comes to lead them (cluster mode).
    loaded: Cell<bool>,
    /// Cluster mode: the `__consumer_offsets` partitions this shard coordinates because this
    /// broker leads them, with the leader epoch their groups were loaded at. Bounded by the
    /// partition count.
    coordinated: RefCell<HashMap<i32, Coordinated>>,
    /// Records appended to `__consumer_offsets` that apply once committed (durable, and
    /// replicated in a cluster), by (partition, base offset of their batch): `None` while
    /// waiting. Commits become durable together (group commit) and their waiters wake in any
    /// order, so they apply from here in log order, as a replay would. One entry per commit in
    /// flight: bounded by the connections times the answers each may owe.
    committing: RefCell<Committing>,
    /// Counts the unloads of partitions: a batch appended before one never settles a batch
    /// appended after it at the same offset (a leader that lost the partition, truncated and
    /// led it again).
    loads: Cell<u64>,
    /// Wakes the timer task when a deadline may have moved.
    pub(super) changed: event_listener::Event,
    clock_origin: Instant,
}

/// A `__consumer_offsets` partition this broker leads, as its coordinator sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Coordinated {
    leader_epoch: LeaderEpoch,
    loaded: bool,
}

/// Whether a led `__consumer_offsets` partition's groups can be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coordination {
    Ready,
    /// Its records are being replayed (COORDINATOR_LOAD_IN_PROGRESS).
    Loading,
    /// Not loaded at this leader epoch: a load is due.
    NeedsLoad,
}

/// A summary for ListGroups.
#[derive(Debug, Clone)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    /// Kafka's name of the group's state (`Stable`, `Empty`, ...).
    pub state: &'static str,
    /// `classic` or `consumer` (KIP-848).
    pub group_type: &'static str,
}

impl GroupCoordinator {
    pub fn new(settings: GroupSettings, offsets_partition_count: i32) -> Self {
        assert!(offsets_partition_count > 0, "__consumer_offsets has partitions");
        GroupCoordinator {
            settings,
            offsets_partition_count,
            groups: RefCell::default(),
            consumer_groups: RefCell::default(),
            consumer_settings: ConsumerGroupSettings::default(),
            consumer_groups_max: ConsumerGroupSettings::default().groups_max,
            offsets: RefCell::default(),
            pending: RefCell::default(),
            loaded: Cell::new(false),
            coordinated: RefCell::default(),
            committing: RefCell::default(),
            loads: Cell::new(0),
            changed: event_listener::Event::new(),
            clock_origin: Instant::now(),
        }
    }

    /// Runs consumer groups as `settings` say, this shard coordinating its share (one of
    /// `shards`) of the broker's groups.
    pub fn with_consumer_settings(mut self, settings: ConsumerGroupSettings, shards: usize) -> Self {
        self.consumer_groups_max = settings.groups_max.div_ceil(shards.max(1));
        self.consumer_settings = settings;
        self
    }

    /// Monotonic milliseconds for group deadlines.
    pub fn now_ms(&self) -> i64 {
        self.clock_origin.elapsed().as_millis() as i64
    }

    pub fn is_loaded(&self) -> bool {
        self.loaded.get()
    }

    pub(super) fn set_loaded(&self) {
        self.loaded.set(true);
    }

    /// Cluster mode: where the groups of `partition`, led at `leader_epoch`, stand.
    pub fn coordination(&self, partition: i32, leader_epoch: LeaderEpoch) -> Coordination {
        match self.coordinated.borrow().get(&partition) {
            Some(c) if c.leader_epoch == leader_epoch && c.loaded => Coordination::Ready,
            Some(c) if c.leader_epoch == leader_epoch => Coordination::Loading,
            _ => Coordination::NeedsLoad,
        }
    }

    /// A load of `partition` at `leader_epoch` starts: what was known of its groups goes (the
    /// log, as this leader has it, is the truth).
    pub fn begin_load(&self, partition: i32, leader_epoch: LeaderEpoch) {
        self.unload(partition);
        let state = Coordinated {
            leader_epoch,
            loaded: false,
        };
        self.coordinated.borrow_mut().insert(partition, state);
    }

    /// The load of `partition` at `leader_epoch` ended (`ok`: its groups are served; else the
    /// next request starts another).
    pub fn end_load(&self, partition: i32, leader_epoch: LeaderEpoch, ok: bool) {
        let mut coordinated = self.coordinated.borrow_mut();
        match coordinated.get_mut(&partition) {
            Some(c) if c.leader_epoch == leader_epoch && ok => c.loaded = true,
            Some(c) if c.leader_epoch == leader_epoch => {
                coordinated.remove(&partition);
            }
            _ => {}
        }
    }

    /// This broker no longer leads `partition`: its groups go with the leadership.
    pub fn stop_coordinating(&self, partition: i32) {
        if self.coordinated.borrow_mut().remove(&partition).is_some() {
            self.unload(partition);
        }
    }

    /// The partitions coordinated now (cluster mode).
    pub fn coordinated_partitions(&self) -> Vec<i32> {
        self.coordinated.borrow().keys().copied().collect()
    }

    /// Forgets the groups and offsets whose home is `partition`.
    fn unload(&self, partition: i32) {
        let count = self.offsets_partition_count;
        let elsewhere = |group_id: &str| super::partition_for(group_id, count) != partition;
        self.groups.borrow_mut().retain(|id, _| elsewhere(id));
        self.consumer_groups.borrow_mut().retain(|id, _| elsewhere(id));
        self.offsets.borrow_mut().retain(|id, _| elsewhere(id));
        self.pending.borrow_mut().unload(partition);
        self.committing.borrow_mut().retain(|(p, _), _| *p != partition);
        self.loads.set(self.loads.get() + 1);
        self.changed.notify(usize::MAX);
    }

    /// Records were appended to `partition` in a batch at `base_offset`: they apply, in log
    /// order, once [`Self::settle`] says they are committed.
    pub fn await_commit(&self, partition: i32, base_offset: Offset) -> CommitTicket {
        let load = self.loads.get();
        let earlier = self
            .committing
            .borrow_mut()
            .insert((partition, base_offset), (load, None));
        assert!(
            earlier.is_none(),
            "two batches at offset {base_offset} of partition {partition}"
        );
        CommitTicket {
            partition,
            base_offset,
            load,
        }
    }

    /// The batch of `ticket` is committed (`Some`: its records) or will never be (`None`).
    /// Applies every settled batch that no earlier one still waits for. A batch the partition's
    /// unload forgot is not applied: its groups went with the leadership.
    pub fn settle(&self, ticket: CommitTicket, records: Option<Vec<GroupRecord>>) {
        let CommitTicket {
            partition,
            base_offset,
            load,
        } = ticket;
        let ready = {
            let mut committing = self.committing.borrow_mut();
            let Some(entry) = committing.get_mut(&(partition, base_offset)) else {
                return;
            };
            if entry.0 != load {
                return; // appended in an earlier load of the partition: stale
            }
            assert!(
                entry.1.is_none(),
                "batch {base_offset} of partition {partition} settled twice"
            );
            match records {
                Some(records) => entry.1 = Some(records),
                None => {
                    committing.remove(&(partition, base_offset));
                }
            }
            take_settled_prefix(&mut committing, partition)
        };
        for (base_offset, records) in ready {
            records.into_iter().for_each(|r| self.apply(r, base_offset));
        }
    }

    /// Runs `work` on the group, creating it (Empty) when `create` and it does not exist.
    /// Returns None for an unknown group. Afterwards the timer task re-reads the deadlines.
    pub fn with_group<R>(
        &self,
        group_id: &str,
        create: bool,
        work: impl FnOnce(&mut Group) -> R,
    ) -> Option<R> {
        let mut groups = self.groups.borrow_mut();
        if create && !groups.contains_key(group_id) {
            groups.insert(
                group_id.to_string(),
                Group::new(group_id.to_string(), self.settings),
            );
        }
        let result = groups.get_mut(group_id).map(work);
        self.changed.notify(usize::MAX);
        result
    }

    pub fn group_exists(&self, group_id: &str) -> bool {
        self.groups.borrow().contains_key(group_id)
    }

    /// Applies passed deadlines to every group; returns the groups whose record should be
    /// rewritten.
    pub fn tick_all(&self, now_ms: i64) -> Vec<String> {
        let mut groups = self.groups.borrow_mut();
        let mut changed = Vec::new();
        for group in groups.values_mut() {
            if group.next_deadline_ms().is_some_and(|t| t <= now_ms) {
                group.tick(now_ms);
            }
            if group.take_persist_wanted() {
                changed.push(group.id.clone());
            }
        }
        changed
    }

    pub fn next_deadline_ms(&self) -> Option<i64> {
        let classic = self
            .groups
            .borrow()
            .values()
            .filter_map(Group::next_deadline_ms)
            .min();
        let consumer = self.next_consumer_deadline_ms();
        classic.into_iter().chain(consumer).min()
    }

    /// The record that stores `group_id`'s current metadata, if it changed since last asked.
    pub fn take_group_record(&self, group_id: &str) -> Option<GroupRecord> {
        let mut groups = self.groups.borrow_mut();
        let group = groups.get_mut(group_id)?;
        if !group.take_persist_wanted() {
            return None;
        }
        Some(group_record(group, crate::clock::now_ms()))
    }

    /// OffsetCommit's membership check. A commit with generation -1 and no member id is a
    /// "simple" commit, allowed while the group has no members.
    pub fn check_commit(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), ResponseError> {
        let now_ms = self.now_ms();
        let simple = generation_id < 0;
        let checked = self.with_group(group_id, simple, |group| {
            if simple && group.state == GroupState::Empty {
                return Ok(());
            }
            group.check_member(member_id, instance_id, generation_id)?;
            match group.state {
                GroupState::CompletingRebalance => Err(ResponseError::RebalanceInProgress),
                GroupState::Dead => Err(ResponseError::CoordinatorNotAvailable),
                _ => {
                    if let Some(member) = group.members.iter_mut().find(|m| m.member_id == member_id) {
                        member.heartbeat(now_ms);
                    }
                    Ok(())
                }
            }
        });
        checked.unwrap_or(Err(ResponseError::IllegalGeneration))
    }

    /// TxnOffsetCommit's membership check ([`Group::check_txn_member`]). A group that does not
    /// exist yet is created (Empty): a producer may commit for a group before any member joins.
    pub fn check_txn_commit(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), ResponseError> {
        let checked = self.with_group(group_id, true, |group| {
            group.check_txn_member(member_id, instance_id, generation_id)
        });
        checked.unwrap_or(Err(ResponseError::CoordinatorNotAvailable))
    }

    pub fn committed(&self, group_id: &str) -> GroupOffsets {
        let offsets = self.offsets.borrow();
        let committed = offsets.get(group_id).into_iter().flatten();
        committed
            .map(|(slot, c)| (slot.clone(), c.value.clone()))
            .collect()
    }

    /// Applies one record of the batch at `position`, written now or replayed at start, to the
    /// in-memory state.
    pub fn apply(&self, record: GroupRecord, position: Offset) {
        match record {
            GroupRecord::Offset(key, Some(value)) => self.put_offset(key, value, position),
            GroupRecord::Offset(key, None) => {
                let slot = (key.topic, key.partition);
                if let Some(committed) = self.offsets.borrow_mut().get_mut(&key.group) {
                    if committed.get(&slot).is_some_and(|c| c.position <= position) {
                        committed.remove(&slot);
                    }
                }
                self.pending
                    .borrow_mut()
                    .drop_deleted(&key.group, Some(&slot), position);
            }
            GroupRecord::Consumer(record) => self.replay_consumer_record(record),
            GroupRecord::Group(group_id, Some(value)) => {
                // The group became a classic group again.
                self.consumer_groups.borrow_mut().remove(&group_id);
                let mut groups = self.groups.borrow_mut();
                // Only replay restores from a record; a live group is its own truth.
                let live = groups.get(&group_id).is_some_and(|g| !g.is_empty());
                if !live {
                    let protocol_type = (!value.protocol_type.is_empty()).then_some(value.protocol_type);
                    groups.insert(
                        group_id.clone(),
                        Group::restored(group_id, self.settings, value.generation_id, protocol_type),
                    );
                }
            }
            GroupRecord::Group(group_id, None) => {
                self.groups.borrow_mut().remove(&group_id);
                let mut offsets = self.offsets.borrow_mut();
                if let Some(committed) = offsets.get_mut(&group_id) {
                    // A transaction's offset applied before this tombstone but written after it
                    // stays.
                    committed.retain(|_, c| c.position > position);
                    if committed.is_empty() {
                        offsets.remove(&group_id);
                    }
                }
                self.pending.borrow_mut().drop_deleted(&group_id, None, position);
            }
        }
    }

    /// Commits `value` for `key` as written at `position`, unless the log holds a later value.
    fn put_offset(&self, key: OffsetKey, value: OffsetValue, position: Offset) {
        let OffsetKey {
            group,
            topic,
            partition,
        } = key;
        if !self.group_exists(&group) && !self.consumer_groups.borrow().contains_key(&group) {
            self.groups
                .borrow_mut()
                .insert(group.clone(), Group::new(group.clone(), self.settings));
        }
        let mut offsets = self.offsets.borrow_mut();
        let committed = CommittedOffset { value, position };
        match offsets.entry(group).or_default().entry((topic, partition)) {
            Entry::Vacant(slot) => {
                slot.insert(committed);
            }
            Entry::Occupied(mut slot) if slot.get().position <= position => {
                slot.insert(committed);
            }
            Entry::Occupied(_) => {}
        }
    }

    /// Applies one batch read by a replay of `partition`, at `position`: a transaction's
    /// offsets stay pending until its marker is read.
    pub fn replay(&self, partition: i32, position: Offset, batch: ReplayedBatch) {
        match batch {
            ReplayedBatch::Plain(records) => records.into_iter().for_each(|r| self.apply(r, position)),
            ReplayedBatch::Transactional { producer_id, records } => {
                for record in records {
                    match record {
                        GroupRecord::Offset(key, Some(value)) => {
                            let offset = PendingOffset { value, position };
                            self.pending
                                .borrow_mut()
                                .insert(partition, producer_id, key, offset);
                        }
                        GroupRecord::Offset(key, None) => self.pending.borrow_mut().remove(producer_id, &key),
                        group => self.apply(group, position),
                    }
                }
            }
            ReplayedBatch::Marker { producer_id, result } => {
                self.complete_transaction(partition, producer_id, result)
            }
        }
    }

    /// Whether `producer_id` may keep offsets of `slots` pending in `group` (the bounds of
    /// [`super::transactions`]).
    pub fn has_txn_room<'a>(
        &self,
        group: &str,
        producer_id: i64,
        slots: impl IntoIterator<Item = &'a (String, i32)>,
    ) -> bool {
        self.pending.borrow().has_room(group, producer_id, slots)
    }

    /// `producer_id`'s transactional batch at `base_offset` of `partition` holds `offsets`:
    /// they are pending from now on, until the producer's marker (or
    /// [`Self::abandon_txn_batch`] if the batch never becomes committed).
    pub fn add_txn_batch(
        &self,
        partition: i32,
        producer_id: i64,
        base_offset: Offset,
        offsets: Vec<(OffsetKey, OffsetValue)>,
    ) -> TxnBatchTicket {
        let mut pending = self.pending.borrow_mut();
        for (key, value) in offsets {
            let offset = PendingOffset {
                value,
                position: base_offset,
            };
            pending.insert(partition, producer_id, key, offset);
        }
        TxnBatchTicket {
            partition,
            producer_id,
            base_offset,
            load: self.loads.get(),
        }
    }

    /// The batch of `ticket` will never be committed: its offsets are no longer pending. A
    /// batch of an earlier load of its partition is already forgotten.
    pub fn abandon_txn_batch(&self, ticket: TxnBatchTicket) {
        if ticket.load == self.loads.get() {
            let TxnBatchTicket {
                partition,
                producer_id,
                base_offset,
                ..
            } = ticket;
            self.pending
                .borrow_mut()
                .drop_batch(partition, producer_id, base_offset);
        }
    }

    /// `producer_id`'s transaction ended in `partition` with `result`: its pending offsets
    /// apply (each where its batch lies in the log) or go.
    pub fn complete_transaction(&self, partition: i32, producer_id: i64, result: TxnResult) {
        let ended = self.pending.borrow_mut().take(partition, producer_id);
        if result == TxnResult::Commit {
            for (key, offset) in ended {
                self.put_offset(key, offset.value, offset.position);
            }
        }
    }

    /// The (topic, partition) of `group_id` that open transactions wrote offsets of
    /// (OffsetFetch's UNSTABLE_OFFSET_COMMIT when it asks for stable offsets).
    pub fn pending_txn_slots(&self, group_id: &str) -> BTreeSet<(String, i32)> {
        self.pending.borrow().slots(group_id)
    }

    pub fn list(&self) -> Vec<ListedGroup> {
        let mut listed: Vec<ListedGroup> = self
            .groups
            .borrow()
            .values()
            .map(|g| ListedGroup {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state.name(),
                group_type: "classic",
            })
            .collect();
        listed.extend(
            self.list_consumer_groups()
                .into_iter()
                .map(|(group_id, state)| ListedGroup {
                    group_id,
                    protocol_type: "consumer".to_string(),
                    state,
                    group_type: "consumer",
                }),
        );
        listed
    }
}

/// The group metadata record for the group as it is now.
pub fn group_record(group: &Group, now_ms: i64) -> GroupRecord {
    let protocol = group.protocol_name.clone().unwrap_or_default();
    let members = group
        .members
        .iter()
        .map(|m| MemberRecord {
            member_id: m.member_id.clone(),
            group_instance_id: m.group_instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            session_timeout_ms: m.session_timeout_ms,
            subscription: m.metadata_for(&protocol),
            assignment: m.assignment.clone(),
        })
        .collect();
    GroupRecord::Group(
        group.id.clone(),
        Some(GroupValue {
            protocol_type: group.protocol_type.clone().unwrap_or_default(),
            generation_id: group.generation_id,
            protocol_name: group.protocol_name.clone(),
            leader_id: group.leader_id.clone(),
            state_timestamp_ms: now_ms,
            members,
        }),
    )
}

/// Takes the settled batches of `partition` from the front of `committing`, up to the first
/// that still waits.
fn take_settled_prefix(committing: &mut Committing, partition: i32) -> Vec<(Offset, Vec<GroupRecord>)> {
    let mut ready = Vec::new();
    loop {
        let first = committing
            .range((partition, Offset::new(i64::MIN))..=(partition, Offset::new(i64::MAX)))
            .next()
            .map(|(key, (_, records))| (*key, records.is_some()));
        match first {
            Some((key, true)) => {
                let records = committing.remove(&key).and_then(|(_, records)| records);
                ready.extend(records.map(|records| (key.1, records)));
            }
            _ => return ready,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::records::OffsetKey;

    fn coordinator() -> GroupCoordinator {
        let settings = GroupSettings {
            initial_rebalance_delay_ms: 0,
        };
        GroupCoordinator::new(settings, 1)
    }

    fn commit(offset: i64) -> Vec<GroupRecord> {
        let key = OffsetKey {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        };
        let value = OffsetValue {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 0,
        };
        vec![GroupRecord::Offset(key, Some(value))]
    }

    fn committed_offset(coordinator: &GroupCoordinator) -> Option<i64> {
        let committed = coordinator.committed("g");
        committed.get(&("t".to_string(), 0)).map(|v| v.offset)
    }

    #[test]
    fn commits_settled_out_of_log_order_apply_in_log_order() {
        let coordinator = coordinator();
        let [first, second, third] =
            [10, 11, 12].map(|base_offset| coordinator.await_commit(0, Offset::new(base_offset)));
        coordinator.settle(third, Some(commit(3)));
        coordinator.settle(second, Some(commit(2)));
        assert_eq!(committed_offset(&coordinator), None, "batch 10 still waits");
        coordinator.settle(first, Some(commit(1)));
        assert_eq!(
            committed_offset(&coordinator),
            Some(3),
            "the last in the log wins"
        );
    }

    #[test]
    fn a_batch_that_never_commits_is_skipped_and_an_unloaded_one_never_applies() {
        let coordinator = coordinator();
        let (failed, kept) = (
            coordinator.await_commit(0, Offset::new(10)),
            coordinator.await_commit(0, Offset::new(11)),
        );
        coordinator.settle(kept, Some(commit(2)));
        coordinator.settle(failed, None);
        assert_eq!(committed_offset(&coordinator), Some(2));
        let forgotten = coordinator.await_commit(0, Offset::new(12));
        coordinator.begin_load(0, LeaderEpoch::new(1));
        coordinator.settle(forgotten, Some(commit(3)));
        assert_eq!(
            committed_offset(&coordinator),
            None,
            "the load forgot the group and its batch"
        );
        // Led again from a truncated log: a new batch at the same offset is not the forgotten
        // one, whose late settle changes nothing.
        let appended_again = coordinator.await_commit(0, Offset::new(12));
        coordinator.settle(forgotten, None);
        coordinator.settle(appended_again, Some(commit(4)));
        assert_eq!(committed_offset(&coordinator), Some(4));
    }
}
