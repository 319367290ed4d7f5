//! The Fetch response, encoded by hand so that record batches are never copied into it.
//!
//! Every other response goes through the kafka-protocol codec, which copies `records` into its
//! output buffer. A fetch answer is mostly record bytes, so it is written as a list of chunks:
//! small buffers for the fields, and in between the records as the engine's read left them:
//! ranges of segment files (sent with sendfile) or batches in memory (`Bytes` shared with the
//! read). The broker's connection writes the chunks in order. The layout follows
//! Kafka's FetchResponse v4-v15 (v12 is flexible: compact lengths and empty tag sections; v13
//! names each topic by its id, KIP-516); a test checks it byte for byte against the codec at
//! every served version.

use bytes::{BufMut, BytesMut};
pub use laminar_engine::partition::{AbortedTxn, RecordBytes};

use crate::chunk::Chunk;

/// One partition's part of the answer.
#[derive(Debug, Clone, Default)]
pub struct PartitionAnswer {
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// READ_COMMITTED answers list the aborted transactions whose records may be among
    /// `records` (possibly none); READ_UNCOMMITTED ones carry null (`None`).
    pub aborted_transactions: Option<Vec<AbortedTxn>>,
    /// Whole batches, in offset order.
    pub records: RecordBytes,
    /// KIP-392 (v11+): the replica the consumer should fetch from instead (then `records` is
    /// empty); `None`: this broker, as before.
    pub preferred_read_replica: Option<i32>,
}

/// The whole answer: topics in request order, each with its partitions.
#[derive(Debug, Clone, Default)]
pub struct FetchAnswer {
    /// How long the client is held back for a quota it went past (the connection is muted as
    /// long); 0: not throttled.
    pub throttle_time_ms: i32,
    /// The request's own error (v7+: a fetch session's), with no topics.
    pub error_code: i16,
    /// The fetch session the answer belongs to (v7+, KIP-227); 0: none.
    pub session_id: i32,
    pub topics: Vec<TopicAnswer>,
}

/// One topic's part of the answer. Before v13 it is named by `name`, from v13 by `id`.
#[derive(Debug, Clone, Default)]
pub struct TopicAnswer {
    pub name: String,
    pub id: [u8; 16],
    pub partitions: Vec<PartitionAnswer>,
}

impl FetchAnswer {
    /// An answer that is only an error of the whole request.
    pub fn failed(error_code: i16) -> FetchAnswer {
        FetchAnswer {
            error_code,
            ..FetchAnswer::default()
        }
    }

    /// The bytes of records the answer carries (what a consumer's byte-rate quota counts).
    pub fn records_len(&self) -> usize {
        let partitions = self.topics.iter().flat_map(|topic| &topic.partitions);
        partitions.map(|p| p.records.len()).sum()
    }
}

const FIRST_FLEXIBLE_VERSION: i16 = 12;
/// The first version that names topics by id.
const FIRST_TOPIC_ID_VERSION: i16 = 13;
/// The newest version served: v15 moves the replica id into `ReplicaState` (KIP-903).
pub const FETCH_VERSION_MAX: i16 = 15;
/// Kafka's "no preferred read replica".
const NO_PREFERRED_REPLICA: i32 = -1;

/// Writes the frame (size prefix, response header, body) as chunks to send in order.
pub fn encode_fetch_frame(answer: &FetchAnswer, version: i16, correlation_id: i32) -> Vec<Chunk> {
    assert!(
        (4..=FETCH_VERSION_MAX).contains(&version),
        "Fetch v{version} is not served"
    );
    let flexible = version >= FIRST_FLEXIBLE_VERSION;
    let mut out = Chunks::default();
    out.fields.put_i32(0); // frame size, patched at the end
    out.fields.put_i32(correlation_id);
    if flexible {
        out.fields.put_u8(0); // response header tag section
    }
    out.fields.put_i32(answer.throttle_time_ms);
    if version >= 7 {
        out.fields.put_i16(answer.error_code);
        out.fields.put_i32(answer.session_id);
    }
    put_len(&mut out.fields, answer.topics.len(), flexible);
    for topic in &answer.topics {
        if version >= FIRST_TOPIC_ID_VERSION {
            out.fields.put_slice(&topic.id);
        } else {
            put_string(&mut out.fields, &topic.name, flexible);
        }
        put_len(&mut out.fields, topic.partitions.len(), flexible);
        for partition in &topic.partitions {
            put_partition(&mut out, partition, version, flexible);
        }
        if flexible {
            out.fields.put_u8(0); // topic tag section
        }
    }
    if flexible {
        out.fields.put_u8(0); // response tag section
    }
    out.finish()
}

