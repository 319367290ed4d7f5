//! The partitions one shard owns.
