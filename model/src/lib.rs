//! The words every layer of Laminar shares (docs/ARCHITECTURE.md, "Crates"): a topic partition,
//! and distinct types for the integers Kafka's protocol leaves bare, so that an offset is never
//! passed where a leader epoch is meant, nor a broker epoch where a node id is.
//!
//! Each type keeps Kafka's representation (`i64` offsets, `i32` epochs and ids) and serialises
//! as that integer alone, so records and files that held the bare integer keep their bytes.
//! The protocol and the on-disk formats convert at their edges with `new` and `get`.

#![forbid(unsafe_code)]

mod ids;
mod time;
mod topic_partition;

pub use ids::{BrokerEpoch, LeaderEpoch, NodeId, Offset, PartitionEpoch, ProducerEpoch, ProducerId};
pub use time::UnixMillis;
pub use topic_partition::TopicPartition;