fn put_partition(out: &mut Chunks, partition: &PartitionAnswer, version: i16, flexible: bool) {
    let fields = &mut out.fields;
    fields.put_i32(partition.partition);
    fields.put_i16(partition.error_code);
    fields.put_i64(partition.high_watermark);
    fields.put_i64(partition.last_stable_offset);
    if version >= 5 {
        fields.put_i64(partition.log_start_offset);
    }
    put_aborted_transactions(fields, partition.aborted_transactions.as_deref(), flexible);
    if version >= 11 {
        fields.put_i32(partition.preferred_read_replica.unwrap_or(NO_PREFERRED_REPLICA));
    }
    let records_len = partition.records.len();
    if flexible {
        put_uvarint(fields, records_len as u64 + 1);
    } else {
        fields.put_i32(i32::try_from(records_len).expect("a fetch answer stays below 2 GiB"));
    }
    match &partition.records {
        RecordBytes::Memory(batches) => {
            for batch in batches {
                out.push_shared(Chunk::Memory(batch.clone()));
            }
        }
        RecordBytes::File { range, .. } => out.push_shared(Chunk::File(range.clone())),
    }
    if flexible {
        out.fields.put_u8(0); // partition tag section
    }
}

/// A nullable array of (producer_id int64, first_offset int64), each with an empty tag
/// section in flexible versions.
fn put_aborted_transactions(fields: &mut BytesMut, aborted: Option<&[AbortedTxn]>, flexible: bool) {
    let Some(aborted) = aborted else {
        match flexible {
            true => fields.put_u8(0),
            false => fields.put_i32(-1),
        }
        return;
    };
    put_len(fields, aborted.len(), flexible);
    for txn in aborted {
        fields.put_i64(txn.producer_id);
        fields.put_i64(txn.first_offset.get());
        if flexible {
            fields.put_u8(0); // aborted transaction tag section
        }
    }
}

/// Field bytes accumulate in `fields` until records interrupt them.
#[derive(Default)]
struct Chunks {
    done: Vec<Chunk>,
    fields: BytesMut,
}

impl Chunks {
    fn push_shared(&mut self, records: Chunk) {
        self.close_fields();
        self.done.push(records);
    }

    fn close_fields(&mut self) {
        if !self.fields.is_empty() {
            self.done.push(Chunk::Memory(self.fields.split().freeze()));
        }
    }

    /// Closes the last field chunk and patches the frame size into the first.
    fn finish(mut self) -> Vec<Chunk> {
        self.close_fields();
        let size = self.done.iter().map(Chunk::len).sum::<usize>() - 4;
        let size = i32::try_from(size).expect("a fetch answer stays below 2 GiB");
        let Chunk::Memory(head) = &self.done[0] else {
            unreachable!("a frame starts with its size and header fields");
        };
        let mut first = BytesMut::from(&head[..]);
        first[..4].copy_from_slice(&size.to_be_bytes());
        self.done[0] = Chunk::Memory(first.freeze());
        self.done
    }
}

fn put_len(buf: &mut BytesMut, len: usize, flexible: bool) {
    if flexible {
        put_uvarint(buf, len as u64 + 1);
    } else {
        buf.put_i32(i32::try_from(len).expect("array length fits an i32"));
    }
}

fn put_string(buf: &mut BytesMut, text: &str, flexible: bool) {
    if flexible {
        put_uvarint(buf, text.len() as u64 + 1);
    } else {
        buf.put_i16(i16::try_from(text.len()).expect("topic names are at most 249 bytes"));
    }
    buf.put_slice(text.as_bytes());
}

