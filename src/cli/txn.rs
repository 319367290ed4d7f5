//! `laminar txn list | describe | describe-producers | abort`: transactions through the
//! brokers, as Kafka's `kafka-transactions` tool shows and ends them (ListTransactions,
//! DescribeTransactions, DescribeProducers; WriteTxnMarkers for `abort`).
//!
//! A hanging transaction — one its producer left open and its coordinator no longer knows,
//! holding the partition's last stable offset back for read_committed consumers — is found
//! with `describe-producers` and ended with `abort`, which writes an ABORT marker on the
//! partition's leader (ClusterAction on the cluster, as Kafka asks).

use anyhow::{anyhow, bail, Context};
use clap::Subcommand;
use laminar_client::{Connection, HangingTransaction, ListedTransaction, TransactionFilter};

use super::group::while_coordinator_not_ready;
use super::{connect_to, print_table, topic_metadata, BrokerArgs, Leaders};

#[derive(Subcommand, Debug)]
pub enum TxnCommand {
    /// Every transactional id the brokers coordinate, with its producer and state.
    ///
    /// Examples:
    ///   laminar txn list
    ///   laminar txn list --state Ongoing --duration-ms 60000
    List {
        /// Only ids in this state (Kafka's names: Empty, Ongoing, PrepareCommit, PrepareAbort,
        /// CompleteCommit, CompleteAbort, Dead, PrepareEpochFence); repeatable.
        #[arg(long = "state", value_name = "STATE")]
        states: Vec<String>,
        /// Only ids of this producer id; repeatable.
        #[arg(long = "producer-id", value_name = "ID")]
        producer_ids: Vec<i64>,
        /// Only transactions that began more than this many milliseconds ago.
        #[arg(long = "duration-ms", value_name = "MS")]
        duration_ms: Option<i64>,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// A transactional id as its coordinator holds it: state, producer, timeout, partitions.
    ///
    /// Example:
    ///   laminar txn describe payments-1
    Describe {
        /// The producer's `transactional.id`.
        transactional_id: String,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// The producers a partition's leader knows, with the first offset of each one's open
    /// transaction.
    ///
    /// Example:
    ///   laminar txn describe-producers --topic orders --partition 0
    DescribeProducers {
        /// The partition's topic.
        #[arg(long)]
        topic: String,
        /// The partition's index.
        #[arg(long)]
        partition: i32,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Ends a hanging transaction on one partition with an ABORT marker. Name the producer
    /// (its id and epoch, and a coordinator epoch at least that of the partition's last
    /// marker, as describe-producers shows), or the offset its transaction began at.
    ///
    /// Examples:
    ///   laminar txn abort --topic orders --partition 0 --producer-id 7 --producer-epoch 2 --coordinator-epoch 0
    ///   laminar txn abort --topic orders --partition 0 --start-offset 1250
    Abort {
        /// The partition's topic.
        #[arg(long)]
        topic: String,
        /// The partition's index.
        #[arg(long)]
        partition: i32,
        /// The producer whose transaction to abort.
        #[arg(long, requires_all = ["producer_epoch", "coordinator_epoch"], conflicts_with = "start_offset")]
        producer_id: Option<i64>,
        /// The producer's epoch, as describe-producers shows it.
        #[arg(long)]
        producer_epoch: Option<i16>,
        /// The epoch the marker is written with: at least that of the partition's last marker
        /// for the producer (describe-producers' COORDINATOR_EPOCH; 0 if it shows -1).
        #[arg(long)]
        coordinator_epoch: Option<i32>,
        /// The first offset of the transaction to abort: its producer is looked up with
        /// DescribeProducers.
        #[arg(long, required_unless_present = "producer_id")]
        start_offset: Option<i64>,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
}

pub fn run(command: TxnCommand) -> anyhow::Result<()> {
    match command {
        TxnCommand::List {
            states,
            producer_ids,
            duration_ms,
            brokers,
        } => {
            let filter = TransactionFilter {
                states,
                producer_ids,
                running_longer_than_ms: duration_ms,
            };
            list(&brokers, &filter)
        }
        TxnCommand::Describe {
            transactional_id,
            brokers,
        } => describe(&brokers, &transactional_id),
        TxnCommand::DescribeProducers {
            topic,
            partition,
            brokers,
        } => describe_producers(&brokers, &topic, partition),
        TxnCommand::Abort {
            topic,
            partition,
            producer_id,
            producer_epoch,
            coordinator_epoch,
            start_offset,
            brokers,
        } => {
            let named = producer_id.zip(producer_epoch).zip(coordinator_epoch);
            let producer = named.map(|((id, epoch), coordinator)| (id, epoch, coordinator));
            abort(&brokers, (&topic, partition), producer, start_offset)
        }
    }
}

/// Asks every broker: each lists the ids it coordinates.
fn list(brokers: &BrokerArgs, filter: &TransactionFilter) -> anyhow::Result<()> {
    let mut bootstrap = brokers.connect()?;
    let metadata = bootstrap
        .metadata(Some(&[]), false)
        .context("cannot read the cluster's brokers")?;
    let config = brokers.client_config()?;
    let mut rows: Vec<(ListedTransaction, i32)> = Vec::new();
    for broker in &metadata.brokers {
        let address = format!("{}:{}", broker.host, broker.port);
        let mut connection =
            connect_to(&address, &config).with_context(|| format!("cannot reach broker {address}"))?;
        let listing = while_coordinator_not_ready(|| connection.list_transactions(filter))
            .with_context(|| format!("cannot list the transactions of broker {}", broker.node_id))?;
        if let Some(unknown) = (!listing.unknown_states.is_empty()).then(|| listing.unknown_states.join(", "))
        {
            eprintln!("laminar: no transaction state is named {unknown}; ignored");
        }
        rows.extend(listing.transactions.into_iter().map(|t| (t, broker.node_id)));
    }
    rows.sort_by(|a, b| a.0.transactional_id.cmp(&b.0.transactional_id));
    let table: Vec<Vec<String>> = rows
        .into_iter()
        .map(|(t, coordinator)| {
            vec![
                t.transactional_id,
                coordinator.to_string(),
                t.producer_id.to_string(),
                t.state,
            ]
        })
        .collect();
    print_table(
        &["TRANSACTIONAL_ID", "COORDINATOR", "PRODUCER_ID", "STATE"],
        &table,
    );
    Ok(())
}

fn describe(brokers: &BrokerArgs, transactional_id: &str) -> anyhow::Result<()> {
    if transactional_id.is_empty() {
        bail!("the transactional id must not be empty");
    }
    let mut bootstrap = brokers.connect()?;
    let found = while_coordinator_not_ready(|| bootstrap.find_transaction_coordinator(transactional_id))
        .with_context(|| format!("cannot find the coordinator of {transactional_id}"))?;
    let address = format!("{}:{}", found.host, found.port);
    let mut coordinator = connect_to(&address, &brokers.client_config()?)
        .with_context(|| format!("cannot reach the coordinator {address}"))?;
    let txn = while_coordinator_not_ready(|| coordinator.describe_transaction(transactional_id))
        .with_context(|| format!("cannot describe {transactional_id}"))?;
    let partitions: Vec<String> = txn
        .partitions
        .iter()
        .flat_map(|(topic, indexes)| indexes.iter().map(move |p| format!("{topic}-{p}")))
        .collect();
    println!("transactional id: {}", txn.transactional_id);
    println!("coordinator:      {}", found.node_id);
    println!("state:            {}", txn.state);
    println!("producer id:      {}", txn.producer_id);
    println!("producer epoch:   {}", txn.producer_epoch);
    println!("timeout ms:       {}", txn.timeout_ms);
    println!("start time ms:    {}", txn.start_time_ms);
    println!("partitions:       {}", partitions.join(","));
    Ok(())
}

/// The leaders of `topic`'s partitions, once `partition` is known to be one of them.
fn leaders_of(brokers: &BrokerArgs, (topic, partition): (&str, i32)) -> anyhow::Result<Leaders> {
    let mut bootstrap = brokers.connect()?;
    let (metadata, found) = topic_metadata(&mut bootstrap, topic)?;
    if !found.partitions.iter().any(|p| p.partition == partition) {
        bail!("topic {topic} has no partition {partition}");
    }
    Ok(Leaders::new(brokers.client_config()?, metadata, &found))
}

fn describe_producers(brokers: &BrokerArgs, topic: &str, partition: i32) -> anyhow::Result<()> {
    let producers = leaders_of(brokers, (topic, partition))?
        .connection(partition)?
        .describe_producers(topic, partition)
        .with_context(|| format!("cannot describe the producers of {topic}-{partition}"))?;
    let rows: Vec<Vec<String>> = producers
        .iter()
        .map(|p| {
            vec![
                p.producer_id.to_string(),
                p.producer_epoch.to_string(),
                p.last_sequence.to_string(),
                p.last_timestamp_ms.to_string(),
                p.coordinator_epoch.to_string(),
                p.current_txn_start_offset
                    .map_or_else(|| "-".into(), |o| o.to_string()),
            ]
        })
        .collect();
    print_table(
        &[
            "PRODUCER_ID",
            "EPOCH",
            "LAST_SEQUENCE",
            "LAST_TIMESTAMP",
            "COORDINATOR_EPOCH",
            "TXN_START_OFFSET",
        ],
        &rows,
    );
    Ok(())
}

/// `producer`: `(id, epoch, coordinator epoch)` as named; else the producer whose open
/// transaction began at `start_offset`.
fn abort(
    brokers: &BrokerArgs,
    (topic, partition): (&str, i32),
    producer: Option<(i64, i16, i32)>,
    start_offset: Option<i64>,
) -> anyhow::Result<()> {
    let mut leaders = leaders_of(brokers, (topic, partition))?;
    let leader = leaders.connection(partition)?;
    let (producer_id, producer_epoch, coordinator_epoch) = match (producer, start_offset) {
        (Some(named), _) => named,
        (None, Some(offset)) => producer_at(leader, (topic, partition), offset)?,
        (None, None) => bail!("name the producer (--producer-id) or the transaction's --start-offset"),
    };
    let hanging = HangingTransaction {
        topic: topic.to_string(),
        partition,
        producer_id,
        producer_epoch,
        coordinator_epoch,
    };
    leader.abort_transaction(&hanging).with_context(|| {
        format!("cannot abort producer {producer_id}'s transaction on {topic}-{partition}")
    })?;
    println!("aborted producer {producer_id}'s transaction on {topic}-{partition}");
    Ok(())
}

/// The producer whose open transaction on the partition began at `offset`, with the epoch of
/// the partition's last marker for it (0 if none: any coordinator epoch is at least that).
fn producer_at(
    leader: &mut Connection,
    (topic, partition): (&str, i32),
    offset: i64,
) -> anyhow::Result<(i64, i16, i32)> {
    let producers = leader
        .describe_producers(topic, partition)
        .with_context(|| format!("cannot describe the producers of {topic}-{partition}"))?;
    let found = producers
        .iter()
        .find(|p| p.current_txn_start_offset == Some(offset))
        .ok_or_else(|| anyhow!("no transaction open on {topic}-{partition} began at offset {offset}"))?;
    let epoch = i16::try_from(found.producer_epoch)
        .with_context(|| format!("producer epoch {} out of range", found.producer_epoch))?;
    Ok((found.producer_id, epoch, found.coordinator_epoch.max(0)))
}
