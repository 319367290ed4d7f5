//! Topic administration through librdkafka's AdminClient: CreateTopics (configs, validate-only,
//! duplicates, unknown config keys), Metadata listing, DescribeConfigs (topic and broker, with
//! defaults), AlterConfigs, CreatePartitions and DeleteTopics.

use anyhow::{Context, Result};
use laminar_tests::rdkafka_client::{
    admin_client, admin_options, assigned_consumer, create_topic, produce_all, producer, sample_records,
    unique_topic, watermarks, OP_TIMEOUT,
};
use laminar_tests::Broker;
use rdkafka::admin::{
    AdminClient, AlterConfig, ConfigResource, ConfigSource, NewPartitions, NewTopic, ResourceSpecifier,
    TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;

type Admin = AdminClient<DefaultClientContext>;

/// Every topic name the broker lists (a Metadata request for all topics never auto-creates).
fn listed_topics(admin: &Admin) -> Result<Vec<String>> {
    let metadata = admin.inner().fetch_metadata(None, OP_TIMEOUT)?;
    Ok(metadata.topics().iter().map(|t| t.name().to_string()).collect())
}

fn partition_count(admin: &Admin, topic: &str) -> Result<usize> {
    let metadata = admin.inner().fetch_metadata(None, OP_TIMEOUT)?;
    let described = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .context("topic not listed")?;
    assert!(described.error().is_none(), "{topic}: {:?}", described.error());
    Ok(described.partitions().len())
}

async fn describe_topic(admin: &Admin, topic: &str) -> Result<ConfigResource> {
    let mut results = admin
        .describe_configs([&ResourceSpecifier::Topic(topic)], &admin_options())
        .await?;
    assert_eq!(results.len(), 1);
    results
        .remove(0)
        .map_err(|code| anyhow::anyhow!("DescribeConfigs {topic}: {code:?}"))
}

fn value<'a>(resource: &'a ConfigResource, name: &str) -> Option<&'a str> {
    resource.get(name).and_then(|entry| entry.value.as_deref())
}

#[tokio::test]
async fn created_topics_are_listed_with_their_partitions_and_leader() -> Result<()> {
    let broker = Broker::start_default()?;
    let admin = admin_client(&broker.bootstrap())?;
    let (one, four) = (unique_topic("list-one"), unique_topic("list-four"));
    create_topic(&broker.bootstrap(), &one, 1, &[]).await?;
    create_topic(&broker.bootstrap(), &four, 4, &[]).await?;
    let metadata = admin.inner().fetch_metadata(None, OP_TIMEOUT)?;
    assert_eq!(metadata.brokers().len(), 1, "a single-node cluster");
    let node = &metadata.brokers()[0];
    assert_eq!(
        (node.host(), node.port()),
        ("127.0.0.1", broker.addr().port() as i32),
        "advertised listener"
    );
    for (name, partitions) in [(&one, 1), (&four, 4)] {
        let topic = metadata
            .topics()
            .iter()
            .find(|t| t.name() == name.as_str())
            .context("topic not listed")?;
        let mut ids: Vec<i32> = topic.partitions().iter().map(|p| p.id()).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..partitions).collect::<Vec<_>>(), "{name}: partition ids");
        for partition in topic.partitions() {
            assert_eq!(partition.leader(), node.id(), "{name}/{}: leader", partition.id());
            assert_eq!(
                partition.replicas(),
                [node.id()],
                "{name}/{}: replicas",
                partition.id()
            );
            assert_eq!(partition.isr(), [node.id()], "{name}/{}: isr", partition.id());
        }
    }
    Ok(())
}

