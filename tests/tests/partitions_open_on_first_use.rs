//! Start-up opens no partition: after a clean shutdown a partition opens when a request first
//! names it, reading it leaves it clean (a crash then would need no recovery for it), and the
//! first write makes it dirty. Retention still reaches the partitions
//! nobody has asked for since the start. A partition never written has no files, and reading
//! it creates none: it answers as empty at offset 0, and a long poll on it wakes at its first
//! record.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use laminar_tests::http::get_ok;
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::{Broker, BrokerOptions};

const TOPIC: &str = "lazy";
const PARTITIONS: i32 = 20;
const STATE_FILE: &str = ".laminar-log-state";
/// Old enough for the default retention.ms (7 days): every closed segment is past it.
const LONG_AGO_MS: i64 = 1_600_000_000_000;

/// The `open` flag of every partition of the topic in `/v1/status`, by partition index.
fn open_flags(broker: &Broker) -> Result<Vec<bool>> {
    let status: serde_json::Value =
        serde_json::from_str(&get_ok(broker.http_addr(), "/v1/status?partitions=true")?)?;
    let mut flags = vec![false; PARTITIONS as usize];
    let shards = status["shards"].as_array().cloned().unwrap_or_default();
    for partition in shards
        .iter()
        .flat_map(|s| s["partitions"].as_array().cloned().unwrap_or_default())
    {
        if partition["topic"] == TOPIC {
            let index = partition["partition"].as_u64().unwrap_or(u64::MAX) as usize;
            flags[index] = partition["open"].as_bool().unwrap_or(false);
        }
    }
    Ok(flags)
}

/// Whether the partition's state file says clean (`engine/src/log/disk_state.rs`: byte 5).
fn is_clean(broker: &Broker, partition: i32) -> Result<bool> {
    let bytes = std::fs::read(partition_dir(broker, partition).join(STATE_FILE))?;
    Ok(bytes.len() == 36 && &bytes[..5] == b"LLST\x04" && bytes[5] == 1)
}

/// Whether the log grew past the state file's synced prefix: its segment (base offset in
/// bytes 8..16 of the state file, `engine/src/log/disk_state.rs`) is longer than the length in
/// bytes 16..24, or a later segment exists.
fn grown_past_clean_prefix(broker: &Broker, partition: i32) -> Result<bool> {
    let dir = partition_dir(broker, partition);
    let state = std::fs::read(dir.join(STATE_FILE))?;
    let prefix_base = i64::from_be_bytes(state[8..16].try_into()?);
    let prefix_len = u64::from_be_bytes(state[16..24].try_into()?);
    let log_len = std::fs::metadata(dir.join(format!("{prefix_base:020}.log")))?.len();
    let later_segment = std::fs::read_dir(&dir)?.any(|entry| {
        let name = entry
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .unwrap_or_default();
        name.strip_suffix(".log")
            .and_then(|base| base.parse::<i64>().ok())
            .is_some_and(|base| base > prefix_base)
    });
    Ok(log_len > prefix_len || later_segment)
}

fn partition_dir(broker: &Broker, partition: i32) -> std::path::PathBuf {
    broker.data_dir().join(format!("{TOPIC}-{partition}"))
}

fn segment_count(dir: &Path) -> Result<usize> {
    let mut count = 0;
    for entry in std::fs::read_dir(dir)? {
        if entry?.file_name().to_string_lossy().ends_with(".log") {
            count += 1;
        }
    }
    Ok(count)
}

fn seed(broker: &Broker) -> Result<()> {
    let mut conn = WireConnection::connect(broker.addr())?;
    wire::create_topic(&mut conn, TOPIC, PARTITIONS)?;
    for partition in 0..PARTITIONS {
        for round in 0..5 {
            let value = format!("{partition}-{round}-{}", "x".repeat(100));
            let batch = wire::record_batch(&[value.as_bytes()], LONG_AGO_MS)?;
            let answer = wire::produce(&mut conn, TOPIC, partition, batch, 1)?;
            assert_eq!(answer.error_code, 0);
        }
    }
    Ok(())
}

