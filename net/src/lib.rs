//! Laminar's Kafka protocol layer: framing, the codec, one handler file per Kafka API, and a
//! Kafka client used by the CLI, the benchmark harness and (later) replication.
pub mod client;
