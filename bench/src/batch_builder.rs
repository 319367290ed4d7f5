//! Record batches a producer sends, built with buffers kept across batches.

use anyhow::Context;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::records::Record;
use laminar_client::records::{encode_batch, encode_plain_batch, plain_record};

use crate::layout::{KEYED_KEY_BYTES, KEY_BYTES};

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

    /// One v2 batch of `timestamps_us.len()` records, keyed by their timestamps.
    pub fn build(
        &mut self,
        timestamps_us: impl Iterator<Item = u64>,
        compression: laminar_client::Compression,
    ) -> anyhow::Result<Bytes> {
        self.keys.clear();
        for timestamp_us in timestamps_us {
            self.keys.put_u64(timestamp_us);
        }
        self.encode(KEY_BYTES, compression)
    }

    /// One v2 batch of keyed records, `(timestamp µs, distinct part)` each: the 16-byte key
    /// holds both (`produce_request::keyed_key`).
    pub fn build_keyed(
        &mut self,
        keys: impl Iterator<Item = (u64, u64)>,
        compression: laminar_client::Compression,
    ) -> anyhow::Result<Bytes> {
        self.keys.clear();
        for (timestamp_us, distinct) in keys {
            self.keys.put_u64(timestamp_us);
            self.keys.put_u64(distinct);
        }
        self.encode(KEYED_KEY_BYTES, compression)
    }

    /// Encodes the keys gathered, `key_bytes` each; the batch's timestamp is the first key's.
    fn encode(
        &mut self,
        key_bytes: usize,
        compression: laminar_client::Compression,
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
