//! Where the fields of an encoded request are: a valid frame is decoded through a buffer that
//! records every primitive read (its offset, width and kind), and the reads are then classified
//! with the common Kafka encodings: an int16 or uvarint followed by exactly that many bytes is a
//! string length, an int32 followed by that many bytes a bytes length, a zero uvarint in a
//! flexible message a tagged-field section. Array counts and their element spans are found
//! later, by trying them against the decoder (see `seeds::find_elements`).

use std::ops::Range;

use bytes::{Buf, Bytes};
use kafka_protocol::protocol::buf::{ByteBuf, NotEnoughBytesError};

/// What a run of bytes in a frame holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A big-endian integer of 1, 2, 4 or 8 bytes (also uuids: 16).
    Int { width: u8 },
    /// An unsigned varint (compact lengths, counts, tag numbers; also booleans, which read alike).
    Uvarint,
    /// An int16 string length (followed by the string).
    StrLen16,
    /// An int32 bytes length (followed by the bytes: record batches, member metadata).
    BytesLen32,
    /// A uvarint length of a compact string or bytes (length + 1, followed by the bytes).
    CompactLen,
    /// A uvarint count of tagged fields (zero in every seed).
    TaggedCount,
    /// Raw payload bytes (string contents, record batches).
    Payload,
}

/// One field of a seed frame. `value` is the integer read (0 for payloads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub at: Range<usize>,
    pub kind: Kind,
    pub value: i64,
    /// Semantic label found by building the seed twice with different marks.
    pub label: Label,
}

/// Fields that the mutator treats specially.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Label {
    #[default]
    None,
    /// A partition index.
    Partition,
    /// A time the broker may legitimately wait (max_wait_ms, timeouts): the mutator keeps it
    /// under the hang bound, so that a hang means the broker ignored the bound.
    WaitMs,
}

/// A [`ByteBuf`] that records each read. Offsets are from the start of the decoded bytes.
pub struct Recorder {
    bytes: Bytes,
    total: usize,
    reads: Vec<Token>,
    /// The last byte read belongs to a varint and had its high bit set: the next continues it.
    varint_open: bool,
    /// Integer reads above this fail, as if the bytes had run out (see [`Recorder::guarded`]).
    limit: i64,
}

/// The longest varint (a varlong's 10 bytes).
const VARINT_BYTES_MAX: usize = 10;

/// Counts above this are refused by a guarded recorder.
pub const GUARD_LIMIT: i64 = 1 << 24;

fn refused(requested: usize) -> bytes::TryGetError {
    bytes::TryGetError {
        requested,
        available: 0,
    }
}

impl Recorder {
    pub fn new(bytes: Bytes) -> Recorder {
        let total = bytes.len();
        Recorder {
            bytes,
            total,
            reads: Vec::new(),
            varint_open: false,
            limit: i64::MAX,
        }
    }

    /// A recorder that refuses int32 and uvarint values above [`GUARD_LIMIT`]: kafka-protocol
    /// reserves an array's count up front, so decoding an untrusted frame in the harness itself
    /// (to try a seed's element spans, or to read a mutant's waits) must not see a huge one.
    pub fn guarded(bytes: Bytes) -> Recorder {
        Recorder {
            limit: GUARD_LIMIT,
            ..Recorder::new(bytes)
        }
    }

    fn offset(&self) -> usize {
        self.total - self.bytes.len()
    }

    fn push(&mut self, width: usize, kind: Kind, value: i64) {
        let at = self.offset() - width..self.offset();
        self.varint_open = false;
        self.reads.push(Token {
            at,
            kind,
            value,
            label: Label::None,
        });
    }

    /// Bytes not read by the decoder.
    pub fn left(&self) -> usize {
        self.bytes.len()
    }

    /// The reads, classified.
    pub fn into_tokens(self) -> Vec<Token> {
        classify(self.reads)
    }
}

macro_rules! recorded_int {
    ($name:ident, $ty:ty, $width:expr) => {
        fn $name(&mut self) -> Result<$ty, bytes::TryGetError> {
            let value = self.bytes.$name()?;
            if $width == 4 && value as i64 > self.limit {
                return Err(refused($width));
            }
            self.push($width, Kind::Int { width: $width }, value as i64);
            Ok(value)
        }
    };
}

impl Buf for Recorder {
    fn remaining(&self) -> usize {
        self.bytes.remaining()
    }

    fn chunk(&self) -> &[u8] {
        self.bytes.chunk()
    }

    fn advance(&mut self, count: usize) {
        self.bytes.advance(count)
    }

    recorded_int!(try_get_i8, i8, 1);
    recorded_int!(try_get_i16, i16, 2);
    recorded_int!(try_get_u16, u16, 2);
    recorded_int!(try_get_i32, i32, 4);
    recorded_int!(try_get_u32, u32, 4);
    recorded_int!(try_get_i64, i64, 8);

    fn try_get_f64(&mut self) -> Result<f64, bytes::TryGetError> {
        let value = self.bytes.try_get_f64()?;
        self.push(8, Kind::Int { width: 8 }, value.to_bits() as i64);
        Ok(value)
    }

