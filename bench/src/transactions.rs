//! What an idempotent or transactional producer asks besides Produce, as Kafka's producer asks
//! it: InitProducerId for its producer id and epoch; for transactions, FindCoordinator (key
//! type 1, a transactional id) for the coordinator, then per transaction AddPartitionsToTxn
//! (v0-3, the client versions) for the partitions its batches go to and EndTxn to commit it.
//!
//! A coordinator that is loading, not available, or still completing the previous transaction
//! is asked again after a short backoff, for [`RETRY_FOR`] at most.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest,
    ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use laminar_client::{ClientConfig, Connection};
use serde_json::{json, Value};

use crate::produce_request::ProducerIdentity;
use crate::stats::new_histogram;

/// Kafka error codes a producer retries.
mod codes {
    pub const NONE: i16 = 0;
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const CONCURRENT_TRANSACTIONS: i16 = 51;
}

/// FindCoordinator's key type of a transactional id.
const TRANSACTION_KEY_TYPE: i8 = 1;
/// The newest AddPartitionsToTxn a client sends (v4 on are the brokers' own, KIP-890).
const ADD_PARTITIONS_CLIENT_VERSION_MAX: i16 = 3;
/// Kafka producer's `transaction.timeout.ms` default.
const TRANSACTION_TIMEOUT_MS: i32 = 60_000;
/// The first backoff after a retriable error, doubled up to [`RETRY_BACKOFF_MAX`]. Short, so
/// that AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS while the previous transaction's
/// markers are written measures how long they take, not the bench's wait (Kafka's Java
/// producer waits 20 ms there).
const RETRY_BACKOFF_FIRST: Duration = Duration::from_millis(1);
const RETRY_BACKOFF_MAX: Duration = Duration::from_millis(200);
/// How long a retriable error is retried before the run fails.
pub const RETRY_FOR: Duration = Duration::from_secs(30);

/// Asks `attempt` until it succeeds, retrying the coordinator's transient errors with backoff
/// for [`RETRY_FOR`]. `attempt` answers a value, or a Kafka error code.
fn retrying<T>(what: &str, mut attempt: impl FnMut() -> anyhow::Result<Result<T, i16>>) -> anyhow::Result<T> {
    let deadline = Instant::now() + RETRY_FOR;
    let mut backoff = RETRY_BACKOFF_FIRST;
    loop {
        let code = match attempt()? {
            Ok(value) => return Ok(value),
            Err(code) => code,
        };
        let retriable = matches!(
            code,
            codes::COORDINATOR_LOAD_IN_PROGRESS
                | codes::COORDINATOR_NOT_AVAILABLE
                | codes::CONCURRENT_TRANSACTIONS
        );
        if !retriable {
            bail!("{what}: Kafka error code {code}");
        }
        if Instant::now() + backoff > deadline {
            bail!("{what}: Kafka error code {code} for {} s", RETRY_FOR.as_secs());
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
    }
}

/// `code` as a result: `Ok(value)` when it is no error.
fn checked<T>(code: i16, value: T) -> Result<T, i16> {
    if code == codes::NONE {
        Ok(value)
    } else {
        Err(code)
    }
}

/// InitProducerId: a producer id and epoch, for `transactional_id` or (none) an idempotent
/// producer.
pub fn init_producer_id(
    connection: &mut Connection,
    transactional_id: Option<&str>,
) -> anyhow::Result<ProducerIdentity> {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_owned()))),
        )
        .with_transaction_timeout_ms(TRANSACTION_TIMEOUT_MS)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    retrying("InitProducerId", || {
        let response = connection.request(&request)?;
        Ok(checked(
            response.error_code,
            ProducerIdentity {
                producer_id: response.producer_id.0,
                producer_epoch: response.producer_epoch,
                transactional: transactional_id.is_some(),
            },
        ))
    })
}

/// The coordinator of `transactional_id`, `host:port`, as `connection`'s broker knows it.
fn find_transaction_coordinator(
    connection: &mut Connection,
    transactional_id: &str,
) -> anyhow::Result<String> {
    let request = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_string(transactional_id.to_owned()))
        .with_key_type(TRANSACTION_KEY_TYPE);
    retrying("FindCoordinator", || {
        let response = connection.request(&request)?;
        Ok(checked(
            response.error_code,
            format!("{}:{}", response.host.as_str(), response.port),
        ))
    })
}

/// What a transactional producer measured.
#[derive(Debug, Clone)]
pub struct TransactionFigures {
    pub committed: u64,
    /// EndTxn (commit) round trips, µs, retries included.
    pub end_txn_us: Histogram<u64>,
    /// AddPartitionsToTxn round trips, µs, retries included.
    pub add_partitions_us: Histogram<u64>,
}

impl TransactionFigures {
    pub fn new() -> TransactionFigures {
        TransactionFigures {
            committed: 0,
            end_txn_us: new_histogram(),
            add_partitions_us: new_histogram(),
        }
    }

    /// Adds another producer's figures.
    pub fn add(&mut self, other: &TransactionFigures) {
        self.committed += other.committed;
        self.end_txn_us.add(&other.end_txn_us).expect("same bounds");
        self.add_partitions_us
            .add(&other.add_partitions_us)
            .expect("same bounds");
    }

    /// The printed line, for a run of `seconds`.
    pub fn summary_line(&self, seconds: f64) -> String {
        let ms = |histogram: &Histogram<u64>, q: f64| histogram.value_at_quantile(q) as f64 / 1e3;
        format!(
            "{} committed, {:.1}/sec; EndTxn {:.2} ms 50th, {:.2} ms 99th, {:.2} ms max; AddPartitionsToTxn {:.2} ms 50th, {:.2} ms 99th",
            self.committed,
            self.committed as f64 / seconds.max(1e-9),
            ms(&self.end_txn_us, 0.5),
            ms(&self.end_txn_us, 0.99),
            self.end_txn_us.max() as f64 / 1e3,
            ms(&self.add_partitions_us, 0.5),
            ms(&self.add_partitions_us, 0.99),
        )
    }

