//! The figures of decision 0012, rerun with
//! `cargo test -p laminar-controller --release --test measure -- --ignored --nocapture`.

mod common;

use std::time::{Duration, Instant};

use common::*;

fn summary(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    format!(
        "n={} median={:?} p90={:?} max={:?}",
        samples.len(),
        at(0.5),
        at(0.9),
        at(1.0)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement: run explicitly"]
async fn measure_failover_commit_latency_and_directory_size() {
    let mut elections = Vec::new();
    for _ in 0..7 {
        let mut cluster = Cluster::start(3, |_| {});
        let leader = cluster.wait_leader(Duration::from_secs(5)).await;
        register_brokers(&cluster.handle(leader), 1, &[]).await;
        cluster.stop(leader);
        let stopped_at = Instant::now();
        cluster.wait_leader(Duration::from_secs(10)).await;
        elections.push(stopped_at.elapsed());
    }
    println!(
        "new leader after the leader stops (heartbeat 50 ms, election timeout 150-300 ms): {}",
        summary(elections)
    );

    // Kafka-like timings for the rest: heartbeat 100 ms, election 1-2 s.
    let cluster = Cluster::start(3, |c| {
        c.session_timeout_ms = 600_000;
        c.heartbeat_interval_ms = 100;
        c.election_timeout_min_ms = 1000;
        c.election_timeout_max_ms = 2000;
    });
    let leader = cluster.wait_leader(Duration::from_secs(5)).await;
    let handle = cluster.handle(leader);
    register_brokers(&handle, 3, &[]).await;
    let mut applied_everywhere = Vec::new();
    for i in 0..200 {
        let started = Instant::now();
        handle
            .create_topics(vec![topic(&format!("latency-{i}"), 1, 3)])
            .await
            .unwrap();
        let version = handle.metadata().version;
        while cluster.running().iter().any(|h| h.metadata().version < version) {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        applied_everywhere.push(started.elapsed());
    }
    println!(
        "create_topics until applied on all three nodes: {}",
        summary(applied_everywhere)
    );

    let started = Instant::now();
    churn_topics(&handle, 10_000).await;
    let elapsed = started.elapsed();
    let sizes: Vec<u64> = cluster
        .configs
        .iter()
        .map(|c| dir_size(&c.metadata_dir))
        .collect();
    println!(
        "10 000 topic create/delete operations in {elapsed:?} ({:.0} ops/s); metadata dir sizes {sizes:?} bytes \
         (snapshot every {} entries, {} kept)",
        10_000.0 / elapsed.as_secs_f64(),
        cluster.configs[0].entries_since_snapshot_max,
        cluster.configs[0].entries_kept_after_snapshot
    );
}
