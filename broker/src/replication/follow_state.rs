//! A followed partition's state, plain data (the shard's logic on it is `follower.rs`).

/// What a followed partition does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Asking the leader where its log and ours diverge.
    Truncating,
    /// Fetching from its log end.
    Fetching,
    /// The leader answered OFFSET_OUT_OF_RANGE: asking where its log starts.
    OutOfRange,
}

/// A partition this shard follows, under one leader epoch. Owned by one shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowState {
    /// The leader's broker id; -1 while the partition has none.
    pub leader: i32,
    pub leader_epoch: i32,
    pub phase: Phase,
    /// After an error, no request for this partition before this time.
    pub retry_at_ms: i64,
}
