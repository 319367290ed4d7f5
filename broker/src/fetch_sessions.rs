//! Incremental fetch sessions (KIP-227): a consumer or follower that fetches the same partitions
//! again and again names them once, in a full fetch that opens a session, and then only those
//! whose fetch position changed; the broker answers only partitions with records, an error, or
//! a high watermark, last stable offset or log start offset other than the session last told.
//! A fetch over 10 000 partitions then carries a few hundred of them each way instead of all.
//!
//! Kafka's rules, as its brokers apply them (`FetchSession.scala`):
//! - epoch -1 (final): no session; a session named is closed first.
//! - epoch 0 (initial): a full fetch; a session named is closed, and a new one is made for the
//!   partitions answered if the cache has room (else the answer carries session 0, and the
//!   client goes on with full fetches).
//! - any other epoch: an incremental fetch in the session named, whose next epoch it must be
//!   (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH otherwise). Partitions named are
//!   added or updated, forgotten ones removed, and every partition of the session is read.
//!   Partitions answered move to the end of the session's order, so that a fetch whose byte
//!   budget runs out starts the next one with those it left out.
//!
//! Sessions belong to the broker, not a shard: a client's fetches may arrive on any connection.
//! One mutex guards the cache; each fetch takes it twice (to open, to answer), for work
//! proportional to the partitions it names.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use laminar_protocol::fetch_session::{next_epoch, FINAL_EPOCH, INITIAL_EPOCH};

use crate::topic_partition::TopicPartition;

/// Kafka's `min.incremental.fetch.session.eviction.ms`: a session unused this long may be
/// evicted for a new one, and is dropped at the next sweep.
pub const SESSION_IDLE_EVICTION: Duration = Duration::from_secs(120);

/// Partitions all sessions together may cache (about 100 bytes each: at most ~50 MiB). A
/// session that would pass it is not made, or, grown by an incremental fetch, is closed.
pub const CACHED_PARTITIONS_MAX: usize = 500_000;

/// How often an open looks for sessions idle past [`SESSION_IDLE_EVICTION`] to drop, so that
/// their memory comes back when their clients are gone.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// What a fetch asks of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionFetch {
    pub fetch_offset: i64,
    pub partition_max_bytes: i32,
    pub current_leader_epoch: i32,
}

/// What an answer told of one partition: a session answers it again only when this changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionState {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

impl PartitionState {
    /// Never told: the partition's first answer in a session always goes out.
    const UNKNOWN: PartitionState = PartitionState {
        high_watermark: i64::MIN,
        last_stable_offset: i64::MIN,
        log_start_offset: i64::MIN,
    };
}

/// One partition's answer as the session needs it.
#[derive(Debug, Clone, Copy)]
pub struct Answered {
    pub state: PartitionState,
    pub has_records: bool,
    pub error_code: i16,
}

/// How a fetch relates to sessions, from its `session_id` and `session_epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchContext {
    /// No session: every partition named is answered.
    Sessionless,
    /// A full fetch that asks for a session: every partition named is answered, and cached.
    Full { follower: bool },
    /// A fetch in session `id`: its partitions are read, the changed ones answered.
    /// `next_epoch` is the session's next epoch once this fetch opened it: a session whose
    /// next epoch has moved on meanwhile was changed by another fetch.
    Incremental { id: i32, next_epoch: i32 },
}

/// A fetch's partitions once its session is applied: what to read, in this order.
pub struct Opened {
    pub context: FetchContext,
    pub partitions: Vec<(TopicPartition, PartitionFetch)>,
}

/// One session's partitions, in read order, with what was last answered of each. Owned by
/// the broker's [`FetchSessions`].
struct Session {
    partitions: Vec<(TopicPartition, PartitionFetch, PartitionState)>,
    /// Where each partition is in `partitions`.
    positions: HashMap<TopicPartition, usize>,
    /// The epoch the next incremental fetch must carry.
    next_epoch: i32,
    last_used: Instant,
    /// A follower's: kept over consumers' when the cache is full (as Kafka's are privileged).
    follower: bool,
}

impl Session {
    fn new(follower: bool, now: Instant) -> Session {
        Session {
            partitions: Vec::new(),
            positions: HashMap::new(),
            next_epoch: 1,
            last_used: now,
            follower,
        }
    }

    fn upsert(&mut self, tp: TopicPartition, fetch: PartitionFetch) {
        match self.positions.get(&tp) {
            Some(&at) => self.partitions[at].1 = fetch,
            None => {
                self.positions.insert(tp.clone(), self.partitions.len());
                self.partitions.push((tp, fetch, PartitionState::UNKNOWN));
            }
        }
    }

