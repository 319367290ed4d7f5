//! Laminar's storage engine.
//!
//! The engine knows partitions, logs, shards and files. It knows nothing of sockets or of Kafka
//! requests; the only wire type it understands is the Kafka RecordBatch v2, because that is also
//! the on-disk format (docs/ARCHITECTURE.md invariant 3).
//!
//! - [`log`]: RecordBatch view and validation, segments, sparse indexes, recovery, retention.
//! - [`partition`]: one partition replica: its log, group commit, offsets, append notification.
//! - [`shard`]: one pinned executor per core, the partition→shard table, cross-shard messages.
//! - [`io`]: the storage I/O seam (glommio-backed; a fault-injecting variant for tests).
//! - [`metadata`]: the node's topic table and producer ids (single writer, published read-only
//!   to every shard).
//! - [`local_sync`]: the async lock and event of state one shard owns (no atomics: one thread
//!   uses them).
//! - [`task_wakers`]: keeping glommio's count of a task's wakers bounded (one operation
//!   polled again and again, or tens of thousands waited on at once).
//!
//! Its system calls beyond std go through `laminar-sys`, the workspace's one crate with `unsafe`.

#![forbid(unsafe_code)]

pub mod io;
pub mod local_sync;
pub mod log;
pub mod metadata;
pub mod partition;
pub mod shard;
pub mod task_wakers;
#[cfg(test)]
mod test_tasks;
