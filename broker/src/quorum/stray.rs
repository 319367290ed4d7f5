//! Stray replicas: partition directories in this broker's log dir that the quorum's metadata
//! does not give it, left by a topic deleted, or a replica moved off, while the broker was down
//! (while it runs, `view::apply_topic_changes` and the replication manager delete them as the
//! metadata changes). At start-up, before any shard runs, once the metadata holds this start's
//! registration (so every change before it), each one is set aside (`<name>.<id>-stray`), named
//! in a warning, for an operator to remove (docs/decisions/0020, "Stray replicas"). A sweep that
//! would set aside more than `laminar.stray.replicas.max.percent` of the broker's partition
//! directories stops the start instead: so many at once more likely means a wrong metadata
//! image than deletions, and setting data aside is the one step here an image can get wrong.

use laminar_model::NodeId;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use laminar_controller::{ClusterMetadata, MetadataImage};
use laminar_engine::shard::partitions::parse_partition_dir_name;

use super::{ClusterLink, METADATA_LOG_DIR};

/// How long start-up waits for the metadata to hold this start's registration before it gives
/// the sweep up (it already waited to be unfenced, which comes later in the same log).
const CAUGHT_UP_WAIT: Duration = Duration::from_secs(30);

/// Sets aside every stray replica in `log_dir` (see the module doc), if they are at most
/// `max_percent` of its partition directories; returns how many.
pub fn set_aside_stray_replicas(
    link: &ClusterLink,
    log_dir: &Path,
    max_percent: u32,
) -> anyhow::Result<usize> {
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
    set_aside_strays_in(log_dir, &image.metadata, (link.node_id, max_percent))
}

/// Sets aside the partition directories in `log_dir` that `metadata` does not place on
/// `node_id`, unless they are more than `max_percent` of them.
fn set_aside_strays_in(
    log_dir: &Path,
    metadata: &ClusterMetadata,
    (node_id, max_percent): (NodeId, u32),
) -> anyhow::Result<usize> {
    let (strays, partition_dirs) = stray_dirs(log_dir, metadata, node_id)
        .map_err(|e| anyhow::anyhow!("log.dirs: cannot list {}: {e}", log_dir.display()))?;
    if strays.len() * 100 > partition_dirs * max_percent as usize {
        anyhow::bail!(
            "log.dirs: the cluster's metadata places {} of the {partition_dirs} partition \
             directories in {} elsewhere, more than laminar.stray.replicas.max.percent \
             ({max_percent} %) allows to set aside at once; nothing was set aside. If the topics \
             were deleted or moved while this broker was down, start it once with \
             --override laminar.stray.replicas.max.percent=100",
            strays.len(),
            log_dir.display()
        );
    }
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
/// `node_id` (its topic gone, or this broker not among its replicas), and how many partition
/// directories it holds in all.
fn stray_dirs(
    log_dir: &Path,
    metadata: &ClusterMetadata,
    node_id: NodeId,
) -> std::io::Result<(Vec<PathBuf>, usize)> {
    let mut strays = Vec::new();
    let mut partition_dirs = 0;
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
        partition_dirs += 1;
        let placed_here = metadata
            .partition_by_name(topic, index)
            .is_some_and(|p| p.replicas.contains(&node_id));
        if !placed_here {
            strays.push(entry.path());
        }
    }
    strays.sort();
    Ok((strays, partition_dirs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use laminar_controller::{MetadataRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord};

    /// Broker 1 registered; topic `kept` with `partitions` partitions, each on broker 1.
    fn metadata_placing_kept(partitions: i32) -> ClusterMetadata {
        let mut metadata = ClusterMetadata::default();
        let broker = RegisterBrokerRecord {
            broker_id: NodeId::new(1),
            incarnation_id: [0; 16],
            endpoints: vec![],
            rack: None,
        };
        let topic = TopicRecord {
            name: "kept".into(),
            topic_id: [7; 16],
        };
        let mut records = vec![
            MetadataRecord::RegisterBroker(broker),
            MetadataRecord::Topic(topic),
        ];
        records.extend((0..partitions).map(|partition_id| {
            MetadataRecord::Partition(PartitionRecord {
                topic_id: [7; 16],
                partition_id,
                replicas: vec![NodeId::new(1)],
                isr: vec![NodeId::new(1)],
                // A broker starts fenced, and a fenced broker leads nothing.
                leader: laminar_controller::NO_LEADER,
                leader_epoch: laminar_model::LeaderEpoch::FIRST,
                partition_epoch: laminar_model::PartitionEpoch::new(0),
            })
        }));
        for record in &records {
            metadata.apply(record, 1).expect("a valid record");
        }
        metadata
    }

    fn log_dir_with(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        for name in names {
            std::fs::create_dir(dir.path().join(name)).expect("partition dir");
        }
        dir
    }

    fn dirs_named(dir: &Path, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("listing")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(prefix))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn strays_within_the_share_are_set_aside_and_placed_replicas_stay() {
        let dir = log_dir_with(&["kept-0", "kept-1", "kept-2", "gone-0"]);
        let set_aside = set_aside_strays_in(dir.path(), &metadata_placing_kept(3), (NodeId::new(1), 50))
            .expect("a sweep");
        assert_eq!(set_aside, 1);
        assert_eq!(dirs_named(dir.path(), "kept-"), ["kept-0", "kept-1", "kept-2"]);
        let gone = dirs_named(dir.path(), "gone-");
        assert!(gone.len() == 1 && gone[0].ends_with("-stray"), "{gone:?}");
    }

    #[test]
    fn a_sweep_of_most_partitions_is_refused_and_sets_nothing_aside() {
        let dir = log_dir_with(&["kept-0", "gone-0", "gone-1", "gone-2"]);
        let refused = set_aside_strays_in(dir.path(), &metadata_placing_kept(1), (NodeId::new(1), 50))
            .expect_err("3 of 4 directories is past 50 %");
        let message = refused.to_string();
        assert!(
            message.contains("3 of the 4") && message.contains("laminar.stray.replicas.max.percent"),
            "{message}"
        );
        assert_eq!(dirs_named(dir.path(), "gone-"), ["gone-0", "gone-1", "gone-2"]);
        // An empty image (one that lost every topic) would place nothing here: refused too.
        let refused = set_aside_strays_in(dir.path(), &ClusterMetadata::default(), (NodeId::new(1), 50));
        assert!(refused.is_err());
        let allowed = set_aside_strays_in(dir.path(), &metadata_placing_kept(1), (NodeId::new(1), 100))
            .expect("allowed");
        assert_eq!(allowed, 3);
    }
}
