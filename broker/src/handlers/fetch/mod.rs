//! Fetch: whole batches from each partition's owning shard, bounded by the request's byte
//! limits, long-polled by appends (not timers) until `min_bytes` arrive or `max_wait_ms` passes.
//! The records go into the answer as the engine's read left them — segment file ranges or
//! shared batches — never copied (see `laminar_protocol::fetch_response` and `send`).
//!
//! This file is the handler: it opens the fetch session, reads, and answers now or after a long
//! poll. Each of those steps has a file of its own beside it; `wanted` holds the types they share.

mod answers;
mod long_poll;
mod partition_read;
mod read_budget;
pub mod replica_checks;
mod replica_selection;
mod session;
mod topic_ids;
mod wanted;

use crate::authorization::Access;
use laminar_model::{LeaderEpoch, NodeId, Offset};
use laminar_security::Operation;
use std::rc::Rc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::FetchRequest;
use laminar_protocol::fetch_response::{FetchAnswer, TopicAnswer};

use crate::broker::{BrokerCtx, TopicPartition};
use crate::fetch_sessions::{Answered, FetchContext, Opened};
use crate::handlers::partition_answers::push_partition;
use crate::handlers::placement::Placement;
use crate::reply::Reply;

use answers::{partition_answers, READ_COMMITTED};
use long_poll::{read_up_to, wait_for_appends};
use read_budget::{fit_to_budget, read_all};
use session::{open_session, told_of};
use wanted::{Reader, Reads, Wanted};

/// Answers a fetch; `placement` is the asking connection's. A fetch short of `min_bytes`
/// is answered later (`crate::reply`), once data arrives or its wait ends, while the
/// connection handles its next requests.
pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    mut request: FetchRequest,
    version: i16,
    (placement, access): (&Placement, &Access),
) -> Reply<FetchAnswer> {
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    // The broker's fetch.max.bytes bounds every answer (as Kafka's does), so none nears the
    // 2 GiB a frame size can express, whatever the client asked.
    let broker_max_bytes = ctx.state.shared.config.fetch_max_bytes as usize;
    let max_bytes = if version >= 3 {
        (request.max_bytes.max(0) as usize).min(broker_max_bytes)
    } else {
        broker_max_bytes
    };
    let unknown_ids = ctx
        .state
        .shared
        .metadata
        .with_current(|table| topic_ids::name_topics(table, &mut request, version));
    let reader = match request.replica_id.0 {
        id if id >= 0 => Reader::Follower(NodeId::new(id)),
        _ => Reader::Consumer,
    };
    let client_rack = (reader == Reader::Consumer && version >= replica_selection::FIRST_RACK_VERSION)
        .then_some(request.rack_id.as_str())
        .filter(|rack| !rack.is_empty());
    let opened = match open_session(ctx, &request, version, reader) {
        Ok(opened) => opened,
        Err(error) => return Reply::Now(FetchAnswer::failed(error.code())),
    };
    let wanted: Vec<(TopicPartition, Wanted)> = opened
        .partitions
        .iter()
        .map(|(tp, fetch)| {
            let want = Wanted {
                offset: Offset::new(fetch.fetch_offset),
                max_bytes: (fetch.partition_max_bytes.max(0) as usize).min(max_bytes),
                min_one_batch: true,
                reader,
                read_committed: request.isolation_level == READ_COMMITTED,
                current_leader_epoch: LeaderEpoch::new(fetch.current_leader_epoch),
                // A follower's fetch was checked as a whole (ClusterAction).
                authorized: reader != Reader::Consumer || access.allows_topic(Operation::Read, &tp.topic),
                preferred_replica: client_rack
                    .and_then(|rack| replica_selection::preferred_read_replica(&ctx.state.shared, tp, rack)),
                follower_may_serve: reader == Reader::Consumer
                    && version >= replica_selection::FIRST_RACK_VERSION,
            };
            (tp.clone(), want)
        })
        .collect();
    placement.note(wanted.iter().map(|(tp, _)| tp));
    let results = read_all(ctx, &wanted, max_bytes).await;
    let fetch = Fetching {
        ctx: ctx.clone(),
        opened,
        wanted,
        max_bytes,
        min_bytes: request.min_bytes.max(0) as usize,
        deadline,
        reader,
        isolation_level: request.isolation_level,
        unknown_ids,
        version,
    };
    if fetch.answers_now(&results) {
        return Reply::Now(fetch.answer(results).await);
    }
    Reply::Later(Box::pin(fetch.long_poll(results)))
}

