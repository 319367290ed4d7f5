//! The metadata directory on real files: bounded by snapshots, and a torn tail truncated at
//! restart.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::*;
use laminar_controller::disk_format::LOG_FILE;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_keep_the_metadata_directory_bounded() {
    let cluster = Cluster::start(1, |c| {
        c.entries_since_snapshot_max = 200;
        c.entries_kept_after_snapshot = 50;
        // Nothing heartbeats during the churn.
        c.session_timeout_ms = 600_000;
    });
    let handle = cluster.handle(0);
    cluster.wait_leader(Duration::from_secs(5)).await;
    register_brokers(&handle, 1, &[]).await;
    let dir = &cluster.configs[0].metadata_dir;
    churn_topics(&handle, 400).await;
    let size_early = dir_size(dir);
    churn_topics(&handle, 1600).await;
    let size_late = dir_size(dir);
    // The log holds at most a snapshot interval plus what is kept: it does not grow with
    // the number of operations.
    assert!(size_late < 100_000, "metadata dir is {size_late} bytes");
    assert!(
        size_late < size_early * 2 + 20_000,
        "grew from {size_early} to {size_late}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_log_tail_is_truncated_at_restart() {
    let mut cluster = Cluster::start(1, |_| {});
    cluster.wait_leader(Duration::from_secs(5)).await;
    let handle = cluster.handle(0);
    register_brokers(&handle, 1, &[]).await;
    for i in 0..5 {
        handle
            .create_topics(vec![topic(&format!("kept-{i}"), 1, 1)])
            .await
            .unwrap();
    }
    let before = handle.metadata();
    cluster.stop(0);
    let log_path = cluster.configs[0].metadata_dir.join(LOG_FILE);
    let good_len = std::fs::metadata(&log_path).unwrap().len();
    // A frame that claims 200 bytes and has 3, as a crash mid-append leaves it.
    let mut file = std::fs::OpenOptions::new().append(true).open(&log_path).unwrap();
    file.write_all(&200u32.to_le_bytes()).unwrap();
    file.write_all(&[1, 2, 3, 4, 5, 6, 7]).unwrap();
    drop(file);
    cluster.restart(0);
    cluster.wait_leader(Duration::from_secs(5)).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while cluster.handle(0).metadata().metadata != before.metadata {
        assert!(Instant::now() < deadline, "state not recovered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Truncated to the good frames (then grown by the new leader's blank entry).
    let recovered_len = std::fs::metadata(&log_path).unwrap().len();
    assert!(
        recovered_len >= good_len && recovered_len < good_len + 100,
        "{good_len} -> {recovered_len}"
    );
    let results = cluster
        .handle(0)
        .create_topics(vec![topic("after-restart", 1, 1)])
        .await
        .unwrap();
    assert!(results[0].result.is_ok(), "{results:?}");
}
