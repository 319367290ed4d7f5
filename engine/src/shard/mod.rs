//! Shards: one pinned glommio executor per core (docs/ARCHITECTURE.md invariant 1).
//!
//! - [`runtime`]: starts the executors and gives each its [`ShardContext`].
//! - [`routing`]: the partition→shard table.
//! - [`partitions`]: the partitions one shard owns, opened lazily and closed on shutdown.

pub mod partitions;
pub mod routing;
pub mod runtime;

pub use routing::shard_of_partition;
pub use runtime::{ShardContext, ShardGone, ShardId, ShardRuntime};
