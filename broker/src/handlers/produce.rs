//! Produce: validate each partition's batches, append them on the owning shard, and answer once
//! durability matches `acks` (docs/ARCHITECTURE.md invariant 5).

use crate::authorization::Access;
use laminar_security::Operation;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::Decodable;
use laminar_engine::log::batch::{BatchError, BatchHeader, HEADER_LEN};
use laminar_engine::partition::{AppendInfo, LogError, Partition};

use crate::broker::{on_owning_shards, BrokerCtx, PartitionAccessError, TopicPartition};
use crate::clock::now_ms;
use crate::config::FsyncSetting;
use crate::errors::partition_error_code;
use crate::handlers::partition_answers::{items_by_partition, push_partition};
use crate::handlers::{ConnectionState, Outcome, RequestError};
use crate::transactions::verification;

const ACKS_NONE: i16 = 0;
const ACKS_LEADER: i16 = 1;
const ACKS_ALL: i16 = -1;

/// What a produce request turns into.
pub enum Produced {
    /// Refused before any append (an invalid `acks`): the answer, now.
    Answer(ProduceResponse),
    /// The appends, under way: the answer once durability matches `acks` (after the group
    /// commit for acks=all with `laminar.fsync=always`), or none at all for acks=0. The
    /// connection handles later requests meanwhile; answers still leave in request order.
    Pending(Pin<Box<dyn Future<Output = Option<ProduceResponse>>>>),
}

/// Takes the request's place in the connection's order now (so call it in request order), and returns its
/// appends as a future that waits for that place, then appends on the owning shards.
pub fn handle(
    ctx: &Rc<BrokerCtx>,
    (connection, access): (&ConnectionState, &Access),
    request: ProduceRequest,
) -> Produced {
    let acks = request.acks;
    if ![ACKS_NONE, ACKS_LEADER, ACKS_ALL].contains(&acks) {
        return Produced::Answer(answer_all(&request, ResponseError::InvalidRequiredAcks.code()));
    }
    let mut items = refuse_partitions_named_twice(items_by_partition(
        &request.topic_data,
        |t| (t.name.as_str(), t.partition_data.as_slice()),
        |p| (p.index, Ok(p.records.clone())),
    ));
    access.refuse_topics_in_place(&mut items, Operation::Write);
    connection.placement.note(items.iter().map(|(tp, _)| tp));
    let place = connection
        .order
        .take_place(items.iter().filter(|(_, r)| r.is_ok()).map(|(tp, _)| tp));
    let timeout = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
    let transactional_id: Option<Arc<str>> =
        request.transactional_id.as_ref().map(|id| Arc::from(id.as_str()));
    let ctx = ctx.clone();
    Produced::Pending(Box::pin(async move {
        place.wait().await;
        let now_ms = now_ms();
        let results = on_owning_shards(&ctx, items, move |there, tp, records| {
            let transactional_id = transactional_id.clone();
            async move {
                let records =
                    records?.ok_or(PartitionAccessError::Log(LogError::Batch(BatchError::NeedMore {
                        needed: HEADER_LEN,
                        available: 0,
                    })))?;
                let partition = there.state.partition(&tp).await?;
                let replication = there.state.replication.as_ref();
                if let (ACKS_ALL, Some(replication)) = (acks, replication) {
                    replication.check_min_isr(&tp, there.state.shared.min_insync_replicas(&tp.topic))?;
                }
                check_transaction(&there, transactional_id.as_deref(), (&tp, &partition), &records).await?;
                let info = partition.append(records, now_ms).await?;
                crate::maintenance::sync_rolled_segment(&tp, &partition);
                if let Some(replication) = replication {
                    replication.leader_appended(&tp, &partition);
                }
                Ok(info)
            }
        })
        .await;
        drop(place);
        match acks {
            ACKS_NONE => None,
            ACKS_ALL => Some(answer(wait_acks_all(&ctx, results, timeout).await)),
            _ => Some(answer(wait_acks_leader(&ctx, results).await)),
        }
    }))
}

