//! A client never crashes the broker: garbage, negative and huge size prefixes, truncated frames,
//! unknown API keys and versions, corrupt and oversized batches, and hundreds of idle or
//! half-open connections each get a clean reaction (a closed connection or a Kafka error code),
//! and afterwards a normal client still works and every record acknowledged earlier is intact.

use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Result};
use bytes::Bytes;
use kafka_protocol::messages::ApiVersionsResponse;
use kafka_protocol::protocol::Decodable;
use laminar_tests::rdkafka_client::{assigned_consumer, consume, unique_topic};
use laminar_tests::wire::{self, Reaction, WireConnection, BATCH_CRC_COVERED_FROM, BATCH_CRC_OFFSET};
use laminar_tests::{Broker, BrokerOptions};
use rdkafka::Offset;

const UNSUPPORTED_VERSION: i16 = 35;
const CORRUPT_MESSAGE: i16 = 2;
const MESSAGE_TOO_LARGE: i16 = 10;
const REACTION_WAIT: Duration = Duration::from_secs(5);

/// A broker with one topic (auto-created by the first produce) holding three acked records.
struct Seeded {
    broker: Broker,
    topic: String,
    values: Vec<&'static [u8]>,
}

fn seeded_broker(options: BrokerOptions) -> Result<Seeded> {
    let broker = Broker::start(options)?;
    let topic = unique_topic("malformed");
    let values: Vec<&'static [u8]> = vec![b"first", b"second", &[0, 1, 2, 255]];
    let mut conn = WireConnection::connect(broker.addr())?;
    wire::auto_create(&mut conn, &topic)?;
    let answer = wire::produce(
        &mut conn,
        &topic,
        0,
        wire::record_batch(&values, 1_700_000_000_000)?,
        -1,
    )?;
    assert_eq!((answer.error_code, answer.base_offset), (0, 0), "seed produce");
    Ok(Seeded {
        broker,
        topic,
        values,
    })
}

impl Seeded {
    /// The broker process lives, answers a fresh connection, and returns the seeded records to a
    /// normal librdkafka consumer.
    fn assert_healthy(&mut self, after: &str) -> Result<()> {
        assert!(
            self.broker.is_running(),
            "broker died after {after}; stderr:\n{}",
            self.broker.stderr_tail()
        );
        let consumer = assigned_consumer(&self.broker.bootstrap(), &[])?;
        let consumed = consume(&consumer, &self.topic, 0, Offset::Beginning, self.values.len())
            .map_err(|e| e.context(format!("reading seeded records after {after}")))?;
        for (i, (got, want)) in consumed.iter().zip(&self.values).enumerate() {
            assert_eq!(got.offset, i as i64, "after {after}");
            assert_eq!(
                got.record.value.as_deref(),
                Some(*want),
                "after {after}: record {i}"
            );
            assert_eq!(
                got.record.key,
                Some(format!("k{i}").into_bytes()),
                "after {after}: key {i}"
            );
            assert_eq!(
                got.record.timestamp_ms,
                1_700_000_000_000 + i as i64,
                "after {after}: timestamp {i}"
            );
        }
        Ok(())
    }

    fn connect(&self) -> Result<WireConnection> {
        WireConnection::connect(self.broker.addr())
    }
}

fn expect_closed(conn: &mut WireConnection, what: &str) -> Result<()> {
    match conn.reaction(REACTION_WAIT)? {
        Reaction::Closed => Ok(()),
        other => bail!("{what}: expected the broker to close the connection, got {other:?}"),
    }
}

/// Deterministic noise (xorshift), so a failure can be replayed.
fn noise(len: usize, mut state: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

#[test]
fn garbage_and_bad_size_prefixes_close_only_that_connection() -> Result<()> {
    let mut seeded = seeded_broker(BrokerOptions::default())?;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a frame of noise", {
            let mut frame = 200i32.to_be_bytes().to_vec();
            frame.extend(noise(200, 0x9e37_79b9_7f4a_7c15));
            frame
        }),
        ("negative size prefix", (-1i32).to_be_bytes().to_vec()),
        ("i32::MIN size prefix", i32::MIN.to_be_bytes().to_vec()),
        ("huge size prefix", {
            let mut frame = i32::MAX.to_be_bytes().to_vec();
            frame.extend(noise(64, 7));
            frame
        }),
        ("size prefix too small for a header", {
            let mut frame = 3i32.to_be_bytes().to_vec();
            frame.extend([0, 18, 0]);
            frame
        }),
    ];
    for (what, bytes) in cases {
        let mut conn = seeded.connect()?;
        conn.write_raw(&bytes)?;
        expect_closed(&mut conn, what)?;
        seeded.assert_healthy(what)?;
    }
    Ok(())
}

