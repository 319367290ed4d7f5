use super::*;

/// One record, key "k", value "hello", timestamp 1000 ms, uncompressed. Field by field.
const GOLDEN_BATCH: [u8; 74] = [
    0, 0, 0, 0, 0, 0, 0, 0, // base offset 0
    0, 0, 0, 62, // batch length: 74 - 12
    255, 255, 255, 255, // partition leader epoch -1
    2,   // magic
    0xED, 0xB8, 0x8D, 0x21, // CRC-32C (Castagnoli) of bytes 21..
    0, 0, // attributes: no compression, create time
    0, 0, 0, 0, // last offset delta 0
    0, 0, 0, 0, 0, 0, 3, 232, // base timestamp 1000
    0, 0, 0, 0, 0, 0, 3, 232, // max timestamp 1000
    255, 255, 255, 255, 255, 255, 255, 255, // producer id -1
    255, 255, // producer epoch -1
    255, 255, 255, 255, // base sequence -1
    0, 0, 0, 1,  // record count 1
    24, // record length 12 (zig-zag)
    0,  // record attributes
    0,  // timestamp delta 0
    0,  // offset delta 0
    2, b'k', // key length 1, "k"
    10, b'h', b'e', b'l', b'l', b'o', // value length 5, "hello"
    0,    // header count 0
];

fn golden() -> Vec<u8> {
    GOLDEN_BATCH.to_vec()
}

fn record(offset: i64, value: &'static [u8]) -> Record {
    plain_record(
        offset,
        1000,
        Some(Bytes::from_static(b"k")),
        Some(Bytes::from_static(value)),
    )
}

#[test]
fn encoder_matches_golden_bytes() {
    let mut out = BytesMut::new();
    encode_batch(&mut out, &[record(0, b"hello")], Compression::None).expect("encode");
    assert_eq!(&out[..], &golden()[..]);
    let view = batches(&out).next().expect("one batch").expect("valid");
    assert!(view.crc_is_valid());
    let mut corrupt = golden();
    corrupt[70] ^= 1;
    assert!(!BatchView { bytes: &corrupt }.crc_is_valid());
    assert_eq!(view.record_count(), 1);
    assert_eq!(view.base_timestamp(), 1000);
}

#[test]
fn walker_and_decoder_agree_for_every_codec() {
    let values: [&'static [u8]; 3] = [b"a", b"bb", b"ccc"];
    for compression in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let records: Vec<Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| record(i as i64, v))
            .collect();
        let mut out = BytesMut::new();
        encode_batch(&mut out, &records, compression).expect("encode");
        let out = out.freeze();
        let view = batches(&out).next().expect("one batch").expect("valid");
        assert_eq!(view.compression().unwrap(), compression);
        assert_eq!((view.base_offset(), view.last_offset()), (0, 2));
        let mut seen = Vec::new();
        for_each_record(view, |record| {
            assert_eq!(record.key, Some(&b"k"[..]));
            assert_eq!(record.timestamp_ms, 1000);
            seen.push((record.offset, record.value.unwrap().to_vec()))
        })
        .expect("walk");
        let expected: Vec<(i64, Vec<u8>)> = values
            .iter()
            .enumerate()
            .map(|(i, v)| (i as i64, v.to_vec()))
            .collect();
        assert_eq!(seen, expected, "{compression:?}");
        let decoded = decode_records(&out).expect("decode");
        assert_eq!(decoded.len(), 3);
        assert_eq!(decoded[2].value.as_deref(), Some(&b"ccc"[..]));
    }
}

#[test]
fn partial_tail_is_skipped_and_bad_length_is_an_error() {
    let mut two = golden();
    two.extend_from_slice(&golden()[..40]); // a fetch may end inside a batch
    let whole: Vec<_> = batches(&two).collect::<Result<_, _>>().expect("valid");
    assert_eq!(whole.len(), 1);
    assert_eq!(decode_records(&Bytes::from(two)).expect("decode").len(), 1);

    let mut bad = golden();
    bad[8..12].copy_from_slice(&10i32.to_be_bytes());
    assert!(batches(&bad).next().expect("an item").is_err());
    let mut bad_magic = golden();
    bad_magic[16] = 1;
    assert!(batches(&bad_magic).next().expect("an item").is_err());
}

#[test]
fn varints_decode_zig_zag() {
    for (bytes, expected) in [
        (&[0u8][..], 0i64),
        (&[1], -1),
        (&[2], 1),
        (&[0xac, 0x02], 150),
        (&[0xff, 0xff, 0xff, 0xff, 0x0f], -2147483648),
    ] {
        let mut buf = bytes;
        assert_eq!(read_varint(&mut buf).unwrap(), expected);
        assert!(buf.is_empty());
    }
    let mut truncated: &[u8] = &[0x80];
    assert!(read_varint(&mut truncated).is_err());
}

#[test]
fn the_plain_batch_encoder_writes_the_golden_batch() {
    let mut out = BytesMut::from(&b"before"[..]);
    encode_plain_batch(&mut out, &[b"k"], b"hello", 1000);
    assert_eq!(&out[..6], b"before", "appends after what is there");
    assert_eq!(&out[6..], &GOLDEN_BATCH[..]);
}

#[test]
fn the_plain_batch_encoder_equals_the_crate_encoder() {
    // Keys and values long enough for multi-byte varints; many records for offset deltas > 63.
    let value = vec![b'v'; 1024];
    let keys: Vec<Vec<u8>> = (0..300u32).map(|i| i.to_be_bytes().repeat(2)).collect();
    let key_slices: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let mut direct = BytesMut::new();
    encode_plain_batch(&mut direct, &key_slices, &value, 1_700_000_000_123);
    let records: Vec<Record> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let (key, value) = (Bytes::from(k.clone()), Bytes::from(value.clone()));
            plain_record(i as i64, 1_700_000_000_123, Some(key), Some(value))
        })
        .collect();
    let mut through_crate = BytesMut::new();
    encode_batch(&mut through_crate, &records, Compression::None).unwrap();
    assert_eq!(direct, through_crate);
}

#[test]
fn varint_lengths_match_the_encoding() {
    for value in [0i64, 1, -1, 63, 64, -64, -65, 8191, 8192, i64::MAX, i64::MIN] {
        let mut out = BytesMut::new();
        put_varint(&mut out, value);
        assert_eq!(out.len(), varint_len(value), "{value}");
    }
}
