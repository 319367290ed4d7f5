//! Data-path helpers: Produce, Fetch and ListOffsets, each addressing topics by name.

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::connection::{Connection, Pending};
use crate::error::{check_code, ClientError, KafkaError};

/// How many replicas must have a batch before the broker answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// acks=0: the broker sends no response at all.
    None,
    /// acks=1: the leader has appended it.
    Leader,
    /// acks=all (-1): every in-sync replica has it.
    All,
}

impl Acks {
    /// The wire value.
    pub fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

impl std::str::FromStr for Acks {
    type Err = String;
    fn from_str(text: &str) -> Result<Acks, String> {
        match text {
            "0" => Ok(Acks::None),
            "1" => Ok(Acks::Leader),
            "all" | "-1" => Ok(Acks::All),
            other => Err(format!("acks must be 0, 1, all or -1, not {other:?}")),
        }
    }
}

/// The broker's acknowledgement of one produced partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceAck {
    /// Offset assigned to the first record.
    pub base_offset: i64,
    /// Append time, when the topic uses LogAppendTime; -1 otherwise.
    pub log_append_time_ms: i64,
}

/// Which offset ListOffsets looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The log end offset (the next offset to be written).
    Latest,
    /// The first offset whose timestamp is at or after this (ms).
    Timestamp(i64),
}

impl OffsetSpec {
    fn wire(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(ms) => ms,
        }
    }
}

/// Where to fetch from in one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPosition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// First offset wanted.
    pub offset: i64,
    /// At most this many bytes from this partition (the first batch comes whole regardless).
    pub partition_max_bytes: i32,
}

/// Request-wide fetch limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchSpec {
    /// Longest the broker may wait for `min_bytes` to accumulate.
    pub max_wait_ms: i32,
    /// Bytes the broker waits for before answering early.
    pub min_bytes: i32,
    /// At most this many bytes in the whole response.
    pub max_bytes: i32,
}

/// One partition's part of a fetch response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The partition's error, if any (then `records` is empty).
    pub error: Option<KafkaError>,
    /// The partition's high watermark.
    pub high_watermark: i64,
    /// The partition's log start offset (-1 if the broker did not say).
    pub log_start_offset: i64,
    /// Whole batches, possibly followed by a partial one; walk with `records::batches`.
    pub records: Bytes,
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// `(topic, item)` pairs grouped by topic, topics and items in first-seen order.
pub(crate) fn by_topic<'a, P>(items: impl IntoIterator<Item = (&'a str, P)>) -> Vec<(TopicName, Vec<P>)> {
    let mut topics: Vec<(TopicName, Vec<P>)> = Vec::new();
    for (topic, item) in items {
        match topics.iter_mut().find(|(name, _)| name.0.as_str() == topic) {
            Some((_, list)) => list.push(item),
            None => topics.push((topic_name(topic), vec![item])),
        }
    }
    topics
}

/// The partitions of a fetch answer, in its order.
pub(crate) fn fetched_partitions(response: FetchResponse) -> Vec<FetchedPartition> {
    let mut fetched = Vec::new();
    for topic in response.responses {
        for partition in topic.partitions {
            fetched.push(FetchedPartition {
                topic: topic.topic.0.to_string(),
                partition: partition.partition_index,
                error: KafkaError::from_code(partition.error_code, None),
                high_watermark: partition.high_watermark,
                log_start_offset: partition.log_start_offset,
                records: partition.records.unwrap_or_default(),
            });
        }
    }
    fetched
}

/// A Fetch request for `partitions` from `replica_id` (-1: a consumer).
pub(crate) fn fetch_request<'a>(
    replica_id: i32,
    spec: &FetchSpec,
    partitions: impl IntoIterator<Item = (&'a str, FetchPartition)>,
) -> FetchRequest {
    let topics = by_topic(partitions)
        .into_iter()
        .map(|(topic, partitions)| {
            FetchTopic::default()
                .with_topic(topic)
                .with_partitions(partitions)
        })
        .collect();
    FetchRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_max_wait_ms(spec.max_wait_ms)
        .with_min_bytes(spec.min_bytes)
        .with_max_bytes(spec.max_bytes)
        .with_session_epoch(laminar_protocol::fetch_session::FINAL_EPOCH)
        .with_topics(topics)
}

impl Connection {
    /// Sends `records` (whole v2 batches) to one partition. Returns the pending response, or
    /// `None` for acks=0, where the broker sends none.
    pub fn send_produce(
        &mut self,
        topic: &str,
        partition: i32,
        records: Bytes,
        acks: Acks,
        timeout_ms: i32,
    ) -> Result<Option<Pending<ProduceResponse>>, ClientError> {
        self.send_produce_batches(topic, vec![(partition, records)], acks, timeout_ms)
    }

