//! The broker's effective config: the static one (`server.properties`, `--override`) with the
//! dynamic broker configs over it (`config::dynamic`). Shared by every shard; replaced whole
//! when the dynamic values change, which is rare (an operator's AlterConfigs), so readers take a
//! pointer and never a lock.
//!
//! Where the dynamic values live: in a cluster, in the metadata log (`ConfigRecord`s of broker
//! resources, applied by `quorum::view`); on a single node, in the file this module reads and
//! writes, `dynamic-broker-configs.properties` in the first log dir:
//!
//! ```text
//! # Laminar dynamic broker configs
//! default.log.retention.ms=3600000
//! broker.leader.replication.throttled.rate=1048576
//! ```
//!
//! Java properties, one entry per line: `default.<key>` for every broker's default
//! (`--entity-default`), `broker.<key>` for this broker's own. Keys are broker config names and
//! values were checked against their kind before they were written; both are checked again when
//! read, and an entry that fails is dropped with a warning.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::config::dynamic::DynamicLayers;
use crate::config::properties::parse_properties;
use crate::config::BrokerConfig;

pub const FILE_NAME: &str = "dynamic-broker-configs.properties";
const HEADER: &str = "# Laminar dynamic broker configs\n";
const DEFAULT_PREFIX: &str = "default.";
const BROKER_PREFIX: &str = "broker.";

/// The effective config and, on a single node, the file its dynamic values persist in.
pub struct EffectiveConfig {
    current: ArcSwap<BrokerConfig>,
    /// The file (`None` in a cluster: the metadata log holds the values). Its lock orders
    /// writers, so that each computes its change from the values the one before it left.
    writer: Mutex<Option<PathBuf>>,
}

impl EffectiveConfig {
    /// A single node's: the static config with the values of `log_dir`'s file, if any.
    pub fn open(static_config: &BrokerConfig, log_dir: &Path) -> anyhow::Result<EffectiveConfig> {
        let path = log_dir.join(FILE_NAME);
        let layers = match std::fs::read_to_string(&path) {
            Ok(text) => decode(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => DynamicLayers::default(),
            Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
        };
        let current = with_valid(static_config, layers)?;
        Ok(EffectiveConfig {
            current: ArcSwap::from_pointee(current),
            writer: Mutex::new(Some(path)),
        })
    }

    /// A cluster node's: the static config with the values `md` holds for this broker.
    pub fn of_cluster(
        static_config: &BrokerConfig,
        md: &laminar_controller::ClusterMetadata,
    ) -> anyhow::Result<EffectiveConfig> {
        let current = with_valid(static_config, layers_in(md, static_config.node_id))?;
        Ok(EffectiveConfig {
            current: ArcSwap::from_pointee(current),
            writer: Mutex::new(None),
        })
    }

    pub fn current(&self) -> Arc<BrokerConfig> {
        self.current.load_full()
    }

    /// `read` of the current config, without taking a reference (the data path's way).
    pub fn read<R>(&self, read: impl FnOnce(&BrokerConfig) -> R) -> R {
        read(&self.current.load())
    }

    /// Makes `change` of the current dynamic values the new ones, persisting them first on a
    /// single node. Returns whether they differ from those applied before.
    pub fn update(
        &self,
        static_config: &BrokerConfig,
        change: impl FnOnce(&DynamicLayers) -> anyhow::Result<DynamicLayers>,
    ) -> anyhow::Result<bool> {
        let file = self
            .writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let current = self.current.load_full();
        let mut layers = change(current.dynamic_layers())?;
        let dropped = crate::config::dynamic::retain_valid(&mut layers);
        if *current.dynamic_layers() == layers {
            return Ok(false);
        }
        for error in dropped {
            tracing::warn!(%error, "dynamic broker config ignored");
        }
        let effective = static_config.with_dynamic(layers)?;
        if let Some(path) = file.as_ref() {
            let text = encode(effective.dynamic_layers());
            laminar_engine::io::replace_file_durably(path, text.as_bytes())?;
        }
        self.current.store(Arc::new(effective));
        Ok(true)
    }
}

/// The dynamic values the cluster's metadata holds for broker `node_id`: the default (resource
/// name empty) and its own (its id).
pub fn layers_in(md: &laminar_controller::ClusterMetadata, node_id: laminar_model::NodeId) -> DynamicLayers {
    let layer = |name: &str| md.broker_configs.get(name).cloned().unwrap_or_default();
    DynamicLayers {
        default: layer(""),
        broker: layer(&node_id.to_string()),
    }
}

/// `static_config` with those of `layers` that are valid (the others logged and dropped).
fn with_valid(static_config: &BrokerConfig, mut layers: DynamicLayers) -> anyhow::Result<BrokerConfig> {
    for dropped in crate::config::dynamic::retain_valid(&mut layers) {
        tracing::warn!(error = %dropped, "dynamic broker config ignored");
    }
    Ok(static_config.with_dynamic(layers)?)
}

fn encode(layers: &DynamicLayers) -> String {
    let mut text = HEADER.to_string();
    let entries = (layers.default.iter().map(|e| (DEFAULT_PREFIX, e)))
        .chain(layers.broker.iter().map(|e| (BROKER_PREFIX, e)));
    for (prefix, (name, value)) in entries {
        debug_assert!(
            !value.contains(['\n', '\r', '\\']),
            "a validated value is one plain line"
        );
        text.push_str(&format!("{prefix}{name}={value}\n"));
    }
    text
}

fn decode(text: &str) -> anyhow::Result<DynamicLayers> {
    let mut layers = DynamicLayers::default();
    for entry in parse_properties(text)? {
        if let Some(name) = entry.key.strip_prefix(DEFAULT_PREFIX) {
            layers.default.insert(name.to_string(), entry.value);
        } else if let Some(name) = entry.key.strip_prefix(BROKER_PREFIX) {
            layers.broker.insert(name.to_string(), entry.value);
        } else {
            anyhow::bail!("unexpected entry {:?}", entry.key);
        }
    }
    Ok(layers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::dynamic::configs as map;
    use std::collections::BTreeMap;

    #[test]
    fn the_file_is_java_properties_with_a_prefix_per_layer() {
        let layers = DynamicLayers {
            default: map(&[("log.retention.ms", "3600000")]),
            broker: map(&[("leader.replication.throttled.rate", "1048576")]),
        };
        let golden = "# Laminar dynamic broker configs\n\
                      default.log.retention.ms=3600000\n\
                      broker.leader.replication.throttled.rate=1048576\n";
        assert_eq!(encode(&layers), golden);
        assert_eq!(decode(golden).unwrap(), layers);
        assert!(decode("other.key=1\n").is_err());
    }

    #[test]
    fn values_persist_across_opens_and_invalid_ones_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let static_config = BrokerConfig::default();
        let effective = EffectiveConfig::open(&static_config, dir.path()).unwrap();
        let layers = DynamicLayers {
            default: map(&[("log.retention.ms", "5000")]),
            broker: BTreeMap::new(),
        };
        assert!(effective.update(&static_config, |_| Ok(layers.clone())).unwrap());
        assert!(!effective.update(&static_config, |_| Ok(layers)).unwrap());
        assert_eq!(effective.current().log_retention_ms, 5000);
        std::fs::write(
            dir.path().join(FILE_NAME),
            "default.log.retention.ms=7000\nbroker.node.id=3\n",
        )
        .unwrap();
        let reopened = EffectiveConfig::open(&static_config, dir.path()).unwrap();
        assert_eq!(reopened.current().log_retention_ms, 7000);
        assert!(reopened.current().dynamic_layers().broker.is_empty());
    }
}
