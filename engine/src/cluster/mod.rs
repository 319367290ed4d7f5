//! Cluster metadata. On a single node this is the topic table and the producer id allocator;
//! the replicated controller (a Raft metadata log) arrives with clustering and keeps the same
//! read side.

pub mod metadata;
pub mod producer_ids;

pub use metadata::{MetadataError, MetadataStore, TopicMetadata, TopicTable};
pub use producer_ids::{ProducerIdAllocator, ProducerIdError};