/// A transactional batch needs the request's transactional id (INVALID_RECORD without one,
/// as Kafka), and the first one of a producer's transaction in this partition needs the
/// coordinator to say the producer added the partition (KIP-890 part 1,
/// `transactions::verification`).
async fn check_transaction(
    ctx: &Rc<BrokerCtx>,
    transactional_id: Option<&str>,
    (tp, partition): (&TopicPartition, &Partition),
    records: &Bytes,
) -> Result<(), PartitionAccessError> {
    let Ok(header) = BatchHeader::parse(records) else {
        return Ok(()); // the append refuses the bytes with their own error
    };
    if !header.is_transactional() || header.is_control() {
        return Ok(());
    }
    let Some(transactional_id) = transactional_id else {
        return Err(PartitionAccessError::Refused(ResponseError::InvalidRecord));
    };
    if partition.has_open_txn(header.producer_id) {
        return Ok(());
    }
    let producer = (header.producer_id, header.producer_epoch);
    verification::verify(ctx, transactional_id, producer, tp)
        .await
        .map_err(PartitionAccessError::Refused)
}

/// A partition's records as the request gave them, or why they are refused before any append.
type ProduceItem = Result<Option<Bytes>, PartitionAccessError>;

/// Every entry of a partition named more than once is refused with INVALID_REQUEST and none is
/// appended: which of them the client meant is unknowable (Kafka keeps the last silently).
fn refuse_partitions_named_twice(
    mut items: Vec<(TopicPartition, ProduceItem)>,
) -> Vec<(TopicPartition, ProduceItem)> {
    let named_twice: Vec<usize> = {
        // Keys borrowed from the items: a request may name thousands of partitions.
        fn key(tp: &TopicPartition) -> (&str, i32) {
            (&*tp.topic, tp.partition)
        }
        let mut seen = std::collections::HashMap::with_capacity(items.len());
        for (tp, _) in &items {
            *seen.entry(key(tp)).or_insert(0usize) += 1;
        }
        let named = items.iter().enumerate();
        named
            .filter(|(_, (tp, _))| seen[&key(tp)] > 1)
            .map(|(at, _)| at)
            .collect()
    };
    for at in named_twice {
        items[at].1 = Err(PartitionAccessError::NamedTwice);
    }
    items
}

type AppendResults = Vec<(TopicPartition, Result<AppendInfo, PartitionAccessError>)>;

/// acks=1: every appended partition waits until its batches are in the kernel's hands, as
/// written to the page cache would be (only O_DIRECT appends, staged in the shard's memory,
/// make this wait), so a kill of the broker loses no acknowledged record.
async fn wait_acks_leader(ctx: &Rc<BrokerCtx>, results: AppendResults) -> AppendResults {
    if ctx.state.shared.config.write_mode.mode != laminar_engine::io::WriteMode::Direct {
        return results;
    }
    let waits = results
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(tp, _)| (tp.clone(), ()));
    let written = on_owning_shards(ctx, waits.collect(), move |there, tp, ()| async move {
        there.state.partition(&tp).await?.wait_written().await?;
        Ok(())
    })
    .await;
    merge_failures(results, written)
}

/// acks=all: every appended partition waits for the fdatasync that covers its last offset
/// (group commit, with `laminar.fsync=always`), then in a cluster for its high watermark to
/// pass it (every in-sync replica has it), at most the request's `timeout_ms`.
async fn wait_acks_all(ctx: &Rc<BrokerCtx>, results: AppendResults, timeout: Duration) -> AppendResults {
    let waits = results
        .iter()
        .filter_map(|(tp, r)| r.as_ref().ok().map(|info| (tp.clone(), info.last_offset)));
    let synced = on_owning_shards(ctx, waits.collect(), move |there, tp, last_offset| async move {
        let partition = there.state.partition(&tp).await?;
        let started = std::time::Instant::now();
        if there.state.shared.config.laminar_fsync == FsyncSetting::Always {
            partition.wait_durable(last_offset).await?;
        }
        if let Some(replication) = &there.state.replication {
            let min_isr = there.state.shared.min_insync_replicas(&tp.topic);
            replication
                .wait_replicated(&tp, &partition, (last_offset, min_isr), timeout)
                .await?;
        }
        there.state.metrics.observe_durability_wait(started.elapsed());
        Ok(())
    })
    .await;
    merge_failures(results, synced)
}

/// `results`, each partition whose wait failed answering that failure instead.
fn merge_failures(
    results: AppendResults,
    waited: Vec<(TopicPartition, Result<(), PartitionAccessError>)>,
) -> AppendResults {
    let mut failures: Vec<_> = waited
        .into_iter()
        .filter_map(|(tp, r)| r.err().map(|e| (tp, e)))
        .collect();
    results
        .into_iter()
        .map(
            |(tp, result)| match failures.iter().position(|(failed, _)| *failed == tp) {
                Some(at) => (tp, Err(failures.swap_remove(at).1)),
                None => (tp, result),
            },
        )
        .collect()
}

