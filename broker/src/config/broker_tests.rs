use super::*;
use crate::config::broker_keys::BROKER_KEYS;

fn load(text: &str, overrides: &[&str]) -> Result<LoadedBrokerConfig, ConfigError> {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    BrokerConfig::from_properties(text, &overrides)
}

fn config(text: &str, overrides: &[&str]) -> BrokerConfig {
    load(text, overrides).unwrap().config
}

#[test]
fn defaults_are_kafkas() {
    let c = BrokerConfig::default();
    assert_eq!(c.node_id.get(), 1);
    assert_eq!(c.log_dirs, vec![PathBuf::from("./data")]);
    assert_eq!(c.listeners[0].to_string(), "PLAINTEXT://0.0.0.0:9092");
    assert_eq!(
        c.advertised_listeners[0].to_string(),
        "PLAINTEXT://127.0.0.1:9092"
    );
    assert_eq!(c.num_partitions, 1);
    assert_eq!(c.default_replication_factor, 1);
    assert_eq!(c.min_insync_replicas, 1);
    assert!(c.auto_create_topics_enable);
    assert!(c.delete_topic_enable);
    assert_eq!(c.message_max_bytes, 1_048_588);
    assert_eq!(c.socket_request_max_bytes, 104_857_600);
    assert_eq!(c.log_segment_bytes, 1_073_741_824);
    assert_eq!(c.log_roll_ms, 168 * 3_600_000);
    assert_eq!(c.log_retention_ms, 168 * 3_600_000);
    assert_eq!(c.log_retention_bytes, -1);
    assert_eq!(c.log_index_interval_bytes, 4096);
    assert_eq!(c.log_retention_check_interval_ms, 300_000);
    assert_eq!(c.log_message_timestamp_type, TimestampType::CreateTime);
    assert!(c.log_cleanup_policy.delete && !c.log_cleanup_policy.compact);
    assert_eq!(c.offsets_topic_num_partitions, 50);
    let t = &c.transactions;
    let kafka_defaults = (50, 3, 2, 900_000, 604_800_000);
    let settings = (
        t.state_log_num_partitions,
        t.state_log_replication_factor,
        t.state_log_min_isr,
        t.max_timeout_ms,
        t.id_expiration_ms,
    );
    assert_eq!(settings, kafka_defaults);
    assert_eq!(c.max_broker_partitions, 200_000);
    assert_eq!(c.laminar_request_partitions_max, 100_000);
    assert_eq!(c.group_initial_rebalance_delay_ms, 3000);
    assert_eq!(c.log_flush_interval_messages, i64::MAX);
    assert_eq!(c.laminar_fsync, FsyncSetting::Always);
    assert!(c.laminar_storage_mapped_appends);
    assert_eq!(c.laminar_http_listen.to_string(), "127.0.0.1:9644");
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(c.laminar_cores, cores);
}

#[test]
fn file_values_and_overrides_on_top() {
    let text = "# single node\nnode.id = 7\nlog.dirs: /d1, /d2\nnum.partitions=3\n\
                listeners=PLAINTEXT://:19092\nlaminar.fsync=interval:50\n";
    let c = config(text, &["num.partitions=12", "laminar.cores = 2", "log.dirs=/o"]);
    assert_eq!(c.node_id.get(), 7);
    assert_eq!(c.num_partitions, 12, "override beats the file");
    assert_eq!(c.laminar_cores, 2);
    assert_eq!(c.log_dirs, vec![PathBuf::from("/o")]);
    assert_eq!(c.listeners[0].host, "");
    assert_eq!(
        c.advertised_listeners[0].to_string(),
        "PLAINTEXT://127.0.0.1:19092"
    );
    assert_eq!(c.laminar_fsync, FsyncSetting::IntervalMs(50));
    assert!(!config("", &["laminar.storage.mapped_appends=false"]).laminar_storage_mapped_appends);
    let storage = config(
        "",
        &[
            "laminar.storage.prewrite=true",
            "laminar.storage.write_mode=direct",
        ],
    );
    assert!(storage.laminar_storage_prewrite);
    assert_eq!(storage.write_mode.mode, laminar_engine::io::WriteMode::Direct);
    let defaults = config("", &[]);
    assert!(
        !defaults.laminar_storage_prewrite,
        "pre-writes measured slower: off by default"
    );
    assert_eq!(defaults.write_mode.mode, laminar_engine::io::WriteMode::Buffered);
    let memory = laminar_sys::memory::physical_memory_bytes();
    assert!(memory > 0);
    assert_eq!(
        defaults.laminar_cache_bytes,
        memory / 8,
        "an eighth of the memory"
    );
    assert_eq!(config("", &["laminar.cache.bytes=0"]).laminar_cache_bytes, 0);
    let c = config("log.dirs=/d1, /d2,", &[]);
    assert_eq!(c.log_dirs, vec![PathBuf::from("/d1"), PathBuf::from("/d2")]);
    // log.dir applies only when log.dirs is unset.
    assert_eq!(config("log.dir=/x", &[]).log_dirs, vec![PathBuf::from("/x")]);
    assert_eq!(
        config("log.dir=/x\nlog.dirs=/y", &[]).log_dirs,
        vec![PathBuf::from("/y")]
    );
    // Later lines win, as in Java.
    assert_eq!(config("node.id=1\nnode.id=2", &[]).node_id.get(), 2);
}