    fn forget(&mut self, forgotten: &[TopicPartition]) {
        if forgotten.is_empty() {
            return;
        }
        let forgotten: std::collections::HashSet<&TopicPartition> = forgotten.iter().collect();
        let before = self.partitions.len();
        self.partitions.retain(|(tp, _, _)| !forgotten.contains(tp));
        if self.partitions.len() != before {
            self.reindex();
        }
    }

    fn reindex(&mut self) {
        self.positions.clear();
        let positions = self
            .partitions
            .iter()
            .enumerate()
            .map(|(at, (tp, _, _))| (tp.clone(), at));
        self.positions.extend(positions);
    }

    /// Records the answers (in the session's order, one per partition) and returns which go
    /// out: those with records, an error or a changed state. They move to the end.
    fn answer(&mut self, answers: &[Answered]) -> Vec<bool> {
        // Only this fetch changed the session since it listed the partitions it read.
        assert_eq!(
            answers.len(),
            self.partitions.len(),
            "one answer per session partition"
        );
        let mut sent = Vec::with_capacity(answers.len());
        for (cached, answer) in self.partitions.iter_mut().zip(answers) {
            let changed = answer.state != cached.2;
            sent.push(answer.has_records || answer.error_code != 0 || changed);
            cached.2 = answer.state;
        }
        if !sent.contains(&true) {
            // A caught-up consumer's long poll, most of the time: the order stands.
            return sent;
        }
        let (mut kept, moved): (Vec<_>, Vec<_>) = std::mem::take(&mut self.partitions)
            .into_iter()
            .zip(&sent)
            .partition(|(_, sent)| !**sent);
        kept.extend(moved);
        self.partitions = kept.into_iter().map(|(partition, _)| partition).collect();
        self.reindex();
        sent
    }

    fn wanted(&self) -> Vec<(TopicPartition, PartitionFetch)> {
        let partitions = self.partitions.iter();
        partitions.map(|(tp, fetch, _)| (tp.clone(), *fetch)).collect()
    }
}

struct Cache {
    sessions: HashMap<i32, Session>,
    /// Partitions over all sessions (bounded by [`CACHED_PARTITIONS_MAX`]).
    partitions: usize,
    last_sweep: Instant,
}

/// The broker's fetch sessions: at most `slots_max` (`max.incremental.fetch.session.cache.slots`)
/// and [`CACHED_PARTITIONS_MAX`] partitions in all. Shared by every shard.
pub struct FetchSessions {
    cache: Mutex<Cache>,
    slots_max: usize,
    partitions_max: usize,
}

impl FetchSessions {
    pub fn new(slots_max: usize) -> FetchSessions {
        FetchSessions::with_partitions_max(slots_max, CACHED_PARTITIONS_MAX)
    }