fn answer(results: AppendResults) -> ProduceResponse {
    let mut response = ProduceResponse::default();
    for (tp, result) in results {
        let partition = match result {
            Ok(info) => appended(tp.partition, &info),
            Err(e) => failed(tp.partition, partition_error_code(&e)),
        };
        push_partition(&mut response.responses, &tp.topic, partition);
    }
    response
}

fn appended(index: i32, info: &AppendInfo) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_base_offset(info.base_offset.get())
        .with_log_append_time_ms(info.log_append_time_ms)
        .with_log_start_offset(info.log_start_offset.get())
}

fn failed(index: i32, error_code: i16) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error_code)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
}

fn answer_all(request: &ProduceRequest, error_code: i16) -> ProduceResponse {
    let mut response = ProduceResponse::default();
    for topic in &request.topic_data {
        for partition in &topic.partition_data {
            push_partition(
                &mut response.responses,
                topic.name.as_str(),
                failed(partition.index, error_code),
            );
        }
    }
    response
}

/// Produce v0-2 (message formats 0 and 1) is advertised but refused with UNSUPPORTED_VERSION for
/// every partition. The codec cannot encode those versions, so the answer is written here:
/// v0 `[topic: string, [partition: i32, error_code: i16, base_offset: i64]]`, v1 appends
/// `throttle_time_ms: i32`, v2 adds `log_append_time: i64` after each base offset. A body that
/// does not decode is an error (the connection closes), as for every other request: it has no
/// `acks` to go by, so it is never taken for acks=0.
pub fn refuse_legacy_version(
    version: i16,
    correlation_id: i32,
    body: Bytes,
) -> Result<Outcome, RequestError> {
    // A v0-2 request body is a v3 body without the leading transactional id (null = -1 length).
    let mut as_v3 = BytesMut::with_capacity(body.len() + 2);
    as_v3.put_i16(-1);
    as_v3.extend_from_slice(&body);
    let request = ProduceRequest::decode(&mut as_v3.freeze(), 3).map_err(|e| RequestError::Malformed {
        api: ApiKey::Produce,
        version,
        reason: e.to_string(),
    })?;
    if request.acks == ACKS_NONE {
        return Ok(Outcome::NoResponse);
    }
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    frame.put_i32(correlation_id);
    frame.put_i32(request.topic_data.len() as i32);
    for topic in &request.topic_data {
        let name = topic.name.as_bytes();
        frame.put_i16(name.len() as i16);
        frame.put_slice(name);
        frame.put_i32(topic.partition_data.len() as i32);
        for partition in &topic.partition_data {
            frame.put_i32(partition.index);
            frame.put_i16(ResponseError::UnsupportedVersion.code());
            frame.put_i64(-1);
            if version >= 2 {
                frame.put_i64(-1);
            }
        }
    }
    if version >= 1 {
        frame.put_i32(0);
    }
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    Ok(Outcome::Respond(frame.freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_produce_gets_unsupported_version_per_partition() {
        // v2 body: acks=1, timeout=1000, one topic "t" with partition 4 and 0 record bytes
        let mut body = BytesMut::new();
        body.put_i16(1); // acks
        body.put_i32(1000); // timeout_ms
        body.put_i32(1); // topics
        body.put_i16(1); // name length
        body.put_slice(b"t");
        body.put_i32(1); // partitions
        body.put_i32(4); // index
        body.put_i32(0); // records length
        let Ok(Outcome::Respond(frame)) = refuse_legacy_version(2, 9, body.freeze()) else {
            panic!("acks=1 gets an answer");
        };
        let expected: &[u8] = &[
            0, 0, 0, 41, // size
            0, 0, 0, 9, // correlation id
            0, 0, 0, 1, // topics
            0, 1, b't', // name
            0, 0, 0, 1, // partitions
            0, 0, 0, 4, // index
            0, 35, // UNSUPPORTED_VERSION
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // base_offset -1
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // log_append_time -1 (v2)
            0, 0, 0, 0, // throttle_time_ms (v1+)
        ];
        assert_eq!(&frame[..], expected);
    }

    #[test]
    fn a_legacy_produce_body_that_does_not_decode_is_an_error_not_an_acks_0_request() {
        for version in 0..=2 {
            // acks=1, then a timeout cut short.
            let body = Bytes::from_static(&[0, 1, 0, 0]);
            let refused = refuse_legacy_version(version, 7, body);
            assert!(
                matches!(
                    refused,
                    Err(RequestError::Malformed {
                        api: ApiKey::Produce,
                        ..
                    })
                ),
                "v{version}"
            );
        }
    }
}
