//! A log dir that fills up: produce is refused with KAFKA_STORAGE_ERROR (retriable) while it is
//! full, fetches still work, and once space is freed the same broker process takes produce
//! again, every acknowledged record intact. The log dir is a small tmpfs, so the test needs
//! root (to mount it); without root it says so and skips.

use std::fs;
use std::os::unix::fs::MetadataExt;

use anyhow::{bail, ensure, Result};
use bytes::Bytes;
use laminar_tests::disks::{fill, Tmpfs};
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::{Broker, BrokerOptions};

const KAFKA_STORAGE_ERROR: i16 = 56;
const TOPIC: &str = "full";
const TMPFS_SIZE: &str = "8m";
/// Larger than the tmpfs, so produce must find it full.
const PRODUCE_ATTEMPTS: usize = 200;

fn value(i: usize) -> Vec<u8> {
    let mut bytes = format!("record-{i}-").into_bytes();
    bytes.resize(60 << 10, b'x');
    bytes
}

fn produce(conn: &mut WireConnection, i: usize) -> Result<(i16, i64)> {
    let batch = wire::record_batch(&[&value(i)], 1_700_000_000_000 + i as i64)?;
    let answer = wire::produce(conn, TOPIC, 0, batch, -1)?;
    Ok((answer.error_code, answer.base_offset))
}

#[test]
fn produce_on_a_full_log_dir_is_retriable_and_resumes_once_space_is_freed() -> Result<()> {
    // /proc/self belongs to the process's effective user.
    if fs::metadata("/proc/self")?.uid() != 0 {
        eprintln!("SKIPPED {}: mounting a tmpfs needs root", module_path!());
        return Ok(());
    }
    let options = BrokerOptions::default()
        .with_override("offsets.topic.num.partitions", "1")
        .with_override("laminar.cores", "1");
    let mut broker = Broker::start(options)?;
    broker.terminate()?;
    let tmpfs = Tmpfs::mount(&broker.data_dir(), TMPFS_SIZE)?;
    broker.restart()?;
    let pid = broker.pid();
    let mut conn = WireConnection::connect(broker.addr())?;
    wire::create_topic(&mut conn, TOPIC, 1)?;

    let mut acked = Vec::new();
    for i in 0..3 {
        let (code, offset) = produce(&mut conn, i)?;
        ensure!(
            code == 0 && offset == i as i64,
            "before the disk fills: {code} at {offset}"
        );
        acked.push(i);
    }
    let filler = tmpfs.path.join("filler");
    fill(&filler)?;
    // The segment's blocks reserved ahead take a few more; then the disk is full.
    let mut refused = 0;
    for i in acked.len()..PRODUCE_ATTEMPTS {
        match produce(&mut conn, i)? {
            (0, offset) if offset == acked.len() as i64 => acked.push(i),
            (KAFKA_STORAGE_ERROR, _) => refused += 1,
            other => bail!("produce {i}: {other:?}"),
        }
        if refused == 3 {
            break;
        }
    }
    ensure!(refused == 3, "{} records went into an 8 MiB tmpfs", acked.len());
    assert_eq!(wire::fetch(&mut conn, TOPIC, 0, 0)?.error_code, 0, "reads go on");

    fs::remove_file(&filler)?;
    let (code, offset) = produce(&mut conn, PRODUCE_ATTEMPTS)?;
    assert_eq!(
        (code, offset),
        (0, acked.len() as i64),
        "resumes once space is freed"
    );
    acked.push(PRODUCE_ATTEMPTS);
    assert_eq!(broker.pid(), pid, "the same broker process");

    let records = wire::fetch_records(&mut conn, TOPIC, 0, 0, acked.len())?;
    for (record, i) in records.iter().zip(&acked) {
        assert_eq!(
            record.value,
            Some(Bytes::from(value(*i))),
            "offset {}",
            record.offset
        );
    }
    broker.kill9()?;
    Ok(())
}
