//! `GET /v1/topics/{name}/records`: a record browser. Reads one partition on its owning shard
//! from an offset (or the first offset at or after a timestamp) and shows each record's offset,
//! timestamp, key, headers and value, as text when they are UTF-8 and always as hex.
//!
//! Bounded: at most [`READ_BYTES_MAX`] of batches are read (one whole batch when the first is
//! larger, as a fetch would; batches are bounded by `message.max.bytes`), at most [`LIMIT_MAX`] records
//! answered, and each key, value and header shows its first [`PREVIEW_BYTES`] bytes (its full
//! size is reported). Only committed records (below the high watermark) are shown, as a
//! consumer would see them. A compressed batch is decompressed whole by the codec crate: its
//! decompressed size is bounded by what the producer sent, not here.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::records::{Record, RecordBatchDecoder};
use laminar_model::Offset;
use laminar_protocol::records::batches;
use serde_json::json;

use super::{ok, ApiError, ApiResult, Query};
use crate::broker::{on_owning_shards, BrokerCtx, PartitionAccessError, TopicPartition};

/// Batch bytes read from the log per request, at most.
pub const READ_BYTES_MAX: usize = 1024 * 1024;
/// Records answered per request, at most (and by default [`LIMIT_DEFAULT`]).
pub const LIMIT_MAX: i64 = 200;
const LIMIT_DEFAULT: i64 = 20;
/// Bytes of each key, value and header value shown.
pub const PREVIEW_BYTES: usize = 1024;

/// Where to start reading.
#[derive(Debug, Clone, Copy)]
enum Start {
    Offset(i64),
    Timestamp(i64),
    /// The last `limit` committed records.
    Latest,
}

/// `GET /v1/topics/{name}/records?partition=P[&offset=O|&timestamp=MS][&limit=N]`.
pub async fn browse(ctx: &Rc<BrokerCtx>, name: &str, query: &Query) -> ApiResult {
    query.only(&["partition", "offset", "timestamp", "limit"])?;
    let partition = query
        .int("partition", 0, i64::from(i32::MAX))?
        .ok_or_else(|| ApiError::bad_request("partition= is required"))? as i32;
    let limit = query.int("limit", 1, LIMIT_MAX)?.unwrap_or(LIMIT_DEFAULT) as usize;
    let start = match (
        query.int("offset", 0, i64::MAX)?,
        query.int("timestamp", 0, i64::MAX)?,
    ) {
        (Some(_), Some(_)) => return Err(ApiError::bad_request("give offset= or timestamp=, not both")),
        (Some(offset), None) => Start::Offset(offset),
        (None, Some(ms)) => Start::Timestamp(ms),
        (None, None) => Start::Latest,
    };
    let tp = TopicPartition {
        topic: name.into(),
        partition,
    };
    let answer = on_owning_shards(
        ctx,
        vec![(tp, (start, limit))],
        |there, tp, (start, limit)| async move { read_records(&there, &tp, start, limit).await },
    )
    .await;
    let (_, result) = answer.into_iter().next().expect("one item in, one answer out");
    match result {
        Ok(page) => ok(&page),
        Err(PartitionAccessError::UnknownTopicOrPartition) => Err(ApiError::new(
            404,
            format!("unknown topic or partition {name}-{partition}"),
        )),
        Err(e) => Err(ApiError::new(503, e.to_string())),
    }
}

