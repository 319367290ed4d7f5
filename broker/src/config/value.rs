//! Value kinds of the config registries: how a textual value is validated and parsed, and the
//! typed values that some keys parse into (listeners, fsync policy, timestamp type...).

use std::fmt;
use std::net::SocketAddr;

use super::ConfigError;

/// How one config key's text is validated. Every registry entry names one kind; the typed
/// getters in the broker and topic modules parse through the same kind, so a value accepted at
/// load time always parses later.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// An integer in `min..=max`.
    Int {
        min: i64,
        max: i64,
    },
    /// `-1` (unlimited) or an integer in `min..=max`.
    IntOrUnlimited {
        min: i64,
        max: i64,
    },
    Bool,
    /// A floating-point number in `0.0..=1.0`.
    Ratio,
    /// One of the listed words (case-sensitive, as in Kafka).
    Choice(&'static [&'static str]),
    /// A non-empty comma-separated list of the listed words (case-insensitive, as Kafka does for
    /// `cleanup.policy`).
    ChoiceList(&'static [&'static str]),
    /// Comma-separated `NAME://host:port`: PLAINTEXT, plus the controller's listener (a name in
    /// `controller.listener.names`, checked when the whole config is built).
    Listeners,
    /// Like `Listeners`, and the host may not be the wildcard address.
    AdvertisedListeners,
    /// A non-empty comma-separated list of directories.
    Paths,
    /// One non-empty file path.
    Path,
    /// `always`, `never` or `interval:<ms>`.
    Fsync,
    /// `host:port` with a numeric host.
    SocketAddr,
    /// Empty, `*`, or a comma-separated list of `partition:broker`.
    ThrottledReplicas,
    /// A boolean that must be false: the feature it would enable does not exist in Laminar.
    FalseOnly,
    /// `controller.quorum.voters`: empty, or comma-separated `id@host:port` with distinct ids.
    QuorumVoters,
    /// A non-empty comma-separated list of listener names (`[A-Za-z0-9_]+`).
    ListenerNames,
    /// Any non-empty text (`broker.rack`).
    Text,
    /// Non-empty text that is a secret (a private key, a password): DescribeConfigs marks it
    /// sensitive and never shows it.
    Password,
}

/// The Kafka `ConfigType` reported by DescribeConfigs v3+ (`config_type` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
    Password = 9,
}

impl Kind {
    /// What a valid value looks like, for error messages.
    pub fn expected(&self) -> String {
        match *self {
            Kind::Int { min, max } => describe_range(min, max),
            Kind::IntOrUnlimited { min, max } => {
                format!("-1 (unlimited) or {}", describe_range(min, max))
            }
            Kind::Bool => "true or false".to_string(),
            Kind::Ratio => "a number between 0 and 1".to_string(),
            Kind::Choice(words) => format!("one of {}", words.join(", ")),
            Kind::ChoiceList(words) => format!("a comma-separated list of {}", words.join(", ")),
            Kind::Listeners => "a comma-separated list of PLAINTEXT://host:port".to_string(),
            Kind::AdvertisedListeners => {
                "a comma-separated list of PLAINTEXT://host:port with a routable host".to_string()
            }
            Kind::Paths => "a non-empty comma-separated list of directories".to_string(),
            Kind::Path => "a file path".to_string(),
            Kind::Fsync => "always, never or interval:<milliseconds>".to_string(),
            Kind::SocketAddr => "an address ip:port".to_string(),
            Kind::ThrottledReplicas => "empty, * or a comma-separated list of partition:broker".to_string(),
            Kind::FalseOnly => "false (Laminar does not implement this feature)".to_string(),
            Kind::QuorumVoters => "a comma-separated list of id@host:port".to_string(),
            Kind::ListenerNames => "a comma-separated list of listener names".to_string(),
            Kind::Text => "a non-empty string".to_string(),
            Kind::Password => "a non-empty secret".to_string(),
        }
    }

