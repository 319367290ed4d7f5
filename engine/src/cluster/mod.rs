//! Cluster metadata. On a single node this is the topic table; the replicated controller
//! (a Raft metadata log) arrives with clustering and keeps the same read side.

pub mod metadata;

pub use metadata::{MetadataError, MetadataStore, TopicMetadata, TopicTable};