    /// Sends one request with batches for several partitions of `topic`, `(partition, whole
    /// v2 batches)` each, as Kafka's producer sends every ready partition a broker leads in one
    /// request. The partitions must differ. `None` for acks=0.
    pub fn send_produce_batches(
        &mut self,
        topic: &str,
        batches: Vec<(i32, Bytes)>,
        acks: Acks,
        timeout_ms: i32,
    ) -> Result<Option<Pending<ProduceResponse>>, ClientError> {
        assert!(
            !batches.is_empty(),
            "a produce request carries at least one batch"
        );
        let pending = self.send_produce_pieces(topic, &batches, acks.wire(), timeout_ms)?;
        if acks == Acks::None {
            return Ok(None);
        }
        Ok(Some(pending))
    }

    /// Receives the response to a single-partition produce sent by [`Connection::send_produce`].
    pub fn receive_produce(&mut self, pending: Pending<ProduceResponse>) -> Result<ProduceAck, ClientError> {
        let acks = self.receive_produce_batches(pending, 1)?;
        Ok(acks[0])
    }

    /// Receives the response to [`Connection::send_produce_batches`] with `partitions` batches:
    /// one acknowledgement per partition, in response order. Any partition's error is an error.
    pub fn receive_produce_batches(
        &mut self,
        pending: Pending<ProduceResponse>,
        partitions: usize,
    ) -> Result<Vec<ProduceAck>, ClientError> {
        let response = self.receive(pending)?;
        let mut acks = Vec::with_capacity(partitions);
        for topic in &response.responses {
            for partition in &topic.partition_responses {
                check_code(
                    ApiKey::Produce,
                    partition.error_code,
                    partition.error_message.as_deref(),
                    || format!(" {}-{}", topic.name.0, partition.index),
                )?;
                acks.push(ProduceAck {
                    base_offset: partition.base_offset,
                    log_append_time_ms: partition.log_append_time_ms,
                });
            }
        }
        if acks.len() != partitions {
            return Err(ClientError::MissingInResponse {
                api: ApiKey::Produce,
                what: format!("{partitions} partitions produced to ({} answered)", acks.len()),
            });
        }
        Ok(acks)
    }

    /// Produces and waits for the acknowledgement (`None` for acks=0).
    pub fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        records: Bytes,
        acks: Acks,
        timeout_ms: i32,
    ) -> Result<Option<ProduceAck>, ClientError> {
        match self.send_produce(topic, partition, records, acks, timeout_ms)? {
            None => Ok(None),
            Some(pending) => self.receive_produce(pending).map(Some),
        }
    }

    /// Sends a fetch for `positions` (a plain consumer: replica id -1, read uncommitted).
    pub fn send_fetch(
        &mut self,
        spec: &FetchSpec,
        positions: &[FetchPosition],
    ) -> Result<Pending<FetchResponse>, ClientError> {
        let partitions = positions.iter().map(|position| {
            let partition = FetchPartition::default()
                .with_partition(position.partition)
                .with_fetch_offset(position.offset)
                .with_partition_max_bytes(position.partition_max_bytes);
            (position.topic.as_str(), partition)
        });
        self.send(&fetch_request(-1, spec, partitions))
    }

    /// Receives a fetch response; partition errors are reported per partition.
    pub fn receive_fetch(
        &mut self,
        pending: Pending<FetchResponse>,
    ) -> Result<Vec<FetchedPartition>, ClientError> {
        let response = self.receive(pending)?;
        check_code(ApiKey::Fetch, response.error_code, None, String::new)?;
        Ok(fetched_partitions(response))
    }

    /// Fetches and waits for the response.
    pub fn fetch(
        &mut self,
        spec: &FetchSpec,
        positions: &[FetchPosition],
    ) -> Result<Vec<FetchedPartition>, ClientError> {
        let pending = self.send_fetch(spec, positions)?;
        self.receive_fetch(pending)
    }

    /// Looks up offsets in `topic`; returns `(partition, offset)` in request order.
    pub fn list_offsets(
        &mut self,
        topic: &str,
        partitions: &[(i32, OffsetSpec)],
    ) -> Result<Vec<(i32, i64)>, ClientError> {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|(partition, spec)| {
                            ListOffsetsPartition::default()
                                .with_partition_index(*partition)
                                .with_current_leader_epoch(-1)
                                .with_timestamp(spec.wire())
                        })
                        .collect(),
                )]);
        let response = self.request(&request)?;
        let answered: Vec<_> = response.topics.iter().flat_map(|t| t.partitions.iter()).collect();
        partitions
            .iter()
            .map(|(partition, _)| {
                let entry = answered
                    .iter()
                    .find(|p| p.partition_index == *partition)
                    .ok_or_else(|| ClientError::MissingInResponse {
                        api: ApiKey::ListOffsets,
                        what: format!("{topic}-{partition}"),
                    })?;
                check_code(ApiKey::ListOffsets, entry.error_code, None, || {
                    format!(" {topic}-{partition}")
                })?;
                Ok((*partition, entry.offset))
            })
            .collect()
    }
}
