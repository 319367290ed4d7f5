//! A small blocking Kafka client on the `kafka-protocol` crate, used by the CLI, the benchmark
//! harness and (later) replication.
//!
//! - [`Connection`]: one TCP connection (TCP_NODELAY) with ApiVersions negotiated at connect,
//!   pipelined: [`Connection::send`] several requests, then [`Connection::receive`] the
//!   responses in order.
//! - Typed helpers on `Connection`: [`Connection::metadata`], [`Connection::create_topics`],
//!   [`Connection::delete_topics`], [`Connection::describe_configs`],
//!   [`Connection::list_offsets`], [`Connection::produce`] / [`Connection::send_produce`],
//!   [`Connection::fetch`].
//! - [`records`]: batch encoding and cheap walks over fetched record bytes.
//! - [`partitioner`]: Kafka's default partitioner for keyed records (the CLI's `produce`, and
//!   `laminar bench`'s keyed load).
//! - [`ClientError`]: I/O, framing, decoding and broker error codes, typed.

#![forbid(unsafe_code)]

mod acls;
mod admin;
mod connection;
mod data;
mod error;
mod fetch_session;
mod group_member;
mod groups;
mod leaders;
pub mod partitioner;
mod produce_frame;
mod quorum;
mod quotas;
mod replica;
mod sasl;
mod security_settings;
mod topic_changes;
mod transactions;
pub mod transport;
mod users;
mod versions;

pub use admin::{
    BrokerInfo, ClusterDescription, ClusterMetadata, ConfigEntry, DescribedBroker, LogDir, LogDirReplica,
    NewTopic, OngoingReassignment, PartitionMetadata, PartitionOutcome, Reassignment, TopicMetadata,
};
pub use connection::{encode_frame, write_all_pieces, ClientConfig, Connection, Pending};
pub use data::{Acks, FetchPosition, FetchSpec, FetchedPartition, OffsetSpec, ProduceAck};
pub use error::{ClientError, KafkaError};
pub use fetch_session::FetchSession;
pub use group_member::{range_assign, GroupMembership, RANGE_ASSIGNOR};
pub use groups::{
    check_offset_commit, decode_assignment, offset_commit_request, CommittedOffset, ConsumerGroupDescription,
    ConsumerGroupMember, GroupDescription, GroupMember, ListedGroup,
};
pub use kafka_protocol::records::Compression;
pub use laminar_security::{Mechanism, SecurityProtocol};
pub use quorum::{QuorumDescription, QuorumMember};
pub use quotas::QuotaValues;
pub use replica::{EpochEnd, EpochEndQuery, Replica, ReplicaFetchPosition, REPLICA_FETCH_VERSION};
pub use security_settings::{SecuritySettings, SecuritySettingsError};
pub use topic_changes::{ConfigChange, BROKER_RESOURCE};
pub use transactions::{
    HangingTransaction, ListedTransaction, ProducerInfo, TransactionDescription, TransactionFilter,
    TransactionListing,
};
pub use transport::{SaslLogin, Security};
pub use users::ScramUser;
pub use versions::{client_versions, ApiVersionTable};

/// Record batches: encoding and cheap walks over fetched bytes (shared with the broker).
pub use laminar_protocol::records;
