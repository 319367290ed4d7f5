//! DescribeLogDirs (API 35, v1–4; kafka-protocol encodes no v0): for each log dir, every
//! topic-partition with a local replica — a directory in it, open or not — with its size in
//! bytes (its segments), `offset_lag` as Kafka defines it for the current log (high
//! watermark minus log end offset, at least 0) and `is_future_key` false (no replica moves
//! between log dirs here); v4 adds the file system's total and usable bytes. Served in
//! single-node and cluster mode alike.
//!
//! Partitions that are not open are not opened to answer: their size is the sum of their
//! `.log` files. Only the first log dir holds partitions (`server::start`); the others are
//! listed with none. A topic that is not in the topic table, or not asked for, is absent, as
//! in Kafka. The listing is bounded by the partitions a broker holds
//! (`max.broker.partitions`). Runs on the shard that read the request; sizes come from each
//! partition's owning shard.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::broker::{on_owning_shards, BrokerCtx, PartitionAccessError, TopicPartition};

/// Kafka's `UNKNOWN_VOLUME_BYTES`: the file system's size could not be read.
const UNKNOWN_VOLUME_BYTES: i64 = -1;

pub async fn handle(ctx: &Rc<BrokerCtx>, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
    let shared = &ctx.state.shared;
    let mut results = Vec::with_capacity(shared.log_dir_locks.len());
    for (index, lock) in shared.log_dir_locks.iter().enumerate() {
        let topics = if index == 0 {
            local_replicas(ctx, &request).await
        } else {
            Ok(Vec::new())
        };
        results.push(log_dir_result(lock.dir(), topics));
    }
    DescribeLogDirsResponse::default().with_results(results)
}

fn log_dir_result(dir: &Path, topics: Result<Vec<DescribeLogDirsTopic>, i16>) -> DescribeLogDirsResult {
    let (total, usable) = match laminar_engine::io::file_system_space(dir) {
        Ok((total, usable)) => (
            i64::try_from(total).unwrap_or(i64::MAX),
            i64::try_from(usable).unwrap_or(i64::MAX),
        ),
        Err(_) => (UNKNOWN_VOLUME_BYTES, UNKNOWN_VOLUME_BYTES),
    };
    let (error_code, topics) = match topics {
        Ok(topics) => (0, topics),
        Err(code) => (code, Vec::new()),
    };
    DescribeLogDirsResult::default()
        .with_error_code(error_code)
        .with_log_dir(StrBytes::from_string(dir.display().to_string()))
        .with_topics(topics)
        .with_total_bytes(total)
        .with_usable_bytes(usable)
}

/// The wanted partitions with a directory in the log dir, with their sizes, by topic and
/// index; KAFKA_STORAGE_ERROR when the log dir cannot be listed.
async fn local_replicas(
    ctx: &Rc<BrokerCtx>,
    request: &DescribeLogDirsRequest,
) -> Result<Vec<DescribeLogDirsTopic>, i16> {
    let wanted: Option<BTreeMap<&str, BTreeSet<i32>>> = request.topics.as_ref().map(|topics| {
        let each = topics
            .iter()
            .map(|t| (t.topic.as_str(), t.partitions.iter().copied().collect()));
        each.collect()
    });
    let dirs = ctx.state.partitions.replica_dirs().await.map_err(|e| {
        tracing::error!(error = %e, "DescribeLogDirs: cannot list the log dir");
        ResponseError::KafkaStorageError.code()
    })?;
    let table = ctx.state.shared.metadata.current();
    let mut items: Vec<(TopicPartition, ())> = dirs
        .into_iter()
        .filter(|tp| {
            let known = table
                .get(&tp.topic)
                .is_some_and(|t| tp.partition < t.partition_count);
            let asked = wanted
                .as_ref()
                .is_none_or(|w| w.get(&*tp.topic).is_some_and(|p| p.contains(&tp.partition)));
            known && asked
        })
        .map(|tp| (tp, ()))
        .collect();
    items.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let sizes = on_owning_shards(ctx, items, |there, tp, ()| async move {
        let size = there.state.partitions.replica_size(&tp.topic, tp.partition).await;
        size.map_err(PartitionAccessError::from)
    })
    .await;
    Ok(by_topic(sizes))
}

/// A replica's size in bytes and offset lag; `None` when its directory is gone.
type ReplicaSize = Result<Option<(u64, i64)>, PartitionAccessError>;

/// The sizes grouped by topic (they come sorted); a partition whose directory went away
/// meanwhile, or could not be read, is left out.
fn by_topic(sizes: Vec<(TopicPartition, ReplicaSize)>) -> Vec<DescribeLogDirsTopic> {
    let mut topics: Vec<DescribeLogDirsTopic> = Vec::new();
    for (tp, size) in sizes {
        let (bytes, lag) = match size {
            Ok(Some(found)) => found,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(topic = &*tp.topic, partition = tp.partition, error = %e, "DescribeLogDirs: replica size unknown");
                continue;
            }
        };
        let partition = DescribeLogDirsPartition::default()
            .with_partition_index(tp.partition)
            .with_partition_size(i64::try_from(bytes).unwrap_or(i64::MAX))
            .with_offset_lag(lag)
            .with_is_future_key(false);
        match topics.last_mut() {
            Some(last) if last.name.as_str() == &*tp.topic => last.partitions.push(partition),
            _ => topics.push(
                DescribeLogDirsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(tp.topic.to_string())))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    topics
}
