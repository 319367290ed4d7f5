//! `meta.properties`, Kafka's file, in every log dir: `version=1`, `cluster.id`, in cluster mode
//! `node.id`, and the dir's own `directory.id` (22 characters, Kafka's text form of a UUID).
//! It ties a data dir to one cluster: a start refuses log dirs that name different clusters or
//! another node before it reads or writes anything in them, and a cluster-mode start compares
//! them with the quorum's cluster id, as Kafka does. `laminar storage format --cluster-id`
//! writes it before a first start; otherwise the first start does. Read and written by the
//! main thread at start only.

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
    /// Present once the data dir served in cluster mode, or was formatted for it.
    pub node_id: Option<i32>,
    /// This log dir's id (Kafka's form); `None` in files written before directory ids.
    pub directory_id: Option<String>,
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
    let directory_id = value("directory.id").map(str::to_string);
    if let Some(id) = directory_id.as_deref().filter(|id| !is_kafka_uuid(id)) {
        bail!("{}: directory.id={id} is not a Kafka UUID", path.display());
    }
    Ok(MetaProperties {
        cluster_id,
        node_id,
        directory_id,
    })
}

/// Kafka's text form of a UUID: 16 bytes in URL-safe base64 without padding (22 characters).
pub fn is_kafka_uuid(text: &str) -> bool {
    let alphabet = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    // The 22nd character carries 2 bits: one of the 4 whose low 4 bits are zero.
    text.len() == 22 && text.bytes().all(alphabet) && text.ends_with(['A', 'Q', 'g', 'w'])
}

/// A new random id in Kafka's form.
pub fn random_kafka_uuid() -> anyhow::Result<String> {
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw).map_err(|e| anyhow!("no OS randomness: {e}"))?;
    Ok(laminar_controller::cluster_id_text(raw))
}

/// Checks every log dir's file before the broker touches any: those that name a cluster name
/// the same one, and those that name a node name `node_id` (cluster mode; `None`: a single
/// node, which no node id may be named in). The error names both sides.
pub fn check_log_dirs(log_dirs: &[PathBuf], node_id: Option<i32>) -> anyhow::Result<()> {
    let mut cluster: Option<(String, PathBuf)> = None;
    for dir in log_dirs {
        let properties = read(dir)?;
        if let Some(id) = properties.cluster_id {
            match &cluster {
                Some((first, first_dir)) if *first != id => bail!(
                    "{} says cluster {id}, but {} says cluster {first}: log dirs of different                      clusters; refusing to start",
                    path(dir).display(),
                    path(first_dir).display()
                ),
                Some(_) => {}
                None => cluster = Some((id, dir.clone())),
            }
        }
        match (properties.node_id, node_id) {
            (Some(recorded), Some(configured)) if recorded != configured => bail!(
                "{} says this log dir is node {recorded}'s, but node.id is {configured}",
                path(dir).display()
            ),
            (Some(recorded), None) => bail!(
                "{} belongs to node {recorded} of a cluster: start it with process.roles and \
                 controller.quorum.voters",
                path(dir).display()
            ),
            _ => {}
        }
    }
    Ok(())
}

