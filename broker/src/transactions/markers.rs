//! COMMIT / ABORT markers: the second phase of a transaction. The coordinator writes one
//! marker to every partition of the transaction, on the broker that leads it: through that
//! partition's shard here, or with WriteTxnMarkers (API 27) to another broker in a cluster.
//! A marker on a `__consumer_offsets` partition also settles the producer's transactional
//! offsets there (`group::complete_transaction`).

use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersRequest};
use kafka_protocol::protocol::StrBytes;
use laminar_engine::partition::TxnResult;
use laminar_model::{LeaderEpoch, NodeId};

use super::records::TxnValue;
use crate::broker::{BrokerCtx, PartitionAccessError, TopicPartition};
use crate::clock::now_ms;
use crate::committed_append::append_committed;
use crate::group::OFFSETS_TOPIC;

/// How long one marker waits for the in-sync replicas before it is tried again.
const MARKER_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between rounds of markers that could not be written yet.
const RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// One marker: producer `(id, epoch)` ends its transaction with `result`; the coordinator's
/// epoch is its `__transaction_state` partition's leader epoch.
#[derive(Debug, Clone, Copy)]
pub struct Marker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub result: TxnResult,
    pub coordinator_epoch: i32,
}

/// Writes the markers of the prepared transaction `prepared` to all its partitions, retrying
/// those that fail (a leader moving, a replica slow) until every one is written, a partition
/// no longer exists, or this shard stops coordinating `(partition, epoch)` — then false.
pub async fn write_all(
    ctx: &Rc<BrokerCtx>,
    (partition, epoch): (i32, LeaderEpoch),
    prepared: &TxnValue,
    result: TxnResult,
) -> bool {
    let marker = Marker {
        producer_id: prepared.producer_id,
        producer_epoch: prepared.producer_epoch,
        result,
        coordinator_epoch: epoch.get(),
    };
    let mut left: Vec<TopicPartition> = prepared
        .partitions
        .iter()
        .flat_map(|(topic, ids)| {
            ids.iter().map(|&p| TopicPartition {
                topic: topic.as_str().into(),
                partition: p,
            })
        })
        .collect();
    loop {
        let mut failed = Vec::new();
        for (leader, tps) in by_leader(ctx, left) {
            let outcomes = match leader {
                Some(node) if !is_this_broker(ctx, node) => write_remote(ctx, node, marker, &tps).await,
                _ => write_here(ctx, marker, &tps).await,
            };
            failed.extend(
                tps.into_iter()
                    .zip(outcomes)
                    .filter_map(|(tp, ok)| (!ok).then_some(tp)),
            );
        }
        if failed.is_empty() {
            return true;
        }
        if ctx.state.transactions.ready_epoch(partition) != Some(epoch) {
            return false;
        }
        tracing::debug!(left = failed.len(), "transaction markers to retry");
        left = failed;
        glommio::timer::sleep(RETRY_BACKOFF).await;
    }
}

fn is_this_broker(ctx: &BrokerCtx, node: NodeId) -> bool {
    ctx.state
        .shared
        .cluster
        .as_ref()
        .is_some_and(|link| link.node_id == node)
}

/// The partitions grouped by their leader now (`None`: single node, or no leader known).
fn by_leader(ctx: &BrokerCtx, tps: Vec<TopicPartition>) -> Vec<(Option<NodeId>, Vec<TopicPartition>)> {
    let image = ctx.state.shared.cluster.as_ref().map(|link| link.image());
    let mut groups: Vec<(Option<NodeId>, Vec<TopicPartition>)> = Vec::new();
    for tp in tps {
        let leader = image.as_ref().and_then(|i| {
            i.metadata
                .partition_by_name(&tp.topic, tp.partition)
                .map(|s| s.leader)
        });
        match groups.iter_mut().find(|(l, _)| *l == leader) {
            Some((_, list)) => list.push(tp),
            None => groups.push((leader, vec![tp])),
        }
    }
    groups
}