    fn with_partitions_max(slots_max: usize, partitions_max: usize) -> FetchSessions {
        let cache = Cache {
            sessions: HashMap::new(),
            partitions: 0,
            last_sweep: Instant::now(),
        };
        FetchSessions {
            cache: Mutex::new(cache),
            slots_max,
            partitions_max,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        // A panic while holding it (a failed assertion, before any change) leaves the cache
        // whole: the other shards go on using it.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sessions open now.
    pub fn len(&self) -> usize {
        self.lock().sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Applies a fetch's session fields (v7+) to the cache: which partitions to read, and how
    /// to answer; or the error that is the whole answer.
    pub fn open(
        &self,
        session: (i32, i32),
        named: Vec<(TopicPartition, PartitionFetch)>,
        forgotten: &[TopicPartition],
        follower: bool,
        now: Instant,
    ) -> Result<Opened, ResponseError> {
        let (id, epoch) = session;
        let mut cache = self.lock();
        cache.sweep(now);
        // Any other epoch names a fetch in a session: one below -1 matches none (as in Kafka).
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if id != 0 {
                cache.remove(id);
            }
            let context = match epoch {
                INITIAL_EPOCH if self.slots_max > 0 => FetchContext::Full { follower },
                _ => FetchContext::Sessionless,
            };
            return Ok(Opened {
                context,
                partitions: named,
            });
        }
        let session = cache
            .sessions
            .get_mut(&id)
            .ok_or(ResponseError::FetchSessionIdNotFound)?;
        if session.next_epoch != epoch {
            return Err(ResponseError::InvalidFetchSessionEpoch);
        }
        let before = session.partitions.len();
        for (tp, fetch) in named {
            session.upsert(tp, fetch);
        }
        session.forget(forgotten);
        session.next_epoch = next_epoch(epoch);
        session.last_used = now;
        let after = session.partitions.len();
        let partitions = session.wanted();
        cache.partitions = cache.partitions + after - before;
        if cache.partitions > self.partitions_max {
            cache.remove(id);
            return Err(ResponseError::FetchSessionIdNotFound);
        }
        cache.debug_check_count();
        Ok(Opened {
            context: FetchContext::Incremental {
                id,
                next_epoch: next_epoch(epoch),
            },
            partitions,
        })
    }

    /// Takes a fetch's answers (one per partition of `opened`, in its order) into the session:
    /// returns the session id the answer carries, and which partitions it carries (`None`:
    /// all). A sessionless fetch needs no answers here (the handler passes none).
    pub fn answered(&self, opened: &Opened, answers: &[Answered], now: Instant) -> (i32, Option<Vec<bool>>) {
        match opened.context {
            FetchContext::Sessionless => (0, None),
            FetchContext::Full { follower } => (self.create(opened, answers, follower, now), None),
            FetchContext::Incremental { id, next_epoch } => match self.lock().sessions.get_mut(&id) {
                Some(session) if session.next_epoch == next_epoch => (id, Some(session.answer(answers))),
                // Closed, or changed by another fetch meanwhile (a client that pipelines fetches
                // in one session, which none does): this answer is whole, in no session.
                _ => (0, None),
            },
        }
    }

    /// A new session holding `opened`'s partitions and their answers; 0 when there is no room.
    fn create(&self, opened: &Opened, answers: &[Answered], follower: bool, now: Instant) -> i32 {
        let mut session = Session::new(follower, now);
        for ((tp, fetch), answer) in opened.partitions.iter().zip(answers) {
            session.upsert(tp.clone(), *fetch);
            let at = session.positions[tp];
            session.partitions[at].2 = answer.state;
        }
        let size = session.partitions.len();
        let mut cache = self.lock();
        if !cache.make_room(size, follower, (self.slots_max, self.partitions_max), now) {
            return 0;
        }
        let id = cache.new_id();
        cache.partitions += size;
        cache.sessions.insert(id, session);
        assert!(
            cache.sessions.len() <= self.slots_max && cache.partitions <= self.partitions_max,
            "make_room keeps the cache within its bounds"
        );
        cache.debug_check_count();
        id
    }
}

impl Cache {
    fn remove(&mut self, id: i32) {
        if let Some(session) = self.sessions.remove(&id) {
            self.partitions -= session.partitions.len();
        }
        self.debug_check_count();
    }

    /// The running count of cached partitions is the sum over the sessions (it bounds the
    /// cache, so a drift would let it grow unbounded or refuse sessions for nothing).
    fn debug_check_count(&self) {
        debug_assert_eq!(
            self.partitions,
            self.sessions.values().map(|s| s.partitions.len()).sum::<usize>(),
            "cached partitions counted"
        );
    }

    /// Drops sessions idle past [`SESSION_IDLE_EVICTION`], at most once a [`SWEEP_INTERVAL`].
    fn sweep(&mut self, now: Instant) {
        if now.saturating_duration_since(self.last_sweep) < SWEEP_INTERVAL {
            return;
        }
        self.last_sweep = now;
        let idle = |s: &Session| now.saturating_duration_since(s.last_used) >= SESSION_IDLE_EVICTION;
        let stale: Vec<i32> = self
            .sessions
            .iter()
            .filter(|(_, s)| idle(s))
            .map(|(id, _)| *id)
            .collect();
        for id in stale {
            self.remove(id);
        }
    }

    /// Evicts sessions until one of `size` partitions fits, as Kafka's cache does: first any
    /// idle past [`SESSION_IDLE_EVICTION`], then those worth less than the new one (a
    /// consumer's below a follower's, a smaller below a larger), least recently used first.
    fn make_room(
        &mut self,
        size: usize,
        follower: bool,
        (slots_max, partitions_max): (usize, usize),
        now: Instant,
    ) -> bool {
        if size > partitions_max {
            return false;
        }
        let full =
            |cache: &Cache| cache.sessions.len() >= slots_max || cache.partitions + size > partitions_max;
        while full(self) {
            let idle = |s: &Session| now.saturating_duration_since(s.last_used) >= SESSION_IDLE_EVICTION;
            let worth = |s: &Session| (s.follower, s.partitions.len());
            let victim = self
                .sessions
                .iter()
                .filter(|(_, s)| idle(s) || worth(s) < (follower, size))
                .min_by_key(|(_, s)| (!idle(s), worth(s), s.last_used))
                .map(|(id, _)| *id);
            match victim {
                Some(id) => self.remove(id),
                None => return false,
            }
        }
        true
    }

    /// A random positive id no session holds.
    fn new_id(&self) -> i32 {
        loop {
            let mut bytes = [0u8; 4];
            // Without the OS's randomness, a clock's nanoseconds serve: ids need only be unlikely
            // to repeat, not secret.
            if getrandom::fill(&mut bytes).is_err() {
                let clock = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
                bytes = clock.unwrap_or_default().subsec_nanos().to_le_bytes();
            }
            let id = (i32::from_le_bytes(bytes) & i32::MAX).max(1);
            if !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }
}

#[cfg(test)]
#[path = "fetch_sessions_tests.rs"]
mod tests;
