//! A consumer's side of an incremental fetch session (KIP-227), as Kafka's Java consumer keeps
//! one per broker: the first fetch names every partition at epoch 0; once the broker answers
//! with a session id, each fetch names only the partitions whose position (or byte limit)
//! changed, forgets those no longer wanted, and gets back only partitions with news.

use std::collections::HashMap;

use kafka_protocol::messages::fetch_request::{FetchPartition, ForgottenTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use laminar_protocol::fetch_session::{next_epoch, INITIAL_EPOCH};

use crate::connection::Connection;
use crate::data::{by_topic, fetch_request, fetched_partitions, FetchPosition, FetchSpec, FetchedPartition};
use crate::error::{check_code, ClientError};

/// Kafka's FETCH_SESSION_ID_NOT_FOUND and INVALID_FETCH_SESSION_EPOCH: the session is gone,
/// and the next fetch starts a new one.
const SESSION_LOST: [i16; 2] = [70, 71];

/// One connection's fetch session. Owned by the thread that owns the connection.
#[derive(Debug, Default)]
pub struct FetchSession {
    /// The broker's id for it; 0: none yet (the next fetch is a full one at epoch 0).
    id: i32,
    /// The epoch the next fetch in it carries.
    epoch: i32,
    /// What the session holds of each partition: the position and limit last named.
    named: HashMap<(String, i32), (i64, i32)>,
}

impl FetchSession {
    pub fn new() -> FetchSession {
        FetchSession::default()
    }

    /// Whether the broker gave this session an id (fetches then name only what changed).
    pub fn is_open(&self) -> bool {
        self.id != 0
    }

    /// The request for `positions`: all of them in a full fetch, else those that changed, and
    /// the partitions the session holds that `positions` no longer names, as forgotten.
    fn request(&mut self, spec: &FetchSpec, positions: &[FetchPosition]) -> FetchRequest {
        let full = self.id == 0;
        let mut still_named = HashMap::with_capacity(positions.len());
        let mut changed = Vec::new();
        for p in positions {
            let key = (p.topic.clone(), p.partition);
            let now = (p.offset, p.partition_max_bytes);
            if full || self.named.get(&key) != Some(&now) {
                let partition = FetchPartition::default()
                    .with_partition(p.partition)
                    .with_fetch_offset(p.offset)
                    .with_partition_max_bytes(p.partition_max_bytes);
                changed.push((p.topic.as_str(), partition));
            }
            still_named.insert(key, now);
        }
        let gone = self.named.keys().filter(|key| !still_named.contains_key(*key));
        let forgotten = by_topic(gone.map(|(topic, partition)| (topic.as_str(), *partition)));
        let forgotten = forgotten
            .into_iter()
            .map(|(topic, partitions)| {
                ForgottenTopic::default()
                    .with_topic(topic)
                    .with_partitions(partitions)
            })
            .collect();
        let request = fetch_request(-1, spec, changed)
            .with_session_id(self.id)
            .with_session_epoch(if full { INITIAL_EPOCH } else { self.epoch })
            .with_forgotten_topics_data(if full { Vec::new() } else { forgotten });
        self.named = still_named;
        request
    }

    /// Takes the broker's answer: keeps the session it names (or starts over next time).
    fn answered(&mut self, response: &FetchResponse) {
        let kept = response.error_code == 0 && response.session_id != 0;
        if kept && (self.id == 0 || self.id == response.session_id) {
            self.epoch = if self.id == 0 { 1 } else { next_epoch(self.epoch) };
            self.id = response.session_id;
        } else {
            *self = FetchSession::new();
        }
    }
}

impl Connection {
    /// Fetches `positions` in `session` and waits for the answer: partitions with records,
    /// an error or a new high watermark (all of them in the session's first fetch). A lost
    /// session answers nothing; the next fetch opens a new one.
    pub fn fetch_in_session(
        &mut self,
        session: &mut FetchSession,
        spec: &FetchSpec,
        positions: &[FetchPosition],
    ) -> Result<Vec<FetchedPartition>, ClientError> {
        let request = session.request(spec, positions);
        let pending = self.send(&request)?;
        let response = self.receive(pending)?;
        session.answered(&response);
        if SESSION_LOST.contains(&response.error_code) {
            return Ok(Vec::new());
        }
        check_code(
            kafka_protocol::messages::ApiKey::Fetch,
            response.error_code,
            None,
            String::new,
        )?;
        Ok(fetched_partitions(response))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(partition: i32, offset: i64) -> FetchPosition {
        FetchPosition {
            topic: "t".into(),
            partition,
            offset,
            partition_max_bytes: 1 << 20,
        }
    }

    fn named(request: &FetchRequest) -> Vec<(i32, i64)> {
        let partitions = request.topics.iter().flat_map(|t| t.partitions.iter());
        partitions.map(|p| (p.partition, p.fetch_offset)).collect()
    }

    fn answer(session_id: i32, error_code: i16) -> FetchResponse {
        FetchResponse::default()
            .with_session_id(session_id)
            .with_error_code(error_code)
    }

    #[test]
    fn a_session_names_everything_once_then_only_what_moved_or_left() {
        let spec = FetchSpec {
            max_wait_ms: 0,
            min_bytes: 1,
            max_bytes: 1 << 20,
        };
        let mut session = FetchSession::new();
        let full = session.request(&spec, &[at(0, 0), at(1, 0), at(2, 0)]);
        assert_eq!((full.session_id, full.session_epoch), (0, 0));
        assert_eq!(named(&full), vec![(0, 0), (1, 0), (2, 0)]);
        session.answered(&answer(77, 0));
        assert!(session.is_open());

        let next = session.request(&spec, &[at(0, 0), at(1, 5)]);
        assert_eq!((next.session_id, next.session_epoch), (77, 1));
        assert_eq!(named(&next), vec![(1, 5)], "only the partition that moved");
        let forgotten: Vec<i32> = next
            .forgotten_topics_data
            .iter()
            .flat_map(|t| t.partitions.clone())
            .collect();
        assert_eq!(forgotten, vec![2]);
        session.answered(&answer(77, 0));
        assert_eq!(session.request(&spec, &[at(0, 0), at(1, 5)]).session_epoch, 2);

        session.answered(&answer(0, 71));
        assert!(!session.is_open(), "a refused epoch starts over");
        let again = session.request(&spec, &[at(0, 0), at(1, 5)]);
        assert_eq!((again.session_epoch, named(&again)), (0, vec![(0, 0), (1, 5)]));
    }
}
