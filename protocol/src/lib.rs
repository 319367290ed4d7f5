//! Kafka's wire protocol as Laminar speaks it, shared by the broker and the client: framing,
//! request headers and the table of served API versions, record batches, and the Fetch response
//! that carries record bytes as file ranges. Knows no sockets' owners, no shards and no config
//! (docs/ARCHITECTURE.md, "Crates").

#![forbid(unsafe_code)]

pub mod chunk;
pub mod codec;
pub mod fetch_response;
pub mod fetch_session;
pub mod frame;
pub mod records;
