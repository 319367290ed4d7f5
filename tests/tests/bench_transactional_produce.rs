//! `laminar bench produce --transactional` against the debug broker: the bench gets a producer
//! id for a transactional id, writes its batches in transactions of `--transaction-batches`
//! batches and commits each; a read_committed fetch of every partition then returns every
//! record, and each partition's last stable offset is its high watermark (no transaction left
//! open). No figure is judged.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use laminar_tests::cli::bench_json;
use laminar_tests::wire::{fetch_request, FetchPartitionData, WireConnection};
use laminar_tests::Broker;

/// Far above what the run takes; a hung run fails the test instead of hanging it.
const RUN_LIMIT: Duration = Duration::from_secs(120);
const TOPIC: &str = "bench-transactions";
const PARTITIONS: i32 = 3;
/// 3 000 records of 100 bytes in batches of 20 (2 000 value bytes): 150 batches, so 15
/// transactions of 10 batches.
const RECORDS: u64 = 3_000;
const TRANSACTIONS: u64 = 15;
const READ_COMMITTED: i8 = 1;

/// Fetches `partition` from `offset` as a read_committed consumer does (Fetch v11).
fn fetch_committed(conn: &mut WireConnection, partition: i32, offset: i64) -> Result<FetchPartitionData> {
    let request = fetch_request((TOPIC, partition), offset, 0).with_isolation_level(READ_COMMITTED);
    let response = conn.request(&request, 11)?;
    let answer = response.responses.first().and_then(|t| t.partitions.first());
    let answer = answer.context("an empty fetch answer")?.clone();
    ensure!(answer.error_code == 0, "fetch error {}", answer.error_code);
    Ok(answer)
}

/// The data records a read_committed consumer reads from `partition`: each is in a committed
/// transaction of the bench's producer. Checks the last stable offset is the high watermark.
fn committed_records_of(conn: &mut WireConnection, partition: i32) -> Result<u64> {
    let (mut offset, mut records) = (0i64, 0u64);
    for _fetch in 0..10_000 {
        let answer = fetch_committed(conn, partition, offset)?;
        ensure!(
            answer.last_stable_offset == answer.high_watermark,
            "partition {partition}: last stable offset {} below the high watermark {}",
            answer.last_stable_offset,
            answer.high_watermark
        );
        ensure!(
            answer.aborted_transactions.as_ref().is_none_or(Vec::is_empty),
            "partition {partition}: aborted transactions {:?}",
            answer.aborted_transactions
        );
        let mut bytes = answer.records.clone().unwrap_or_default();
        let from = offset;
        for set in kafka_protocol::records::RecordBatchDecoder::decode_all(&mut bytes)? {
            for record in set.records.iter().filter(|r| r.offset >= from) {
                offset = record.offset + 1;
                if !record.control {
                    ensure!(
                        record.transactional && record.producer_id >= 0,
                        "a record outside a transaction"
                    );
                    records += 1;
                }
            }
        }
        if offset >= answer.high_watermark {
            return Ok(records);
        }
    }
    anyhow::bail!("partition {partition}: no end after 10 000 fetches")
}

#[test]
fn bench_produce_commits_every_transaction_and_read_committed_reads_every_record() -> Result<()> {
    let broker = Broker::start_default()?;
    let dir = tempfile::tempdir()?;
    let brokers = broker.bootstrap();
    let partitions = PARTITIONS.to_string();
    let records = RECORDS.to_string();
    let args = [
        "produce",
        "--brokers",
        &brokers,
        "--topic",
        TOPIC,
        "--partitions",
        &partitions,
        "--num-records",
        &records,
        "--record-size",
        "100",
        "--batch-bytes",
        "2000",
        "--acks",
        "all",
        "--transactional",
        "--no-limits",
    ];
    let (stdout, json) = bench_json(dir.path(), &args, RUN_LIMIT)?;
    assert_eq!(json["records"], RECORDS, "{json:#}");
    assert_eq!(json["transactions"]["committed"], TRANSACTIONS, "{json:#}");
    assert!(json["transactions"]["end_txn_latency_ms"]["p99"]
        .as_f64()
        .is_some());
    assert!(stdout.contains("transactions: 15 committed"), "{stdout}");
    let mut conn = WireConnection::connect(broker.addr())?;
    let mut read = 0;
    for partition in 0..PARTITIONS {
        read += committed_records_of(&mut conn, partition)?;
    }
    assert_eq!(read, RECORDS, "read_committed reads every record once");
    Ok(())
}

#[test]
fn bench_produce_idempotent_writes_every_record_with_its_producer_id() -> Result<()> {
    let broker = Broker::start_default()?;
    let dir = tempfile::tempdir()?;
    let brokers = broker.bootstrap();
    let args = [
        "produce",
        "--brokers",
        &brokers,
        "--topic",
        "bench-idempotent",
        "--partitions",
        "2",
        "--num-records",
        "2000",
        "--record-size",
        "100",
        "--batch-bytes",
        "2000",
        "--acks",
        "all",
        "--idempotent",
        "--no-limits",
    ];
    let (_, json) = bench_json(dir.path(), &args, RUN_LIMIT)?;
    assert_eq!(json["records"], 2000, "{json:#}");
    assert!(json.get("transactions").is_none(), "{json:#}");
    let mut conn = WireConnection::connect(broker.addr())?;
    let data = laminar_tests::wire::fetch(&mut conn, "bench-idempotent", 0, 0)?;
    let records = laminar_tests::wire::decode_records(&data)?;
    assert!(!records.is_empty());
    for (sequence, record) in records.iter().enumerate() {
        assert!(record.producer_id >= 0 && record.producer_epoch == 0 && !record.transactional);
        assert_eq!(
            record.sequence, sequence as i32,
            "sequences count the partition's records"
        );
    }
    Ok(())
}

#[test]
fn bench_produce_refuses_idempotence_without_acks_all() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let args = [
        "produce",
        "--brokers",
        "127.0.0.1:1",
        "--topic",
        TOPIC,
        "--num-records",
        "1",
        "--idempotent",
        "--no-limits",
    ];
    let error = bench_json(dir.path(), &args, RUN_LIMIT).expect_err("acks=1 is refused");
    assert!(error.to_string().contains("needs --acks all"), "{error:#}");
    Ok(())
}
