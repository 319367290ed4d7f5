//! A produce request frame written as pieces: the protocol fields are encoded into one small
//! buffer, and each partition's record batches go to the socket from the caller's own buffers
//! (one gathering write), so a producer never copies its batches into a request buffer. Kafka's
//! own clients send produce requests this way.
//!
//! Body layout (Produce v3–v12; the request header comes first, as the crate encodes it):
//!
//! | field | v3–v8 | v9+ (flexible) |
//! |---|---|---|
//! | transactional_id | i16 length, -1 = null | uvarint length + 1, 0 = null |
//! | acks | i16 | i16 |
//! | timeout_ms | i32 | i32 |
//! | topics | i32 count | uvarint count + 1 |
//! | · name | i16 length + bytes | uvarint length + 1, bytes |
//! | · partitions | i32 count | uvarint count + 1 |
//! | · · index | i32 | i32 |
//! | · · records | i32 length + bytes | uvarint length + 1, bytes |
//! | · · tagged fields | — | uvarint 0 |
//! | · tagged fields | — | uvarint 0 |
//! | tagged fields | — | uvarint 0 |

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Encodable, StrBytes};

use crate::error::ClientError;

/// First Produce version with flexible (compact) encoding.
const FIRST_FLEXIBLE_VERSION: i16 = 9;
/// Produce versions this encoder writes: v3 (RecordBatch v2) up to the last that names topics.
const VERSIONS: std::ops::RangeInclusive<i16> = 3..=12;

/// One produce request to one topic: what [`encode`] needs.
pub struct ProduceFrame<'a> {
    pub correlation_id: i32,
    pub client_id: &'a StrBytes,
    pub version: i16,
    pub acks: i16,
    pub timeout_ms: i32,
    pub topic: &'a str,
    /// (partition, whole v2 batches), in request order.
    pub batches: &'a [(i32, Bytes)],
}

/// The frame (size prefix included) as pieces to write in order: protocol fields from `scratch`
/// (cleared first), batches shared with the caller, not copied.
pub fn encode(frame: &ProduceFrame<'_>, scratch: &mut BytesMut) -> Result<Vec<Bytes>, ClientError> {
    let version = frame.version;
    let encode_error = |message: String| ClientError::Encode {
        api: ApiKey::Produce,
        version,
        message,
    };
    if !VERSIONS.contains(&version) {
        return Err(encode_error(format!(
            "pieces are written for versions {VERSIONS:?} only"
        )));
    }
    scratch.clear();
    scratch.put_i32(0); // frame size, patched below
    RequestHeader::default()
        .with_request_api_key(ApiKey::Produce as i16)
        .with_request_api_version(version)
        .with_correlation_id(frame.correlation_id)
        .with_client_id(Some(frame.client_id.clone()))
        .encode(scratch, ApiKey::Produce.request_header_version(version))
        .map_err(|e| encode_error(e.to_string()))?;
    let mut fields = Fields {
        out: scratch,
        version,
    };
    fields.length(None); // transactional_id: null
    fields.out.put_i16(frame.acks);
    fields.out.put_i32(frame.timeout_ms);
    fields.count(1);
    fields.length(Some(frame.topic.len()));
    fields.out.put_slice(frame.topic.as_bytes());
    fields.count(frame.batches.len());
    let mut pieces = Vec::with_capacity(2 * frame.batches.len() + 1);
    for (partition, records) in frame.batches {
        fields.out.put_i32(*partition);
        fields.records_length(records.len())?;
        pieces.push(fields.out.split().freeze());
        pieces.push(records.clone());
        fields.tags(); // this partition's
    }
    fields.tags(); // the topic's
    fields.tags(); // the request's
    pieces.push(fields.out.split().freeze());
    let size: usize = pieces.iter().map(Bytes::len).sum::<usize>() - 4;
    let size = i32::try_from(size)
        .map_err(|_| encode_error(format!("request of {size} bytes exceeds the i32 frame size")))?;
    let mut head = BytesMut::from(&pieces[0][..]);
    head[..4].copy_from_slice(&size.to_be_bytes());
    pieces[0] = head.freeze();
    Ok(pieces)
}

/// Writes lengths and counts in the request's encoding.
struct Fields<'a> {
    out: &'a mut BytesMut,
    version: i16,
}

