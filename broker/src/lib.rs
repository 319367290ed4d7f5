//! The Kafka broker: accepts connections on every shard, answers each Kafka API in a handler
//! file of its own, coordinates consumer groups, and serves metrics and admin HTTP. Storage is
//! the engine's; the wire format is `laminar-protocol`'s (docs/ARCHITECTURE.md).

#![forbid(unsafe_code)]

pub mod admin_http;
pub mod authentication;
pub mod authorization;
pub mod broker;
pub mod client_quotas;
pub mod clock;
pub mod committed_append;
pub mod config;
mod connection;
pub mod connection_rate;
pub mod connection_slots;
pub mod connections_per_ip;
pub mod controller_only;
pub mod dynamic_configs;
mod errors;
pub mod failed_logins;
pub mod fetch_sessions;
pub mod group;
pub mod handlers;
pub mod internal_records;
pub mod kafka_listener;
pub mod log_dir_lock;
mod maintenance;
pub mod meta_properties;
pub mod metrics;
pub mod open_files;
pub mod peer_request;
pub mod peer_security;
pub mod quorum;
pub mod replication;
pub mod reply;
pub mod request_memory;
pub mod scram_users;
pub mod send;
pub mod server;
pub mod tls;
pub mod topic_partition;
pub mod transactions;