#[test]
fn retention_precedence_ms_then_minutes_then_hours() {
    assert_eq!(config("log.retention.hours=2", &[]).log_retention_ms, 7_200_000);
    let text = "log.retention.hours=2\nlog.retention.minutes=3";
    assert_eq!(config(text, &[]).log_retention_ms, 180_000);
    let c = config(text, &["log.retention.ms=1234"]);
    assert_eq!(c.log_retention_ms, 1234);
    assert_eq!(config("log.retention.hours=-1", &[]).log_retention_ms, -1);
    assert_eq!(config("log.retention.minutes=-1", &[]).log_retention_ms, -1);
    assert_eq!(config("log.roll.hours=1", &[]).log_roll_ms, 3_600_000);
    assert_eq!(config("log.roll.hours=1\nlog.roll.ms=5", &[]).log_roll_ms, 5);
}

#[test]
fn every_error_names_the_key_and_value() {
    let cases = [
        ("log.segment.bytes=abc", "log.segment.bytes", "abc"),
        ("log.segment.bytes=10", "log.segment.bytes", "10"),
        ("num.partitions=0", "num.partitions", "0"),
        (
            "auto.create.topics.enable=yes",
            "auto.create.topics.enable",
            "yes",
        ),
        ("listeners=FOO://h:9093", "listener.security.protocol.map", "FOO"),
        ("listeners=PLAINTEXT://h", "listeners", "PLAINTEXT://h"),
        (
            "advertised.listeners=PLAINTEXT://0.0.0.0:9",
            "advertised.listeners",
            "0.0.0.0",
        ),
        ("laminar.fsync=sometimes", "laminar.fsync", "sometimes"),
        ("laminar.cores=0", "laminar.cores", "0"),
        (
            "laminar.http.listen=localhost",
            "laminar.http.listen",
            "localhost",
        ),
        ("log.retention.ms=0", "log.retention.ms", "0"),
        (
            "log.message.timestamp.type=Now",
            "log.message.timestamp.type",
            "Now",
        ),
        ("log.cleanup.policy=shred", "log.cleanup.policy", "shred"),
        ("log.dirs=,", "log.dirs", ","),
        ("log.dirs=/a,/a", "log.dirs", "/a,/a"),
        ("node.id=1\nbroker.id=2", "broker.id", "2"),
        ("no.such.key=1", "no.such.key", "1"),
        ("laminar.data.dir.lock=true", "laminar.data.dir.lock", "true"),
    ];
    for (text, key, value) in cases {
        let err = load(text, &[]).unwrap_err();
        let message = err.to_string();
        assert!(message.starts_with("config error: "), "{message}");
        assert!(message.contains(key), "{text}: {message}");
        assert!(message.contains(value), "{text}: {message}");
        assert_eq!(err.key(), Some(key), "{text}");
    }
    let err = load("log.segment.bytes=abc", &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "config error: log.segment.bytes: expected an integer between 14 and 2147483647, got \"abc\""
    );
    let err = load("", &["num.partitions"]).unwrap_err();
    assert_eq!(
        err,
        ConfigError::BadOverride {
            entry: "num.partitions".into()
        }
    );
    let err = load("", &["=3"]).unwrap_err();
    assert!(matches!(err, ConfigError::BadOverride { .. }));
    let err = load("", &["log.index.interval.bytes=-4"]).unwrap_err();
    assert_eq!(err.key(), Some("log.index.interval.bytes"));
    let err = BrokerConfig::load(Path::new("/nonexistent/server.properties"), &[]).unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/server.properties"),
        "{err}"
    );
}

