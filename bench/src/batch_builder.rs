//! Record batches a producer sends, built with buffers kept across batches.
//!
//! An idempotent or transactional producer's batches carry its producer id, epoch and each
//! partition's sequence ([`ProducerFields`]), written into the header before the batch's
//! CRC-32C is taken over it.

use anyhow::Context;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::records::Record;
use laminar_client::records::{encode_batch, encode_plain_batch, plain_record};
use laminar_engine::log::checksum::crc32c;

use crate::layout::{KEYED_KEY_BYTES, KEY_BYTES};

/// Where a v2 batch header holds what [`ProducerFields`] sets, and its CRC.
mod header {
    use std::ops::Range;

    pub const CRC: Range<usize> = 17..21;
    /// The CRC covers the batch from its attributes to its end.
    pub const CRC_COVERS_FROM: usize = 21;
    pub const ATTRIBUTES: Range<usize> = 21..23;
    pub const PRODUCER_ID: Range<usize> = 43..51;
    pub const PRODUCER_EPOCH: Range<usize> = 51..53;
    pub const BASE_SEQUENCE: Range<usize> = 53..57;
    /// The attributes bit of a batch in a transaction.
    pub const TRANSACTIONAL_ATTRIBUTE: i16 = 0x10;
}

/// The producer fields of an idempotent (or transactional) producer's batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerFields {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Records sent to the batch's partition before it by this producer id and epoch,
    /// wrapping at `i32::MAX` ([`next_sequence`]).
    pub base_sequence: i32,
    /// Part of a transaction (attributes bit 0x10).
    pub transactional: bool,
}

/// The sequence after `records` records from `sequence`: past `i32::MAX` it wraps to 0, as
/// Kafka's producer and broker count (`DefaultRecordBatch.incrementSequence`).
pub fn next_sequence(sequence: i32, records: i32) -> i32 {
    if sequence > i32::MAX - records {
        records - (i32::MAX - sequence) - 1
    } else {
        sequence + records
    }
}

/// Writes `fields` into the header of the one batch `batch` holds, then its CRC-32C.
fn write_producer_fields(batch: &mut [u8], fields: ProducerFields) {
    let attributes = i16::from_be_bytes(batch[header::ATTRIBUTES].try_into().expect("2 bytes"));
    let attributes = if fields.transactional {
        attributes | header::TRANSACTIONAL_ATTRIBUTE
    } else {
        attributes
    };
    batch[header::ATTRIBUTES].copy_from_slice(&attributes.to_be_bytes());
    batch[header::PRODUCER_ID].copy_from_slice(&fields.producer_id.to_be_bytes());
    batch[header::PRODUCER_EPOCH].copy_from_slice(&fields.producer_epoch.to_be_bytes());
    batch[header::BASE_SEQUENCE].copy_from_slice(&fields.base_sequence.to_be_bytes());
    let crc = crc32c(&batch[header::CRC_COVERS_FROM..]);
    batch[header::CRC].copy_from_slice(&crc.to_be_bytes());
}

/// Builds batches with buffers kept across batches. Owned by one producer thread.
pub struct BatchBuilder {
    value: Bytes,
    keys: BytesMut,
    records: Vec<Record>,
    out: BytesMut,
}

impl BatchBuilder {
    /// A builder for records of `record_size` value bytes, up to `batch_max` per batch.
    pub fn new(record_size: usize, batch_max: usize, seed: u64) -> BatchBuilder {
        BatchBuilder {
            value: payload(record_size, seed),
            keys: BytesMut::with_capacity(batch_max * KEY_BYTES),
            records: Vec::with_capacity(batch_max),
            out: BytesMut::with_capacity(batch_max * (record_size + 32) + 128),
        }
    }

    /// One v2 batch of `timestamps_us.len()` records, keyed by their timestamps, with
    /// `producer`'s fields (none: a plain producer's batch).
    pub fn build(
        &mut self,
        timestamps_us: impl Iterator<Item = u64>,
        compression: laminar_client::Compression,
        producer: Option<ProducerFields>,
    ) -> anyhow::Result<Bytes> {
        self.keys.clear();
        for timestamp_us in timestamps_us {
            self.keys.put_u64(timestamp_us);
        }
        self.encode(KEY_BYTES, compression, producer)
    }

    /// One v2 batch of keyed records, `(timestamp µs, distinct part)` each: the 16-byte key
    /// holds both (`produce_request::keyed_key`).
    pub fn build_keyed(
        &mut self,
        keys: impl Iterator<Item = (u64, u64)>,
        compression: laminar_client::Compression,
        producer: Option<ProducerFields>,
    ) -> anyhow::Result<Bytes> {
        self.keys.clear();
        for (timestamp_us, distinct) in keys {
            self.keys.put_u64(timestamp_us);
            self.keys.put_u64(distinct);
        }
        self.encode(KEYED_KEY_BYTES, compression, producer)
    }