#[tokio::test]
async fn create_topics_validates_and_refuses_what_kafka_refuses() -> Result<()> {
    let broker = Broker::start_default()?;
    let admin = admin_client(&broker.bootstrap())?;

    let dry = unique_topic("validate-only");
    let new = NewTopic::new(&dry, 2, TopicReplication::Fixed(1));
    let results = admin
        .create_topics([&new], &admin_options().validate_only(true))
        .await?;
    assert_eq!(results, vec![Ok(dry.clone())], "validate-only of a valid topic");
    assert!(
        !listed_topics(&admin)?.contains(&dry),
        "validate-only must not create {dry}"
    );

    let real = unique_topic("exists");
    create_topic(&broker.bootstrap(), &real, 1, &[]).await?;
    let again = NewTopic::new(&real, 1, TopicReplication::Fixed(1));
    let results = admin.create_topics([&again], &admin_options()).await?;
    assert_eq!(
        results,
        vec![Err((real.clone(), RDKafkaErrorCode::TopicAlreadyExists))]
    );

    let bad_config = unique_topic("bad-config");
    let bad = NewTopic::new(&bad_config, 1, TopicReplication::Fixed(1)).set("no.such.topic.config", "1");
    let results = admin.create_topics([&bad], &admin_options()).await?;
    assert_eq!(
        results,
        vec![Err((bad_config.clone(), RDKafkaErrorCode::InvalidConfig))]
    );
    assert!(!listed_topics(&admin)?.contains(&bad_config));

    let too_many_replicas = unique_topic("rf3");
    let rf3 = NewTopic::new(&too_many_replicas, 1, TopicReplication::Fixed(3));
    let results = admin.create_topics([&rf3], &admin_options()).await?;
    assert_eq!(
        results,
        vec![Err((
            too_many_replicas,
            RDKafkaErrorCode::InvalidReplicationFactor
        ))]
    );
    Ok(())
}

#[tokio::test]
async fn describe_configs_shows_topic_overrides_and_every_default() -> Result<()> {
    let broker = Broker::start_default()?;
    let admin = admin_client(&broker.bootstrap())?;
    let topic = unique_topic("configs");
    create_topic(
        &broker.bootstrap(),
        &topic,
        1,
        &[("retention.ms", "3600000"), ("max.message.bytes", "2000000")],
    )
    .await?;
    let described = describe_topic(&admin, &topic).await?;
    for (name, set) in [("retention.ms", "3600000"), ("max.message.bytes", "2000000")] {
        let entry = described
            .get(name)
            .with_context(|| format!("{name} not described"))?;
        assert_eq!(entry.value.as_deref(), Some(set), "{name}");
        assert_eq!(entry.source, ConfigSource::DynamicTopic, "{name} source");
        assert!(!entry.is_default, "{name} is set on the topic");
    }
    // Kafka's defaults, listed even though nobody set them.
    for (name, default) in [
        ("cleanup.policy", "delete"),
        ("segment.bytes", "1073741824"),
        ("retention.bytes", "-1"),
        ("compression.type", "producer"),
    ] {
        let entry = described
            .get(name)
            .with_context(|| format!("default {name} not described"))?;
        assert_eq!(entry.value.as_deref(), Some(default), "{name} default");
        assert_ne!(
            entry.source,
            ConfigSource::DynamicTopic,
            "{name} was never set on the topic"
        );
    }

    let metadata = admin.inner().fetch_metadata(None, OP_TIMEOUT)?;
    let node_id = metadata.brokers()[0].id();
    let mut results = admin
        .describe_configs([&ResourceSpecifier::Broker(node_id)], &admin_options())
        .await?;
    let broker_configs = results
        .remove(0)
        .map_err(|code| anyhow::anyhow!("DescribeConfigs broker: {code:?}"))?;
    assert_eq!(
        value(&broker_configs, "message.max.bytes"),
        Some("1048588"),
        "broker message.max.bytes default"
    );
    assert_eq!(value(&broker_configs, "auto.create.topics.enable"), Some("true"));
    Ok(())
}

