//! Offsets a transaction commits (TxnOffsetCommit, KIP-98; KIP-447 adds the member check).
//!
//! The group coordinator writes them to the group's `__consumer_offsets` partition as one
//! transactional batch of the producer. They are then *pending*: not applied, not answered by
//! OffsetFetch, until the producer's transaction ends in that partition. A COMMIT marker
//! applies them, an ABORT marker drops them. The transaction coordinator calls
//! [`complete_transaction`] once it wrote a marker; a replay meets the markers in the log.
//!
//! Order: every committed offset keeps the log position of the batch that wrote it, and a value
//! replaces another only if the log holds it later. An offset a transaction wrote before a
//! plain OffsetCommit of the same partition therefore loses to it when the COMMIT marker comes,
//! and one written after it wins, whichever of the two the coordinator applies first.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use laminar_engine::partition::TxnResult;
use laminar_engine::shard::shard_of_partition;
use laminar_model::Offset;

use super::records::{OffsetKey, OffsetValue};
use super::OFFSETS_TOPIC;
use crate::broker::BrokerCtx;

/// Most pending offsets one group holds, over all its producers. A commit that would pass it
/// is refused (INVALID_COMMIT_OFFSET_SIZE; the producer aborts its transaction). An entry takes
/// about 200 bytes: 20 MB per group at most. The check is made as a commit arrives, so commits
/// of several connections in flight at once may pass it together by their own size.
pub const PENDING_OFFSETS_PER_GROUP_MAX: usize = 100_000;
/// Most pending offsets one producer holds in one group: the partitions its open transaction
/// committed offsets of.
pub const PENDING_OFFSETS_PER_PRODUCER_MAX: usize = 10_000;

/// Called by the transaction coordinator once it appended a COMMIT or ABORT marker of
/// `producer_id` to `__consumer_offsets` partition `offsets_partition`, on the shard that owns
/// that partition: applies (Commit) or drops (Abort) what that producer's transaction
/// committed for every group of the partition. Applying is idempotent: a replay that meets
/// the same marker changes nothing more.
pub async fn complete_transaction(
    ctx: &Rc<BrokerCtx>,
    offsets_partition: i32,
    producer_id: i64,
    result: TxnResult,
) {
    if shard_of_partition(OFFSETS_TOPIC, offsets_partition, ctx.shard_count()) != ctx.id() {
        tracing::warn!(
            offsets_partition,
            producer_id,
            "transaction marker reported to a shard that does not own {OFFSETS_TOPIC}"
        );
        return;
    }
    ctx.state
        .groups
        .complete_transaction(offsets_partition, producer_id, result);
}

/// An offset a transaction wrote, waiting for its marker on its group's coordinator shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingOffset {
    pub value: OffsetValue,
    /// Base offset of the batch that wrote it.
    pub position: Offset,
}

/// One group's pending offsets.
#[derive(Debug, Default)]
struct GroupPending {
    /// The group's `__consumer_offsets` partition.
    offsets_partition: i32,
    /// Producer id → (topic, partition) → offset.
    producers: BTreeMap<i64, BTreeMap<(String, i32), PendingOffset>>,
}

/// The pending offsets of the groups one shard coordinates. Owned by that shard; not Send.
#[derive(Debug, Default)]
pub struct PendingTxnOffsets {
    by_group: HashMap<String, GroupPending>,
    /// (`__consumer_offsets` partition, producer id) → the groups holding that producer's
    /// offsets there: what a marker in that partition completes.
    groups_of: HashMap<(i32, i64), BTreeSet<String>>,
}

