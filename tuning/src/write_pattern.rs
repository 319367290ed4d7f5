//! The bytes `laminar iotune` writes: non-repeating (xorshift), so that no layer between it and
//! the disk can compress or deduplicate them. Shared by the bandwidth cases (`iotune.rs`) and
//! the append cases (`iotune_appends.rs`).

/// Fills `buf` with the pattern that starts at `seed`.
pub(crate) fn fill_pattern(buf: &mut [u8], seed: u64) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
}
