//! An answer a handler has now, or one it will have later.
//!
//! A connection handles its requests in order, but answers some late: an acks=all produce or
//! an OffsetCommit once durable, a JoinGroup once the rebalance completes, a fetch once data
//! arrives or its wait ends. Such a handler does in the connection's turn what must happen in
//! request order, then returns [`Reply::Later`]; the connection handles the next requests
//! meanwhile and writes every answer in request order (`connection.rs`). So an answer never
//! waits for a later request, and pipelined commits share one fdatasync.

use std::future::Future;
use std::pin::Pin;

/// An answer of type `T`, ready or on its way. Owned by the connection's shard.
pub enum Reply<T> {
    Now(T),
    Later(Pin<Box<dyn Future<Output = T>>>),
}

impl<T: 'static> Reply<T> {
    /// The answer, once it is ready (for callers that are not a connection).
    pub async fn ready(self) -> T {
        match self {
            Reply::Now(answer) => answer,
            Reply::Later(answer) => answer.await,
        }
    }

    /// The answer turned into another, now or later.
    pub fn map<U>(self, f: impl FnOnce(T) -> U + 'static) -> Reply<U> {
        match self {
            Reply::Now(answer) => Reply::Now(f(answer)),
            Reply::Later(answer) => Reply::Later(Box::pin(async move { f(answer.await) })),
        }
    }
}