/// Writes `marker` to each partition of `tps` this broker leads; true for each written (or
/// whose topic is gone: nothing is left to end there).
async fn write_here(ctx: &Rc<BrokerCtx>, marker: Marker, tps: &[TopicPartition]) -> Vec<bool> {
    let mut outcomes = Vec::with_capacity(tps.len());
    for tp in tps {
        let written = write_on_owner(ctx, tp.clone(), marker).await;
        outcomes.push(match written {
            Ok(()) | Err(ResponseError::UnknownTopicOrPartition) => true,
            Err(error) => {
                tracing::debug!(
                    topic = &*tp.topic,
                    partition = tp.partition,
                    ?error,
                    "marker not written yet"
                );
                false
            }
        });
    }
    outcomes
}

/// Writes `marker` to `tp` on the shard that owns it, as its leader; then settles the
/// producer's transactional offsets if `tp` is a `__consumer_offsets` partition. Also what
/// WriteTxnMarkers does for each partition it names.
pub async fn write_on_owner(
    ctx: &Rc<BrokerCtx>,
    tp: TopicPartition,
    marker: Marker,
) -> Result<(), ResponseError> {
    // Names from another broker's request: only a partition the topic table has is routed.
    let table = ctx.state.shared.metadata.current();
    let count = table.get(&tp.topic).map_or(0, |t| t.partition_count);
    if !(0..count).contains(&tp.partition) {
        return Err(ResponseError::UnknownTopicOrPartition);
    }
    let shard = laminar_engine::shard::shard_of_partition(&tp.topic, tp.partition, ctx.shard_count());
    let done = ctx
        .submit_to(shard, move |there| async move {
            let now = now_ms();
            let append = |log: Rc<laminar_engine::partition::Partition>| async move {
                log.append_txn_marker(
                    marker.producer_id,
                    marker.producer_epoch,
                    marker.result,
                    marker.coordinator_epoch,
                    now,
                )
                .await
            };
            append_committed(&there, &tp, append, MARKER_TIMEOUT)
                .await
                .map_err(marker_error)?;
            if &*tp.topic == OFFSETS_TOPIC {
                crate::group::complete_transaction(&there, tp.partition, marker.producer_id, marker.result)
                    .await;
            }
            Ok(())
        })
        .await;
    done.unwrap_or(Err(ResponseError::NotLeaderOrFollower))
}

fn marker_error(error: PartitionAccessError) -> ResponseError {
    let code = crate::errors::partition_error_code(&error);
    ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError)
}

/// Sends `marker` for `tps` to broker `node` with WriteTxnMarkers; true for each partition it
/// wrote.
async fn write_remote(
    ctx: &Rc<BrokerCtx>,
    node: NodeId,
    marker: Marker,
    tps: &[TopicPartition],
) -> Vec<bool> {
    let request = marker_request(marker, tps);
    let Some(response) = crate::peer_request::call(
        ctx,
        node,
        (request, None),
        MARKER_TIMEOUT + Duration::from_secs(5),
    )
    .await
    else {
        return vec![false; tps.len()];
    };
    tps.iter()
        .map(|tp| {
            let answered = response
                .markers
                .iter()
                .flat_map(|m| &m.topics)
                .find(|t| t.name.0.as_str() == &*tp.topic);
            let code = answered
                .and_then(|t| t.partitions.iter().find(|p| p.partition_index == tp.partition))
                .map(|p| p.error_code);
            code == Some(0) || code == Some(ResponseError::UnknownTopicOrPartition.code())
        })
        .collect()
}

fn marker_request(marker: Marker, tps: &[TopicPartition]) -> WriteTxnMarkersRequest {
    let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
    for tp in tps {
        let name = TopicName(StrBytes::from_string(tp.topic.to_string()));
        match topics.iter_mut().find(|t| t.name == name) {
            Some(topic) => topic.partition_indexes.push(tp.partition),
            None => topics.push(
                WritableTxnMarkerTopic::default()
                    .with_name(name)
                    .with_partition_indexes(vec![tp.partition]),
            ),
        }
    }
    let written = WritableTxnMarker::default()
        .with_producer_id(ProducerId(marker.producer_id))
        .with_producer_epoch(marker.producer_epoch)
        .with_transaction_result(marker.result == TxnResult::Commit)
        .with_topics(topics)
        .with_coordinator_epoch(marker.coordinator_epoch);
    WriteTxnMarkersRequest::default().with_markers(vec![written])
}