#[test]
fn ignored_kafka_keys_warn_by_name() {
    let text = "zookeeper.connect=localhost:2181\nnum.io.threads=8\n\
                log.cleaner.threads=2\ntransaction.state.log.segment.bytes=1000\n\
                offsets.topic.replication.factor=1\nsocket.send.buffer.bytes=102400\n\
                log.cleaner.delete.retention.ms=1000\nnode.id=4\n";
    let loaded = load(text, &[]).unwrap();
    assert_eq!(loaded.config.node_id.get(), 4);
    let mut keys: Vec<&str> = loaded.warnings.iter().map(|w| w.key.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        vec![
            "log.cleaner.threads",
            "num.io.threads",
            "offsets.topic.replication.factor",
            "socket.send.buffer.bytes",
            "transaction.state.log.segment.bytes",
            "zookeeper.connect",
        ]
    );
    // A registered log.cleaner.* key is implemented, not ignored.
    assert_eq!(
        loaded
            .config
            .value_of("log.cleaner.delete.retention.ms")
            .as_deref(),
        Some("1000")
    );
    let warning = loaded
        .warnings
        .iter()
        .find(|w| w.key == "num.io.threads")
        .unwrap();
    let text = warning.to_string();
    assert!(text.contains("num.io.threads=\"8\""), "{text}");
    assert!(text.contains("laminar.cores"), "{text}");
}

#[test]
fn describe_lists_every_key_with_sources() {
    let c = config("log.retention.hours=5\nnum.partitions=3", &["node.id=9"]);
    let entries = c.describe();
    assert_eq!(entries.len(), BROKER_KEYS.len());
    let names: std::collections::BTreeSet<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names.len(), entries.len(), "no duplicate registry names");
    let get = |name: &str| entries.iter().find(|e| e.name == name).unwrap();
    assert_eq!(get("num.partitions").source, ConfigSource::StaticBroker);
    assert_eq!(get("num.partitions").value.as_deref(), Some("3"));
    assert_eq!(get("node.id").source, ConfigSource::StaticBroker);
    assert_eq!(get("log.segment.bytes").source, ConfigSource::Default);
    assert_eq!(get("log.segment.bytes").value.as_deref(), Some("1073741824"));
    // Derived from a fallback that was set: static, with the fallback among its synonyms.
    let retention = get("log.retention.ms");
    assert_eq!(retention.value.as_deref(), Some("18000000"));
    assert_eq!(retention.source, ConfigSource::StaticBroker);
    assert_eq!(retention.synonyms[0].name, "log.retention.hours");
    assert_eq!(retention.synonyms[0].source, ConfigSource::StaticBroker);
    assert_eq!(retention.synonyms[1].value.as_deref(), Some("168"));
    assert_eq!(retention.synonyms[1].source, ConfigSource::Default);
    assert_eq!(get("log.retention.minutes").value, None);
    assert_eq!(
        get("advertised.listeners").value.as_deref(),
        Some("PLAINTEXT://127.0.0.1:9092")
    );
    assert_eq!(get("advertised.listeners").source, ConfigSource::Default);
    assert!(entries.iter().all(|e| !e.doc.is_empty()));
    // Writable exactly where dynamic.
    assert!(entries
        .iter()
        .all(|e| e.read_only != dynamic::is_dynamic(&e.name)));
    assert!(!get("log.segment.bytes").read_only && get("num.partitions").read_only);
    // Only secrets are sensitive, and they are never shown.
    let sensitive: Vec<&str> = entries
        .iter()
        .filter(|e| e.sensitive)
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(sensitive, ["ssl.keystore.key", "ssl.key.password"]);
    // Every key's default value is valid for its own kind.
    for entry in BrokerConfig::default().describe() {
        if let Some(value) = &entry.value {
            let key = find_broker_key(&entry.name).unwrap();
            key.kind.validate(&entry.name, value).unwrap();
        }
    }
}

