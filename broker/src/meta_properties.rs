//! `meta.properties` in the first log dir, Kafka's file: `version=1`, `cluster.id`, and in
//! cluster mode `node.id`. It ties a data dir to one cluster: a cluster-mode start compares
//! it with the quorum's cluster id and refuses a data dir of another cluster (or of another
//! node id), as Kafka does. Read and written by the main thread at start only.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};

const FILE: &str = "meta.properties";
/// The file holds three short lines; anything larger is not ours and is refused, not read.
const FILE_LEN_MAX: u64 = 64 * 1024;
/// Kafka's ids are 22 characters; a hand-made one may be longer, never this long.
const CLUSTER_ID_LEN_MAX: usize = 255;

/// What the file says (both fields absent when there is no file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaProperties {
    pub cluster_id: Option<String>,
    /// Present once the data dir served in cluster mode.
    pub node_id: Option<i32>,
}

fn path(log_dir: &Path) -> PathBuf {
    log_dir.join(FILE)
}

/// Reads and validates the file; no file reads as empty.
pub fn read(log_dir: &Path) -> anyhow::Result<MetaProperties> {
    let path = path(log_dir);
    let len = match std::fs::metadata(&path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(MetaProperties::default()),
        Err(e) => bail!("cannot read {}: {e}", path.display()),
    };
    if len > FILE_LEN_MAX {
        bail!("{} is {len} bytes: not a meta.properties", path.display());
    }
    let text = std::fs::read_to_string(&path).map_err(|e| anyhow!("cannot read {}: {e}", path.display()))?;
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
            .map(str::trim)
    };
    let cluster_id = value("cluster.id")
        .filter(|id| !id.is_empty())
        .map(str::to_string);
    if cluster_id
        .as_ref()
        .is_some_and(|id| id.len() > CLUSTER_ID_LEN_MAX)
    {
        bail!(
            "{}: cluster.id is longer than {CLUSTER_ID_LEN_MAX}",
            path.display()
        );
    }
    let node_id = match value("node.id") {
        None => None,
        Some(text) => Some(
            text.parse::<i32>()
                .ok()
                .filter(|id| *id >= 0)
                .ok_or_else(|| anyhow!("{}: node.id={text} is not a node id", path.display()))?,
        ),
    };
    Ok(MetaProperties { cluster_id, node_id })
}

/// Replaces the file atomically (temporary file, fsync, rename).
pub fn write(log_dir: &Path, properties: &MetaProperties) -> anyhow::Result<()> {
    use std::io::Write;
    let mut text = String::from("version=1\n");
    if let Some(id) = &properties.cluster_id {
        text.push_str(&format!("cluster.id={id}\n"));
    }
    if let Some(id) = properties.node_id {
        text.push_str(&format!("node.id={id}\n"));
    }
    let target = path(log_dir);
    let temporary = log_dir.join(format!("{FILE}.tmp"));
    let written = std::fs::File::create(&temporary)
        .and_then(|mut file| file.write_all(text.as_bytes()).and_then(|()| file.sync_all()))
        .and_then(|()| std::fs::rename(&temporary, &target))
        .and_then(|()| std::fs::File::open(log_dir)?.sync_all());
    written.map_err(|e| anyhow!("cannot write {}: {e}", target.display()))
}

/// The single-node mode's cluster id: the file's, else a new random one written down. A data
/// dir that served in cluster mode is refused: its topics live in the quorum, not here.
pub fn single_node_cluster_id(log_dir: &Path) -> anyhow::Result<String> {
    let properties = read(log_dir)?;
    if let Some(node_id) = properties.node_id {
        bail!(
            "{} belongs to node {node_id} of cluster {}: start it with process.roles and \
             controller.quorum.voters",
            path(log_dir).display(),
            properties.cluster_id.unwrap_or_default()
        );
    }
    if let Some(id) = properties.cluster_id {
        return Ok(id);
    }
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw).map_err(|e| anyhow!("no OS randomness: {e}"))?;
    let id = laminar_controller::cluster_id_text(raw);
    write(
        log_dir,
        &MetaProperties {
            cluster_id: Some(id.clone()),
            node_id: None,
        },
    )?;
    Ok(id)
}

/// A data dir in cluster mode: whether this is its first start in a quorum (it served in
/// single-node mode, or is new), once checked against the quorum's cluster id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterStart {
    First,
    Again,
}

/// Compares the file with the quorum's cluster id and this node's id: a data dir that served
/// another cluster or another node is a start-up error, never served silently.
pub fn check_cluster(log_dir: &Path, node_id: i32, quorum_cluster_id: &str) -> anyhow::Result<ClusterStart> {
    let properties = read(log_dir)?;
    let Some(recorded_node) = properties.node_id else {
        return Ok(ClusterStart::First);
    };
    let recorded_cluster = properties.cluster_id.unwrap_or_default();
    if recorded_node != node_id {
        bail!(
            "{} says this data dir is node {recorded_node}'s, but node.id is {node_id}",
            path(log_dir).display()
        );
    }
    if recorded_cluster != quorum_cluster_id {
        bail!(
            "{} says this data dir belongs to cluster {recorded_cluster}, but the controller \
             quorum is cluster {quorum_cluster_id}: refusing to serve another cluster's data",
            path(log_dir).display()
        );
    }
    Ok(ClusterStart::Again)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_dir_of_another_cluster_or_node_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let single = single_node_cluster_id(dir.path()).unwrap();
        assert_eq!(single.len(), 22);
        assert_eq!(single_node_cluster_id(dir.path()).unwrap(), single);
        // A single-node dir joins a quorum for the first time.
        assert_eq!(check_cluster(dir.path(), 1, "Q").unwrap(), ClusterStart::First);
        let member = MetaProperties {
            cluster_id: Some("Q".into()),
            node_id: Some(1),
        };
        write(dir.path(), &member).unwrap();
        assert_eq!(read(dir.path()).unwrap(), member);
        assert_eq!(check_cluster(dir.path(), 1, "Q").unwrap(), ClusterStart::Again);
        let other = check_cluster(dir.path(), 1, "R").unwrap_err().to_string();
        assert!(other.contains("belongs to cluster Q"), "{other}");
        assert!(check_cluster(dir.path(), 2, "Q").is_err());
        assert!(single_node_cluster_id(dir.path()).is_err());
        std::fs::write(dir.path().join(FILE), "node.id=-3\n").unwrap();
        assert!(read(dir.path()).is_err());
    }
}
