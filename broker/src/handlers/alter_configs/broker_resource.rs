//! AlterConfigs and IncrementalAlterConfigs of a broker resource: the dynamic broker configs
//! (`config::dynamic`) of one broker (its id as the resource name) or of every broker (an empty
//! name, Kafka's `--entity-default`).
//!
//! In a cluster they go through the controller, like topic configs, and every broker applies
//! them from the metadata (`quorum::view`); a single node keeps them in its log dir
//! (`dynamic_configs`). Either way they then reach every open partition and every shard's
//! replication throttles ([`apply_dynamic_configs`]).

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;

use crate::broker::BrokerCtx;
use crate::config::dynamic::{self, DynamicLayers};
use crate::handlers::topic_admin::{push_configs, AdminError};
use crate::quorum::admin::{wait_for_view, with_retries};
use crate::quorum::ClusterLink;
use laminar_controller::api::BrokerConfigChange;
use laminar_controller::{MetadataImage, Refusal};
use laminar_model::NodeId;

type Configs = BTreeMap<String, String>;

/// Computes a broker resource's new dynamic configs from its current ones, checks them, and
/// stores and applies them (not when `validate_only`).
pub async fn alter(
    ctx: &Rc<BrokerCtx>,
    name: &str,
    validate_only: bool,
    new_configs: impl Fn(&Configs) -> Result<Configs, AdminError>,
) -> Result<(), AdminError> {
    let broker = broker_named(name)?;
    let shared = &ctx.state.shared;
    let checked = |current: &Configs| {
        let configs = new_configs(current)?;
        dynamic::validate(&configs)
            .map_err(|e| AdminError::new(ResponseError::InvalidConfig, e.to_string()))?;
        Ok::<_, AdminError>(configs)
    };
    if let Some(link) = &shared.cluster {
        return alter_in_cluster(link, broker, validate_only, checked).await;
    }
    if broker.is_some_and(|id| id != shared.node_id()) {
        let message = format!("this single node is broker {}", shared.node_id());
        return Err(AdminError::new(ResponseError::InvalidRequest, message));
    }
    let changed = shared.effective_config.update(&shared.config, |layers| {
        let mut new = layers.clone();
        let layer = if broker.is_some() {
            &mut new.broker
        } else {
            &mut new.default
        };
        *layer = checked(layer).map_err(|e| anyhow::anyhow!(e.message))?;
        Ok(if validate_only { layers.clone() } else { new })
    });
    match changed {
        Ok(true) => apply_dynamic_configs(ctx).await,
        Ok(false) => {}
        Err(e) => return Err(AdminError::new(ResponseError::InvalidConfig, format!("{e:#}"))),
    }
    Ok(())
}

/// The broker a resource name means: `None` for the default (empty), else its id.
fn broker_named(name: &str) -> Result<Option<NodeId>, AdminError> {
    if name.is_empty() {
        return Ok(None);
    }
    match name.parse::<i32>() {
        Ok(id) if id >= 0 => Ok(Some(NodeId::new(id))),
        _ => Err(AdminError::new(
            ResponseError::InvalidRequest,
            format!("broker resource '{name}' is not a broker id (or empty, for every broker)"),
        )),
    }
}

async fn alter_in_cluster(
    link: &ClusterLink,
    broker: Option<NodeId>,
    validate_only: bool,
    checked: impl Fn(&Configs) -> Result<Configs, AdminError>,
) -> Result<(), AdminError> {
    let resource = broker.map(|id| id.to_string()).unwrap_or_default();
    let held = |image: &MetadataImage| {
        let configs = image.metadata.broker_configs.get(&resource);
        configs.cloned().unwrap_or_default()
    };
    let deadline = std::time::Instant::now() + super::CLUSTER_RETRY_WITHIN;
    while std::time::Instant::now() < deadline {
        let current = held(&link.image());
        let configs = checked(&current)?;
        if validate_only || configs == current {
            return Ok(());
        }
        let change = BrokerConfigChange {
            broker,
            expected: current.clone(),
            configs: configs.clone(),
        };
        let answer = with_retries(|| link.handle.alter_broker_configs(vec![change.clone()])).await;
        match answer.map(|results| results.into_iter().next()) {
            Ok(Some(Ok(()))) => {
                wait_for_view(link, |image| held(image) == configs).await;
                tracing::info!(broker = resource, ?configs, "altered dynamic broker configs");
                return Ok(());
            }
            Ok(Some(Err(Refusal::InvalidUpdateVersion))) => {
                wait_for_view(link, |image| held(image) != current).await;
            }
            Ok(None) => return Err(AdminError::new(ResponseError::UnknownServerError, "no answer")),
            Ok(Some(Err(refusal))) | Err(refusal) => {
                return Err(AdminError::new(refusal.response_error(), refusal.to_string()))
            }
        }
    }
    let message = format!("the configs of broker '{resource}' kept changing while this change was made");
    Err(AdminError::new(ResponseError::InvalidUpdateVersion, message))
}

/// Applies the effective config's topic defaults to every open partition and its throttle
/// rates to every shard. Run by one shard per change (shard 0 in a cluster).
pub async fn apply_dynamic_configs(ctx: &Rc<BrokerCtx>) {
    let effective = ctx.state.shared.effective_config.current();
    if let Some(cluster) = &effective.cluster {
        let rates = (
            cluster.replication.leader_throttled_rate,
            cluster.replication.follower_throttled_rate,
        );
        for shard in 0..ctx.shard_count() {
            let set = ctx.submit_to(shard, move |there| async move {
                if let Some(replication) = &there.state.replication {
                    replication.leader_throttle.set_rate(rates.0);
                    replication.follower_throttle.set_rate(rates.1);
                }
            });
            if set.await.is_err() {
                tracing::warn!(shard, "replication throttles not updated: the shard is gone");
            }
        }
    }
    let topics: Vec<_> = ctx
        .state
        .shared
        .metadata
        .current()
        .topics
        .values()
        .cloned()
        .collect();
    for topic in &topics {
        push_configs(ctx, topic).await;
    }
    let layers: &DynamicLayers = effective.dynamic_layers();
    tracing::info!(default = ?layers.default, broker = ?layers.broker, "applied dynamic broker configs");
}
