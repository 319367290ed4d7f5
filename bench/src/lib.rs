//! `laminar bench`: load generator and reports for any Kafka-compatible broker.
