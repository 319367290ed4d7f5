//! How the process's open-file limit is shared: partition files, client connections, the rest.
//!
//! Every segment holds up to three files (its log, and its index files once they have an
//! entry), so a data dir can hold more partitions than the limit lets
//! the broker hold open, and every connection holds one. The storage files of all shards share
//! a [`DescriptorBudget`], client connections have their own share ([`ConnectionSlots`],
//! `max.connections`), and a reserve is kept for rings, listeners and short-lived files, so the
//! broker always comes up and binds its listener and neither side can starve the other.
//! Partitions open on first use (start-up opens none but the group coordinator's), and each
//! shard's file cache closes idle files when the budget runs short and opens them again on
//! demand (`laminar_engine::io::FileCache`); an open that cannot fit (the files in use at that
//! instant do not) answers KAFKA_STORAGE_ERROR (retriable), and the broker says once how many
//! descriptors it needs.

use std::sync::Arc;

use laminar_engine::io::{DescriptorBudget, DIR_SYNCS_IN_FLIGHT_MAX};

use crate::connection_slots::ConnectionSlots;

/// The least and the most descriptors kept for neither share: rings, eventfds, listeners, the
/// admin port, and the instant a connection past its share is held before it is closed.
/// Directory fsyncs' handles are kept on top of these, [`DIR_SYNCS_IN_FLIGHT_MAX`] per shard.
const DESCRIPTORS_KEPT_MIN: u64 = 32;
const DESCRIPTORS_KEPT_MAX: u64 = 1024;

/// How the open-file limit is shared by partition files and client connections.
pub struct DescriptorShares {
    /// The pool, less what connections withhold, is the storage's.
    pub storage: Arc<DescriptorBudget>,
    pub connections: Arc<ConnectionSlots>,
}

/// Splits `open_files_limit`: a 64th (32 to 1024) is kept out of the pool for the rest, and the
/// directory fsyncs' handles of `shard_count` shards; connections are guaranteed `max_connections` of the pool but at most half the limit, and
/// partition files may use whatever connections do not hold. So 10 000 connections fit under
/// the common limit of 20 000 beside partition files, and with few connections the files may
/// use nearly all of it (idle files close when connections need their descriptors).
pub fn descriptor_shares(
    open_files_limit: u64,
    max_connections: u64,
    shard_count: usize,
) -> DescriptorShares {
    let rest = (open_files_limit / 64).clamp(DESCRIPTORS_KEPT_MIN, DESCRIPTORS_KEPT_MAX);
    let dir_syncs = (shard_count * DIR_SYNCS_IN_FLIGHT_MAX) as u64;
    let kept = rest.saturating_add(dir_syncs);
    let pool = DescriptorBudget::new(open_files_limit.saturating_sub(kept));
    let connections_max = max_connections.min(open_files_limit / 2).min(pool.limit());
    // Half the reserve may be held by accepted connections waiting for the storage's room:
    // one by each shard's accept loop (`server::admit_after_room`), the rest in their own tasks.
    let waiting_max = (rest / 2).saturating_sub(shard_count as u64);
    DescriptorShares {
        connections: ConnectionSlots::new(connections_max, pool.clone(), waiting_max),
        storage: pool,
    }
}

/// The open-file limit, its soft limit raised to the hard one where the kernel allows (see
/// [`laminar_sys::limits::raise_open_files_limit`]; a refused raise keeps the soft limit);
/// without one, a limit no open reaches, so the kernel's EMFILE is the only bound.
pub fn open_files_limit() -> u64 {
    let limit =
        laminar_sys::limits::raise_open_files_limit().or_else(|_| laminar_sys::limits::open_files_limit());
    limit.map(|limit| limit.soft).unwrap_or_else(|error| {
        tracing::warn!(%error, "cannot read the open-file limit; partition files are not budgeted");
        u64::MAX
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (the pool, the storage's limit with no connection open, the connections' max), without
    /// the shards' directory fsyncs (their own test).
    fn split(limit: u64, max_connections: u64) -> (u64, u64, u64) {
        let shares = descriptor_shares(limit, max_connections, 0);
        (
            shares.storage.limit(),
            shares.storage.storage_limit(),
            shares.connections.max(),
        )
    }

    #[test]
    fn connections_get_half_the_limit_at_most_and_files_what_connections_do_not_hold() {
        const ANY: u64 = i32::MAX as u64;
        assert_eq!(split(20_000, ANY), (19_688, 18_438, 10_000));
        assert_eq!(split(20_000, 500), (19_688, 19_626, 500));
        assert_eq!(split(256, ANY), (224, 208, 128));
        assert_eq!(
            split(1 << 20, ANY),
            ((1 << 20) - 1024, (1 << 20) - 1024 - 2048, 1 << 19)
        );
        assert_eq!(split(40, ANY), (8, 7, 8), "a tiny limit keeps its reserve first");
        assert_eq!(split(10, ANY), (0, 0, 0));
        assert_eq!(split(u64::MAX, 0), (u64::MAX - 1024, u64::MAX - 1024, 0));
    }

    #[test]
    fn every_shards_directory_fsyncs_are_kept_out_of_the_pool() {
        let dir_syncs = DIR_SYNCS_IN_FLIGHT_MAX as u64;
        for (limit, shards) in [(256, 1), (256, 2), (20_000, 4)] {
            let without = descriptor_shares(limit, 100, 0).storage.limit();
            let with = descriptor_shares(limit, 100, shards).storage.limit();
            assert_eq!(without - with, shards as u64 * dir_syncs, "{limit} with {shards}");
        }
        assert_eq!(
            descriptor_shares(40, 100, 2).storage.limit(),
            0,
            "never below nothing"
        );
    }
}
