//! Kafka's default partitioner for keyed records: murmur2 of the key bytes (seed 0x9747b28c),
//! sign bit cleared, modulo the partition count. Matching it means `laminar produce` puts a key
//! in the same partition as the Java client, librdkafka's `murmur2_random` and kcat do, and
//! `laminar bench`'s keyed load spreads records over partitions as those clients would.

/// Kafka's 32-bit murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len() as u32;
    let mut h: u32 = SEED ^ length;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes(chunk.try_into().expect("4 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of `key` among `partitions` (Kafka's `toPositive(murmur2(key)) % n`).
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    assert!(partitions > 0, "a topic has at least one partition");
    (murmur2(key) & 0x7fff_ffff) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_kafkas_murmur2_test_vectors() {
        // The expected values are those of Kafka's UtilsTest.testMurmur2.
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            (b"abc", 479_470_107),
        ];
        for (input, expected) in cases {
            assert_eq!(murmur2(input), expected, "{}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn partition_is_positive_and_in_range() {
        for key in [&b"21"[..], b"foobar", b"", b"k"] {
            let partition = partition_for_key(key, 7);
            assert!((0..7).contains(&partition));
        }
        assert_eq!(partition_for_key(b"21", 1), 0);
    }
}
