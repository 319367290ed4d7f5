//! A broker checkpoints the partitions that were written and then left idle: each one's state
//! file says clean again (`engine/src/log/disk_state.rs`), so a crash after that recovers none
//! of them. More partitions than the shard checkpoints at once, so that the pass's concurrency
//! is exercised (`broker/src/maintenance.rs`).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::Broker;

const TOPIC: &str = "idle";
const PARTITIONS: i32 = 200;

/// The state file's state byte: `Some(true)` clean, `Some(false)` dirty, `None` no (valid)
/// file, which counts as dirty. Layout: magic "LLST", format version, state (1 clean, 0 dirty).
fn clean(partition_dir: &Path) -> Option<bool> {
    let bytes = std::fs::read(partition_dir.join(".laminar-log-state")).ok()?;
    (bytes.len() >= 6 && &bytes[..4] == b"LLST").then(|| bytes[5] == 1)
}

fn clean_count(broker: &Broker) -> usize {
    let dirs = (0..PARTITIONS).map(|p| broker.data_dir().join(format!("{TOPIC}-{p}")));
    dirs.filter(|dir| clean(dir) == Some(true)).count()
}

#[test]
fn partitions_written_then_left_idle_are_checkpointed_clean() -> Result<()> {
    let broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    wire::create_topic(&mut conn, TOPIC, PARTITIONS)?;
    for partition in 0..PARTITIONS {
        let batch = wire::record_batch(&[b"value"], 1_700_000_000_000)?;
        let answer = wire::produce(&mut conn, TOPIC, partition, batch, 1)?;
        ensure!(
            answer.error_code == 0,
            "partition {partition}: error {}",
            answer.error_code
        );
    }
    ensure!(
        clean_count(&broker) == 0,
        "written partitions are dirty until checkpointed"
    );
    // Checkpointed once idle for 10 s, by a pass every 5 s: give it three times that.
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut checkpointed = 0;
    while Instant::now() < deadline {
        checkpointed = clean_count(&broker);
        if checkpointed == PARTITIONS as usize {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    anyhow::bail!("{checkpointed} of {PARTITIONS} partitions checkpointed after 45 s idle")
}
