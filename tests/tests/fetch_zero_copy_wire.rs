//! Fetch answers sent from the segment files with sendfile: a multi-megabyte answer read by a
//! slow client (the socket fills again and again mid-file) arrives whole, in order, with valid
//! CRCs; the request's total byte limit is shared across partitions on batch boundaries; and
//! `/metrics` shows the bytes went the zero-copy way.

use anyhow::{ensure, Context, Result};
use bytes::{Buf, Bytes};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, StrBytes};
use laminar_tests::http::{get_ok, MetricsPage};
use laminar_tests::wire::{self, create_topic, FetchPartitionData, WireConnection};
use laminar_tests::Broker;
use std::io::Read;
use std::time::Duration;

const FETCH_VERSION: i16 = 11;

/// Appends `batches` batches of 60 records of 1000 bytes (about 60 KB each) to `partition`;
/// record i of batch b has value `[b as u8 ^ i as u8; 1000]`.
fn fill(conn: &mut WireConnection, topic: &str, partition: i32, batches: usize) -> Result<()> {
    for b in 0..batches {
        let values: Vec<Vec<u8>> = (0..60).map(|i| vec![(b as u8) ^ (i as u8); 1000]).collect();
        let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let answer = wire::produce(conn, topic, partition, wire::record_batch(&values, 1_000)?, 1)?;
        ensure!(answer.error_code == 0, "produce: {answer:?}");
    }
    Ok(())
}

fn fetch_request(topic: &str, partitions: &[i32], partition_max: i32, total_max: i32) -> FetchRequest {
    let partitions = partitions
        .iter()
        .map(|&p| {
            FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(0)
                .with_partition_max_bytes(partition_max)
        })
        .collect();
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(total_max)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(partitions)])
}

fn decode(mut frame: Bytes) -> Result<FetchResponse> {
    ResponseHeader::decode(&mut frame, 0)?;
    let response = FetchResponse::decode(&mut frame, FETCH_VERSION)?;
    ensure!(
        !frame.has_remaining(),
        "{} bytes after the response",
        frame.remaining()
    );
    Ok(response)
}

/// Offsets and values of every record, after checking each batch's CRC and that the records
/// end on a batch boundary.
fn records(data: &FetchPartitionData) -> Result<Vec<(i64, Vec<u8>)>> {
    let records = wire::decode_records(data).context("decoding (CRC checked)")?;
    Ok(records
        .into_iter()
        .map(|r| (r.offset, r.value.map(|v| v.to_vec()).unwrap_or_default()))
        .collect())
}

#[test]
fn a_large_answer_read_slowly_arrives_whole_and_in_order() -> Result<()> {
    let broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    create_topic(&mut conn, "slow-reader", 1)?;
    fill(&mut conn, "slow-reader", 0, 80)?;

    conn.send(
        &fetch_request("slow-reader", &[0], 8 << 20, 8 << 20),
        FETCH_VERSION,
    )?;
    // Read the ~4.9 MB answer in small sips, so the broker's sendfile meets a full socket often.
    let mut stream = conn.stream().try_clone()?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
    for chunk in frame.chunks_mut(256 * 1024) {
        std::thread::sleep(Duration::from_millis(20));
        stream.read_exact(chunk)?;
    }
    let response = decode(Bytes::from(frame))?;
    let got = records(&response.responses[0].partitions[0])?;
    ensure!(got.len() == 80 * 60, "{} records", got.len());
    for (n, (offset, value)) in got.iter().enumerate() {
        let (b, i) = (n / 60, n % 60);
        ensure!(*offset == n as i64, "record {n} has offset {offset}");
        ensure!(
            *value == vec![(b as u8) ^ (i as u8); 1000],
            "record {n} has the wrong value"
        );
    }

    let page = MetricsPage::parse(&get_ok(broker.http_addr(), "/metrics")?)?;
    let sent = |path: &str| page.value(&format!("laminar_kafka_fetch_bytes_total{{path=\"{path}\"}}"));
    let (sendfile, copied) = (sent("sendfile").unwrap_or(0.0), sent("copied").unwrap_or(0.0));
    ensure!(
        sendfile + copied >= 4_800_000.0,
        "file bytes sent: {sendfile} + {copied}"
    );
    ensure!(
        sendfile > copied,
        "mostly zero-copy: sendfile {sendfile}, copied {copied}"
    );
    Ok(())
}

#[test]
fn the_total_byte_limit_is_shared_across_partitions_on_batch_boundaries() -> Result<()> {
    let broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    create_topic(&mut conn, "budget", 3)?;
    for partition in 0..3 {
        fill(&mut conn, "budget", partition, 10)?;
    }
    let (partition_max, total_max) = (200_000, 300_000);
    let request = fetch_request("budget", &[0, 1, 2], partition_max, total_max);
    let response = conn.request(&request, FETCH_VERSION)?;
    let partitions = &response.responses[0].partitions;
    let sizes: Vec<usize> = partitions
        .iter()
        .map(|p| p.records.as_ref().map_or(0, Bytes::len))
        .collect();
    ensure!(sizes.iter().all(|&s| s <= partition_max as usize), "{sizes:?}");
    ensure!(sizes.iter().sum::<usize>() <= total_max as usize, "{sizes:?}");
    ensure!(
        sizes[0] > 0 && sizes[1] > 0,
        "the first two share the limit: {sizes:?}"
    );
    for partition in partitions {
        let got = records(partition)?;
        ensure!(got.len() % 60 == 0, "whole batches only: {} records", got.len());
        ensure!(
            got.iter().enumerate().all(|(n, (o, _))| *o == n as i64),
            "from offset 0"
        );
    }
    Ok(())
}
