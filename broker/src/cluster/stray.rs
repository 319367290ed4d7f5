//! Stray replicas: partition directories in this broker's log dir that the quorum's metadata
//! does not give it, left by a topic deleted, or a replica moved off, while the broker was down
//! (while it runs, `view::delete_removed_topics` and the replication manager delete them as the
//! metadata changes). At start-up, before any shard runs, once the metadata holds this start's
//! registration (so every change before it), each one is set aside (`<name>.<id>-stray`), named
//! in a warning, for an operator to remove (docs/decisions/0020, "Stray replicas").

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use laminar_controller::{ClusterMetadata, MetadataImage};
use laminar_engine::shard::partitions::parse_partition_dir_name;

use super::{ClusterLink, METADATA_LOG_DIR};

/// How long start-up waits for the metadata to hold this start's registration before it gives
/// the sweep up (it already waited to be unfenced, which comes later in the same log).
const CAUGHT_UP_WAIT: Duration = Duration::from_secs(30);

/// Sets aside every stray replica in `log_dir` (see the module doc); returns how many.
pub fn set_aside_stray_replicas(link: &ClusterLink, log_dir: &Path) -> anyhow::Result<usize> {
    let Some(image) = caught_up_image(link) else {
        tracing::warn!(
            "the metadata did not reach this broker's registration within {CAUGHT_UP_WAIT:?}: \
             stray replicas are not looked for at this start"
        );
        return Ok(0);
    };
    // Listed after the metadata was read: a directory made after the listing is not looked at,
    // and the shards, which make them for partitions the metadata gives this broker, are not
    // running yet.
    let strays = stray_dirs(log_dir, &image.metadata, link.node_id)
        .map_err(|e| anyhow::anyhow!("log.dirs: cannot list {}: {e}", log_dir.display()))?;
    let set_aside = laminar_engine::io::set_aside_blocking(log_dir, &strays).map_err(|e| {
        anyhow::anyhow!(
            "log.dirs: cannot set stray replicas aside in {}: {e}",
            log_dir.display()
        )
    })?;
    for (dir, aside) in strays.iter().zip(&set_aside) {
        tracing::warn!(
            dir = %dir.display(),
            set_aside_as = %aside.display(),
            "a replica the cluster's metadata no longer gives this broker (its topic deleted, or \
             the replica moved, while the broker was down): set aside; remove it once not needed"
        );
    }
    Ok(set_aside.len())
}

/// The applied metadata once it holds this broker's registration of this start (its epoch is
/// the registration record's log index: every record before it is applied too).
fn caught_up_image(link: &ClusterLink) -> Option<Arc<MetadataImage>> {
    let registered_epoch = link.broker_epoch();
    let deadline = Instant::now() + CAUGHT_UP_WAIT;
    loop {
        let image = link.handle.metadata();
        let registration = image.metadata.brokers.get(&link.node_id);
        if registration.is_some_and(|r| r.broker_epoch >= registered_epoch) {
            return Some(image);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The partition directories in `log_dir` whose partition `metadata` does not place on
/// `node_id` (its topic gone, or this broker not among its replicas).
fn stray_dirs(log_dir: &Path, metadata: &ClusterMetadata, node_id: i32) -> std::io::Result<Vec<PathBuf>> {
    let mut strays = Vec::new();
    for entry in std::fs::read_dir(log_dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let Some((topic, index)) = parse_partition_dir_name(&name) else {
            continue;
        };
        if name == METADATA_LOG_DIR || !entry.file_type()?.is_dir() {
            continue;
        }
        let placed_here = metadata
            .partition_by_name(topic, index)
            .is_some_and(|p| p.replicas.contains(&node_id));
        if !placed_here {
            strays.push(entry.path());
        }
    }
    strays.sort();
    Ok(strays)
}