fn put_uvarint(buf: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::{ApiKey, BrokerId, FetchResponse, ProducerId, ResponseKind, TopicName};
    use laminar_engine::io::FileRange;
    use std::sync::Arc;

    /// The aborted transactions a sample lists: none (null) unless `read_committed`.
    fn sample_aborted(read_committed: bool) -> Option<Vec<AbortedTxn>> {
        read_committed.then(|| vec![AbortedTxn::new(1_000, 30), AbortedTxn::new(0x0102_0304_0506, 35)])
    }

    fn sample(read_committed: bool) -> FetchAnswer {
        let ok = PartitionAnswer {
            partition: 3,
            high_watermark: 42,
            last_stable_offset: 30,
            log_start_offset: 7,
            aborted_transactions: sample_aborted(read_committed),
            records: RecordBytes::Memory(vec![
                Bytes::from_static(b"first batch"),
                Bytes::from_static(b"second"),
            ]),
            ..Default::default()
        };
        let failed = PartitionAnswer {
            partition: 9,
            error_code: 3,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            aborted_transactions: read_committed.then(Vec::new),
            records: RecordBytes::default(),
            preferred_read_replica: None,
        };
        let elsewhere = PartitionAnswer {
            partition: 4,
            high_watermark: 42,
            last_stable_offset: 42,
            preferred_read_replica: Some(2),
            ..Default::default()
        };
        FetchAnswer {
            throttle_time_ms: 250,
            error_code: 0,
            session_id: 1_234_567,
            topics: vec![
                TopicAnswer {
                    name: "orders".into(),
                    id: [0x5a; 16],
                    partitions: vec![ok, failed.clone(), elsewhere],
                },
                TopicAnswer {
                    name: "t".into(),
                    id: *b"0123456789abcdef",
                    partitions: vec![failed],
                },
            ],
        }
    }

    /// The same answer through kafka-protocol's encoder, records joined into one buffer.
    fn through_codec(answer: &FetchAnswer, version: i16) -> Bytes {
        let responses = answer
            .topics
            .iter()
            .map(|topic| {
                let partitions = topic
                    .partitions
                    .iter()
                    .map(|p| {
                        let records = records_bytes(&p.records);
                        PartitionData::default()
                            .with_partition_index(p.partition)
                            .with_error_code(p.error_code)
                            .with_high_watermark(p.high_watermark)
                            .with_last_stable_offset(p.last_stable_offset)
                            .with_log_start_offset(p.log_start_offset)
                            .with_aborted_transactions(p.aborted_transactions.as_ref().map(|list| {
                                let each = list.iter().map(|t| {
                                    AbortedTransaction::default()
                                        .with_producer_id(ProducerId(t.producer_id))
                                        .with_first_offset(t.first_offset.get())
                                });
                                each.collect()
                            }))
                            // Before v11 the field does not exist (and is not written).
                            .with_preferred_read_replica(BrokerId(match version {
                                11.. => p.preferred_read_replica.unwrap_or(-1),
                                _ => -1,
                            }))
                            .with_records(Some(Bytes::from(records)))
                    })
                    .collect();
                FetchableTopicResponse::default()
                    .with_topic(TopicName(topic.name.clone().into()))
                    .with_topic_id(uuid::Uuid::from_bytes(topic.id))
                    .with_partitions(partitions)
            })
            .collect();
        // Before v7 the fields do not exist (and are not written).
        let (error_code, session_id) = match version {
            7.. => (answer.error_code, answer.session_id),
            _ => (0, 0),
        };
        let response = FetchResponse::default()
            .with_throttle_time_ms(answer.throttle_time_ms)
            .with_error_code(error_code)
            .with_session_id(session_id)
            .with_responses(responses);
        let response = ResponseKind::Fetch(response);
        crate::codec::encode_response(ApiKey::Fetch, version, 77, &response).unwrap()
    }

    fn records_bytes(records: &RecordBytes) -> Vec<u8> {
        match records {
            RecordBytes::Memory(batches) => batches.concat(),
            RecordBytes::File { range, .. } => range_bytes(range),
        }
    }

    fn range_bytes(range: &FileRange) -> Vec<u8> {
        use std::os::unix::fs::FileExt;
        let mut out = vec![0u8; range.len as usize];
        range.file.read_exact_at(&mut out, range.position).unwrap();
        out
    }

    fn joined(chunks: &[Chunk]) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in chunks {
            match chunk {
                Chunk::Memory(bytes) => out.extend_from_slice(bytes),
                Chunk::File(range) => out.extend(range_bytes(range)),
            }
        }
        out
    }

    /// `sample` with its first partition's records in a file instead: "...first batchsecond..."
    fn sample_in_file(read_committed: bool, dir: &std::path::Path) -> FetchAnswer {
        let path = dir.join("00000000000000000000.log");
        std::fs::write(&path, b"older bytesfirst batchsecondlater bytes").unwrap();
        let file = Arc::new(std::fs::File::open(&path).unwrap().into());
        let range = FileRange {
            file,
            position: 11,
            len: 17,
        };
        let mut answer = sample(read_committed);
        answer.topics[0].partitions[0].records = RecordBytes::File { range, offsets: 0..2 };
        answer
    }

    #[test]
    fn chunks_match_the_codec_at_every_served_version() {
        let dir = tempfile::tempdir().unwrap();
        for version in 4..=FETCH_VERSION_MAX {
            for read_committed in [false, true] {
                for answer in [sample(read_committed), sample_in_file(read_committed, dir.path())] {
                    let chunks = encode_fetch_frame(&answer, version, 77);
                    let expected = through_codec(&answer, version).to_vec();
                    assert_eq!(joined(&chunks), expected, "v{version}");
                }
            }
            let failed = FetchAnswer::failed(70);
            let chunks = encode_fetch_frame(&failed, version, 77);
            assert_eq!(
                joined(&chunks),
                through_codec(&failed, version).to_vec(),
                "v{version}"
            );
        }
    }

    /// One partition answer's bytes (v4 and v12) with two aborted transactions, field by field.
    #[test]
    fn golden_aborted_transactions() {
        let partition = PartitionAnswer {
            partition: 3,
            high_watermark: 42,
            last_stable_offset: 30,
            log_start_offset: 7,
            aborted_transactions: sample_aborted(true),
            ..Default::default()
        };
        let fixed: Vec<u8> = [
            &[0, 0, 0, 3][..],          // partition 3
            &[0, 0],                    // no error
            &[0, 0, 0, 0, 0, 0, 0, 42], // high watermark 42
            &[0, 0, 0, 0, 0, 0, 0, 30], // last stable offset 30
        ]
        .concat();
        let txns = |tag: &[u8]| -> Vec<u8> {
            [
                &[0, 0, 0, 0, 0, 0, 0x03, 0xE8][..], // producer id 1000
                &[0, 0, 0, 0, 0, 0, 0, 30],          // first offset 30
                tag,
                &[0, 0, 1, 2, 3, 4, 5, 6],  // producer id 0x010203040506
                &[0, 0, 0, 0, 0, 0, 0, 35], // first offset 35
                tag,
            ]
            .concat()
        };
        #[rustfmt::skip]
        let v4: Vec<u8> = [
            &fixed[..],
            &[0, 0, 0, 2],               // two aborted transactions
            &txns(&[]),
            &[0, 0, 0, 0],               // no records
        ]
        .concat();
        #[rustfmt::skip]
        let v12: Vec<u8> = [
            &fixed[..],
            &[0, 0, 0, 0, 0, 0, 0, 7],   // log start offset 7
            &[3],                        // two aborted transactions (compact: 2 + 1)
            &txns(&[0]),                 // each with an empty tag section
            &[0xFF; 4],                  // no preferred read replica
            &[1],                        // no records (compact: 0 + 1)
            &[0],                        // partition tag section
        ]
        .concat();
        for (version, expected) in [(4, v4), (12, v12)] {
            let mut out = Chunks::default();
            put_partition(&mut out, &partition, version, version >= FIRST_FLEXIBLE_VERSION);
            out.close_fields();
            assert_eq!(joined(&out.done), expected, "v{version}");
        }
    }

    #[test]
    fn records_are_shared_not_copied() {
        let answer = sample(false);
        let chunks = encode_fetch_frame(&answer, 12, 1);
        let RecordBytes::Memory(batches) = &answer.topics[0].partitions[0].records else {
            unreachable!()
        };
        let stored = &batches[0];
        assert!(chunks.iter().any(|c| matches!(c, Chunk::Memory(b)
            if b.as_ptr() == stored.as_ptr() && b.len() == stored.len())));

        let dir = tempfile::tempdir().unwrap();
        let answer = sample_in_file(false, dir.path());
        let chunks = encode_fetch_frame(&answer, 12, 1);
        let files: Vec<_> = chunks.iter().filter(|c| matches!(c, Chunk::File(_))).collect();
        assert!(matches!(
            files[..],
            [Chunk::File(FileRange {
                position: 11,
                len: 17,
                ..
            })]
        ));
    }
}
