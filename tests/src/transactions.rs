//! Raw Kafka frames for the transactional producer's side, shared by the transaction wire
//! tests: producer batches, InitProducerId for a transactional id, AddPartitionsToTxn, EndTxn,
//! each asked again while the coordinator answers a retriable code.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

use crate::wire::WireConnection;

/// Codes a transaction coordinator answers while it cannot yet: loading, moving, not made yet,
/// or an earlier transaction of the producer still writing its markers.
pub const RETRIABLE: [i16; 4] = [14, 15, 16, 51];
/// How long those may last.
pub const SETTLE_WITHIN: Duration = Duration::from_secs(15);

pub fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// `count` records of producer `(id, epoch)` from sequence `sequence` in one batch, values
/// `v<sequence>`…; transactional or only idempotent.
pub fn producer_batch(
    (id, epoch): (i64, i16),
    sequence: i32,
    count: i32,
    transactional: bool,
) -> Result<Bytes> {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: id,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            sequence: sequence + i,
            timestamp: 1_700_000_000_000 + i64::from(i),
            key: None,
            value: Some(Bytes::from(format!("v{}", sequence + i))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options)?;
    Ok(buf.freeze())
}

/// Asks `ask` again while it answers a [`RETRIABLE`] code, up to [`SETTLE_WITHIN`]; its last
/// code and answer otherwise.
pub fn until_settled<T>(mut ask: impl FnMut() -> Result<(i16, T)>) -> Result<(i16, T)> {
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        let (code, answer) = ask()?;
        if !RETRIABLE.contains(&code) || Instant::now() > deadline {
            return Ok((code, answer));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// InitProducerId (v4) for `transactional_id` with `timeout_ms`: its producer id and epoch.
pub fn init_producer(
    conn: &mut WireConnection,
    transactional_id: &str,
    timeout_ms: i32,
) -> Result<(i64, i16)> {
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(str_bytes(transactional_id))))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let (code, producer) = until_settled(|| {
        let answer = conn.request(&init, 4)?;
        Ok((answer.error_code, (answer.producer_id.0, answer.producer_epoch)))
    })?;
    ensure!(code == 0, "InitProducerId answered {code}");
    Ok(producer)
}

/// AddPartitionsToTxn (v3) of `(topic, partition)`: the highest partition code answered.
pub fn add_partition(
    conn: &mut WireConnection,
    transactional_id: &str,
    (id, epoch): (i64, i16),
    (topic, partition): (&str, i32),
) -> Result<i16> {
    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(str_bytes(transactional_id)))
        .with_v3_and_below_producer_id(ProducerId(id))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(str_bytes(topic)))
            .with_partitions(vec![partition])]);
    let (code, ()) = until_settled(|| {
        let answer = conn.request(&add, 3)?;
        let codes = answer
            .results_by_topic_v3_and_below
            .iter()
            .flat_map(|t| &t.results_by_partition);
        Ok((codes.map(|p| p.partition_error_code).max().unwrap_or(-1), ()))
    })?;
    Ok(code)
}

/// EndTxn (v3): commits or aborts the transaction of `transactional_id`; the code answered.
pub fn end(
    conn: &mut WireConnection,
    transactional_id: &str,
    (id, epoch): (i64, i16),
    commit: bool,
) -> Result<i16> {
    let end = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(str_bytes(transactional_id)))
        .with_producer_id(ProducerId(id))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let (code, ()) = until_settled(|| Ok((conn.request(&end, 3)?.error_code, ())))?;
    Ok(code)
}

/// Produce (v8, acks=all) of `batch` to one partition as `transactional_id`'s producer (a
/// transactional batch needs the request to name it): that partition's answer.
pub fn produce(
    conn: &mut WireConnection,
    transactional_id: Option<&str>,
    (topic, partition): (&str, i32),
    batch: Bytes,
) -> Result<PartitionProduceResponse> {
    let request = crate::wire::produce_request((topic, partition), batch, -1)
        .with_transactional_id(transactional_id.map(|id| TransactionalId(str_bytes(id))));
    let response = conn.request(&request, 8)?;
    let answer = response
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .ok_or_else(|| anyhow::anyhow!("produce answered no partition"))?;
    Ok(answer.clone())
}
