//! Laminar's Kafka protocol layer: framing, the codec, one handler file per Kafka API, and a
//! Kafka client used by the CLI, the benchmark harness and (later) replication.

pub mod admin_http;
pub mod broker;
pub mod client;
pub mod codec;
pub mod config;
mod connection;
mod errors;
pub mod frame;
pub mod group;
pub mod handlers;
pub mod log_dir_lock;
mod maintenance;
pub mod metrics;
pub mod open_files;
pub mod request_memory;
pub mod send;
pub mod server;
mod sys;
