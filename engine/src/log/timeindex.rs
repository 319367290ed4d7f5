//! The time index (`<base offset>.timeindex`).
//!
//! Format: a sequence of 12-byte entries, no header:
//!
//! ```text
//! off len field
//!   0   8 timestamp        i64 BE: the largest batch max timestamp up to and including …
//!   8   4 relative offset  u32 BE: … the batch starting at this relative offset
//! ```
//!
//! An entry is added together with an offset-index entry when the running maximum timestamp
//! grew, so every batch before the entry's batch has a max timestamp ≤ the entry's timestamp.
//! A lookup for the first batch with max timestamp ≥ T starts scanning at the last entry whose
//! timestamp is < T. Both fields strictly increase; every relative offset is also in the
//! offset index.

use super::index::{sane_prefix, Entry, IndexEntry};

/// One time-index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp: i64,
    pub relative_offset: u32,
}

impl Entry for TimeEntry {
    const LEN: usize = 12;
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.timestamp.to_be_bytes());
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        TimeEntry {
            timestamp: i64::from_be_bytes(b[0..8].try_into().expect("8 bytes")),
            relative_offset: u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
        }
    }
    fn relative_offset(&self) -> u32 {
        self.relative_offset
    }
    fn follows(&self, earlier: &Self) -> bool {
        self.timestamp > earlier.timestamp && self.relative_offset > earlier.relative_offset
    }
}

/// Length of the sane prefix: strictly increasing entries whose offsets are offset-index
/// entries below `relative_end`.
pub fn time_index_sane_prefix(
    entries: &[TimeEntry],
    offset_index: &[IndexEntry],
    relative_end: u32,
) -> usize {
    sane_prefix(
        entries,
        |p, e| e.follows(p),
        |e| {
            let indexed = offset_index
                .binary_search_by_key(&e.relative_offset, |x| x.relative_offset)
                .is_ok();
            indexed && e.relative_offset < relative_end
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_time_entry() {
        let e = TimeEntry {
            timestamp: 0x0102_0304_0506_0708,
            relative_offset: 0x0A0B_0C0D,
        };
        let mut out = Vec::new();
        e.encode(&mut out);
        assert_eq!(
            out,
            [
                0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // timestamp
                0x0A, 0x0B, 0x0C, 0x0D, // relative offset
            ]
        );
        assert_eq!(TimeEntry::decode(&out), e);
    }

    #[test]
    fn sanity_rejects_unindexed_and_decreasing() {
        let idx = [
            IndexEntry {
                relative_offset: 3,
                position: 100,
            },
            IndexEntry {
                relative_offset: 7,
                position: 200,
            },
        ];
        let t = |ts, r| TimeEntry {
            timestamp: ts,
            relative_offset: r,
        };
        assert_eq!(time_index_sane_prefix(&[t(5, 3), t(9, 7)], &idx, 10), 2);
        assert_eq!(time_index_sane_prefix(&[t(5, 3), t(4, 7)], &idx, 10), 1);
        assert_eq!(time_index_sane_prefix(&[t(5, 4)], &idx, 10), 0);
        assert_eq!(time_index_sane_prefix(&[t(5, 3), t(9, 7)], &idx, 7), 1);
    }
}
