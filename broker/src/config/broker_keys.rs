//! The registry of broker keys: one row per key Laminar implements (name, default, value kind,
//! fallback keys, doc), and the list of Kafka keys Laminar knows but ignores with a warning.
//!
//! Defaults are Kafka's, except `log.dir` (`./data`, not `/tmp/kafka-logs`) and
//! `advertised.listeners` (see its doc).

use super::broker_settings::BrokerConfig;
use super::value::{CleanupPolicy, CompressionType, Kind, LogFormat, TimestampType};

/// Where a broker key's value comes from when nobody set it.
#[derive(Clone, Copy)]
pub enum BrokerDefault {
    /// A constant, parsed like any explicit value.
    Fixed(&'static str),
    /// Computed from other keys or from the host; reported as the key's default value.
    Derived(fn(&BrokerConfig) -> String),
    /// No value of its own (Kafka's null): a fallback key applies instead.
    Unset,
}

/// One broker key.
pub struct BrokerKey {
    pub name: &'static str,
    pub default: BrokerDefault,
    pub kind: Kind,
    /// Lower-precedence keys consulted when this one is unset (e.g. `log.retention.hours` for
    /// `log.retention.ms`); they are this key's synonyms in DescribeConfigs.
    pub fallbacks: &'static [&'static str],
    pub doc: &'static str,
}

pub const LONG_MAX: &str = "9223372036854775807";
/// The one `replica.selector.class` served: Kafka's rack-aware selector (KIP-392).
pub const RACK_AWARE_REPLICA_SELECTOR: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";
const I32_MAX: i64 = i32::MAX as i64;
const POSITIVE: Kind = Kind::Int {
    min: 1,
    max: i64::MAX,
};
const POSITIVE_I32: Kind = Kind::Int { min: 1, max: I32_MAX };
const NON_NEGATIVE: Kind = Kind::Int {
    min: 0,
    max: i64::MAX,
};
const NON_NEGATIVE_I32: Kind = Kind::Int { min: 0, max: I32_MAX };

const fn key(
    name: &'static str,
    default: BrokerDefault,
    kind: Kind,
    fallbacks: &'static [&'static str],
    doc: &'static str,
) -> BrokerKey {
    BrokerKey {
        name,
        default,
        kind,
        fallbacks,
        doc,
    }
}

use BrokerDefault::{Derived, Fixed, Unset};