#[test]
fn example_server_properties_loads_without_warnings() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/server.properties");
    let loaded = BrokerConfig::load(&path, &[]).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let c = loaded.config;
    assert_eq!(c.log_dirs, vec![PathBuf::from("./data")]);
    assert_eq!(c.listeners[0].port, 9092);
    assert_eq!(c.laminar_fsync, FsyncSetting::Always);
    assert_eq!(c.value_of("log.retention.hours").as_deref(), Some("168"));
}

const COMBINED: &str = "process.roles=broker,controller\nnode.id=2\n\
    controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095\n\
    listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9094\n";

#[test]
fn no_quorum_is_the_single_node_mode() {
    let c = BrokerConfig::default();
    assert_eq!(c.cluster, None);
    assert_eq!(c.broker_rack, None);
    assert!(!c.unclean_leader_election_enable);
}

#[test]
fn combined_mode_takes_the_controller_listener_out_of_the_client_ones() {
    let c = config(COMBINED, &["broker.rack=r1", "broker.session.timeout.ms=3000"]);
    let cluster = c.cluster.expect("combined mode");
    assert_eq!(cluster.roles, crate::config::ProcessRoles::Combined);
    assert_eq!(cluster.voters.len(), 3);
    assert_eq!(cluster.voters[&2], "127.0.0.1:9094");
    assert_eq!(
        cluster.controller_listener.to_string(),
        "CONTROLLER://127.0.0.1:9094"
    );
    assert_eq!(
        (cluster.session_timeout_ms, cluster.heartbeat_interval_ms),
        (3000, 2000)
    );
    assert_eq!(c.listeners.len(), 1);
    assert_eq!(c.listeners[0].name, "PLAINTEXT");
    assert_eq!(
        c.advertised_listeners[0].to_string(),
        "PLAINTEXT://127.0.0.1:9092"
    );
    assert_eq!(c.broker_rack.as_deref(), Some("r1"));
}

#[test]
fn a_broker_only_node_is_not_a_voter_and_names_its_controller_listeners_host() {
    let broker_only = ["process.roles=broker", "node.id=4"];
    let own_listener = "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://10.0.0.4:9093";
    let c = config(COMBINED, &[broker_only[0], broker_only[1], own_listener]);
    let cluster = c.cluster.expect("cluster mode");
    assert_eq!(cluster.roles, crate::config::ProcessRoles::Broker);
    assert_eq!(cluster.controller_listener.host, "10.0.0.4");
    let anywhere = "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://0.0.0.0:9093";
    let message = load(COMBINED, &[broker_only[0], broker_only[1], anywhere])
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("needs the host the voters reach it at"),
        "{message}"
    );
    // A combined node outside the voters starts as an observer, to be added later (KIP-853).
    let observer = config(COMBINED, &["node.id=7"]).cluster.expect("cluster mode");
    assert_eq!(observer.roles, crate::config::ProcessRoles::Combined);
    // KIP-853: a broker may name where to find the quorum instead of its voters.
    let found = [
        "controller.quorum.voters=",
        "controller.quorum.bootstrap.servers=h1:9093, h2:9093",
    ];
    let c = config(
        COMBINED,
        &[broker_only[0], broker_only[1], own_listener, found[0], found[1]],
    );
    assert_eq!(
        c.cluster.expect("cluster mode").bootstrap_servers,
        ["h1:9093", "h2:9093"]
    );
    let bad = load(
        COMBINED,
        &[
            broker_only[0],
            own_listener,
            found[0],
            "controller.quorum.bootstrap.servers=h1",
        ],
    );
    assert!(bad.unwrap_err().to_string().contains("h1 is not host:port"));
    let voter_id = load(COMBINED, &["process.roles=broker"]).unwrap_err().to_string();
    assert!(voter_id.contains("a voter's id cannot be its"), "{voter_id}");
}

