//! [`DynamicLayers`]: the dynamic broker config values a broker holds (`dynamic.rs` says which
//! keys may be dynamic and checks them). Plain data that needs nothing of the config, so that
//! the config itself can hold it without an import loop.

use std::collections::BTreeMap;

/// The dynamic values a broker applies: the default of every broker and its own. Plain data,
/// held inside [`super::BrokerConfig`] (shared read-only; replaced whole when they change).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DynamicLayers {
    /// `--entity-default`: every broker's.
    pub default: BTreeMap<String, String>,
    /// `--entity-name <this node id>`.
    pub broker: BTreeMap<String, String>,
}

impl DynamicLayers {
    /// Both layers merged, this broker's over the default.
    pub fn merged(&self) -> impl Iterator<Item = (&String, &String)> {
        self.default
            .iter()
            .filter(|(name, _)| !self.broker.contains_key(*name))
            .chain(&self.broker)
    }
}