#[tokio::test]
async fn alter_configs_replaces_the_topic_overrides() -> Result<()> {
    let broker = Broker::start_default()?;
    let admin = admin_client(&broker.bootstrap())?;
    let topic = unique_topic("alter");
    create_topic(
        &broker.bootstrap(),
        &topic,
        1,
        &[("max.message.bytes", "2000000")],
    )
    .await?;
    let alter = AlterConfig::new(ResourceSpecifier::Topic(&topic)).set("retention.ms", "7200000");
    let results = admin.alter_configs([&alter], &admin_options()).await?;
    assert_eq!(results.len(), 1);
    results
        .into_iter()
        .next()
        .expect("one")
        .map_err(|(r, code)| anyhow::anyhow!("AlterConfigs {r:?}: {code:?}"))?;
    let described = describe_topic(&admin, &topic).await?;
    assert_eq!(value(&described, "retention.ms"), Some("7200000"));
    // AlterConfigs (not the incremental one) replaces the whole set of topic overrides.
    assert_eq!(
        value(&described, "max.message.bytes"),
        Some("1048588"),
        "override dropped, default back"
    );

    let bad = AlterConfig::new(ResourceSpecifier::Topic(&topic)).set("no.such.topic.config", "1");
    // The broker answers INVALID_CONFIG (checked with confluent-kafka in
    // tests/python/test_confluent_kafka.py), but the rdkafka crate 0.39 reports every
    // AlterConfigs resource as Ok, so here only the effect is checked: nothing changed.
    admin.alter_configs([&bad], &admin_options()).await?;
    assert_eq!(
        value(&describe_topic(&admin, &topic).await?, "no.such.topic.config"),
        None
    );
    assert_eq!(
        value(&describe_topic(&admin, &topic).await?, "retention.ms"),
        Some("7200000"),
        "refused alter kept"
    );
    Ok(())
}

#[tokio::test]
async fn create_partitions_grows_a_topic_and_refuses_to_shrink_it() -> Result<()> {
    let broker = Broker::start_default()?;
    let admin = admin_client(&broker.bootstrap())?;
    let topic = unique_topic("grow");
    create_topic(&broker.bootstrap(), &topic, 1, &[]).await?;
    let grow = NewPartitions::new(&topic, 3);
    let results = admin.create_partitions([&grow], &admin_options()).await?;
    assert_eq!(results, vec![Ok(topic.clone())]);
    assert_eq!(partition_count(&admin, &topic)?, 3);

    let records = sample_records(10);
    let offsets = produce_all(&producer(&broker.bootstrap(), &[])?, &topic, 2, &records).await?;
    assert_eq!(
        offsets,
        (0..10).collect::<Vec<i64>>(),
        "a new partition starts at offset 0"
    );

    let shrink = NewPartitions::new(&topic, 2);
    let results = admin.create_partitions([&shrink], &admin_options()).await?;
    assert_eq!(
        results,
        vec![Err((topic.clone(), RDKafkaErrorCode::InvalidPartitions))]
    );
    assert_eq!(partition_count(&admin, &topic)?, 3);
    Ok(())
}

#[tokio::test]
async fn delete_topics_removes_the_topic_and_its_data() -> Result<()> {
    let broker = Broker::start_default()?;
    let admin = admin_client(&broker.bootstrap())?;
    let topic = unique_topic("delete");
    create_topic(&broker.bootstrap(), &topic, 2, &[]).await?;
    produce_all(
        &producer(&broker.bootstrap(), &[])?,
        &topic,
        0,
        &sample_records(20),
    )
    .await?;

    let results = admin.delete_topics(&[&topic], &admin_options()).await?;
    assert_eq!(results, vec![Ok(topic.clone())]);
    assert!(
        !listed_topics(&admin)?.contains(&topic),
        "{topic} still listed after DeleteTopics"
    );

    let results = admin.delete_topics(&[&topic], &admin_options()).await?;
    assert_eq!(
        results,
        vec![Err((topic.clone(), RDKafkaErrorCode::UnknownTopicOrPartition))]
    );

    // Same name again: a new, empty topic, not the old log.
    create_topic(&broker.bootstrap(), &topic, 1, &[]).await?;
    let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
    assert_eq!(
        watermarks(&consumer, &topic, 0)?,
        (0, 0),
        "recreated topic must be empty"
    );
    Ok(())
}
