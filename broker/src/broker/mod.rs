//! The broker's state: what every shard shares, what each shard owns, and how a request reaches
//! the shard that owns a partition.
//!
//! Each in a file of its own: `shared` and `shard_state` hold the state, `routing` takes work
//! to the owning shard and `shard_work` runs it there, and `shutdown` is the signal that stops
//! (or starts) every shard. Everything public is named here, at `crate::broker`, so callers need not know the files.

mod routing;
mod shard_state;
mod shard_work;
mod shared;
mod shutdown;

pub use routing::{by_owning_shard, on_owning_shards, owner_of, ByOwningShard};
pub use shard_state::{BrokerCtx, BrokerShard, OpenMode};
pub use shared::BrokerShared;
pub use shutdown::ShutdownSignal;

pub use crate::topic_partition::{PartitionAccessError, TopicPartition};