    /// The Kafka type name this kind reports as, given that `Int` ranges wider than 32 bits are
    /// Kafka `LONG`s.
    pub fn config_type(&self) -> ConfigType {
        match *self {
            Kind::Int { min, max } | Kind::IntOrUnlimited { min, max } => {
                if min >= i64::from(i32::MIN) && max <= i64::from(i32::MAX) {
                    ConfigType::Int
                } else {
                    ConfigType::Long
                }
            }
            Kind::Bool | Kind::FalseOnly => ConfigType::Boolean,
            Kind::Ratio => ConfigType::Double,
            Kind::ChoiceList(_) | Kind::Listeners | Kind::AdvertisedListeners | Kind::Paths => {
                ConfigType::List
            }
            Kind::ThrottledReplicas | Kind::QuorumVoters | Kind::ListenerNames => ConfigType::List,
            Kind::Choice(_) | Kind::Fsync | Kind::SocketAddr | Kind::Path | Kind::Text => ConfigType::String,
            Kind::Password => ConfigType::Password,
        }
    }

    /// Checks `value` for key `key`; the error names both.
    pub fn validate(&self, key: &str, value: &str) -> Result<(), ConfigError> {
        let ok = match *self {
            Kind::Int { .. } | Kind::IntOrUnlimited { .. } => self.parse_int(key, value).is_ok(),
            Kind::Bool => parse_bool(value).is_some(),
            Kind::FalseOnly => parse_bool(value) == Some(false),
            Kind::Ratio => value
                .trim()
                .parse::<f64>()
                .is_ok_and(|r| (0.0..=1.0).contains(&r)),
            Kind::Choice(words) => words.contains(&value.trim()),
            Kind::ChoiceList(words) => {
                let items = split_list(value);
                !items.is_empty()
                    && items
                        .iter()
                        .all(|item| words.iter().any(|w| w.eq_ignore_ascii_case(item)))
            }
            Kind::Listeners => return parse_listener_list(key, value, false).map(drop),
            Kind::AdvertisedListeners => return parse_listeners(key, value, true).map(drop),
            Kind::Paths => return parse_paths(key, value).map(drop),
            Kind::Path => !value.trim().is_empty(),
            Kind::Fsync => FsyncSetting::parse(value).is_some(),
            Kind::SocketAddr => value.trim().parse::<SocketAddr>().is_ok(),
            Kind::ThrottledReplicas => valid_throttled_replicas(value),
            Kind::QuorumVoters => return parse_quorum_voters(key, value).map(drop),
            Kind::ListenerNames => {
                let names = split_list(value);
                !names.is_empty() && names.iter().all(|n| valid_listener_name(n))
            }
            Kind::Text | Kind::Password => !value.trim().is_empty(),
        };
        if ok {
            Ok(())
        } else {
            Err(self.invalid(key, value))
        }
    }

    /// Parses an integer kind; the error names the key, the value and the allowed range.
    pub fn parse_int(&self, key: &str, value: &str) -> Result<i64, ConfigError> {
        let (min, max, unlimited_allowed) = match *self {
            Kind::Int { min, max } => (min, max, false),
            Kind::IntOrUnlimited { min, max } => (min, max, true),
            _ => panic!("parse_int on non-integer kind {self:?} for {key}"),
        };
        match value.trim().parse::<i64>() {
            Ok(-1) if unlimited_allowed => Ok(-1),
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(self.invalid(key, value)),
        }
    }

    pub fn invalid(&self, key: &str, value: &str) -> ConfigError {
        ConfigError::InvalidValue {
            key: key.to_string(),
            value: value.to_string(),
            expected: self.expected(),
        }
    }
}

fn describe_range(min: i64, max: i64) -> String {
    match (min, max) {
        (1, i64::MAX) => "a positive integer".to_string(),
        (0, i64::MAX) => "a non-negative integer".to_string(),
        (min, i64::MAX) => format!("an integer >= {min}"),
        (min, max) => format!("an integer between {min} and {max}"),
    }
}

pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// Splits a comma-separated list, trimming items and dropping empty ones (Kafka does the same).
pub fn split_list(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

fn valid_throttled_replicas(value: &str) -> bool {
    let value = value.trim();
    value.is_empty()
        || value == "*"
        || split_list(value).iter().all(|item| {
            item.split_once(':').is_some_and(|(partition, broker)| {
                partition.trim().parse::<u32>().is_ok() && broker.trim().parse::<u32>().is_ok()
            })
        })
}

pub fn parse_paths(key: &str, value: &str) -> Result<Vec<std::path::PathBuf>, ConfigError> {
    let items = split_list(value);
    let mut seen = std::collections::BTreeSet::new();
    if items.is_empty() || !items.iter().all(|item| seen.insert(*item)) {
        return Err(Kind::Paths.invalid(key, value));
    }
    Ok(items.into_iter().map(std::path::PathBuf::from).collect())
}

/// One listener: the listener name (which is also its security protocol, since Laminar has no
/// `listener.security.protocol.map`), the host (empty = every interface) and the port
/// (0 = any free port, useful in tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

impl Listener {
    /// Whether the host means "every interface" and so cannot be advertised to clients.
    pub fn is_wildcard_host(&self) -> bool {
        matches!(self.host.as_str(), "" | "0.0.0.0" | "::" | "[::]")
    }
}

impl fmt::Display for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}:{}", self.name, self.host, self.port)
    }
}

/// Parses `NAME://host:port[,...]`; names must be unique (their security protocols are
/// checked when the whole config is built: `listener_security`).
pub fn parse_listeners(key: &str, value: &str, advertised: bool) -> Result<Vec<Listener>, ConfigError> {
    parse_listener_list(key, value, advertised)
}

/// Parses `NAME://host:port[,...]` with any listener name (upper-cased); names must be unique.
pub fn parse_listener_list(key: &str, value: &str, advertised: bool) -> Result<Vec<Listener>, ConfigError> {
    let kind = if advertised {
        Kind::AdvertisedListeners
    } else {
        Kind::Listeners
    };
    let unsupported = |reason: String| ConfigError::Rejected {
        key: key.to_string(),
        value: value.to_string(),
        reason,
    };
    let items = split_list(value);
    if items.is_empty() {
        return Err(kind.invalid(key, value));
    }
    let mut listeners: Vec<Listener> = Vec::new();
    for item in items {
        let (name, address) = item.split_once("://").ok_or_else(|| kind.invalid(key, value))?;
        let (host, port) = split_host_port(address).ok_or_else(|| kind.invalid(key, value))?;
        if !valid_listener_name(name) {
            return Err(kind.invalid(key, value));
        }
        let name = name.to_ascii_uppercase();
        if listeners.iter().any(|l| l.name == name) {
            return Err(unsupported(format!("listener name {name} appears twice")));
        }
        let listener = Listener { name, host, port };
        if advertised && listener.is_wildcard_host() {
            return Err(unsupported(format!(
                "cannot advertise the wildcard address in {listener}; name a host clients can reach"
            )));
        }
        listeners.push(listener);
    }
    Ok(listeners)
}

/// `host:port` with a numeric port; the host may be empty (every interface) or a bracketed
/// IPv6 address, and holds no `/`, space or bare `:`.
fn split_host_port(address: &str) -> Option<(String, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let bracketed_ipv6 = host.starts_with('[') && host.ends_with(']');
    if host.contains(['/', ' ']) || (host.contains(':') && !bracketed_ipv6) {
        return None;
    }
    Some((host.to_string(), port))
}

