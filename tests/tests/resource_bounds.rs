//! Clients that hold resources instead of using them — stalled partial frames, thousands of idle
//! connections, a consumer that never reads its socket, a producer that never waits — leave the
//! broker's resident memory under the bounds the README states, give memory back when they go,
//! and do not hold up other clients.

use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiVersionsRequest, BrokerId, FetchRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::process::rss_bytes;
use laminar_tests::wire::{self, Reaction, WireConnection};
use laminar_tests::{Broker, BrokerOptions};

const MIB: u64 = 1 << 20;
/// How long another client's request may take while the broker is under abuse (a liveness
/// bound, far above a normal answer's milliseconds; not a latency goal).
const ANSWER_WAIT_MAX: Duration = Duration::from_secs(3);

/// Another client produces one record (acks=1: this measures the broker, not the disk's
/// fdatasync under someone else's flood) and reads it back within [`ANSWER_WAIT_MAX`].
fn assert_other_clients_served(broker: &Broker, topic: &str, round: i64) -> Result<()> {
    let started = Instant::now();
    let mut conn = WireConnection::connect(broker.addr())?;
    conn.stream().set_read_timeout(Some(ANSWER_WAIT_MAX))?;
    let batch = wire::record_batch(&[b"still served"], 1_700_000_000_000)?;
    let produced = wire::produce(&mut conn, topic, 0, batch, 1)?;
    assert_eq!(produced.error_code, 0, "produce by another client");
    let fetched = wire::fetch(&mut conn, topic, 0, produced.base_offset)?;
    assert_eq!(fetched.error_code, 0);
    let took = started.elapsed();
    if took > ANSWER_WAIT_MAX {
        bail!("another client waited {took:?} (round {round})");
    }
    Ok(())
}

/// Writes as much of `bytes` as the socket takes within a short wait; a broker that stopped
/// reading (back-pressure) leaves the rest unsent.
fn write_what_fits(stream: &mut TcpStream, bytes: &[u8]) -> Result<usize> {
    stream.set_write_timeout(Some(Duration::from_millis(200)))?;
    let mut written = 0;
    while written < bytes.len() {
        match stream.write(&bytes[written..]) {
            Ok(n) => written += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => return Err(e).context("writing a partial frame"),
        }
    }
    Ok(written)
}

/// Waits until `pid`'s RSS is at most `bound` (memory given back), or fails with what it was.
fn wait_for_rss_at_most(pid: u32, bound: u64, wait: Duration) -> Result<u64> {
    let started = Instant::now();
    loop {
        let rss = rss_bytes(pid)?;
        if rss <= bound {
            return Ok(rss);
        }
        if started.elapsed() > wait {
            bail!("RSS stayed at {} MiB, above {} MiB", rss / MIB, bound / MIB);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// 200 connections each announce a frame just under socket.request.max.bytes, send 1 MiB of it
/// and stall: they took RSS from 58 MB to 888 MB and it stayed at 476 MB after they closed.
/// Now all partial frames together hold at most queued.max.request.bytes (here 128 MiB) beyond
/// 64 KiB per connection, others are served meanwhile, and memory comes back after they close.
#[test]
fn stalled_partial_frames_hold_at_most_the_request_budget_and_give_it_back() -> Result<()> {
    let budget = 128 * MIB;
    let broker = Broker::start(
        BrokerOptions::default().with_override("queued.max.request.bytes", &budget.to_string()),
    )?;
    let topic = "partial-frames";
    wire::create_topic(&mut WireConnection::connect(broker.addr())?, topic, 1)?;
    assert_other_clients_served(&broker, topic, 0)?;
    let pid = broker.pid().context("pid")?;
    let baseline = rss_bytes(pid)?;
    let announced = (100 * MIB - 1) as i32;
    let mut prefix_and_body = announced.to_be_bytes().to_vec();
    prefix_and_body.extend([0u8, 0, 0, 11, 0, 0, 0, 1, 0xff, 0xff]); // Fetch v11 header start
    prefix_and_body.resize(4 + MIB as usize, 7);
    let mut stalled = Vec::new();
    let mut sent = 0;
    for _ in 0..200 {
        let mut stream = TcpStream::connect(broker.addr())?;
        sent += write_what_fits(&mut stream, &prefix_and_body)?;
        stalled.push(stream);
    }
    std::thread::sleep(Duration::from_secs(1));
    let during = rss_bytes(pid)?;
    assert_other_clients_served(&broker, topic, 1)?;
    let allowance = 200 * 64 * 1024;
    let slack = 48 * MIB;
    eprintln!(
        "sent {} MiB of partial frames; RSS {} MiB before, {} MiB during",
        sent as u64 / MIB,
        baseline / MIB,
        during / MIB
    );
    assert!(
        during <= baseline + budget + allowance + slack,
        "RSS {} MiB with partial frames (baseline {} MiB, budget {} MiB)",
        during / MIB,
        baseline / MIB,
        budget / MIB
    );
    drop(stalled);
    let after = wait_for_rss_at_most(pid, baseline + slack, Duration::from_secs(10))?;
    eprintln!("RSS {} MiB after the stalled connections closed", after / MIB);
    assert_other_clients_served(&broker, topic, 2)
}

/// A frame that stops arriving is timed out (laminar.request.receive.timeout.ms): its connection
/// is closed and its memory freed, while a connection idle between requests is left alone.
#[test]
fn a_frame_that_stops_arriving_is_timed_out() -> Result<()> {
    let broker =
        Broker::start(BrokerOptions::default().with_override("laminar.request.receive.timeout.ms", "1000"))?;
    let mut idle = WireConnection::connect(broker.addr())?;
    idle.request(&ApiVersionsRequest::default(), 0)?;
    let mut partial = WireConnection::connect(broker.addr())?;
    partial.write_raw(&[0, 0, 1, 0, 0, 18, 0, 0])?;
    let started = Instant::now();
    assert_eq!(partial.reaction(Duration::from_secs(10))?, Reaction::Closed);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(900), "closed after {took:?}");
    assert_eq!(idle.request(&ApiVersionsRequest::default(), 0)?.error_code, 0);
    Ok(())
}

/// 2 000 connections that each made one request and went quiet: bounded memory each, and the
/// broker serves others meanwhile.
#[test]
fn two_thousand_idle_connections_cost_bounded_memory() -> Result<()> {
    let broker = Broker::start(BrokerOptions::default())?;
    let topic = "idle-connections";
    wire::create_topic(&mut WireConnection::connect(broker.addr())?, topic, 1)?;
    assert_other_clients_served(&broker, topic, 0)?;
    let pid = broker.pid().context("pid")?;
    let baseline = rss_bytes(pid)?;
    let mut idle = Vec::new();
    for _ in 0..2000 {
        let mut conn = WireConnection::connect(broker.addr())?;
        conn.request(&ApiVersionsRequest::default(), 3)?;
        idle.push(conn);
    }
    let during = rss_bytes(pid)?;
    let per_connection = during.saturating_sub(baseline) / 2000;
    eprintln!("2000 idle connections: {per_connection} bytes of RSS each");
    assert!(
        per_connection <= 32 * 1024,
        "{per_connection} bytes per idle connection"
    );
    assert_other_clients_served(&broker, topic, 1)
}

fn fetch_everything(topic: &str) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(64 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(64 << 20)])])
}

