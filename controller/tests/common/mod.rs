//! A test cluster: controller nodes on loopback ports, each with its own tempdir, thread and
//! tokio runtime. Owned by the test's thread.
#![allow(dead_code)]

use laminar_model::{BrokerEpoch, NodeId};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use laminar_controller::api::CreatableTopic;
use laminar_controller::{
    BrokerEndpoint, ControllerConfig, ControllerError, ControllerHandle, ControllerNode, Refusal,
};

/// Fields drop in order: the nodes stop before their directories go (a node still writing into
/// a removed directory would stop its process, as a failed metadata disk does).
pub struct Cluster {
    pub nodes: Vec<Option<ControllerNode>>,
    pub configs: Vec<ControllerConfig>,
    pub dirs: Vec<tempfile::TempDir>,
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Short timeouts so the suite runs in seconds.
pub fn test_config(
    node_id: i32,
    port: u16,
    voters: &BTreeMap<i32, String>,
    dir: &std::path::Path,
) -> ControllerConfig {
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut config = ControllerConfig::new(node_id, addr, voters.clone(), dir.to_path_buf());
    config.heartbeat_interval_ms = 50;
    config.election_timeout_min_ms = 150;
    config.election_timeout_max_ms = 300;
    config.session_timeout_ms = 1000;
    config.request_timeout_ms = 5000;
    config
}

/// Attempts at starting a cluster: a port found free can be taken by another test before its
/// node binds it, and then the cluster starts again on other ports.
const START_ATTEMPTS: usize = 5;

impl Cluster {
    pub fn start(size: i32, tune: impl Fn(&mut ControllerConfig)) -> Cluster {
        for _ in 1..START_ATTEMPTS {
            match Cluster::try_start(size, &tune) {
                Ok(cluster) => return cluster,
                Err(ControllerError::Io(e)) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
                Err(e) => panic!("cannot start a controller: {e}"),
            }
        }
        Cluster::try_start(size, &tune).expect("a controller cluster starts")
    }

    fn try_start(size: i32, tune: &impl Fn(&mut ControllerConfig)) -> Result<Cluster, ControllerError> {
        let ports: Vec<u16> = (0..size).map(|_| free_port()).collect();
        let voters: BTreeMap<i32, String> = (1..=size)
            .zip(&ports)
            .map(|(id, port)| (id, format!("127.0.0.1:{port}")))
            .collect();
        let dirs: Vec<tempfile::TempDir> = (0..size).map(|_| tempfile::tempdir().unwrap()).collect();
        let configs: Vec<ControllerConfig> = (1..=size)
            .zip(&ports)
            .zip(&dirs)
            .map(|((id, port), dir)| {
                let mut config = test_config(id, *port, &voters, &dir.path().join("__cluster_metadata-0"));
                tune(&mut config);
                config
            })
            .collect();
        let nodes = configs
            .iter()
            .map(|c| ControllerNode::start(c.clone()).map(Some))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Cluster { dirs, configs, nodes })
    }

    pub fn handle(&self, index: usize) -> ControllerHandle {
        self.nodes[index].as_ref().unwrap().handle()
    }

    pub fn running(&self) -> Vec<ControllerHandle> {
        self.nodes.iter().flatten().map(ControllerNode::handle).collect()
    }

    pub fn stop(&mut self, index: usize) {
        if let Some(node) = self.nodes[index].take() {
            node.shutdown();
        }
    }

    pub fn restart(&mut self, index: usize) {
        self.nodes[index] = Some(ControllerNode::start(self.configs[index].clone()).unwrap());
    }

    /// The index of the node all running nodes agree leads, once they do.
    pub async fn wait_leader(&self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            let handles = self.running();
            let leaders: Vec<Option<u64>> = handles.iter().map(|h| h.quorum_status().leader_id).collect();
            if let Some(Some(leader)) = leaders.first() {
                let agreed = leaders.iter().all(|l| *l == Some(*leader));
                let index = (*leader - 1) as usize;
                if agreed
                    && self.nodes[index].is_some()
                    && self.handle(index).quorum_status().role == "Leader"
                {
                    return index;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no leader within {timeout:?}: {leaders:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until every running node has applied the same metadata at the same version.
    pub async fn wait_agreement(&self, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        loop {
            let images: Vec<_> = self.running().iter().map(ControllerHandle::metadata).collect();
            let first = &images[0];
            if images
                .iter()
                .all(|i| i.version == first.version && i.metadata == first.metadata)
            {
                return first.version;
            }
            assert!(
                Instant::now() < deadline,
                "nodes disagree: versions {:?}",
                images.iter().map(|i| i.version).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

pub fn endpoint(port: u16) -> Vec<BrokerEndpoint> {
    vec![BrokerEndpoint {
        listener_name: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port,
    }]
}

/// Registers brokers 1..=count (with `racks[i]` if given) and unfences them; returns epochs.
pub async fn register_brokers(
    handle: &ControllerHandle,
    count: i32,
    racks: &[&str],
) -> BTreeMap<NodeId, BrokerEpoch> {
    let mut epochs = BTreeMap::new();
    for number in 1..=count {
        let id = NodeId::new(number);
        let rack = racks.get((number - 1) as usize).map(|r| r.to_string());
        let incarnation = [number as u8; 16];
        let epoch = handle
            .register_broker(id, incarnation, endpoint(9000 + number as u16), rack)
            .await
            .unwrap();
        let (fenced, metadata_version) = handle.broker_heartbeat(id, epoch).await.unwrap();
        assert!(!fenced);
        assert!(
            metadata_version > 0,
            "the answer names the metadata it was decided at"
        );
        epochs.insert(id, epoch);
    }
    epochs
}

pub fn topic(name: &str, partitions: i32, factor: i16) -> CreatableTopic {
    CreatableTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: factor,
        configs: BTreeMap::new(),
        assignments: Vec::new(),
        topic_id: None,
    }
}

pub fn dir_size(path: &std::path::Path) -> u64 {
    std::fs::read_dir(path)
        .unwrap()
        .flatten()
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum()
}

/// `operations` creates and deletes of one-partition topics, one request each. A request that
/// meets a leadership change (NOT_CONTROLLER) is retried, as a broker would; a retry may find
/// its first attempt applied.
pub async fn churn_topics(handle: &ControllerHandle, operations: usize) {
    for i in 0..operations / 2 {
        let name = format!("churn-{i}");
        let created = retry(|| handle.create_topics(vec![topic(&name, 1, 1)])).await;
        assert!(
            matches!(created, Ok(_) | Err(Refusal::TopicAlreadyExists)),
            "create: {created:?}"
        );
        let deleted = retry(|| handle.delete_topics(vec![name.clone()])).await;
        assert!(
            matches!(deleted, Ok(_) | Err(Refusal::UnknownTopic)),
            "delete: {deleted:?}"
        );
    }
}

async fn retry<F, Fut>(request: F) -> Result<laminar_controller::records::TopicId, Refusal>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Vec<laminar_controller::api::TopicResult>, Refusal>>,
{
    for _ in 0..50 {
        match request().await {
            Ok(results) => return results[0].result.clone(),
            Err(e) => assert!(matches!(e, Refusal::NotController { .. }), "{e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no controller answered");
}