fn valid_listener_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses `controller.quorum.voters`: empty, or `id@host:port,...` with distinct non-negative
/// ids (KRaft's static quorum). The map's values are `host:port`.
pub fn parse_quorum_voters(
    key: &str,
    value: &str,
) -> Result<std::collections::BTreeMap<i32, String>, ConfigError> {
    let invalid = || Kind::QuorumVoters.invalid(key, value);
    let mut voters = std::collections::BTreeMap::new();
    for item in split_list(value) {
        let (id, address) = item.split_once('@').ok_or_else(invalid)?;
        let id: i32 = id.trim().parse().ok().filter(|id| *id >= 0).ok_or_else(invalid)?;
        let (host, port) = split_host_port(address.trim()).ok_or_else(invalid)?;
        if host.is_empty() || port == 0 {
            return Err(invalid());
        }
        if voters.insert(id, format!("{host}:{port}")).is_some() {
            return Err(ConfigError::Rejected {
                key: key.to_string(),
                value: value.to_string(),
                reason: format!("voter id {id} appears twice"),
            });
        }
    }
    Ok(voters)
}

/// When the broker calls fdatasync (`laminar.fsync`). `Always` syncs before acknowledging
/// acks=all (group commit: one sync covers every batch appended since the previous one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncSetting {
    Always,
    Never,
    /// Sync every this many milliseconds, and not before acknowledging.
    IntervalMs(u64),
}

impl FsyncSetting {
    pub fn parse(value: &str) -> Option<FsyncSetting> {
        match value.trim() {
            "always" => Some(FsyncSetting::Always),
            "never" => Some(FsyncSetting::Never),
            other => other
                .strip_prefix("interval:")
                .and_then(|ms| ms.trim().parse::<u64>().ok())
                .filter(|&ms| ms > 0)
                .map(FsyncSetting::IntervalMs),
        }
    }
}

impl fmt::Display for FsyncSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsyncSetting::Always => f.write_str("always"),
            FsyncSetting::Never => f.write_str("never"),
            FsyncSetting::IntervalMs(ms) => write!(f, "interval:{ms}"),
        }
    }
}

/// `laminar.log.format`: how the broker writes its log lines to stderr.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// One human-readable line per event (coloured only on a terminal).
    #[default]
    Text,
    /// One JSON object per line, for log shippers (never coloured).
    Json,
}

impl LogFormat {
    pub const NAMES: &'static [&'static str] = &["text", "json"];

    pub fn parse(value: &str) -> Option<LogFormat> {
        match value.trim() {
            "text" => Some(LogFormat::Text),
            "json" => Some(LogFormat::Json),
            _ => None,
        }
    }
}

/// Which timestamp a stored batch carries (`message.timestamp.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    pub const NAMES: &'static [&'static str] = &["CreateTime", "LogAppendTime"];

    pub fn parse(value: &str) -> Option<TimestampType> {
        match value.trim() {
            "CreateTime" => Some(TimestampType::CreateTime),
            "LogAppendTime" => Some(TimestampType::LogAppendTime),
            _ => None,
        }
    }
}

/// `compression.type` of a topic (or the broker default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionType {
    /// Keep whatever the producer sent.
    Producer,
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl CompressionType {
    pub const NAMES: &'static [&'static str] = &["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"];

    pub fn parse(value: &str) -> Option<CompressionType> {
        match value.trim() {
            "producer" => Some(CompressionType::Producer),
            "uncompressed" => Some(CompressionType::Uncompressed),
            "gzip" => Some(CompressionType::Gzip),
            "snappy" => Some(CompressionType::Snappy),
            "lz4" => Some(CompressionType::Lz4),
            "zstd" => Some(CompressionType::Zstd),
            _ => None,
        }
    }
}

/// `cleanup.policy`: delete old segments, compact by key, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    pub delete: bool,
    pub compact: bool,
}