/// Writes `cluster_id` and `node_id` into every log dir's file, keeping each dir's directory
/// id (or giving it one).
pub fn write_every(log_dirs: &[PathBuf], cluster_id: &str, node_id: Option<i32>) -> anyhow::Result<()> {
    for dir in log_dirs {
        let directory_id = match read(dir)?.directory_id {
            Some(id) => id,
            None => random_kafka_uuid()?,
        };
        let properties = MetaProperties {
            cluster_id: Some(cluster_id.to_string()),
            node_id,
            directory_id: Some(directory_id),
        };
        write(dir, &properties)?;
    }
    Ok(())
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
    if let Some(id) = &properties.directory_id {
        text.push_str(&format!("directory.id={id}\n"));
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
pub fn single_node_cluster_id(log_dirs: &[PathBuf]) -> anyhow::Result<String> {
    check_log_dirs(log_dirs, None)?;
    let mut named = None;
    for dir in log_dirs {
        named = named.or(read(dir)?.cluster_id);
    }
    let id = match named {
        Some(id) => id,
        None => random_kafka_uuid()?,
    };
    write_every(log_dirs, &id, None)?;
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
        let dirs = [dir.path().to_path_buf()];
        let single = single_node_cluster_id(&dirs).unwrap();
        assert!(is_kafka_uuid(&single), "{single}");
        assert_eq!(single_node_cluster_id(&dirs).unwrap(), single);
        // A single-node dir joins a quorum for the first time.
        assert_eq!(check_cluster(dir.path(), 1, "Q").unwrap(), ClusterStart::First);
        let member = MetaProperties {
            cluster_id: Some("Q".into()),
            node_id: Some(1),
            directory_id: Some(random_kafka_uuid().unwrap()),
        };
        write(dir.path(), &member).unwrap();
        assert_eq!(read(dir.path()).unwrap(), member);
        assert_eq!(check_cluster(dir.path(), 1, "Q").unwrap(), ClusterStart::Again);
        let other = check_cluster(dir.path(), 1, "R").unwrap_err().to_string();
        assert!(other.contains("belongs to cluster Q"), "{other}");
        assert!(check_cluster(dir.path(), 2, "Q").is_err());
        assert!(single_node_cluster_id(&dirs).is_err());
        std::fs::write(dir.path().join(FILE), "node.id=-3\n").unwrap();
        assert!(read(dir.path()).is_err());
        std::fs::write(dir.path().join(FILE), "directory.id=short\n").unwrap();
        assert!(read(dir.path()).is_err());
    }

    #[test]
    fn every_log_dir_gets_the_cluster_and_an_id_of_its_own_and_disagreeing_dirs_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let dirs: Vec<PathBuf> = ["a", "b"].iter().map(|d| root.path().join(d)).collect();
        for dir in &dirs {
            std::fs::create_dir(dir).unwrap();
        }
        write_every(&dirs, "AAAAAAAAAAAAAAAAAAAAAA", Some(4)).unwrap();
        let [a, b] = [read(&dirs[0]).unwrap(), read(&dirs[1]).unwrap()];
        assert_eq!(
            (a.cluster_id.as_deref(), a.node_id),
            (Some("AAAAAAAAAAAAAAAAAAAAAA"), Some(4))
        );
        assert_eq!((&b.cluster_id, b.node_id), (&a.cluster_id, a.node_id));
        assert_ne!(a.directory_id, b.directory_id);
        // Written again, each dir keeps its id.
        write_every(&dirs, "AAAAAAAAAAAAAAAAAAAAAA", Some(4)).unwrap();
        assert_eq!(read(&dirs[0]).unwrap(), a);
        check_log_dirs(&dirs, Some(4)).unwrap();
        let wrong_node = check_log_dirs(&dirs, Some(5)).unwrap_err().to_string();
        assert!(wrong_node.contains("node 4's, but node.id is 5"), "{wrong_node}");
        assert!(
            check_log_dirs(&dirs, None).is_err(),
            "a cluster's dirs as a single node"
        );
        write_every(&dirs[1..], "QQQQQQQQQQQQQQQQQQQQQQ", Some(4)).unwrap();
        let mixed = check_log_dirs(&dirs, Some(4)).unwrap_err().to_string();
        assert!(
            mixed.contains("QQQQQQQQQQQQQQQQQQQQQQ") && mixed.contains("AAAAAAAAAAAAAAAAAAAAAA"),
            "{mixed}"
        );
    }

    #[test]
    fn kafka_uuids_are_22_characters_of_url_safe_base64() {
        assert!(is_kafka_uuid(&random_kafka_uuid().unwrap()));
        assert!(is_kafka_uuid("MkU3OEVBNTcwNTJENDM2Qg"));
        for bad in [
            "",
            "MkU3OEVBNTcwNTJENDM2Q",
            "MkU3OEVBNTcwNTJENDM2Qh",
            "MkU3OEVBNTcwNTJENDM2+g",
        ] {
            assert!(!is_kafka_uuid(bad), "{bad}");
        }
    }
}