#[test]
fn truncated_frames_then_close_do_not_hurt() -> Result<()> {
    let mut seeded = seeded_broker(BrokerOptions::default())?;
    for cut in [1usize, 3, 4, 6, 10] {
        let mut conn = seeded.connect()?;
        // A valid ApiVersions v0 frame announcing 24 bytes, of which only `cut` arrive.
        let mut frame = 24i32.to_be_bytes().to_vec();
        frame.extend([0, 18, 0, 0, 0, 0, 0, 9, 0, 14]);
        frame.extend(b"truncated-test");
        frame.truncate(cut);
        conn.write_raw(&frame)?;
        drop(conn);
        seeded.assert_healthy(&format!("a frame cut after {cut} bytes"))?;
    }
    Ok(())
}

#[test]
fn unknown_api_key_gets_closed_or_an_error_answer() -> Result<()> {
    let mut seeded = seeded_broker(BrokerOptions::default())?;
    let mut conn = seeded.connect()?;
    let mut body = Vec::new();
    body.extend(9999i16.to_be_bytes()); // api key no Kafka version defines
    body.extend(0i16.to_be_bytes());
    body.extend(77i32.to_be_bytes()); // correlation id
    body.extend((-1i16).to_be_bytes()); // null client id
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend(body);
    conn.write_raw(&frame)?;
    match conn.reaction(REACTION_WAIT)? {
        Reaction::Closed => {}
        Reaction::Frame(payload) => {
            assert!(payload.len() >= 6, "answer too short: {payload:?}");
            assert_eq!(
                i32::from_be_bytes(payload[0..4].try_into()?),
                77,
                "correlation id"
            );
            let code = i16::from_be_bytes(payload[4..6].try_into()?);
            assert_ne!(code, 0, "an unknown API cannot succeed");
        }
        Reaction::Silent => bail!("no reaction to an unknown API key within {REACTION_WAIT:?}"),
    }
    seeded.assert_healthy("an unknown api key")
}

#[test]
fn a_legacy_produce_whose_body_does_not_decode_closes_its_connection() -> Result<()> {
    let mut seeded = seeded_broker(BrokerOptions::default())?;
    for version in 0i16..=2 {
        let mut conn = seeded.connect()?;
        let mut body = Vec::new();
        body.extend(0i16.to_be_bytes()); // Produce
        body.extend(version.to_be_bytes());
        body.extend(78i32.to_be_bytes()); // correlation id
        body.extend((-1i16).to_be_bytes()); // null client id
        body.extend(1i16.to_be_bytes()); // acks=1
        body.extend([0, 0]); // a timeout cut short: the body ends here
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend(body);
        conn.write_raw(&frame)?;
        expect_closed(&mut conn, &format!("an undecodable Produce v{version}"))?;
    }
    seeded.assert_healthy("undecodable legacy produce requests")
}

#[test]
fn unknown_api_versions_version_gets_unsupported_version_with_v0_header() -> Result<()> {
    let mut seeded = seeded_broker(BrokerOptions::default())?;
    let mut conn = seeded.connect()?;
    // What a future client sends: ApiVersions v127, header v2, a v3-shaped flexible body.
    let mut body = Vec::new();
    body.extend(18i16.to_be_bytes());
    body.extend(127i16.to_be_bytes());
    body.extend(4242i32.to_be_bytes());
    body.extend(4i16.to_be_bytes());
    body.extend(b"test");
    body.push(0); // header tagged fields
    body.extend([5, b'l', b'a', b'm', b'i', 6, b'0', b'.', b'0', b'.', b'1', 0]); // compact strings + tags
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend(body);
    conn.write_raw(&frame)?;
    let Reaction::Frame(mut payload) = conn.reaction(REACTION_WAIT)? else {
        bail!("ApiVersions v127 must be answered, not dropped");
    };
    // v0 response header: the correlation id and nothing else; then a v0 body.
    assert_eq!(i32::from_be_bytes(payload[0..4].try_into()?), 4242);
    let mut body: Bytes = payload.split_off(4);
    let response = ApiVersionsResponse::decode(&mut body, 0)?;
    assert_eq!(response.error_code, UNSUPPORTED_VERSION);
    let api_versions = response.api_keys.iter().find(|k| k.api_key == 18);
    let api_versions = api_versions.expect("the supported list names ApiVersions");
    assert!(
        api_versions.min_version == 0 && api_versions.max_version >= 3,
        "{api_versions:?}"
    );
    assert!(response.api_keys.iter().any(|k| k.api_key == 0), "Produce listed");
    assert!(response.api_keys.iter().any(|k| k.api_key == 1), "Fetch listed");
    seeded.assert_healthy("ApiVersions v127")
}

