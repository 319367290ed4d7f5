//! A node's own metadata: the topic table the shards route by, and the producer-id
//! allocator. On a single node they are written here; in a cluster the broker keeps the topic
//! table as a view of the controller quorum's metadata, with the same read side.

pub mod producer_ids;
pub mod topic_table;

pub use producer_ids::{ProducerIdAllocator, ProducerIdError};
pub use topic_table::{MetadataError, MetadataStore, TopicMetadata, TopicTable};
