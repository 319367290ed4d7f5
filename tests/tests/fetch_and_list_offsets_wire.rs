//! Fetch and ListOffsets semantics that clients rely on, checked at the byte level: a fetch
//! answers with every whole batch that fits (and at least one, even if it is larger than the
//! limit), a fetch inside a batch returns that batch, a fetch past the end is
//! OFFSET_OUT_OF_RANGE, ListOffsets by timestamp names the exact record inside a batch, and from
//! v13 a fetch names topics by id (an unknown id answers UNKNOWN_TOPIC_ID).

use anyhow::Result;
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::Broker;

const OFFSET_OUT_OF_RANGE: i16 = 1;
const UNKNOWN_TOPIC_ID: i16 = 100;

/// A broker and a topic holding five batches of three records: offsets 3b..3b+2 carry
/// timestamps 1000 + 10b + i.
fn five_batches() -> Result<(Broker, WireConnection, String)> {
    let broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let topic = laminar_tests::rdkafka_client::unique_topic("fetch-wire");
    wire::auto_create(&mut conn, &topic)?;
    for batch in 0..5i64 {
        let values: Vec<&[u8]> = vec![b"abc", b"def", b"ghi"];
        let answer = wire::produce(
            &mut conn,
            &topic,
            0,
            wire::record_batch(&values, 1000 + batch * 10)?,
            -1,
        )?;
        assert_eq!((answer.error_code, answer.base_offset), (0, batch * 3));
    }
    Ok((broker, conn, topic))
}

#[test]
fn a_fetch_returns_every_whole_batch_that_fits() -> Result<()> {
    let (_broker, mut conn, topic) = five_batches()?;
    let data = wire::fetch(&mut conn, &topic, 0, 0)?;
    assert_eq!((data.error_code, data.high_watermark), (0, 15));
    let bases: Vec<i64> = wire::batch_infos(&data)?.iter().map(|b| b.min_offset).collect();
    assert_eq!(
        bases,
        [0, 3, 6, 9, 12],
        "8 MiB fits all five batches of one partition"
    );
    Ok(())
}

#[test]
fn a_fetch_by_topic_id_reads_the_topic_and_an_unknown_id_answers_unknown_topic_id() -> Result<()> {
    let (_broker, mut conn, topic) = five_batches()?;
    let topic_id = wire::partition_view(&mut conn, &topic, 0)?.topic_id;
    let unknown_id = [0xee; 16];
    let mut request = wire::fetch_request(("", 0), 3, 0);
    request.topics[0].topic_id = uuid::Uuid::from_bytes(topic_id);
    let mut unknown = request.topics[0].clone();
    unknown.topic_id = uuid::Uuid::from_bytes(unknown_id);
    request.topics.push(unknown);
    for version in [13, 15] {
        let answer = conn.request(&request, version)?;
        let topics: Vec<([u8; 16], i16, i64)> = answer
            .responses
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (*t.topic_id.as_bytes(), p.error_code, p.high_watermark))
            })
            .collect();
        assert_eq!(
            topics,
            [(topic_id, 0, 15), (unknown_id, UNKNOWN_TOPIC_ID, -1)],
            "v{version}"
        );
        let bases: Vec<i64> = wire::batch_infos(&answer.responses[0].partitions[0])?
            .iter()
            .map(|b| b.min_offset)
            .collect();
        assert_eq!(bases, [3, 6, 9, 12], "v{version}");
    }
    Ok(())
}

#[test]
fn a_fetch_inside_a_batch_returns_that_whole_batch() -> Result<()> {
    let (_broker, mut conn, topic) = five_batches()?;
    let data = wire::fetch(&mut conn, &topic, 0, 7)?;
    let first = wire::batch_infos(&data)?
        .first()
        .map(|b| (b.min_offset, b.record_count));
    assert_eq!(first, Some((6, 3)), "the batch holding offset 7 starts at 6");
    let records = wire::fetch_records(&mut conn, &topic, 0, 7, 8)?;
    assert_eq!(
        records.iter().map(|r| r.offset).collect::<Vec<_>>(),
        (7..15).collect::<Vec<_>>()
    );
    Ok(())
}

#[test]
fn a_fetch_past_the_end_is_offset_out_of_range() -> Result<()> {
    let (_broker, mut conn, topic) = five_batches()?;
    let at_end = wire::fetch(&mut conn, &topic, 0, 15)?;
    assert_eq!(at_end.error_code, 0, "the log end itself is a valid position");
    assert!(wire::batch_infos(&at_end)?.is_empty());
    assert_eq!(
        wire::fetch(&mut conn, &topic, 0, 16)?.error_code,
        OFFSET_OUT_OF_RANGE
    );
    Ok(())
}

#[test]
fn list_offsets_by_timestamp_names_the_exact_record() -> Result<()> {
    let (_broker, mut conn, topic) = five_batches()?;
    assert_eq!(wire::list_offset(&mut conn, &topic, 0, -2)?.1, 0, "earliest");
    assert_eq!(wire::list_offset(&mut conn, &topic, 0, -1)?.1, 15, "latest");
    // Batch 2 holds offsets 6, 7, 8 at 1020, 1021, 1022.
    assert_eq!(
        wire::list_offset(&mut conn, &topic, 0, 1021)?,
        (0, 7, 1021),
        "exact record time"
    );
    assert_eq!(
        wire::list_offset(&mut conn, &topic, 0, 1015)?,
        (0, 6, 1020),
        "between batches"
    );
    assert_eq!(
        wire::list_offset(&mut conn, &topic, 0, 999)?,
        (0, 0, 1000),
        "before everything"
    );
    assert_eq!(
        wire::list_offset(&mut conn, &topic, 0, 5000)?.1,
        -1,
        "after everything: -1"
    );
    Ok(())
}