    /// Unsigned varints are read a byte at a time: consecutive bytes continue one varint while
    /// the previous byte has its high bit set, up to the longest varint (a decoder stops there,
    /// high bit or not, and the next byte starts a new field).
    fn try_get_u8(&mut self) -> Result<u8, bytes::TryGetError> {
        let byte = self.bytes.try_get_u8()?;
        let bits = i64::from(byte & 0x7f);
        match self.reads.last_mut() {
            Some(last) if self.varint_open && last.at.len() < VARINT_BYTES_MAX => {
                // Bits beyond 63 are dropped: the value only steers mutations.
                last.value |= bits.checked_shl(7 * last.at.len() as u32).unwrap_or(0);
                last.at.end += 1;
                if last.value > self.limit {
                    return Err(refused(1));
                }
            }
            _ => self.push(1, Kind::Uvarint, bits),
        }
        self.varint_open = byte >= 0x80;
        Ok(byte)
    }

    fn try_copy_to_slice(&mut self, dst: &mut [u8]) -> Result<(), bytes::TryGetError> {
        self.bytes.try_copy_to_slice(dst)?;
        self.push(
            dst.len(),
            Kind::Int {
                width: dst.len() as u8,
            },
            0,
        );
        Ok(())
    }
}

impl ByteBuf for Recorder {
    fn peek_bytes(&mut self, r: Range<usize>) -> Bytes {
        self.bytes.slice(r)
    }

    fn get_bytes(&mut self, size: usize) -> Bytes {
        let taken = self.bytes.split_to(size);
        self.push(size, Kind::Payload, 0);
        taken
    }

    fn try_get_bytes(&mut self, size: usize) -> Result<Bytes, NotEnoughBytesError> {
        if self.bytes.len() < size {
            return Err(NotEnoughBytesError);
        }
        Ok(self.get_bytes(size))
    }
}

/// Names the length prefixes and tagged sections among raw reads.
fn classify(mut reads: Vec<Token>) -> Vec<Token> {
    for i in 0..reads.len() {
        let next_payload = reads
            .get(i + 1)
            .filter(|next| next.kind == Kind::Payload && next.at.start == reads[i].at.end)
            .map(|next| next.at.len() as i64);
        let token = &mut reads[i];
        token.kind = match (token.kind, next_payload) {
            (Kind::Int { width: 2 }, Some(len)) if len == token.value => Kind::StrLen16,
            (Kind::Int { width: 4 }, Some(len)) if len == token.value => Kind::BytesLen32,
            (Kind::Uvarint, Some(len)) if len + 1 == token.value => Kind::CompactLen,
            (kind, _) => kind,
        };
    }
    reads
}

/// Marks the zero uvarints that are tagged-field sections. Called for flexible versions only:
/// there every struct ends with one, and seeds have no null compact arrays or strings.
pub fn mark_tagged_sections(tokens: &mut [Token]) {
    for token in tokens.iter_mut() {
        if token.kind == Kind::Uvarint && token.value == 0 && token.at.len() == 1 {
            token.kind = Kind::TaggedCount;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unterminated_varints_are_cut_at_the_longest_varint() {
        let mut recorder = Recorder::new(Bytes::from(vec![0xff; 25]));
        while recorder.try_get_u8().is_ok() {}
        let lengths: Vec<usize> = recorder.into_tokens().iter().map(|t| t.at.len()).collect();
        assert_eq!(lengths, vec![10, 10, 5]);
    }
    use kafka_protocol::messages::{GroupId, HeartbeatRequest};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    #[test]
    fn reads_are_recorded_and_lengths_named() {
        let group = "g".repeat(200);
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.clone())))
            .with_generation_id(7)
            .with_member_id(StrBytes::from_static_str("ab"))
            .with_group_instance_id(Some(StrBytes::from_static_str("i")));
        let mut raw = bytes::BytesMut::new();
        request.encode(&mut raw, 4).unwrap();
        let mut recorder = Recorder::new(raw.freeze());
        let decoded = HeartbeatRequest::decode(&mut recorder, 4).unwrap();
        assert_eq!(decoded, request);
        assert_eq!(recorder.left(), 0);
        let mut tokens = recorder.into_tokens();
        mark_tagged_sections(&mut tokens);
        let kinds: Vec<(Range<usize>, Kind, i64)> =
            tokens.into_iter().map(|t| (t.at, t.kind, t.value)).collect();
        assert_eq!(
            kinds,
            vec![
                (0..2, Kind::CompactLen, 201), // a two-byte uvarint
                (2..202, Kind::Payload, 0),
                (202..206, Kind::Int { width: 4 }, 7),
                (206..207, Kind::CompactLen, 3),
                (207..209, Kind::Payload, 0),
                (209..210, Kind::CompactLen, 2),
                (210..211, Kind::Payload, 0),
                (211..212, Kind::TaggedCount, 0),
            ]
        );
    }
}
