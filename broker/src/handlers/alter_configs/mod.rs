//! AlterConfigs (replace a topic's overrides) and IncrementalAlterConfigs (set, delete, append,
//! subtract single keys). Changes are validated whole, persisted, then applied live to the
//! topic's open partitions. Broker resources: the dynamic broker configs (`broker_resource`).
//!
//! In a cluster the overrides live in the metadata log: the change goes to the controller,
//! which writes it only if the topic still holds the overrides it was computed from
//! (`laminar_controller::decide::configs`), and every replica applies it from there
//! (`quorum::view`). The answer waits until this broker's view holds the change.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest, AlterConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::handlers::describe_configs::{RESOURCE_BROKER, RESOURCE_TOPIC};
use crate::handlers::topic_admin::{push_configs, validate_overrides, AdminError};
use crate::quorum::admin::{wait_for_view, with_retries};
use crate::quorum::ClusterLink;
use laminar_controller::api::TopicConfigChange;
use laminar_controller::{MetadataImage, Refusal};
use laminar_security::Operation;

mod broker_resource;
pub use broker_resource::apply_dynamic_configs;

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

pub async fn handle_alter(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let responses = alter_each(
        (ctx, access),
        &request.resources,
        request.validate_only,
        |r| (r.resource_type, &r.resource_name),
        |r, _current| {
            Ok(r.configs
                .iter()
                .filter_map(|c| c.value.as_ref().map(|v| (c.name.to_string(), v.to_string())))
                .collect())
        },
        |(resource_type, resource_name), code, message| {
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_resource_type(resource_type)
                .with_resource_name(resource_name)
                .with_error_code(code)
                .with_error_message(message)
        },
    )
    .await;
    AlterConfigsResponse::default().with_responses(responses)
}

pub async fn handle_incremental(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let responses = alter_each(
        (ctx, access),
        &request.resources,
        request.validate_only,
        |r| (r.resource_type, &r.resource_name),
        |r, current| {
            let changes: Vec<(String, i8, Option<String>)> = r
                .configs
                .iter()
                .map(|c| {
                    (
                        c.name.to_string(),
                        c.config_operation,
                        c.value.as_ref().map(|v| v.to_string()),
                    )
                })
                .collect();
            apply_incremental(current.clone(), &changes)
        },
        |(resource_type, resource_name), code, message| {
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_resource_type(resource_type)
                .with_resource_name(resource_name)
                .with_error_code(code)
                .with_error_message(message)
        },
    )
    .await;
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

type Overrides = BTreeMap<String, String>;

/// Alters each resource of either request in order, answering each: `resource` gives its type
/// and name, `new_overrides` its overrides from the current ones, `answer` builds its result from
/// (type, name), error code and message.
async fn alter_each<Resource, Answer>(
    (ctx, access): (&Rc<BrokerCtx>, &Access),
    resources: &[Resource],
    validate_only: bool,
    resource: impl Fn(&Resource) -> (i8, &StrBytes),
    new_overrides: impl Fn(&Resource, &Overrides) -> Result<Overrides, AdminError>,
    answer: impl Fn((i8, StrBytes), i16, Option<StrBytes>) -> Answer,
) -> Vec<Answer> {
    let mut answers = Vec::with_capacity(resources.len());
    for r in resources {
        let (resource_type, name) = resource(r);
        let refused =
            super::describe_configs::config_refusal(access, Operation::AlterConfigs, resource_type, name);
        let outcome = match refused {
            Some((error, message)) => Err(AdminError::new(error, message)),
            None => {
                alter(ctx, resource_type, name.as_str(), validate_only, |current| {
                    new_overrides(r, current)
                })
                .await
            }
        };
        let (code, message) = split(outcome);
        answers.push(answer((resource_type, name.clone()), code, message));
    }
    answers
}

fn split(outcome: Result<(), AdminError>) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        Err(e) => (e.code, Some(StrBytes::from_string(e.message))),
    }
}