/// On the owning shard: the records from `start`, as the JSON page answered.
async fn read_records(
    there: &Rc<BrokerCtx>,
    tp: &TopicPartition,
    start: Start,
    limit: usize,
) -> Result<serde_json::Value, PartitionAccessError> {
    let Some(partition) = there.state.partition_to_read(tp).await? else {
        // Never written: nothing to show.
        return Ok(page(0, 0, 0, Vec::new()));
    };
    let log_start = partition.log_start_offset().get();
    let high_watermark = partition.high_watermark().get();
    let from = match start {
        Start::Offset(offset) => offset.max(log_start),
        Start::Timestamp(ms) => match partition.offset_for_timestamp(ms).await? {
            Some((offset, _)) => offset.get().max(log_start),
            None => high_watermark,
        },
        Start::Latest => (high_watermark - limit as i64).max(log_start),
    };
    if from >= high_watermark {
        return Ok(page(log_start, high_watermark, from, Vec::new()));
    }
    let read = partition.read(Offset::new(from), READ_BYTES_MAX, true).await?;
    let mut shown = Vec::new();
    'batches: for chunk in &read.data {
        for batch in batches(chunk) {
            let Ok(batch) = batch else { break 'batches };
            if batch.last_offset() < from {
                continue;
            }
            let mut bytes = Bytes::copy_from_slice(batch.bytes);
            let Ok(set) = RecordBatchDecoder::decode(&mut bytes) else {
                break 'batches;
            };
            for record in set.records.iter().filter(|r| r.offset >= from) {
                if record.offset >= high_watermark || shown.len() == limit {
                    break 'batches;
                }
                shown.push(record_json(record));
            }
        }
    }
    Ok(page(log_start, high_watermark, from, shown))
}

fn page(
    log_start: i64,
    high_watermark: i64,
    from: i64,
    records: Vec<serde_json::Value>,
) -> serde_json::Value {
    json!({
        "log_start_offset": log_start,
        "high_watermark": high_watermark,
        "from_offset": from,
        "preview_bytes": PREVIEW_BYTES,
        "records": records,
    })
}

fn record_json(record: &Record) -> serde_json::Value {
    let headers: Vec<serde_json::Value> = record
        .headers
        .iter()
        .map(|(key, value)| json!({ "key": key.as_str(), "value": bytes_json(value.as_deref()) }))
        .collect();
    json!({
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": bytes_json(record.key.as_deref()),
        "value": bytes_json(record.value.as_deref()),
        "headers": headers,
    })
}

/// Bytes shown as their size, their first [`PREVIEW_BYTES`] in hex, and as text when those are
/// UTF-8 (a character cut at the preview's end is dropped); `null` for a null key or value.
pub fn bytes_json(bytes: Option<&[u8]>) -> serde_json::Value {
    let Some(bytes) = bytes else {
        return serde_json::Value::Null;
    };
    let shown = &bytes[..bytes.len().min(PREVIEW_BYTES)];
    let text = match std::str::from_utf8(shown) {
        Ok(text) => Some(text),
        // Cut inside a character at the preview's end: the text up to it.
        Err(e) if e.error_len().is_none() && shown.len() < bytes.len() => {
            std::str::from_utf8(&shown[..e.valid_up_to()]).ok()
        }
        Err(_) => None,
    };
    let hex: String = shown.iter().map(|b| format!("{b:02x}")).collect();
    json!({
        "size": bytes.len(),
        "truncated": shown.len() < bytes.len(),
        "text": text,
        "hex": hex,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_show_as_text_and_hex_bounded() {
        assert_eq!(bytes_json(None), serde_json::Value::Null);
        let small = bytes_json(Some(b"hi"));
        assert_eq!(small["text"], "hi");
        assert_eq!(small["hex"], "6869");
        assert_eq!(small["truncated"], false);
        let binary = bytes_json(Some(&[0xff, 0x00]));
        assert_eq!(binary["text"], serde_json::Value::Null);
        assert_eq!(binary["hex"], "ff00");
        let mut big = vec![b'a'; PREVIEW_BYTES - 1];
        big.extend_from_slice("é and more".as_bytes());
        let cut = bytes_json(Some(&big));
        assert_eq!(cut["size"], big.len());
        assert_eq!(cut["truncated"], true);
        assert_eq!(cut["text"].as_str().unwrap().len(), PREVIEW_BYTES - 1);
        assert_eq!(cut["hex"].as_str().unwrap().len(), PREVIEW_BYTES * 2);
    }
}