impl Fields<'_> {
    fn flexible(&self) -> bool {
        self.version >= FIRST_FLEXIBLE_VERSION
    }

    /// A string's length (`None`: null).
    fn length(&mut self, len: Option<usize>) {
        match (self.flexible(), len) {
            (true, None) => put_uvarint(self.out, 0),
            (true, Some(len)) => put_uvarint(self.out, len as u64 + 1),
            (false, None) => self.out.put_i16(-1),
            (false, Some(len)) => self.out.put_i16(len as i16),
        }
    }

    fn count(&mut self, count: usize) {
        if self.flexible() {
            put_uvarint(self.out, count as u64 + 1);
        } else {
            self.out.put_i32(count as i32);
        }
    }

    fn records_length(&mut self, len: usize) -> Result<(), ClientError> {
        if self.flexible() {
            put_uvarint(self.out, len as u64 + 1);
            return Ok(());
        }
        let len = i32::try_from(len).map_err(|_| ClientError::Encode {
            api: ApiKey::Produce,
            version: self.version,
            message: format!("{len} record bytes exceed the i32 length"),
        })?;
        self.out.put_i32(len);
        Ok(())
    }

    /// An empty tagged-field section (flexible versions only).
    fn tags(&mut self) {
        if self.flexible() {
            put_uvarint(self.out, 0);
        }
    }
}

fn put_uvarint(out: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8(value as u8 | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode_frame;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName};

    fn batches() -> Vec<(i32, Bytes)> {
        // Record bytes are opaque here; 300 bytes make the flexible length a two-byte uvarint.
        vec![(0, Bytes::from(vec![7u8; 300])), (3, Bytes::from_static(b"abc"))]
    }

    fn pieces(version: i16, batches: &[(i32, Bytes)]) -> Vec<Bytes> {
        let client_id = StrBytes::from_static_str("bench");
        let frame = ProduceFrame {
            correlation_id: 42,
            client_id: &client_id,
            version,
            acks: -1,
            timeout_ms: 30_000,
            topic: "orders",
            batches,
        };
        encode(&frame, &mut BytesMut::new()).expect("encodes")
    }

    #[test]
    fn pieces_equal_the_crates_encoding_at_every_version() {
        let batches = batches();
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("orders")))
                .with_partition_data(
                    batches
                        .iter()
                        .map(|(index, records)| {
                            PartitionProduceData::default()
                                .with_index(*index)
                                .with_records(Some(records.clone()))
                        })
                        .collect(),
                )]);
        for version in VERSIONS {
            let mut expected = BytesMut::new();
            encode_frame(
                &mut expected,
                42,
                &StrBytes::from_static_str("bench"),
                &request,
                version,
            )
            .expect("crate encodes");
            let joined: Vec<u8> = pieces(version, &batches).concat();
            assert_eq!(joined, expected.to_vec(), "version {version}");
        }
    }

    #[test]
    fn batches_are_shared_not_copied() {
        let batches = batches();
        let pieces = pieces(11, &batches);
        // head+partition 0 fields, batch 0, partition 1 fields, batch 1, closing tags
        assert_eq!(pieces.len(), 5);
        assert_eq!(pieces[1].as_ptr(), batches[0].1.as_ptr());
        assert_eq!(pieces[3].as_ptr(), batches[1].1.as_ptr());
    }

    /// v11, field by field: the frame a producer sends for 3 bytes to partition 3 of "t".
    #[test]
    fn golden_v11_frame() {
        let batches = [(3, Bytes::from_static(b"xyz"))];
        let client_id = StrBytes::from_static_str("c");
        let frame = ProduceFrame {
            correlation_id: 1,
            client_id: &client_id,
            version: 11,
            acks: 1,
            timeout_ms: 1000,
            topic: "t",
            batches: &batches,
        };
        let joined: Vec<u8> = encode(&frame, &mut BytesMut::new()).unwrap().concat();
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 34,          // frame size: 34 bytes follow
            0, 0,                 // api key 0: Produce
            0, 11,                // api version 11
            0, 0, 0, 1,           // correlation id
            0, 1, b'c',           // client id: i16 length (header v2 keeps it non-compact)
            0,                    // header tagged fields
            0,                    // transactional id: null
            0, 1,                 // acks
            0, 0, 0x03, 0xe8,     // timeout 1000 ms
            2,                    // topics: 1 (+1)
            2, b't',              // name "t" (length + 1)
            2,                    // partitions: 1 (+1)
            0, 0, 0, 3,           // partition index 3
            4, b'x', b'y', b'z',  // records: 3 bytes (+1)
            0,                    // partition tagged fields
            0,                    // topic tagged fields
            0,                    // request tagged fields
        ];
        assert_eq!(joined, expected);
    }
}