/// A consumer that asks for 32 MiB again and again and never reads the answers: the broker stops
/// reading its requests once 16 answers are owed, and answers are file ranges, not copies.
#[test]
fn a_consumer_that_never_reads_holds_bounded_memory() -> Result<()> {
    let broker = Broker::start(BrokerOptions::default())?;
    let topic = "never-read";
    let mut conn = WireConnection::connect(broker.addr())?;
    wire::create_topic(&mut conn, topic, 1)?;
    let value = vec![5u8; 512 * 1024];
    for _ in 0..64 {
        let batch = wire::record_batch(&[&value], 1_700_000_000_000)?;
        assert_eq!(wire::produce(&mut conn, topic, 0, batch, 1)?.error_code, 0);
    }
    let pid = broker.pid().context("pid")?;
    let baseline = rss_bytes(pid)?;
    let mut greedy = WireConnection::connect(broker.addr())?;
    greedy
        .stream()
        .set_write_timeout(Some(Duration::from_millis(500)))?;
    let request = fetch_everything(topic);
    let mut sent = 0;
    for _ in 0..200 {
        match greedy.send(&request, 11) {
            Ok(_) => sent += 1,
            Err(_) => break, // the broker stopped reading: back-pressure
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    let during = rss_bytes(pid)?;
    eprintln!(
        "{sent} fetches of 32 MiB never read: RSS {} -> {} MiB",
        baseline / MIB,
        during / MIB
    );
    assert!(during <= baseline + 64 * MIB, "RSS {} MiB", during / MIB);
    assert_other_clients_served(&broker, topic, 1)
}

/// A producer that pipelines acks=0 requests as fast as it can write them: the broker's memory
/// stays bounded (appends go to the page cache, frames are freed once appended) and another
/// client is served meanwhile.
#[test]
fn a_producer_that_never_waits_holds_bounded_memory() -> Result<()> {
    let broker = Broker::start(BrokerOptions::default())?;
    let (topic, other_topic) = ("flood", "beside-the-flood");
    let mut admin = WireConnection::connect(broker.addr())?;
    wire::create_topic(&mut admin, topic, 1)?;
    wire::create_topic(&mut admin, other_topic, 1)?;
    let pid = broker.pid().context("pid")?;
    let baseline = rss_bytes(pid)?;
    let value = vec![9u8; 256 * 1024];
    let batch = wire::record_batch(&[&value, &value, &value, &value], 1_700_000_000_000)?;
    let request = ProduceRequest::default()
        .with_acks(0)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch))])]);
    let addr = broker.addr();
    let flood = std::thread::spawn(move || -> Result<usize> {
        let mut conn = WireConnection::connect(addr)?;
        let mut sent = 0;
        // 3 s or 2 GiB, whichever comes first (CI's disk takes all of it).
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until && sent < 2048 {
            conn.send(&request, 8)?;
            sent += 1;
        }
        Ok(sent)
    });
    let mut peak = 0;
    for round in 1..=3 {
        std::thread::sleep(Duration::from_millis(700));
        peak = peak.max(rss_bytes(pid)?);
        assert_other_clients_served(&broker, other_topic, round)?;
    }
    let sent = flood.join().expect("flood thread")?;
    eprintln!(
        "{sent} MiB produced with acks=0; RSS {} MiB before, {} MiB at the peak",
        baseline / MIB,
        peak / MIB
    );
    assert!(sent > 0);
    assert!(peak <= baseline + 192 * MIB, "RSS {} MiB", peak / MIB);
    Ok(())
}