/// Computes the new overrides from the current ones, validates and stores them, and applies them.
async fn alter(
    ctx: &Rc<BrokerCtx>,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    new_overrides: impl Fn(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, AdminError>,
) -> Result<(), AdminError> {
    match resource_type {
        RESOURCE_TOPIC => {}
        RESOURCE_BROKER => return broker_resource::alter(ctx, name, validate_only, new_overrides).await,
        other => {
            return Err(AdminError::new(
                ResponseError::InvalidRequest,
                format!("unknown resource type {other}"),
            ))
        }
    }
    let shared = &ctx.state.shared;
    if let Some(link) = &shared.cluster {
        return alter_in_cluster(link, name, validate_only, new_overrides).await;
    }
    let current = shared
        .metadata
        .current()
        .get(name)
        .cloned()
        .ok_or_else(|| no_topic(name))?;
    let overrides = new_overrides(&current.configs)?;
    validate_overrides(&overrides)?;
    if validate_only {
        return Ok(());
    }
    let updated = shared.metadata.set_configs(name, overrides)?;
    push_configs(ctx, &updated).await;
    tracing::info!(topic = name, configs = ?updated.configs, "altered topic configs");
    Ok(())
}

fn no_topic(name: &str) -> AdminError {
    AdminError::new(
        ResponseError::UnknownTopicOrPartition,
        format!("no topic '{name}'"),
    )
}

/// How long a change whose resource changed meanwhile (through another broker, or not yet in
/// this broker's view) is computed again from the configs the view then holds: Kafka's request
/// timeout. Each try loses only to a change that was written, so two clients changing one
/// resource at once both get through; a fixed number of tries let one lose every race.
pub(super) const CLUSTER_RETRY_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Cluster mode: the new overrides, computed from the topic's as the metadata holds them,
/// written through the controller.
async fn alter_in_cluster(
    link: &ClusterLink,
    name: &str,
    validate_only: bool,
    new_overrides: impl Fn(&Overrides) -> Result<Overrides, AdminError>,
) -> Result<(), AdminError> {
    let held = |image: &MetadataImage| image.metadata.topic_by_name(name).map(|t| t.configs.clone());
    let deadline = std::time::Instant::now() + CLUSTER_RETRY_WITHIN;
    while std::time::Instant::now() < deadline {
        let current = held(&link.image()).ok_or_else(|| no_topic(name))?;
        let overrides = new_overrides(&current)?;
        validate_overrides(&overrides)?;
        if validate_only || overrides == current {
            return Ok(());
        }
        let change = TopicConfigChange {
            name: name.to_string(),
            expected: current.clone(),
            configs: overrides.clone(),
        };
        let answer = with_retries(|| link.handle.alter_topic_configs(vec![change.clone()])).await;
        match answer.map(|results| results.into_iter().next().map(|r| r.result)) {
            Ok(Some(Ok(_))) => {
                wait_for_view(link, |image| held(image).as_ref() == Some(&overrides)).await;
                tracing::info!(topic = name, configs = ?overrides, "altered topic configs");
                return Ok(());
            }
            Ok(Some(Err(Refusal::InvalidUpdateVersion))) => {
                wait_for_view(link, |image| held(image).as_ref() != Some(&current)).await;
            }
            Ok(None) => return Err(AdminError::new(ResponseError::UnknownServerError, "no answer")),
            Ok(Some(Err(refusal))) | Err(refusal) => {
                return Err(AdminError::new(refusal.response_error(), refusal.to_string()))
            }
        }
    }
    let message = format!("the configs of '{name}' kept changing while this change was made");
    Err(AdminError::new(ResponseError::InvalidUpdateVersion, message))
}

fn apply_incremental(
    mut overrides: BTreeMap<String, String>,
    changes: &[(String, i8, Option<String>)],
) -> Result<BTreeMap<String, String>, AdminError> {
    for (name, operation, value) in changes {
        match (*operation, value) {
            (OP_SET, Some(value)) => {
                overrides.insert(name.clone(), value.clone());
            }
            (OP_DELETE, _) => {
                overrides.remove(name);
            }
            (OP_APPEND, Some(value)) => {
                let mut items = list_items(overrides.get(name));
                items.extend(
                    list_items(Some(value))
                        .into_iter()
                        .filter(|v| !overrides_contains(&overrides, name, v)),
                );
                overrides.insert(name.clone(), items.join(","));
            }
            (OP_SUBTRACT, Some(value)) => {
                let remove = list_items(Some(value));
                let items: Vec<String> = list_items(overrides.get(name))
                    .into_iter()
                    .filter(|v| !remove.contains(v))
                    .collect();
                overrides.insert(name.clone(), items.join(","));
            }
            (operation, _) => {
                return Err(AdminError::new(
                    ResponseError::InvalidRequest,
                    format!("{name}: operation {operation} needs a value or is unknown"),
                ))
            }
        }
    }
    Ok(overrides)
}

fn overrides_contains(overrides: &BTreeMap<String, String>, name: &str, item: &str) -> bool {
    list_items(overrides.get(name)).iter().any(|v| v == item)
}

fn list_items(value: Option<&String>) -> Vec<String> {
    value
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incremental_operations_edit_single_keys() {
        let current = BTreeMap::from([
            ("retention.ms".to_string(), "1000".to_string()),
            ("cleanup.policy".to_string(), "delete".to_string()),
        ]);
        let changes = vec![
            ("retention.ms".to_string(), OP_DELETE, None),
            ("segment.bytes".to_string(), OP_SET, Some("2048".to_string())),
            (
                "cleanup.policy".to_string(),
                OP_APPEND,
                Some("compact,delete".to_string()),
            ),
        ];
        let updated = apply_incremental(current, &changes).unwrap();
        assert_eq!(updated.get("retention.ms"), None);
        assert_eq!(updated.get("segment.bytes").map(String::as_str), Some("2048"));
        assert_eq!(
            updated.get("cleanup.policy").map(String::as_str),
            Some("delete,compact")
        );
        let subtract = vec![(
            "cleanup.policy".to_string(),
            OP_SUBTRACT,
            Some("delete".to_string()),
        )];
        let updated = apply_incremental(updated, &subtract).unwrap();
        assert_eq!(updated.get("cleanup.policy").map(String::as_str), Some("compact"));
        assert!(apply_incremental(BTreeMap::new(), &[("x".to_string(), 9, None)]).is_err());
    }
}