    /// Encodes the keys gathered, `key_bytes` each; the batch's timestamp is the first key's.
    /// The encoders write a plain batch and its CRC; `producer`'s fields are written over its
    /// header and the CRC taken again: one more pass over the batch at the engine's CRC speed
    /// (tens of GB/s), rather than a second encoder for producers with ids.
    fn encode(
        &mut self,
        key_bytes: usize,
        compression: laminar_client::Compression,
        producer: Option<ProducerFields>,
    ) -> anyhow::Result<Bytes> {
        let first: [u8; KEY_BYTES] = self
            .keys
            .get(..KEY_BYTES)
            .context("a batch has records")?
            .try_into()
            .expect("8 bytes");
        let timestamp_ms = u64::from_be_bytes(first) as i64 / 1000;
        self.out.clear();
        self.out
            .reserve(self.keys.len() / key_bytes * (self.value.len() + key_bytes + 24) + 128);
        if compression == laminar_client::Compression::None {
            let keys: Vec<&[u8]> = self.keys.chunks_exact(key_bytes).collect();
            encode_plain_batch(&mut self.out, &keys, &self.value, timestamp_ms);
        } else {
            self.encode_with_crate(key_bytes, timestamp_ms, compression)?;
        }
        if let Some(fields) = producer {
            write_producer_fields(&mut self.out, fields);
        }
        Ok(self.out.split().freeze())
    }

    /// Compressed batches go through the protocol crate's encoder (compression costs far more
    /// than building its records).
    fn encode_with_crate(
        &mut self,
        key_bytes: usize,
        timestamp_ms: i64,
        compression: laminar_client::Compression,
    ) -> anyhow::Result<()> {
        let keys = self.keys.split().freeze();
        for (index, key) in keys.chunks_exact(key_bytes).enumerate() {
            let start = index * key_bytes;
            debug_assert_eq!(key.len(), key_bytes);
            self.records.push(plain_record(
                index as i64,
                timestamp_ms,
                Some(keys.slice(start..start + key_bytes)),
                Some(self.value.clone()),
            ));
        }
        let encoded = encode_batch(&mut self.out, &self.records, compression);
        self.records.clear();
        drop(keys); // lets `self.keys` take its allocation back on the next batch
        Ok(encoded?)
    }
}

/// A record value of `size` pseudo-random letters (like kafka-producer-perf-test's payload:
/// compressible about as much as text).
pub fn payload(size: usize, seed: u64) -> Bytes {
    let mut state = seed | 1;
    (0..size)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            b'A' + (state % 26) as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;
    use laminar_client::records::batches;
    use laminar_client::Compression;

    const FIELDS: ProducerFields = ProducerFields {
        producer_id: 4242,
        producer_epoch: 3,
        base_sequence: 100,
        transactional: true,
    };

    /// Builds a batch of 5 records with `producer`'s fields, checks its CRC, and decodes it.
    fn built_and_decoded(
        compression: Compression,
        producer: Option<ProducerFields>,
    ) -> Vec<kafka_protocol::records::Record> {
        let mut builder = BatchBuilder::new(50, 5, 3);
        let batch = builder.build(1_000..1_005, compression, producer).expect("build");
        let view = batches(&batch).next().expect("a batch").expect("valid");
        assert!(
            view.crc_is_valid(),
            "{compression:?}: the CRC covers the fields written"
        );
        let mut encoded = batch.clone();
        let decoded = RecordBatchDecoder::decode(&mut encoded).expect("decodes");
        assert!(encoded.is_empty(), "one batch");
        decoded.records
    }

    #[test]
    fn producer_fields_are_in_the_header_under_a_valid_crc() {
        for compression in [Compression::None, Compression::Lz4] {
            let records = built_and_decoded(compression, Some(FIELDS));
            assert_eq!(records.len(), 5);
            for (index, record) in records.iter().enumerate() {
                assert_eq!(
                    (record.producer_id, record.producer_epoch, record.sequence),
                    (4242, 3, 100 + index as i32),
                    "{compression:?}"
                );
                assert!(record.transactional && !record.control);
            }
            let idempotent = ProducerFields {
                transactional: false,
                ..FIELDS
            };
            let records = built_and_decoded(compression, Some(idempotent));
            assert!(records.iter().all(|r| !r.transactional && r.producer_id == 4242));
        }
    }

    #[test]
    fn header_bytes_hold_the_fields_and_keep_the_compression_bits() {
        let mut builder = BatchBuilder::new(50, 5, 3);
        let batch = builder
            .build(1_000..1_003, Compression::Lz4, Some(FIELDS))
            .expect("build");
        let attributes = i16::from_be_bytes(batch[header::ATTRIBUTES].try_into().unwrap());
        assert_eq!(attributes, 0x10 | 3, "transactional, LZ4 (3)");
        assert_eq!(&batch[header::PRODUCER_ID], &4242i64.to_be_bytes());
        assert_eq!(&batch[header::PRODUCER_EPOCH], &3i16.to_be_bytes());
        assert_eq!(&batch[header::BASE_SEQUENCE], &100i32.to_be_bytes());
        let crc = u32::from_be_bytes(batch[header::CRC].try_into().unwrap());
        assert_eq!(
            crc,
            crc32c::crc32c(&batch[header::CRC_COVERS_FROM..]),
            "an independent CRC-32C"
        );
    }

    #[test]
    fn a_plain_batch_has_no_producer() {
        let records = built_and_decoded(Compression::None, None);
        assert!(records
            .iter()
            .all(|r| r.producer_id == -1 && r.producer_epoch == -1 && !r.transactional));
    }

    #[test]
    fn sequences_wrap_past_i32_max_to_zero_as_kafka_counts() {
        assert_eq!(next_sequence(0, 5), 5);
        assert_eq!(next_sequence(i32::MAX - 5, 5), i32::MAX);
        assert_eq!(next_sequence(i32::MAX, 1), 0);
        // Records MAX-1, MAX, 0: the next is 1.
        assert_eq!(next_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(next_sequence(i32::MAX - 1, i32::MAX), i32::MAX - 2);
    }
}
