//! WriteTxnMarkers (API 27): a transaction coordinator on another broker asks this one, the
//! leader of the named partitions, to end a producer's transaction there with a COMMIT or
//! ABORT marker. Brokers only: the ACL layer asks for ClusterAction on the cluster.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use laminar_engine::partition::TxnResult;

use crate::broker::{BrokerCtx, TopicPartition};
use crate::transactions::markers::{write_on_owner, Marker};

/// Every partition of `request` answered `error`.
pub fn refused_whole(request: &WriteTxnMarkersRequest, error: ResponseError) -> WriteTxnMarkersResponse {
    let markers = request.markers.iter().map(|m| {
        let topics = m.topics.iter().map(|t| {
            let partitions = t.partition_indexes.iter().map(|p| {
                WritableTxnMarkerPartitionResult::default()
                    .with_partition_index(*p)
                    .with_error_code(error.code())
            });
            WritableTxnMarkerTopicResult::default()
                .with_name(t.name.clone())
                .with_partitions(partitions.collect())
        });
        WritableTxnMarkerResult::default()
            .with_producer_id(m.producer_id)
            .with_topics(topics.collect())
    });
    WriteTxnMarkersResponse::default().with_markers(markers.collect())
}

pub async fn handle(ctx: &Rc<BrokerCtx>, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    let mut results = Vec::with_capacity(request.markers.len());
    for asked in request.markers {
        let marker = Marker {
            producer_id: asked.producer_id.0,
            producer_epoch: asked.producer_epoch,
            result: if asked.transaction_result {
                TxnResult::Commit
            } else {
                TxnResult::Abort
            },
            coordinator_epoch: asked.coordinator_epoch,
        };
        let mut topics = Vec::with_capacity(asked.topics.len());
        for topic in asked.topics {
            let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
            for partition in topic.partition_indexes {
                let tp = TopicPartition {
                    topic: topic.name.0.as_str().into(),
                    partition,
                };
                let written = write_on_owner(ctx, tp, marker).await;
                partitions.push(
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(partition)
                        .with_error_code(written.err().map_or(0, |e| e.code())),
                );
            }
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(topic.name)
                    .with_partitions(partitions),
            );
        }
        results.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(asked.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(results)
}
