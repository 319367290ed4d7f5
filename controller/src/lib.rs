//! Laminar's controller quorum: the cluster metadata (brokers, topics, partitions, leaders,
//! ISRs, epochs, producer-id blocks) replicated with Raft (openraft), after Kafka's KRaft.
//!
//! A controller node runs on its own thread with its own tokio runtime (openraft needs one),
//! beside the broker's glommio shards; other threads reach it through a [`ControllerHandle`]
//! (channels) and see the metadata through a watch channel of [`MetadataImage`]s.
//! Decision 0012 says why and how.

#![forbid(unsafe_code)]

mod active;
pub mod api;
mod command;
mod config;
pub mod decide;
pub mod disk_format;
pub mod fault;
mod handle;
pub mod log_store;
pub mod metadata;
pub mod network;
mod node;
mod observers;
pub mod placement;
pub mod quorum_description;
pub mod records;
mod refusal;
mod server;
pub mod snapshot_format;
pub mod state_machine;
pub mod transport;

pub use config::{ControllerConfig, ControllerError};
pub use decide::{leaders_to_rebalance, preferred_leader_imbalance};
pub use handle::{ControllerHandle, QuorumStatus, VoterStatus};
pub use metadata::{
    BrokerRegistration, ClusterMetadata, MetadataImage, PartitionState, QuotaEntity, QuotaValue, TopicState,
};
pub use node::ControllerNode;
pub use records::*;
pub use refusal::Refusal;
pub use server::serve_connection;

openraft::declare_raft_types!(
    /// The Raft types of the controller quorum: entries carry [`RecordBatch`]es; node ids are
    /// Kafka's `node.id` (non-negative i32) widened to u64.
    pub TypeConfig:
        SnapshotData = std::io::Cursor<Vec<u8>>,
        D = RecordBatch,
        R = ApplyOutcome,
);