    /// The `--json` object, for a run of `seconds`.
    pub fn to_json(&self, seconds: f64) -> Value {
        let quantiles = |histogram: &Histogram<u64>| {
            let ms = |q: f64| (!histogram.is_empty()).then(|| histogram.value_at_quantile(q) as f64 / 1e3);
            json!({"p50": ms(0.5), "p99": ms(0.99), "max": ms(1.0)})
        };
        json!({
            "committed": self.committed,
            "per_sec": self.committed as f64 / seconds.max(1e-9),
            "end_txn_latency_ms": quantiles(&self.end_txn_us),
            "add_partitions_latency_ms": quantiles(&self.add_partitions_us),
        })
    }
}

/// A transactional producer's connection to its coordinator, and its transactions' figures.
/// Owned by one producer thread.
pub struct TransactionCoordinator {
    connection: Connection,
    transactional_id: TransactionalId,
    identity: ProducerIdentity,
    topic: TopicName,
    pub figures: TransactionFigures,
}

impl TransactionCoordinator {
    /// Finds the coordinator of `transactional_id` through the broker at `bootstrap`, connects
    /// to it and initialises the producer id (fencing an earlier producer of the id).
    pub fn connect(
        bootstrap: &str,
        client: &ClientConfig,
        transactional_id: &str,
        topic: &str,
    ) -> anyhow::Result<TransactionCoordinator> {
        let mut bootstrap_connection =
            Connection::connect(bootstrap, client).with_context(|| format!("connecting to {bootstrap}"))?;
        let address = find_transaction_coordinator(&mut bootstrap_connection, transactional_id)?;
        let mut connection = Connection::connect(&address, client)
            .with_context(|| format!("connecting to transaction coordinator {address}"))?;
        let version = connection.versions().version(ApiKey::AddPartitionsToTxn)?;
        if version > ADD_PARTITIONS_CLIENT_VERSION_MAX {
            bail!("AddPartitionsToTxn v{version} negotiated; a client sends v0-{ADD_PARTITIONS_CLIENT_VERSION_MAX}");
        }
        let identity = init_producer_id(&mut connection, Some(transactional_id))?;
        Ok(TransactionCoordinator {
            connection,
            transactional_id: TransactionalId(StrBytes::from_string(transactional_id.to_owned())),
            identity,
            topic: TopicName(StrBytes::from_string(topic.to_owned())),
            figures: TransactionFigures::new(),
        })
    }

    /// The producer id and epoch of the transactional id.
    pub fn identity(&self) -> ProducerIdentity {
        self.identity
    }

    /// The transactional id, for the produce requests of its transactions.
    pub fn transactional_id(&self) -> &TransactionalId {
        &self.transactional_id
    }

    /// AddPartitionsToTxn: `partitions` of the topic join the transaction (beginning it).
    pub fn add_partitions(&mut self, partitions: &[i32]) -> anyhow::Result<()> {
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(self.transactional_id.clone())
            .with_v3_and_below_producer_id(ProducerId(self.identity.producer_id))
            .with_v3_and_below_producer_epoch(self.identity.producer_epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(self.topic.clone())
                .with_partitions(partitions.to_vec())]);
        let started = Instant::now();
        let connection = &mut self.connection;
        retrying("AddPartitionsToTxn", || {
            let response = connection.request(&request)?;
            let first_error = response
                .results_by_topic_v3_and_below
                .iter()
                .flat_map(|topic| &topic.results_by_partition)
                .map(|partition| partition.partition_error_code)
                .find(|code| *code != codes::NONE);
            Ok(checked(first_error.unwrap_or(codes::NONE), ()))
        })?;
        record_us(&mut self.figures.add_partitions_us, started);
        Ok(())
    }

    /// EndTxn: commits the open transaction (every batch of it acknowledged).
    pub fn commit(&mut self) -> anyhow::Result<()> {
        let request = EndTxnRequest::default()
            .with_transactional_id(self.transactional_id.clone())
            .with_producer_id(ProducerId(self.identity.producer_id))
            .with_producer_epoch(self.identity.producer_epoch)
            .with_committed(true);
        let started = Instant::now();
        let connection = &mut self.connection;
        retrying("EndTxn", || {
            let response = connection.request(&request)?;
            Ok(checked(response.error_code, ()))
        })?;
        record_us(&mut self.figures.end_txn_us, started);
        self.figures.committed += 1;
        Ok(())
    }
}

fn record_us(histogram: &mut Histogram<u64>, started: Instant) {
    let elapsed_us = started.elapsed().as_micros() as u64;
    histogram.saturating_record(elapsed_us.max(1));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_coordinator_errors_are_retried_and_others_are_not() {
        let mut answers = vec![
            Err(codes::COORDINATOR_LOAD_IN_PROGRESS),
            Err(codes::CONCURRENT_TRANSACTIONS),
            Err(codes::COORDINATOR_NOT_AVAILABLE),
            Ok(7),
        ]
        .into_iter();
        assert_eq!(
            retrying("test", || Ok(answers.next().expect("an answer"))).unwrap(),
            7
        );
        let invalid_producer_epoch = 47;
        let error = retrying::<()>("EndTxn", || Ok(Err(invalid_producer_epoch))).unwrap_err();
        assert!(
            error.to_string().contains("EndTxn: Kafka error code 47"),
            "{error}"
        );
    }
}