impl CleanupPolicy {
    pub const NAMES: &'static [&'static str] = &["delete", "compact"];

    pub fn parse(value: &str) -> Option<CleanupPolicy> {
        let items = split_list(value);
        let has = |word: &str| items.iter().any(|i| i.eq_ignore_ascii_case(word));
        let policy = CleanupPolicy {
            delete: has("delete"),
            compact: has("compact"),
        };
        (policy.delete || policy.compact).then_some(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_ranges_and_messages() {
        let positive = Kind::Int {
            min: 1,
            max: i64::MAX,
        };
        assert_eq!(positive.parse_int("k", " 42 ").unwrap(), 42);
        let err = positive.parse_int("log.segment.bytes", "abc").unwrap_err();
        assert_eq!(
            err.to_string(),
            "config error: log.segment.bytes: expected a positive integer, got \"abc\""
        );
        assert!(positive.parse_int("k", "0").is_err());
        let unlimited = Kind::IntOrUnlimited {
            min: 1,
            max: i64::MAX,
        };
        assert_eq!(unlimited.parse_int("k", "-1").unwrap(), -1);
        assert!(unlimited.parse_int("k", "0").is_err());
        assert!(unlimited.parse_int("k", "-2").is_err());
        assert_eq!(positive.config_type(), ConfigType::Long);
        assert_eq!(Kind::Int { min: 0, max: 100 }.config_type(), ConfigType::Int);
    }

    #[test]
    fn listeners_parse_and_reject() {
        let l = parse_listeners("listeners", "PLAINTEXT://0.0.0.0:9092", false).unwrap();
        assert_eq!(l[0].host, "0.0.0.0");
        assert_eq!(l[0].port, 9092);
        assert!(l[0].is_wildcard_host());
        let l = parse_listeners("listeners", "plaintext://[::1]:19092", false).unwrap();
        assert_eq!(l[0].to_string(), "PLAINTEXT://[::1]:19092");
        for bad in [
            "",
            "0.0.0.0:9092",
            "PLAINTEXT://host",
            "PLAINTEXT://h:99999",
            "PLAINTEXT://::1:9",
        ] {
            let err = parse_listeners("listeners", bad, false).unwrap_err();
            assert!(err.to_string().contains("listeners"), "{err}");
        }
        let err = parse_listeners("listeners", "PLAINTEXT//h:9093", false).unwrap_err();
        assert!(err.to_string().contains("PLAINTEXT//h:9093"), "{err}");
        let err = parse_listeners("listeners", "PLAINTEXT://a:1,PLAINTEXT://b:2", false).unwrap_err();
        assert!(err.to_string().contains("twice"), "{err}");
        let err = parse_listeners("advertised.listeners", "PLAINTEXT://0.0.0.0:1", true).unwrap_err();
        assert!(err.to_string().starts_with("config error: advertised.listeners"));
    }

    #[test]
    fn fsync_policy_words() {
        assert_eq!(FsyncSetting::parse("always"), Some(FsyncSetting::Always));
        assert_eq!(FsyncSetting::parse("never"), Some(FsyncSetting::Never));
        assert_eq!(
            FsyncSetting::parse("interval:250"),
            Some(FsyncSetting::IntervalMs(250))
        );
        for bad in ["interval:0", "interval:", "sometimes", "Always"] {
            assert_eq!(FsyncSetting::parse(bad), None, "{bad}");
        }
        assert_eq!(FsyncSetting::IntervalMs(5).to_string(), "interval:5");
    }

    #[test]
    fn cleanup_policy_and_choices() {
        assert_eq!(
            CleanupPolicy::parse("compact, Delete"),
            Some(CleanupPolicy {
                delete: true,
                compact: true
            })
        );
        assert_eq!(CleanupPolicy::parse(""), None);
        let kind = Kind::ChoiceList(CleanupPolicy::NAMES);
        assert!(kind.validate("cleanup.policy", "delete,compact").is_ok());
        assert!(kind.validate("cleanup.policy", "delete,shred").is_err());
        assert!(Kind::ThrottledReplicas.validate("t", "0:1, 1:2").is_ok());
        assert!(Kind::ThrottledReplicas.validate("t", "*").is_ok());
        assert!(Kind::ThrottledReplicas.validate("t", "0-1").is_err());
        assert!(Kind::FalseOnly.validate("remote.storage.enable", "true").is_err());
        assert!(Kind::Ratio.validate("r", "0.5").is_ok());
        assert!(Kind::Ratio.validate("r", "1.5").is_err());
    }
}
