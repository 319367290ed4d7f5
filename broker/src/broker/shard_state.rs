//! What each shard owns: its partitions, groups, metrics and replication, and how it opens a
//! partition for a client (as its leader) or for replication (as one of its replicas). Apart
//! from the shared state because none of it crosses threads.

use laminar_model::LeaderEpoch;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use laminar_controller::PartitionState;
use laminar_engine::partition::Partition;
use laminar_engine::shard::partitions::ShardPartitions;
use laminar_engine::shard::ShardContext;

use crate::replication::throttle::ThrottleSide;
use crate::topic_partition::{PartitionAccessError, TopicPartition};

use super::shared::BrokerShared;

/// Per-shard broker state. Owned by one shard; not Send.
pub struct BrokerShard {
    pub shared: Arc<BrokerShared>,
    pub partitions: ShardPartitions,
    pub connections_active: Cell<usize>,
    /// The consumer groups this shard coordinates.
    pub groups: crate::group::coordinator::GroupCoordinator,
    /// The transactional ids this shard coordinates.
    pub transactions: crate::transactions::TxnCoordinator,
    pub metrics: crate::metrics::shard::ShardMetrics,
    /// Cluster mode: the partitions this shard leads and follows, and its fetchers.
    pub replication: Option<crate::replication::ShardReplication>,
}

/// Whether opening a replica may create its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Create the partition if it has no files yet (a follower's first fetched batch).
    Create,
    /// Only open a partition that was written (`None` otherwise).
    IfWritten,
}

pub type BrokerCtx = ShardContext<BrokerShard>;

impl BrokerShard {
    /// The open partition `tp`, which must be owned by this shard; opened (and created) if
    /// need be.
    pub async fn partition(&self, tp: &TopicPartition) -> Result<Rc<Partition>, PartitionAccessError> {
        let led = self.led_state_of(tp)?;
        let config = || self.shared.partition_spec_named(&tp.topic);
        let partition = self
            .partitions
            .get_or_open(&tp.topic, tp.partition, config)
            .await?;
        self.under_replication(tp, &partition, led.as_ref());
        let epoch = led.map_or(LeaderEpoch::FIRST, |state| state.leader_epoch);
        // Batches carry the epoch Metadata advertises for this leader (KIP-101): the quorum's
        // in a cluster, 0 on a single node (which never changes it).
        if partition.leader_epoch() != epoch {
            partition.set_leader_epoch(epoch);
        }
        Ok(partition)
    }

    /// The partition `tp` for a read: `None` when it exists but was never written, so that
    /// reads do not create its files (`ShardPartitions::get_or_open_written`).
    pub async fn partition_to_read(
        &self,
        tp: &TopicPartition,
    ) -> Result<Option<Rc<Partition>>, PartitionAccessError> {
        let led = self.led_state_of(tp)?;
        let config = || self.shared.partition_spec_named(&tp.topic);
        let partition = self
            .partitions
            .get_or_open_written(&tp.topic, tp.partition, config)
            .await?;
        if let Some(partition) = &partition {
            self.under_replication(tp, partition, led.as_ref());
        }
        Ok(partition)
    }

    /// Whether `side`'s replication throttle applies to `tp` on this broker (a rate is set and
    /// the topic lists the replica).
    pub fn replication_throttled(&self, side: ThrottleSide, tp: &TopicPartition) -> bool {
        let Some(replication) = &self.replication else {
            return false;
        };
        replication.throttle(side).is_limited()
            && self
                .shared
                .replica_throttled(side.replicas_key(), &tp.topic, tp.partition)
    }

    /// `tp` as one of its replicas, whoever leads it: for the follower's fetcher and the
    /// leader-election paths. Cluster mode only (NOT_LEADER_OR_FOLLOWER otherwise, and when this
    /// broker is no replica of it).
    pub async fn replica_partition(
        &self,
        tp: &TopicPartition,
        mode: OpenMode,
    ) -> Result<Option<Rc<Partition>>, PartitionAccessError> {
        let link = self
            .shared
            .cluster
            .as_ref()
            .ok_or(PartitionAccessError::NotLeader)?;
        let table = self.shared.metadata.current();
        let topic = table
            .get(&tp.topic)
            .ok_or(PartitionAccessError::UnknownTopicOrPartition)?
            .clone();
        let image = link.image();
        let state = image
            .metadata
            .partition_by_name(&tp.topic, tp.partition)
            .ok_or(PartitionAccessError::UnknownTopicOrPartition)?;
        if !state.replicas.contains(&link.node_id) {
            return Err(PartitionAccessError::NotLeader);
        }
        let config = || self.shared.partition_spec(&topic);
        let partition = match mode {
            OpenMode::Create => Some(
                self.partitions
                    .get_or_open(&tp.topic, tp.partition, config)
                    .await?,
            ),
            OpenMode::IfWritten => {
                self.partitions
                    .get_or_open_written(&tp.topic, tp.partition, config)
                    .await?
            }
        };
        if let Some(partition) = &partition {
            self.under_replication(tp, partition, None);
        }
        Ok(partition)
    }

    /// In cluster mode a partition's high watermark comes from replication, from its first
    /// open; and a leader's state exists from its first use as leader (`led`), even if the
    /// shard's replication task has not taken the new metadata up yet.
    fn under_replication(
        &self,
        tp: &TopicPartition,
        partition: &Rc<Partition>,
        led: Option<&PartitionState>,
    ) {
        if let Some(replication) = &self.replication {
            replication.on_open(tp, partition);
            if let Some(state) = led {
                replication.ensure_leading(tp, state, partition);
            }
        }
    }

    /// The leader epoch this broker leads `tp` at: the quorum's in a cluster, 0 on a single
    /// node (as Metadata answers). Call after `partition_to_read` accepted `tp`.
    pub fn leader_epoch_of(&self, tp: &TopicPartition) -> LeaderEpoch {
        let Some(link) = &self.shared.cluster else {
            return LeaderEpoch::FIRST;
        };
        let image = link.image();
        image
            .metadata
            .partition_by_name(&tp.topic, tp.partition)
            .map_or(LeaderEpoch::FIRST, |s| s.leader_epoch)
    }

    /// Whether `tp` exists in the topic table (in a cluster, also whether this broker leads
    /// it: NOT_LEADER_OR_FOLLOWER otherwise), and in a cluster the state of the partition.
    fn led_state_of(&self, tp: &TopicPartition) -> Result<Option<PartitionState>, PartitionAccessError> {
        let exists = self.shared.metadata.with_current(|table| {
            table
                .get(&tp.topic)
                .is_some_and(|topic| (0..topic.partition_count).contains(&tp.partition))
        });
        if !exists {
            return Err(PartitionAccessError::UnknownTopicOrPartition);
        }
        let Some(link) = &self.shared.cluster else {
            return Ok(None);
        };
        // Clients are served by the leader only; followers reach their replicas through
        // `replica_partition`.
        let image = link.image();
        match image.metadata.partition_by_name(&tp.topic, tp.partition) {
            None => Err(PartitionAccessError::UnknownTopicOrPartition),
            Some(state) if state.leader != link.node_id => Err(PartitionAccessError::NotLeader),
            // A leader whose session lapsed may have been replaced already (`SessionLease`).
            Some(_) if !link.session.is_held() => Err(PartitionAccessError::NotLeader),
            Some(state) => Ok(Some(state.clone())),
        }
    }
}
