//! Consumer groups of KIP-848's protocol ("consumer" groups): the broker assigns partitions,
//! members heartbeat with ConsumerGroupHeartbeat, and a rebalance moves only the partitions
//! that change owner, one member at a time, while every other member goes on consuming
//! (docs/ARCHITECTURE.md, "Consumer groups").
//!
//! They share the classic groups' home: the same coordinator shard (the owner of the group's
//! `__consumer_offsets` partition), the same committed offsets, and the same log, in Kafka's
//! record types for this protocol ([`records`]).
//!
//! - [`group`]: one group's state machine; [`member`]: its members; [`reconcile`]: one
//!   member's next step toward its target assignment.
//! - [`assignor`]: the server-side assignors, `uniform` and `range`.
//! - [`subscription`]: topic names and regular expressions resolved against the topics.

pub mod assignor;
pub mod classic;
pub mod group;
pub mod member;
pub mod reconcile;
pub mod records;
pub mod subscription;

#[cfg(test)]
mod classic_tests;
#[cfg(test)]
mod group_tests;

pub use group::{ConsumerGroup, ConsumerGroupSettings, HeartbeatOutcome};
pub use member::HeartbeatArgs;
