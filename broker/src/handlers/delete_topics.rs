//! DeleteTopics: removes topics from the table, then their partitions' files on every shard. In
//! cluster mode the quorum removes them; every broker deletes its partitions' files when its
//! view loses the topic (`quorum::view`).

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use std::sync::Arc;

use laminar_engine::metadata::TopicMetadata;

use crate::authorization::Access;
use crate::broker::{BrokerCtx, BrokerShared};
use crate::handlers::topic_admin::{delete_partitions, AdminError};
use crate::quorum::admin::{wait_for_view, with_retries};
use crate::quorum::ClusterLink;
use laminar_security::Operation;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let shared = &ctx.state.shared;
    // v6 names topics in `topics` (by name or id); earlier versions in `topic_names`.
    let targets: Vec<(Option<String>, uuid::Uuid)> = if version >= 6 {
        request
            .topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.to_string()), t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|n| (Some(n.to_string()), uuid::Uuid::nil()))
            .collect()
    };
    let mut response = DeleteTopicsResponse::default();
    for (name, id) in targets {
        let name = name.or_else(|| {
            let table = shared.metadata.current();
            table
                .topics
                .values()
                .find(|t| uuid::Uuid::from_bytes(t.id) == id)
                .map(|t| t.name.clone())
        });
        let outcome = match &name {
            None => Err(AdminError::new(
                ResponseError::UnknownTopicId,
                format!("no topic has id {id}"),
            )),
            Some(name) if !access.allows_topic(Operation::Delete, name) => Err(AdminError::new(
                ResponseError::TopicAuthorizationFailed,
                "Delete on the topic is needed",
            )),
            Some(_) if !shared.config.delete_topic_enable => Err(AdminError::new(
                ResponseError::TopicDeletionDisabled,
                "delete.topic.enable is false",
            )),
            Some(name) => match &shared.cluster {
                Some(link) => cluster_delete(shared, link, name).await,
                None => shared.metadata.delete_topic(name).map_err(AdminError::from),
            },
        };
        let result = DeletableTopicResult::default()
            .with_name(name.clone().map(|n| TopicName(StrBytes::from_string(n))))
            .with_topic_id(id);
        let result = match outcome {
            Ok(topic) => {
                if shared.cluster.is_none() {
                    delete_partitions(ctx, &topic).await;
                }
                tracing::info!(topic = topic.name, "deleted topic");
                result.with_topic_id(uuid::Uuid::from_bytes(topic.id))
            }
            Err(e) => result
                .with_error_code(e.code)
                .with_error_message(Some(StrBytes::from_string(e.message))),
        };
        response.responses.push(result);
    }
    response
}

/// Cluster mode: the quorum removes the topic; the answer waits for this broker's view.
async fn cluster_delete(
    shared: &BrokerShared,
    link: &ClusterLink,
    name: &str,
) -> Result<Arc<TopicMetadata>, AdminError> {
    let topic = shared.metadata.current().get(name).cloned();
    let deleted = with_retries(|| link.handle.delete_topics(vec![name.to_string()])).await?;
    if let Some(Err(refusal)) = deleted.into_iter().next().map(|r| r.result) {
        let message = format!("topic '{name}' not deleted: {refusal}");
        return Err(AdminError::new(refusal.response_error(), message));
    }
    wait_for_view(link, |image| image.metadata.topic_by_name(name).is_none()).await;
    topic.ok_or_else(|| {
        AdminError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("no topic '{name}'"),
        )
    })
}
