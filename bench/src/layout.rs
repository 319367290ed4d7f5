//! The bytes of every record the harness writes, known to the arguments (sizing requests), the
//! producer (writing keys) and the consumer (reading them back).

/// Bytes of the timestamp key of every record: the 8-byte big-endian wall-clock µs of its
/// intended send time.
pub const KEY_BYTES: usize = 8;

/// Bytes of the key of a keyed record (`--keyed`): the timestamp key, then 8 bytes that make
/// it distinct from every other record's.
pub const KEYED_KEY_BYTES: usize = 16;

/// A v2 batch's header, before its records.
pub const BATCH_HEADER_BYTES: usize = 61;

/// Most bytes a plain record adds around its key and value (length, attributes, timestamp and
/// offset deltas, key and value lengths, header count; varints of records under 2 MiB).
pub const RECORD_FRAMING_BYTES: usize = 3 + 1 + 1 + 3 + 1 + 3 + 1;