impl PendingTxnOffsets {
    /// Whether `producer_id` may add offsets of `slots` (topic, partition) to `group` within
    /// the bounds. Slots it already holds pending cost nothing.
    pub fn has_room<'a>(
        &self,
        group: &str,
        producer_id: i64,
        slots: impl IntoIterator<Item = &'a (String, i32)>,
    ) -> bool {
        let pending = self.by_group.get(group);
        let held = pending.and_then(|g| g.producers.get(&producer_id));
        let added = slots
            .into_iter()
            .filter(|slot| !held.is_some_and(|h| h.contains_key(*slot)))
            .count();
        let of_group: usize = pending.map_or(0, |g| g.producers.values().map(BTreeMap::len).sum());
        held.map_or(0, BTreeMap::len) + added <= PENDING_OFFSETS_PER_PRODUCER_MAX
            && of_group + added <= PENDING_OFFSETS_PER_GROUP_MAX
    }

    /// Keeps `offset`, which `producer_id` wrote to `offsets_partition`, pending (unless the
    /// producer holds a later one for the same key).
    pub fn insert(
        &mut self,
        offsets_partition: i32,
        producer_id: i64,
        key: OffsetKey,
        offset: PendingOffset,
    ) {
        let OffsetKey {
            group,
            topic,
            partition,
        } = key;
        let groups = self
            .groups_of
            .entry((offsets_partition, producer_id))
            .or_default();
        if !groups.contains(&group) {
            groups.insert(group.clone());
        }
        let pending = self.by_group.entry(group).or_insert_with(|| GroupPending {
            offsets_partition,
            producers: BTreeMap::new(),
        });
        match pending
            .producers
            .entry(producer_id)
            .or_default()
            .entry((topic, partition))
        {
            Entry::Vacant(slot) => {
                slot.insert(offset);
            }
            Entry::Occupied(mut slot) if slot.get().position <= offset.position => {
                slot.insert(offset);
            }
            Entry::Occupied(_) => {}
        }
    }

    /// A tombstone a transaction wrote (none of ours does; a log may hold one): the producer's
    /// pending offset of `key` goes.
    pub fn remove(&mut self, producer_id: i64, key: &OffsetKey) {
        if let Some(pending) = self.by_group.get_mut(&key.group) {
            if let Some(held) = pending.producers.get_mut(&producer_id) {
                held.remove(&(key.topic.clone(), key.partition));
            }
        }
        self.prune(&key.group, producer_id);
    }

    /// Takes every offset `producer_id` holds pending in the groups of `offsets_partition`.
    pub fn take(&mut self, offsets_partition: i32, producer_id: i64) -> Vec<(OffsetKey, PendingOffset)> {
        let groups = self
            .groups_of
            .remove(&(offsets_partition, producer_id))
            .unwrap_or_default();
        let mut taken = Vec::new();
        for group in groups {
            let Some(pending) = self.by_group.get_mut(&group) else {
                continue;
            };
            let held = pending.producers.remove(&producer_id).unwrap_or_default();
            if pending.producers.is_empty() {
                self.by_group.remove(&group);
            }
            taken.extend(held.into_iter().map(|((topic, partition), offset)| {
                let key = OffsetKey {
                    group: group.clone(),
                    topic,
                    partition,
                };
                (key, offset)
            }));
        }
        taken
    }

    /// Drops the offsets `producer_id` wrote in its batch at `position` of `offsets_partition`:
    /// that batch never became committed.
    pub fn drop_batch(&mut self, offsets_partition: i32, producer_id: i64, position: Offset) {
        let groups = self
            .groups_of
            .get(&(offsets_partition, producer_id))
            .cloned()
            .unwrap_or_default();
        for group in groups {
            if let Some(held) = self
                .by_group
                .get_mut(&group)
                .and_then(|g| g.producers.get_mut(&producer_id))
            {
                held.retain(|_, offset| offset.position != position);
            }
            self.prune(&group, producer_id);
        }
    }

    /// A tombstone at `position` deleted `group`'s offset of `slot` (every offset of the group
    /// when `None`): the pending offsets written before it go too, else a later COMMIT marker
    /// would bring back what was deleted after them.
    pub fn drop_deleted(&mut self, group: &str, slot: Option<&(String, i32)>, position: Offset) {
        let Some(pending) = self.by_group.get_mut(group) else {
            return;
        };
        let producers: Vec<i64> = pending.producers.keys().copied().collect();
        for held in pending.producers.values_mut() {
            held.retain(|key, offset| slot.is_some_and(|s| s != key) || offset.position > position);
        }
        for producer_id in producers {
            self.prune(group, producer_id);
        }
    }

    /// Forgets the pending offsets of the groups of `offsets_partition` (unloaded).
    pub fn unload(&mut self, offsets_partition: i32) {
        self.by_group
            .retain(|_, pending| pending.offsets_partition != offsets_partition);
        self.groups_of
            .retain(|(partition, _), _| *partition != offsets_partition);
    }

    /// Whether `group` has an offset of `slot` (topic, partition) pending.
    pub fn is_pending(&self, group: &str, slot: &(String, i32)) -> bool {
        self.by_group
            .get(group)
            .is_some_and(|g| g.producers.values().any(|held| held.contains_key(slot)))
    }

    /// The (topic, partition) of which `group` has offsets pending.
    pub fn slots(&self, group: &str) -> BTreeSet<(String, i32)> {
        let producers = self
            .by_group
            .get(group)
            .into_iter()
            .flat_map(|g| g.producers.values());
        producers.flat_map(|held| held.keys().cloned()).collect()
    }

    /// How many offsets are pending, over every group (for tests and metrics).
    pub fn len(&self) -> usize {
        self.by_group
            .values()
            .flat_map(|g| g.producers.values())
            .map(BTreeMap::len)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_group.is_empty()
    }

    /// Removes the empty maps `producer_id` may have left in `group`.
    fn prune(&mut self, group: &str, producer_id: i64) {
        let Some(pending) = self.by_group.get_mut(group) else {
            return;
        };
        let offsets_partition = pending.offsets_partition;
        if pending
            .producers
            .get(&producer_id)
            .is_some_and(BTreeMap::is_empty)
        {
            pending.producers.remove(&producer_id);
        }
        if pending.producers.contains_key(&producer_id) {
            return;
        }
        if pending.producers.is_empty() {
            self.by_group.remove(group);
        }
        let key = (offsets_partition, producer_id);
        if let Some(groups) = self.groups_of.get_mut(&key) {
            groups.remove(group);
            if groups.is_empty() {
                self.groups_of.remove(&key);
            }
        }
    }
}
