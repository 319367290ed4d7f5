//! A RecordBatch v2 encoder for tests and benches (feature `testing`).
//!
//! Record layout (varints are zigzag, as Kafka writes them): length, attributes i8,
//! timestampDelta varlong, offsetDelta varint, keyLength varint (-1 = null), key,
//! valueLength varint (-1 = null), value, header count varint, then per header
//! keyLength varint, key, valueLength varint, value.
//!
//! The codec bits can be set with [`BatchBuilder::attributes`], but the records are written
//! uncompressed: the engine never decompresses, so tests only need the bits.

use super::{HEADER_LEN, LOG_OVERHEAD, MAGIC_V2};

struct Record {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    timestamp_delta: i64,
}

/// Builds one RecordBatch v2 with a correct CRC-32C.
pub struct BatchBuilder {
    base_offset: i64,
    leader_epoch: i32,
    attributes: i16,
    base_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    record_count: Option<i32>,
    records: Vec<Record>,
}

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

impl BatchBuilder {
    pub fn new(base_timestamp: i64) -> Self {
        BatchBuilder {
            base_offset: 0,
            leader_epoch: -1,
            attributes: 0,
            base_timestamp,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            record_count: None,
            records: Vec::new(),
        }
    }

    pub fn base_offset(mut self, offset: i64) -> Self {
        self.base_offset = offset;
        self
    }

    pub fn leader_epoch(mut self, epoch: i32) -> Self {
        self.leader_epoch = epoch;
        self
    }

    pub fn attributes(mut self, attributes: i16) -> Self {
        self.attributes = attributes;
        self
    }

    pub fn producer(mut self, id: i64, epoch: i16, base_sequence: i32) -> Self {
        (self.producer_id, self.producer_epoch, self.base_sequence) = (id, epoch, base_sequence);
        self
    }

    /// Overrides the header's record count (to build invalid batches).
    pub fn record_count(mut self, count: i32) -> Self {
        self.record_count = Some(count);
        self
    }

    pub fn record(mut self, key: Option<&[u8]>, value: Option<&[u8]>, ts_delta: i64) -> Self {
        self.records.push(Record {
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            headers: Vec::new(),
            timestamp_delta: ts_delta,
        });
        self
    }

    /// Adds a header to the last record.
    pub fn header(mut self, key: &[u8], value: Option<&[u8]>) -> Self {
        let last = self.records.last_mut().expect("header() after record()");
        last.headers.push((key.to_vec(), value.map(<[u8]>::to_vec)));
        self
    }

    /// `count` records of `value_len` bytes each (a quick batch of a given size).
    pub fn records_of(mut self, count: usize, value_len: usize) -> Self {
        let value = vec![b'v'; value_len];
        for i in 0..count {
            self = self.record(None, Some(&value), i as i64);
        }
        self
    }

    pub fn build(&self) -> Vec<u8> {
        let mut body = Vec::new();
        for (delta, r) in self.records.iter().enumerate() {
            let mut rec = vec![0u8]; // attributes
            put_varint(&mut rec, r.timestamp_delta);
            put_varint(&mut rec, delta as i64);
            put_bytes(&mut rec, r.key.as_deref());
            put_bytes(&mut rec, r.value.as_deref());
            put_varint(&mut rec, r.headers.len() as i64);
            for (k, v) in &r.headers {
                put_bytes(&mut rec, Some(k));
                put_bytes(&mut rec, v.as_deref());
            }
            put_varint(&mut body, rec.len() as i64);
            body.extend_from_slice(&rec);
        }
        let max_delta = self.records.iter().map(|r| r.timestamp_delta).max().unwrap_or(0);
        let max_timestamp = if self.base_timestamp < 0 {
            self.base_timestamp
        } else {
            self.base_timestamp + max_delta
        };
        let count = self.record_count.unwrap_or(self.records.len() as i32);
        let last_offset_delta = (self.records.len() as i32 - 1).max(0);
        let mut b = Vec::with_capacity(HEADER_LEN + body.len());
        b.extend_from_slice(&self.base_offset.to_be_bytes());
        let batch_length = (HEADER_LEN - LOG_OVERHEAD + body.len()) as i32;
        b.extend_from_slice(&batch_length.to_be_bytes());
        b.extend_from_slice(&self.leader_epoch.to_be_bytes());
        b.push(MAGIC_V2 as u8);
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&self.attributes.to_be_bytes());
        b.extend_from_slice(&last_offset_delta.to_be_bytes());
        b.extend_from_slice(&self.base_timestamp.to_be_bytes());
        b.extend_from_slice(&max_timestamp.to_be_bytes());
        b.extend_from_slice(&self.producer_id.to_be_bytes());
        b.extend_from_slice(&self.producer_epoch.to_be_bytes());
        b.extend_from_slice(&self.base_sequence.to_be_bytes());
        b.extend_from_slice(&count.to_be_bytes());
        b.extend_from_slice(&body);
        let crc = crate::log::checksum::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }
}
