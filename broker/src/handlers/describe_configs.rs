//! DescribeConfigs: every topic or broker config with its value, source and (on request)
//! synonyms and documentation.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::authorization::Access;
use crate::broker::{BrokerCtx, BrokerShared};
use crate::config::{ConfigEntry, TopicConfig};
use laminar_security::Operation;

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

pub fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let shared = &ctx.state.shared;
    let results = request
        .resources
        .iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let described = config_refusal(
                access,
                Operation::DescribeConfigs,
                resource.resource_type,
                &resource.resource_name,
            )
            .map_or_else(|| entries(shared, resource), Err);
            match described {
                Ok(entries) => result.with_configs(
                    entries
                        .into_iter()
                        .filter(|e| wanted(resource, &e.name))
                        .map(|e| encode(e, &request, version))
                        .collect(),
                ),
                Err((code, message)) => result
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(message))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// Kafka's check on a config resource: `operation` on the topic, or on the cluster for a
/// broker's configs.
pub fn config_refusal(
    access: &Access,
    operation: Operation,
    resource_type: i8,
    name: &str,
) -> Option<(ResponseError, String)> {
    let refused = |error| Some((error, format!("{operation} is needed")));
    match resource_type {
        RESOURCE_TOPIC if !access.allows_topic(operation, name) => {
            refused(ResponseError::TopicAuthorizationFailed)
        }
        RESOURCE_TOPIC => None,
        _ if !access.allows_cluster(operation) => refused(ResponseError::ClusterAuthorizationFailed),
        _ => None,
    }
}

fn entries(
    shared: &BrokerShared,
    resource: &DescribeConfigsResource,
) -> Result<Vec<ConfigEntry>, (ResponseError, String)> {
    let name = resource.resource_name.as_str();
    match resource.resource_type {
        RESOURCE_TOPIC => match shared.metadata.current().get(name) {
            Some(topic) => Ok(TopicConfig::describe(
                &topic.configs,
                &shared.effective_config.current(),
            )),
            None => Err((
                ResponseError::UnknownTopicOrPartition,
                format!("no topic '{name}'"),
            )),
        },
        // Kafka's `--entity-default`: the dynamic defaults only.
        RESOURCE_BROKER if name.is_empty() => {
            Ok(shared.effective_config.current().describe_dynamic_defaults())
        }
        RESOURCE_BROKER if name == shared.node_id().to_string() => {
            Ok(shared.effective_config.current().describe())
        }
        RESOURCE_BROKER => Err((
            ResponseError::InvalidRequest,
            format!("this broker is node {}", shared.node_id()),
        )),
        other => Err((
            ResponseError::InvalidRequest,
            format!("resource type {other} has no configs here"),
        )),
    }
}

fn wanted(resource: &DescribeConfigsResource, name: &str) -> bool {
    match &resource.configuration_keys {
        Some(keys) if !keys.is_empty() => keys.iter().any(|k| k.as_str() == name),
        _ => true,
    }
}

/// One config entry, with synonyms and documentation as `request` asks.
fn encode(
    entry: ConfigEntry,
    request: &DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResourceResult {
    let synonyms = if request.include_synonyms {
        entry
            .synonyms
            .into_iter()
            .map(|s| {
                DescribeConfigsSynonym::default()
                    .with_name(StrBytes::from_string(s.name))
                    .with_value(s.value.map(StrBytes::from_string))
                    .with_source(s.source.kafka_code())
            })
            .collect()
    } else {
        Vec::new()
    };
    let result = DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(entry.name))
        .with_value(entry.value.map(StrBytes::from_string))
        .with_read_only(entry.read_only)
        .with_config_source(entry.source.kafka_code())
        .with_is_sensitive(entry.sensitive)
        .with_synonyms(synonyms);
    if version >= 3 {
        let doc = request
            .include_documentation
            .then(|| StrBytes::from_static_str(entry.doc));
        result
            .with_config_type(entry.config_type as i8)
            .with_documentation(doc)
    } else {
        result
    }
}
