//! A cluster whose brokers replicate over SCRAM-SHA-512: a REPLICATION listener (SASL_PLAINTEXT)
//! for the followers, logging in as `replicator`, and a CLIENTS listener (SASL_PLAINTEXT, SCRAM)
//! beside the harness's PLAINTEXT one. Followers lag out of the ISR after 2 s and acks=all needs
//! two replicas, so a produce is acknowledged only while followers can log in and fetch.

use crate::{BrokerOptions, Cluster};

/// The replicating user's login.
pub const REPLICATOR: (&str, &str) = ("replicator", "replicator-secret");

/// Every node's options (the `replicator` user must exist: made through the API or formatted).
pub fn node_options() -> BrokerOptions {
    let (user, password) = REPLICATOR;
    BrokerOptions {
        extra_listeners: vec!["REPLICATION".to_string(), "CLIENTS".to_string()],
        ..Cluster::node_options()
    }
    .with_override(
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,REPLICATION:SASL_PLAINTEXT,CLIENTS:SASL_PLAINTEXT",
    )
    .with_override("inter.broker.listener.name", "REPLICATION")
    .with_override("sasl.enabled.mechanisms", "SCRAM-SHA-512")
    .with_override("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512")
    .with_override(
        "listener.name.replication.scram-sha-512.sasl.jaas.config",
        &format!(
            "org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"{user}\" password=\"{password}\";"
        ),
    )
    .with_override("replica.lag.time.max.ms", "2000")
    .with_override("min.insync.replicas", "2")
}