#[test]
fn corrupt_crc_is_refused_with_corrupt_message_and_nothing_is_appended() -> Result<()> {
    let mut seeded = seeded_broker(BrokerOptions::default())?;
    let mut conn = seeded.connect()?;
    let good = wire::record_batch(&[b"would be offset 3", b"and 4"], 1_700_000_100_000)?;
    for (what, position) in [
        ("a flipped payload byte", good.len() - 1),
        ("a flipped CRC byte", BATCH_CRC_OFFSET),
    ] {
        assert!(position == BATCH_CRC_OFFSET || position >= BATCH_CRC_COVERED_FROM);
        let mut corrupt = good.to_vec();
        corrupt[position] ^= 0x55;
        let answer = wire::produce(&mut conn, &seeded.topic, 0, Bytes::from(corrupt), -1)?;
        assert_eq!(answer.error_code, CORRUPT_MESSAGE, "{what}: {answer:?}");
    }
    // The same connection still works, and the refused batches took no offsets.
    let answer = wire::produce(&mut conn, &seeded.topic, 0, good, -1)?;
    assert_eq!(
        (answer.error_code, answer.base_offset),
        (0, 3),
        "next good batch after refusals"
    );
    assert_eq!(wire::fetch(&mut conn, &seeded.topic, 0, 0)?.high_watermark, 5);
    let records = wire::fetch_records(&mut conn, &seeded.topic, 0, 3, 2)?;
    let values: Vec<Option<Bytes>> = records.into_iter().map(|r| r.value).collect();
    assert_eq!(
        values,
        [
            Some(Bytes::from_static(b"would be offset 3")),
            Some(Bytes::from_static(b"and 4"))
        ]
    );
    seeded.assert_healthy("corrupt CRCs")
}

#[test]
fn record_larger_than_message_max_bytes_is_message_too_large() -> Result<()> {
    let mut seeded = seeded_broker(BrokerOptions::default().with_override("message.max.bytes", "10000"))?;
    let mut conn = seeded.connect()?;
    let big = vec![0x42u8; 20_000];
    let answer = wire::produce(
        &mut conn,
        &seeded.topic,
        0,
        wire::record_batch(&[&big], 1_700_000_200_000)?,
        -1,
    )?;
    assert_eq!(answer.error_code, MESSAGE_TOO_LARGE, "{answer:?}");
    let small = wire::produce(
        &mut conn,
        &seeded.topic,
        0,
        wire::record_batch(&[b"fits"], 1)?,
        -1,
    )?;
    assert_eq!(
        (small.error_code, small.base_offset),
        (0, 3),
        "the refused batch took no offset"
    );
    seeded.assert_healthy("an oversized record")
}

#[test]
fn hundreds_of_idle_and_half_open_connections_do_not_starve_clients() -> Result<()> {
    let mut seeded = seeded_broker(BrokerOptions::default())?;
    let mut idle: Vec<TcpStream> = Vec::new();
    for i in 0..400u32 {
        let stream = TcpStream::connect_timeout(&seeded.broker.addr(), Duration::from_secs(5))?;
        if i % 2 == 0 {
            // Half-open request: a size prefix and part of a header, then silence.
            use std::io::Write;
            (&stream).write_all(&[0, 0, 0, 30, 0, 18])?;
        }
        idle.push(stream);
    }
    seeded.assert_healthy("400 idle connections (while they stay open)")?;
    let mut conn = seeded.connect()?;
    let answer = wire::produce(
        &mut conn,
        &seeded.topic,
        0,
        wire::record_batch(&[b"busy"], 2)?,
        -1,
    )?;
    assert_eq!((answer.error_code, answer.base_offset), (0, 3));
    drop(idle);
    std::thread::sleep(Duration::from_millis(200));
    seeded.assert_healthy("400 connections closed at once")
}