#[test]
fn a_controller_only_node_has_its_controller_listener_only() {
    let only = [
        "process.roles=controller",
        "listeners=CONTROLLER://127.0.0.1:9094",
    ];
    let c = config(COMBINED, &only);
    let cluster = c.cluster.as_ref().expect("cluster mode");
    assert_eq!(cluster.roles, crate::config::ProcessRoles::Controller);
    assert!(c.listeners.is_empty() && !cluster.roles.runs_broker());
    assert!(
        c.peer_links.expect("links").replication.is_none(),
        "no replicas, no replication link"
    );
    let with_clients = load(COMBINED, &["process.roles=controller"])
        .unwrap_err()
        .to_string();
    assert!(
        with_clients.contains("controller listener only"),
        "{with_clients}"
    );
}

#[test]
fn quorum_misconfigurations_are_refused_with_the_reason() {
    let cases: [(&[&str], &str); 7] = [
        (
            &["listeners=PLAINTEXT://127.0.0.1:9092"],
            "controller.listener.names",
        ),
        (&["controller.quorum.voters="], "list the quorum's voters"),
        (&["controller.quorum.voters=1@h:1,1@h:2"], "appears twice"),
        (&["controller.quorum.voters=x@h:1"], "id@host:port"),
        (&["process.roles=broker"], "broker-only"),
        (&["process.roles=controller"], "controller-only"),
        (
            &["broker.heartbeat.interval.ms=9000"],
            "below broker.session.timeout.ms",
        ),
    ];
    for (overrides, reason) in cases {
        let message = load(COMBINED, overrides).unwrap_err().to_string();
        assert!(message.contains(reason), "{overrides:?}: {message}");
    }
    let no_roles = "controller.quorum.voters=1@h:9093\n";
    assert!(load(no_roles, &[])
        .unwrap_err()
        .to_string()
        .contains("process.roles"));
    let stray = "listeners=PLAINTEXT://h:1,CONTROLLER://h:2\n";
    assert!(load(stray, &[])
        .unwrap_err()
        .to_string()
        .contains("process.roles is unset"));
}

#[test]
fn dynamic_values_rank_per_key_over_static_ones_as_kafka_resolves_synonyms() {
    let loaded = load("log.retention.ms=100\n", &[]).unwrap().config;
    let map = super::dynamic::configs;
    // A dynamic log.retention.hours does not beat a static log.retention.ms (Kafka's order).
    let layers = DynamicLayers {
        default: map(&[("log.retention.hours", "1"), ("log.segment.bytes", "4096")]),
        broker: BTreeMap::new(),
    };
    let effective = loaded.with_dynamic(layers.clone()).unwrap();
    assert_eq!(effective.log_retention_ms, 100);
    assert_eq!(effective.value_of("log.segment.bytes").as_deref(), Some("4096"));
    let layers = DynamicLayers {
        broker: map(&[("log.retention.ms", "7")]),
        ..layers
    };
    let effective = loaded.with_dynamic(layers).unwrap();
    assert_eq!(effective.log_retention_ms, 7);
    let sources: Vec<(String, ConfigSource)> = effective
        .broker_synonyms(
            "log.retention.ms",
            &["log.retention.minutes", "log.retention.hours"],
        )
        .into_iter()
        .map(|s| (s.name, s.source))
        .collect();
    let expected = [
        ("log.retention.ms", ConfigSource::DynamicBroker),
        ("log.retention.ms", ConfigSource::StaticBroker),
        ("log.retention.hours", ConfigSource::DynamicDefaultBroker),
        ("log.retention.hours", ConfigSource::Default),
    ];
    assert_eq!(sources, expected.map(|(n, s)| (n.to_string(), s)));
    let entry = effective
        .describe()
        .into_iter()
        .find(|e| e.name == "log.retention.ms")
        .unwrap();
    assert_eq!(
        (entry.source, entry.read_only),
        (ConfigSource::DynamicBroker, false)
    );
    let defaults = effective.describe_dynamic_defaults();
    let names: Vec<&str> = defaults.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        ["log.segment.bytes", "log.retention.hours"],
        "in the registry's order"
    );
}