/// A fetch whose first reads are done. Owned by the asking connection's shard.
struct Fetching {
    ctx: Rc<BrokerCtx>,
    opened: Opened,
    wanted: Vec<(TopicPartition, Wanted)>,
    max_bytes: usize,
    min_bytes: usize,
    deadline: Instant,
    reader: Reader,
    isolation_level: i8,
    /// The request's topics whose ids are unknown here (v13+), already answered.
    unknown_ids: Vec<TopicAnswer>,
    version: i16,
}

impl Fetching {
    /// Whether `results` answer the fetch: `min_bytes` (at least one byte) read, an error, the
    /// wait over, or the broker stopping.
    fn answers_now(&self, results: &Reads) -> bool {
        let any_error = results.iter().any(|(_, r)| r.is_err()) || !self.unknown_ids.is_empty();
        // KIP-392: a consumer sent elsewhere is told at once.
        let redirected = self
            .wanted
            .iter()
            .any(|(_, want)| want.preferred_replica.is_some());
        let bytes: usize = results
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .map(|read| read.data.len())
            .sum();
        let shutting_down = self.ctx.state.shared.shutdown.is_triggered();
        bytes >= self.min_bytes.max(1)
            || any_error
            || redirected
            || Instant::now() >= self.deadline
            || shutting_down
    }

    /// Waits for appends and reads again until the results answer the fetch.
    async fn long_poll(self, mut results: Reads) -> FetchAnswer {
        let (ctx, wanted) = (&self.ctx, &self.wanted);
        while !self.answers_now(&results) {
            let read_end = self.reader.read_end(self.isolation_level == READ_COMMITTED);
            wait_for_appends(ctx, read_up_to(wanted, &results), read_end, self.deadline).await;
            if Instant::now() >= self.deadline && !ctx.state.shared.shutdown.is_triggered() {
                // The wait saw nothing grow before the deadline, so the reads before it still
                // answer: a caught-up consumer's long poll reads each partition once, not twice.
                break;
            }
            results = read_all(ctx, wanted, self.max_bytes).await;
        }
        self.answer(results).await
    }

    /// The answer from `results`, trimmed to the fetch's byte budget, as the fetch session
    /// sends it.
    async fn answer(self, results: Reads) -> FetchAnswer {
        let ctx = &self.ctx;
        let results = fit_to_budget(ctx, &self.wanted, results, self.max_bytes).await;
        let answers = partition_answers(results, &self.wanted, self.isolation_level);
        // Sessionless fetches (librdkafka's, kafkajs's, followers') keep nothing per partition.
        let told: Vec<Answered> = match self.opened.context {
            FetchContext::Sessionless => Vec::new(),
            _ => answers.iter().map(|(_, answer)| told_of(answer)).collect(),
        };
        let sessions = &ctx.state.shared.fetch_sessions;
        let (session_id, sent) = sessions.answered(&self.opened, &told, Instant::now());
        let mut answer = FetchAnswer {
            session_id,
            ..FetchAnswer::default()
        };
        for (at, (tp, partition)) in answers.into_iter().enumerate() {
            if sent.as_ref().is_none_or(|sent| sent[at]) {
                push_partition(&mut answer.topics, &tp.topic, partition);
            }
        }
        if self.version >= topic_ids::FIRST_TOPIC_ID_VERSION {
            ctx.state
                .shared
                .metadata
                .with_current(|table| topic_ids::add_ids(table, &mut answer));
            answer.topics.extend(self.unknown_ids);
        }
        answer
    }
}