#[rustfmt::skip]
pub static BROKER_KEYS: &[BrokerKey] = &[
    key("node.id", Fixed("1"), Kind::Int { min: 0, max: I32_MAX }, &[],
        "This broker's id in the cluster."),
    key("broker.id", Derived(|c| c.node_id.to_string()), Kind::Int { min: 0, max: I32_MAX }, &[],
        "Older name of node.id; if both are set they must agree."),
    key("log.dirs", Derived(|c| join_paths(&c.log_dirs)), Kind::Paths, &["log.dir"],
        "Comma-separated directories holding partition logs; log.dir applies when unset."),
    key("log.dir", Fixed("./data"), Kind::Paths, &[],
        "The log directory when log.dirs is unset (Laminar's default is ./data)."),
    key("listeners", Fixed("PLAINTEXT://0.0.0.0:9092"), Kind::Listeners, &[],
        "Where the broker accepts Kafka clients, as NAME://host:port; only PLAINTEXT exists."),
    key("advertised.listeners", Derived(|c| join(&c.advertised_listeners)),
        Kind::AdvertisedListeners, &["listeners"],
        "Addresses given to clients in Metadata. Default: listeners, with a wildcard host \
         replaced by 127.0.0.1 (a single-node setup then works without DNS; set this key \
         when clients run on other hosts)."),
    key("process.roles", Unset, Kind::ChoiceList(&["broker", "controller"]), &[],
        "KRaft roles of this node: broker,controller (combined mode, what Laminar runs) with \
         controller.quorum.voters. Unset: the single-node mode, with no quorum."),
    key("controller.quorum.bootstrap.servers", Unset, Kind::Text, &[],
        "host:port of controller listeners where a node that is not a voter first finds the \
         quorum (KIP-853), instead of or beside controller.quorum.voters."),
    key("controller.quorum.voters", Fixed(""), Kind::QuorumVoters, &[],
        "The static controller quorum as id@host:port of each voter's CONTROLLER listener, \
         e.g. 1@h1:9093,2@h2:9093,3@h3:9093. Needs process.roles."),
    key("controller.listener.names", Fixed("CONTROLLER"), Kind::ListenerNames, &[],
        "Names of the listeners (in listeners) that carry the controller quorum's traffic; the \
         first one found in listeners is bound by the controller."),
    key("broker.session.timeout.ms", Fixed("9000"), POSITIVE_I32, &[],
        "A broker without a heartbeat for this long is fenced by the controller and its \
         leaderships move."),
    key("broker.heartbeat.interval.ms", Fixed("2000"), POSITIVE_I32, &[],
        "How often a broker heartbeats to the controller; below broker.session.timeout.ms."),
    key("replica.lag.time.max.ms", Fixed("30000"), POSITIVE_I32, &[],
        "A follower that has not caught up with its leader's log end for this long leaves the \
         ISR; one that catches up rejoins it (cluster mode)."),
    key("replica.fetch.max.bytes", Fixed("1048576"), POSITIVE_I32, &[],
        "Bytes a follower asks of one partition per fetch (a larger first batch still comes)."),
    key("replica.fetch.response.max.bytes", Fixed("10485760"), POSITIVE_I32, &[],
        "Bytes a follower asks for in one fetch: the bound on one fetcher's bytes in flight."),
    key("replica.fetch.wait.max.ms", Fixed("500"), POSITIVE_I32, &[],
        "How long a follower's fetch waits at the leader for new data; below \
         replica.lag.time.max.ms."),
    key("replica.fetch.backoff.ms", Fixed("1000"), NON_NEGATIVE_I32, &[],
        "How long a fetcher waits after an error before it tries its leader again."),
    key("replica.high.watermark.checkpoint.interval.ms", Fixed("5000"), POSITIVE_I32, &[],
        "How often each shard writes its replicas' high watermarks to its \
         replication-offset-checkpoint file."),
    key("leader.replication.throttled.rate", Fixed(LONG_MAX), POSITIVE, &[],
        "Bytes per second a leader sends to followers of the replicas topics list in \
         leader.replication.throttled.replicas (cluster mode)."),
    key("follower.replication.throttled.rate", Fixed(LONG_MAX), POSITIVE, &[],
        "Bytes per second a follower fetches for the replicas topics list in \
         follower.replication.throttled.replicas (cluster mode)."),
    key("replica.selector.class", Unset, Kind::Choice(&[RACK_AWARE_REPLICA_SELECTOR]), &[],
        "KIP-392: with Kafka's RackAwareReplicaSelector, a leader points a consumer that sends \
         client.rack to an in-sync replica in its rack, and followers serve consumers' fetches \
         (cluster mode). Unset: consumers read from leaders only."),
    key("inter.broker.listener.name", Fixed("PLAINTEXT"), Kind::Text, &[],
        "The listener brokers reach each other on (followers' fetches), with its own security: \
         its ssl.* settings, and on SASL listeners the login of \
         sasl.mechanism.inter.broker.protocol."),
    key("security.inter.broker.protocol", Unset,
        Kind::Choice(&["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]), &[],
        "Names the inter-broker listener by its protocol instead (the listener of that name); \
         set this or inter.broker.listener.name, not both."),
    key("sasl.mechanism.inter.broker.protocol", Unset,
        Kind::Choice(&["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]), &[],
        "The SASL mechanism brokers log in to each other's inter-broker listener with, when it \
         is a SASL listener; the broker's username and password are those of \
         listener.name.<name>.<mechanism>.sasl.jaas.config. Kafka's default, GSSAPI, does not \
         exist here, so it must be set."),
    key("sasl.mechanism.controller.protocol", Unset,
        Kind::Choice(&["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]), &[],
        "As sasl.mechanism.inter.broker.protocol, for the controller listener (the quorum's \
         own traffic and brokers' requests to the active controller)."),
    key("auto.leader.rebalance.enable", Fixed("true"), Kind::Bool, &[],
        "The active controller moves leaderships back to each partition's preferred (first) \
         replica when a broker's share of misled partitions passes \
         leader.imbalance.per.broker.percentage (cluster mode)."),
    key("leader.imbalance.check.interval.seconds", Fixed("300"), Kind::Int { min: 1, max: I32_MAX }, &[],
        "How often the active controller checks the leader imbalance."),
    key("leader.imbalance.per.broker.percentage", Fixed("10"), Kind::Int { min: 0, max: 100 }, &[],
        "The share (in %) of a broker's preferred partitions led elsewhere above which their \
         leaderships are moved back to it."),
    key("laminar.stray.replicas.max.percent", Fixed("50"), Kind::Int { min: 0, max: 100 }, &[],
        "Cluster mode, at start-up: the most partition directories (in % of this broker's) that \
         may be set aside as stray replicas at once. Past it the broker stops, naming the count \
         and this key: so many at once is more likely a wrong metadata image than deletions \
         made while it was down. 100 allows any number."),
    key("broker.rack", Unset, Kind::Text, &[],
        "This broker's rack; replica placement spreads a partition's replicas over racks."),
    key("num.partitions", Fixed("1"), POSITIVE_I32, &[],
        "Partitions of an auto-created topic."),
    key("default.replication.factor", Fixed("1"), Kind::Int { min: 1, max: i16::MAX as i64 }, &[],
        "Replication factor of a topic created without one (CreateTopics -1, auto-creation)."),
    key("min.insync.replicas", Fixed("1"), POSITIVE_I32, &[],
        "In-sync replicas that must hold a batch before acks=all succeeds."),
    key("auto.create.topics.enable", Fixed("true"), Kind::Bool, &[],
        "Create a topic when a client asks for an unknown one in Metadata."),
    key("delete.topic.enable", Fixed("true"), Kind::Bool, &[],
        "Allow DeleteTopics."),
    key("message.max.bytes", Fixed("1048588"), NON_NEGATIVE_I32, &[],
        "Largest record batch accepted, after compression."),
    key("socket.request.max.bytes", Fixed("104857600"), POSITIVE_I32, &[],
        "Largest request frame accepted; a larger frame closes the connection."),
    key("fetch.max.bytes", Fixed("57671680"), Kind::Int { min: 1024, max: I32_MAX }, &[],
        "Most record bytes one fetch answer carries over all its partitions (a first batch \
         larger than that still comes whole, so a consumer progresses); a request asking for \
         more gets this."),
    key("max.incremental.fetch.session.cache.slots", Fixed("1000"), NON_NEGATIVE_I32, &[],
        "Incremental fetch sessions (KIP-227) the broker keeps at most; 0: none, every fetch \
         names all its partitions."),
    key("queued.max.request.bytes", Fixed("536870912"),
        Kind::IntOrUnlimited { min: 1, max: i64::MAX }, &[],
        "Memory all connections together may hold for requests being received or waiting for \
         their handler, beyond 64 KiB per connection; at the bound, connections that need more \
         stop reading until memory is freed. At least socket.request.max.bytes; -1: no bound \
         (Kafka's default; Laminar's is 512 MiB)."),
    key("max.connections", Fixed("2147483647"), NON_NEGATIVE_I32, &[],
        "Most client connections open at once; one past it is closed as soon as accepted. \
         Bounded by half the open-file limit, so connections and partition files each keep \
         their own share of descriptors."),
    key("authorizer.class.name", Unset, Kind::Text, &[],
        "Turns ACLs on: laminar, or Kafka's org.apache.kafka.metadata.authorizer.StandardAuthorizer \
         or kafka.security.authorizer.AclAuthorizer (taken as the same). Unset: every principal \
         may do everything, and the ACL APIs answer SECURITY_DISABLED."),
    key("super.users", Unset, Kind::Text, &[],
        "Principals that may do everything whatever the ACLs say, semicolon-separated \
         (User:admin;User:CN=broker)."),
    key("allow.everyone.if.no.acl.found", Fixed("false"), Kind::Bool, &[],
        "With ACLs on, whether a resource that no ACL names is open to every principal."),
    key("max.connections.per.ip", Fixed("2147483647"), NON_NEGATIVE_I32, &[],
        "Most connections open at once from one IP address, on every listener; one past it is \
         closed as soon as accepted. 0 only with max.connections.per.ip.overrides (which then \
         names the only addresses let in)."),
    key("max.connection.creation.rate", Fixed("2147483647"), NON_NEGATIVE_I32, &[],
        "New connections a second the broker serves (KIP-612): past it, and past a listener's \
         own listener.name.<name>.max.connection.creation.rate, a new connection waits in the \
         listen queue. The inter-broker listener counts only against its own rate."),
    key("quota.window.num", Fixed("11"), POSITIVE_I32, &[],
        "Windows a client quota's rate is measured over (producer_byte_rate, consumer_byte_rate, \
         request_percentage); also the burst of controller_mutation_rate."),
    key("quota.window.size.seconds", Fixed("1"), POSITIVE_I32, &[],
        "Length of each window of a client quota's rate."),
    key("max.connections.per.ip.overrides", Unset, Kind::Text, &[],
        "Per-address exceptions to max.connections.per.ip: comma-separated host:count or \
         ip:count entries (host names are resolved at start; an IPv6 address is split at its \
         last colon)."),
    key("connections.max.idle.ms", Fixed("600000"), POSITIVE, &[],
        "A connection with no request for this long is closed."),
    key("listener.security.protocol.map",
        Fixed("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
        Kind::Text, &[],
        "Listener name to security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL). A listener not in the map must be named after its \
         protocol; the controller's listener is PLAINTEXT unless mapped."),
    key("sasl.enabled.mechanisms", Fixed("SCRAM-SHA-256,SCRAM-SHA-512"), Kind::Text, &[],
        "SASL mechanisms a SASL listener offers (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); \
         listener.name.<name>.sasl.enabled.mechanisms sets one listener's. Kafka's default is \
         GSSAPI, which Laminar does not have. PLAIN's users come from \
         listener.name.<name>.plain.sasl.jaas.config (PlainLoginModule, user_<name>=\"<password>\"); \
         SCRAM's from AlterUserScramCredentials."),
    key("ssl.keystore.type", Fixed("PEM"), Kind::Choice(&["PEM"]), &[],
        "Format of the key store: PEM only (convert a JKS or PKCS12 store with keytool or \
         openssl). listener.name.<name>.ssl.* sets any ssl key for one listener."),
    key("ssl.keystore.location", Unset, Kind::Path, &[],
        "A PEM file with the listener's private key (unencrypted) and certificate chain."),
    key("ssl.keystore.certificate.chain", Unset, Kind::Text, &[],
        "The certificate chain in PEM, inline (with ssl.keystore.key, instead of a file)."),
    key("ssl.keystore.key", Unset, Kind::Password, &[],
        "The private key in PEM, inline (never shown by DescribeConfigs)."),
    key("ssl.key.password", Unset, Kind::Password, &[],
        "Encrypted private keys are not supported: setting this is refused."),
    key("ssl.truststore.type", Fixed("PEM"), Kind::Choice(&["PEM"]), &[],
        "Format of the trust store: PEM only."),
    key("ssl.truststore.location", Unset, Kind::Path, &[],
        "A PEM file of the CA certificates client certificates are verified against."),
    key("ssl.truststore.certificates", Unset, Kind::Text, &[],
        "The trusted CA certificates in PEM, inline (instead of a file)."),
    key("ssl.client.auth", Fixed("none"), Kind::Choice(&["none", "requested", "required"]), &[],
        "Client certificates on SSL and SASL_SSL listeners: none, requested (verified when \
         sent), required. On SSL listeners the certificate's subject names the principal."),
    key("ssl.enabled.protocols", Fixed("TLSv1.2,TLSv1.3"), Kind::ChoiceList(&["TLSv1.2", "TLSv1.3"]),
        &[], "TLS versions offered; nothing older exists in Laminar."),
    key("ssl.principal.mapping.rules", Fixed("DEFAULT"), Kind::Text, &[],
        "How a client certificate's subject DN becomes a principal's name: DEFAULT (the DN), \
         or RULE:<regex>/<replacement>/[LU], as Kafka."),
    key("laminar.sasl.plain.plaintext.enable", Fixed("false"), Kind::Bool, &[],
        "Allows PLAIN on SASL_PLAINTEXT listeners, where it sends passwords in clear."),
    key("connections.max.reauth.ms", Fixed("0"), NON_NEGATIVE, &[],
        "How long a SASL authentication holds (KIP-368): clients re-authenticate before it ends, \
         and a connection that did not is closed at its next request. 0: forever."),
    key("connection.failed.authentication.delay.ms", Fixed("100"), NON_NEGATIVE, &[],
        "How long the answer to a failed authentication, and the close that follows it, is \
         held back: it slows down password guessing."),
    key("laminar.connection.failed.authentication.delay.max.ms", Fixed("10000"), NON_NEGATIVE, &[],
        "Each SASL login refused for wrong credentials from an address within a minute of its previous one doubles \
         that address's delay, from connection.failed.authentication.delay.ms up to this."),
    key("laminar.request.receive.timeout.ms", Fixed("30000"), POSITIVE, &[],
        "A request frame must arrive whole within this much time spent waiting for its bytes \
         (time the broker spends on earlier requests of the connection does not count), or the \
         connection is closed and the frame's memory freed (a stalled sender holds nothing \
         for long). Kafka clients give up on a request after request.timeout.ms (30 s) anyway."),
    key("compression.type", Fixed("producer"), Kind::Choice(CompressionType::NAMES), &[],
        "Default compression of stored batches; producer keeps what the producer sent."),
    key("log.segment.bytes", Fixed("1073741824"), Kind::Int { min: 14, max: I32_MAX }, &[],
        "Size at which a segment file rolls."),
    key("log.roll.ms", Derived(|c| c.log_roll_ms.to_string()), POSITIVE, &["log.roll.hours"],
        "Age at which a segment rolls even if not full; log.roll.hours applies when unset."),
    key("log.roll.hours", Fixed("168"), POSITIVE_I32, &[],
        "Segment roll age in hours, when log.roll.ms is unset."),
    key("log.roll.jitter.ms", Fixed("0"), NON_NEGATIVE, &[],
        "Random jitter subtracted from the roll age, so that segments do not all roll at once."),
    key("log.retention.ms", Derived(|c| c.log_retention_ms.to_string()),
        Kind::IntOrUnlimited { min: 1, max: i64::MAX },
        &["log.retention.minutes", "log.retention.hours"],
        "How long segments are kept (-1: forever). Precedence: ms, then minutes, then hours."),
    key("log.retention.minutes", Unset, Kind::IntOrUnlimited { min: 1, max: I32_MAX },
        &["log.retention.hours"], "Retention in minutes, when log.retention.ms is unset."),
    key("log.retention.hours", Fixed("168"), Kind::IntOrUnlimited { min: 1, max: I32_MAX }, &[],
        "Retention in hours, when log.retention.ms and log.retention.minutes are unset."),
    key("log.retention.bytes", Fixed("-1"), Kind::IntOrUnlimited { min: 0, max: i64::MAX }, &[],
        "Size per partition beyond which whole old segments are deleted (-1: no limit)."),
    key("log.retention.check.interval.ms", Fixed("300000"), POSITIVE, &[],
        "How often retention is checked (and idle producer ids expired)."),
    key("producer.id.expiration.ms", Fixed("86400000"), POSITIVE_I32, &[],
        "How long a partition remembers an idle idempotent producer's sequence state."),
    key("log.index.interval.bytes", Fixed("4096"), NON_NEGATIVE_I32, &[],
        "Bytes of log between two entries of the sparse offset index."),
    key("log.index.size.max.bytes", Fixed("10485760"), Kind::Int { min: 4, max: I32_MAX }, &[],
        "Largest offset index file; a segment rolls when its index is full."),
    key("log.segment.delete.delay.ms", Fixed("60000"), NON_NEGATIVE, &[],
        "Delay between unlinking a segment from the log and deleting its files."),
    key("log.message.timestamp.type", Fixed("CreateTime"), Kind::Choice(TimestampType::NAMES),
        &[], "Whether batches keep the producer's timestamp or get the broker's append time."),
    key("log.message.timestamp.difference.max.ms", Fixed(LONG_MAX), NON_NEGATIVE, &[],
        "Deprecated by Kafka: largest allowed gap between a CreateTime timestamp and now."),
    key("log.message.timestamp.before.max.ms", Fixed(LONG_MAX), NON_NEGATIVE, &[],
        "How far in the past a CreateTime timestamp may be."),
    key("log.message.timestamp.after.max.ms", Fixed(LONG_MAX), NON_NEGATIVE, &[],
        "How far in the future a CreateTime timestamp may be."),
    key("log.message.downconversion.enable", Fixed("true"), Kind::Bool, &[],
        "Whether old fetch versions get down-converted batches."),
    key("log.cleanup.policy", Fixed("delete"), Kind::ChoiceList(CleanupPolicy::NAMES), &[],
        "delete (by retention), compact (keep the last record per key), or both."),
    key("log.cleaner.delete.retention.ms", Fixed("86400000"), NON_NEGATIVE, &[],
        "How long tombstones stay in a compacted log."),
    key("log.cleaner.min.compaction.lag.ms", Fixed("0"), NON_NEGATIVE, &[],
        "Minimum age of a record before compaction may remove it."),
    key("log.cleaner.max.compaction.lag.ms", Fixed(LONG_MAX), POSITIVE, &[],
        "Maximum age of an uncompacted record."),
    key("log.cleaner.min.cleanable.ratio", Fixed("0.5"), Kind::Ratio, &[],
        "Dirty fraction of a log that makes it eligible for compaction."),
    key("log.flush.interval.messages", Fixed(LONG_MAX), POSITIVE, &[],
        "Records appended to a partition before it is flushed (Kafka's per-partition flush)."),
    key("log.flush.interval.ms", Fixed(LONG_MAX), NON_NEGATIVE, &[],
        "Milliseconds a record may stay unflushed (Kafka's per-partition flush)."),
    key("log.preallocate", Fixed("false"), Kind::Bool, &[],
        "Preallocate segment files at creation."),
    key("log.local.retention.ms", Fixed("-2"), Kind::Int { min: -2, max: i64::MAX }, &[],
        "Tiered-storage local retention (-2: same as retention); Laminar has no tiers."),
    key("log.local.retention.bytes", Fixed("-2"), Kind::Int { min: -2, max: i64::MAX }, &[],
        "Tiered-storage local retention in bytes (-2: same as retention)."),
    key("unclean.leader.election.enable", Fixed("false"), Kind::Bool, &[],
        "Allow an out-of-sync replica to become leader, losing data."),
    key("offsets.topic.num.partitions", Fixed("50"), POSITIVE_I32, &[],
        "Partitions of __consumer_offsets."),
    key("transaction.state.log.num.partitions", Fixed("50"), POSITIVE_I32, &[],
        "Partitions of __transaction_state, made when a transactional producer first needs it."),
    key("transaction.state.log.replication.factor", Fixed("3"), POSITIVE_I32, &[],
        "Replicas of __transaction_state in a cluster (fewer while fewer brokers are up)."),
    key("transaction.state.log.min.isr", Fixed("2"), POSITIVE_I32, &[],
        "min.insync.replicas of __transaction_state (at most its replica count)."),
    key("transactional.id.expiration.ms", Fixed("604800000"), POSITIVE_I32, &[],
        "A transactional id with no transaction for this long is forgotten (its record removed)."),
    key("transaction.max.timeout.ms", Fixed("900000"), POSITIVE_I32, &[],
        "Longest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT past it)."),
    key("max.broker.partitions", Fixed("200000"), POSITIVE_I32, &[],
        "Most partitions this broker hosts, internal topics included (KIP-578's name). \
         CreateTopics, CreatePartitions and auto-creation that would pass it are refused with \
         POLICY_VIOLATION; a topic table on disk that passes it stops the start."),
    key("laminar.request.partitions.max", Fixed("100000"), POSITIVE_I32, &[],
        "Most partitions one CreateTopics or CreatePartitions request may add, all its topics \
         together; a topic that would pass it is refused with INVALID_PARTITIONS."),
    key("group.initial.rebalance.delay.ms", Fixed("3000"), NON_NEGATIVE_I32, &[],
        "How long the first rebalance of an empty group waits for more members."),
    key("group.consumer.heartbeat.interval.ms", Fixed("5000"), Kind::Int { min: 1, max: i32::MAX as i64 }, &[],
        "How often members of consumer groups (group.protocol=consumer) heartbeat."),
    key("group.consumer.session.timeout.ms", Fixed("45000"), Kind::Int { min: 1, max: i32::MAX as i64 }, &[],
        "A consumer group member that has not heartbeated for this long is removed."),
    key("group.consumer.max.size", Fixed("1000"), Kind::Int { min: 1, max: 100_000 }, &[],
        "Most members of one consumer group (GROUP_MAX_SIZE_REACHED past it)."),
    key("group.consumer.assignors", Fixed("uniform,range"), Kind::ChoiceList(&["uniform", "range"]), &[],
        "Server-side assignors consumer groups may use; the first is the default."),
    key("laminar.group.consumer.groups.max", Fixed("10000"), Kind::Int { min: 1, max: 10_000_000 }, &[],
        "Most consumer groups (group.protocol=consumer) this broker coordinates; a heartbeat that \
         would make one more is refused with GROUP_MAX_SIZE_REACHED."),
    key("laminar.group.consumer.regexes.max", Fixed("100"), Kind::Int { min: 0, max: 100_000 }, &[],
        "Most distinct subscription regular expressions in one consumer group \
         (INVALID_REGULAR_EXPRESSION past it)."),
    key("laminar.cores", Derived(|c| c.laminar_cores.to_string()),
        Kind::Int { min: 1, max: 4096 }, &[],
        "Shards (one pinned executor per core). Default: every available core."),
    key("laminar.fsync", Fixed("always"), Kind::Fsync, &[],
        "always: fdatasync before acknowledging acks=all (group commit); never; or \
         interval:<ms>: fdatasync in the background every <ms> milliseconds."),
    key("laminar.http.listen", Fixed("127.0.0.1:9644"), Kind::SocketAddr, &[],
        "Address of the HTTP endpoint (health, metrics, the JSON admin API and the console)."),
    key("laminar.http.ssl.keystore.location", Unset, Kind::Text, &[],
        "PEM file with the HTTP endpoint's private key and certificate chain: the endpoint then \
         serves HTTPS only. Needed when laminar.http.listen is not a loopback address."),
    key("laminar.http.ssl.truststore.location", Unset, Kind::Text, &[],
        "PEM file of the certificates that sign HTTP clients' certificates (with \
         laminar.http.ssl.client.auth)."),
    key("laminar.http.ssl.client.auth", Fixed("none"), Kind::Choice(&["none", "requested", "required"]), &[],
        "Whether HTTPS clients present a certificate; its subject DN (User:CN=...) is the \
         principal laminar.http.authentication.*.principals name."),
    key("laminar.http.authentication.tokens.file", Unset, Kind::Text, &[],
        "File of bearer tokens for the HTTP endpoint, one per line: <role> <name> <token>, the \
         role admin or read-only, the token at least 24 characters. With it (or certificate \
         principals) every request but the console's pages needs a token or a certificate."),
    key("laminar.http.authentication.admin.principals", Unset, Kind::Text, &[],
        "Comma-separated certificate principals (User:CN=ops,O=example) with the admin role."),
    key("laminar.http.authentication.read.only.principals", Unset, Kind::Text, &[],
        "Comma-separated certificate principals with the read-only role (GET requests only)."),
    key("laminar.http.monitoring.open", Fixed("false"), Kind::Bool, &[],
        "With authentication on the HTTP endpoint, whether /metrics and /v1/status/ready stay \
         open to every client (for scrapers and load balancers)."),
    key("laminar.log.format", Fixed("text"), Kind::Choice(LogFormat::NAMES), &[],
        "How log lines are written to stderr: text (coloured only on a terminal) or json (one \
         object per line, for log shippers). Levels per module: LAMINAR_LOG, RUST_LOG syntax."),
    key("laminar.storage.write_batch_bytes",
        Derived(|c| c.write_behind.settings.write_batch_bytes.to_string()),
        Kind::Int { min: 0, max: super::write_behind::WRITE_BATCH_BYTES_MAX as i64 }, &[],
        "Write-behind: once this many appended bytes of a segment are in the page cache, the \
         kernel is asked to write them out in the background (sync_file_range), so that \
         fdatasync and dirty-page throttling find less to do. 0 turns it off; otherwise at \
         least 4096. Default: the iotune profile's recommended_write_batch_bytes, else 0."),
    key("laminar.storage.io_depth", Derived(|c| c.write_behind.settings.io_depth.to_string()),
        Kind::Int { min: 1, max: laminar_engine::io::WriteBehind::IO_DEPTH_MAX as i64 }, &[],
        "Write-behind ranges in flight per shard at most; more wait for the next append. \
         Default: the iotune profile's recommended_io_depth, else 4."),
    key("laminar.storage.mapped_appends", Fixed("true"), Kind::Bool, &[],
        "Appends under 4 KiB to a segment's .log file are copied into a shared mapping of the \
         file's end instead of written with pwritev each (docs/decisions/0018): the kernel is \
         entered once per page instead of once per batch. Durability is the same. false: every \
         append is a pwritev."),
    key("laminar.storage.prewrite", Fixed("false"), Kind::Bool, &[],
        "true: the blocks ahead of a segment's appends are written (zeros) and synced in the \
         background before the appends reach them, so that the fdatasync after an append commits \
         only data. On the disks measured so far it costs more than it saves (the zeros double \
         the bytes written; docs/decisions/0048). false: blocks are reserved with fallocate."),
    key("laminar.storage.write_mode", Derived(|c| c.write_mode.mode.name().to_string()),
        Kind::Choice(laminar_engine::io::WriteMode::NAMES), &[],
        "How segment data is written: buffered (through the page cache, which then serves reads \
         of recent data) or direct (O_DIRECT from the shard's own aligned buffers through its \
         io_uring; laminar.cache.bytes keeps recent data for reads). Unset: what the iotune \
         profile recommends (laminar.iotune.profile), else buffered. docs/decisions/0049 and \
         0050 have the measurements."),
    key("laminar.cache.bytes", Derived(|c| c.laminar_cache_bytes.to_string()),
        Kind::Int { min: 0, max: i64::MAX }, &[],
        "With laminar.storage.write_mode=direct: bytes of recently written segment data the \
         broker keeps in memory, shared evenly by its shards, so that consumers and followers \
         reading recent data do not go to the disk (O_DIRECT writes leave nothing in the page \
         cache). 0: none. Default: an eighth of the machine's memory. Unused in buffered mode, \
         where the page cache serves those reads."),
    key("laminar.iotune.profile", Unset, Kind::Path, &[],
        "An iotune.json written by `laminar iotune`, whose recommendations set the write-behind \
         keys left unset. Default: iotune.json in the first log dir, when that file exists."),
];

pub fn find_broker_key(name: &str) -> Option<&'static BrokerKey> {
    BROKER_KEYS.iter().find(|k| k.name == name)
}

fn join_paths(paths: &[std::path::PathBuf]) -> String {
    let items: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    items.join(",")
}

fn join(items: &[impl ToString]) -> String {
    let items: Vec<String> = items.iter().map(ToString::to_string).collect();
    items.join(",")
}

/// Kafka keys Laminar recognises and ignores, with the reason given in the warning.
static IGNORED_KEYS: &[(&str, &str)] = &[
    ("zookeeper.connect", "Laminar has no ZooKeeper"),
    (
        "num.network.threads",
        "one shard per core does all work; see laminar.cores",
    ),
    (
        "num.io.threads",
        "one shard per core does all work; see laminar.cores",
    ),
    (
        "background.threads",
        "one shard per core does all work; see laminar.cores",
    ),
    (
        "num.recovery.threads.per.data.dir",
        "each shard recovers its own partitions",
    ),
    ("num.replica.fetchers", "replication fetchers are per shard"),
    (
        "queued.max.requests",
        "back-pressure is by bytes in flight per connection",
    ),
    (
        "socket.send.buffer.bytes",
        "the kernel's socket buffer defaults are used",
    ),
    (
        "socket.receive.buffer.bytes",
        "the kernel's socket buffer defaults are used",
    ),
    (
        "socket.listen.backlog.size",
        "the listen backlog follows net.core.somaxconn",
    ),
    ("offsets.topic.replication.factor", "not implemented"),
    ("offsets.retention.minutes", "not implemented"),
    ("group.min.session.timeout.ms", "not implemented"),
    ("group.max.session.timeout.ms", "not implemented"),
    ("group.max.size", "not implemented"),
    (
        "replica.fetch.min.bytes",
        "a follower's fetch answers at the first byte",
    ),
    ("metadata.log.dir", "metadata lives under log.dirs"),
    ("log.flush.scheduler.interval.ms", "see laminar.fsync"),
    (
        "log.flush.offset.checkpoint.interval.ms",
        "checkpoints are written on clean shutdown",
    ),
    ("log.roll.jitter.hours", "use log.roll.jitter.ms"),
    ("log.cleaner.enable", "not implemented"),
    ("metric.reporters", "metrics are served on laminar.http.listen"),
    ("cluster.id", "not implemented"),
];

/// Prefixes of Kafka key families Laminar ignores (checked after the registry, so that e.g.
/// `log.cleaner.delete.retention.ms` is implemented while other `log.cleaner.*` keys are not).
static IGNORED_PREFIXES: &[(&str, &str)] = &[
    ("zookeeper.", "Laminar has no ZooKeeper"),
    ("controller.", "the controller is built in"),
    ("log.cleaner.", "not implemented"),
    (
        "transaction.state.log.",
        "the other __transaction_state settings are fixed",
    ),
    ("ssl.", "not implemented"),
    ("sasl.", "not implemented"),
    ("remote.log.", "Laminar has no tiered storage"),
    ("metrics.", "metrics are served on laminar.http.listen"),
    ("quota.", "quotas are not implemented"),
];

/// If `name` is a Kafka key Laminar ignores, the reason.
pub fn ignored_key_reason(name: &str) -> Option<&'static str> {
    IGNORED_KEYS
        .iter()
        .find(|(key, _)| *key == name)
        .or_else(|| IGNORED_PREFIXES.iter().find(|(p, _)| name.starts_with(p)))
        .map(|(_, reason)| *reason)
}