#[test]
fn partitions_open_on_first_use_and_reads_keep_them_clean() -> Result<()> {
    let options = BrokerOptions::default()
        .with_override("offsets.topic.num.partitions", "1")
        .with_override("log.segment.bytes", "300");
    let mut broker = Broker::start(options)?;
    seed(&broker)?;
    broker.terminate()?;
    for partition in 0..PARTITIONS {
        assert!(is_clean(&broker, partition)?);
        assert!(segment_count(&partition_dir(&broker, partition))? > 1);
    }

    broker.restart()?;
    assert_eq!(
        open_flags(&broker)?,
        vec![false; PARTITIONS as usize],
        "none opened at start"
    );
    let mut conn = WireConnection::connect(broker.addr())?;
    let (error, start, _) = wire::list_offset(&mut conn, TOPIC, 3, -2)?;
    assert_eq!((error, start), (0, 0));
    let records = wire::fetch_records(&mut conn, TOPIC, 3, 0, 5)?;
    assert_eq!(records.len(), 5);
    let flags = open_flags(&broker)?;
    assert!(
        flags[3] && flags.iter().filter(|open| **open).count() == 1,
        "{flags:?}"
    );
    assert!(is_clean(&broker, 3)?, "a read leaves the partition clean");
    let batch = wire::record_batch(&[b"fresh"], LONG_AGO_MS)?;
    assert_eq!(wire::produce(&mut conn, TOPIC, 3, batch, -1)?.error_code, 0);
    // The first write leaves the state file alone: the log growing past the length the clean
    // state recorded is what tells an open after a crash to recover it.
    assert!(
        is_clean(&broker, 3)?,
        "the state file is not written by an append"
    );
    assert!(
        grown_past_clean_prefix(&broker, 3)?,
        "the first write grows the log past it"
    );
    drop(conn);
    broker.terminate()?;
    assert!(is_clean(&broker, 3)?, "a clean shutdown leaves it clean again");

    // Retention reaches partitions no request named since the start.
    broker
        .options_mut()
        .overrides
        .push(("log.retention.check.interval.ms".into(), "200".into()));
    broker.restart()?;
    let deadline = Instant::now() + Duration::from_secs(20);
    for partition in 0..PARTITIONS {
        while segment_count(&partition_dir(&broker, partition))? > 1 {
            if Instant::now() > deadline {
                bail!("retention did not delete the old segments of {TOPIC}-{partition}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

/// A fetch waiting up to 10 s on partition 0 of `topic` from offset 0, sent now; its answer is
/// read by [`long_poll_answer`].
fn long_poll(conn: &mut WireConnection, topic: &str) -> Result<()> {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(10_000)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(kafka_protocol::protocol::StrBytes::from_string(
                topic.into(),
            )))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    conn.send(&request, 11)?;
    Ok(())
}

#[test]
fn reading_a_partition_never_written_creates_no_files() -> Result<()> {
    const TOPIC_UNWRITTEN: &str = "unwritten";
    let broker = Broker::start(BrokerOptions::default().with_override("offsets.topic.num.partitions", "1"))?;
    let mut conn = WireConnection::connect(broker.addr())?;
    wire::create_topic(&mut conn, TOPIC_UNWRITTEN, 8)?;
    for partition in 0..8 {
        let read = wire::fetch(&mut conn, TOPIC_UNWRITTEN, partition, 0)?;
        assert_eq!(
            (read.error_code, read.high_watermark),
            (0, 0),
            "partition {partition}"
        );
        assert!(read.records.as_ref().is_none_or(|r| r.is_empty()));
        assert_eq!(
            wire::list_offset(&mut conn, TOPIC_UNWRITTEN, partition, -1)?,
            (0, 0, -1)
        );
        assert_eq!(
            wire::list_offset(&mut conn, TOPIC_UNWRITTEN, partition, -2)?,
            (0, 0, -1)
        );
        assert_eq!(wire::list_offset(&mut conn, TOPIC_UNWRITTEN, partition, 0)?.1, -1);
    }
    let past_the_end = wire::fetch(&mut conn, TOPIC_UNWRITTEN, 1, 5)?;
    assert_eq!(past_the_end.error_code, 1, "OFFSET_OUT_OF_RANGE");
    let dirs = std::fs::read_dir(broker.data_dir())?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(TOPIC_UNWRITTEN))
        .count();
    assert_eq!(dirs, 0, "reads created partition directories");

    // A long poll on a partition never written wakes at its first record, well before 10 s.
    let mut waiting = WireConnection::connect(broker.addr())?;
    long_poll(&mut waiting, TOPIC_UNWRITTEN)?;
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let batch = wire::record_batch(&[b"first"], LONG_AGO_MS)?;
    assert_eq!(
        wire::produce(&mut conn, TOPIC_UNWRITTEN, 0, batch, 1)?.error_code,
        0
    );
    let answer = waiting.read_frame()?.expect("the long poll answers");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "woke after {:?}",
        started.elapsed()
    );
    assert!(
        answer.len() > 40,
        "the answer carries the record ({} bytes)",
        answer.len()
    );
    Ok(())
}
