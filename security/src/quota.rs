//! Kafka's client quotas as a model: which entity a quota is set on (`user`, `client-id`, both,
//! or an `ip`, each named or Kafka's `<default>`), the five quota keys, the rules an
//! alteration must follow (AlterClientQuotas), and which quota applies to a request of a given
//! user and client id, in Kafka's order of precedence. Enforcing them (rates, throttle times)
//! is the broker's; keeping them is the store's or the metadata log's.

use std::collections::BTreeMap;
use std::fmt;

/// The name of an entity part: one named, or Kafka's default (`<default>`; a null name on the
/// wire), which applies to every name that has no quota of its own.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntityName {
    Default,
    Named(String),
}

impl EntityName {
    /// From the wire: a null name is the default.
    pub fn from_wire(name: Option<&str>) -> EntityName {
        name.map_or(EntityName::Default, |name| EntityName::Named(name.to_string()))
    }

    /// To the wire: the default is a null name.
    pub fn to_wire(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Named(name) => Some(name),
        }
    }
}

/// Kafka's entity types, as the wire names them.
pub const ENTITY_USER: &str = "user";
pub const ENTITY_CLIENT_ID: &str = "client-id";
pub const ENTITY_IP: &str = "ip";

/// What a quota is set on: `user`, `client-id`, both, or an `ip` alone (Kafka's valid
/// combinations). Ordered, so the same entity always makes the same bytes in a store.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
    pub ip: Option<EntityName>,
}

impl QuotaEntity {
    /// The longest entity name (as ACL fields are bounded).
    pub const NAME_LEN_MAX: usize = 1024;

    /// The entity of `(entity type, name)` parts as AlterClientQuotas names them, checked:
    /// known types, each at most once, in one of Kafka's combinations, names of 1 to
    /// [`Self::NAME_LEN_MAX`] bytes.
    pub fn from_parts<'a>(
        parts: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<QuotaEntity, QuotaError> {
        let mut entity = QuotaEntity {
            user: None,
            client_id: None,
            ip: None,
        };
        for (entity_type, name) in parts {
            if name.is_some_and(|n| n.is_empty() || n.len() > Self::NAME_LEN_MAX) {
                return Err(QuotaError::new("an entity name is 1 to 1024 bytes"));
            }
            let slot = match entity_type {
                ENTITY_USER => &mut entity.user,
                ENTITY_CLIENT_ID => &mut entity.client_id,
                ENTITY_IP => &mut entity.ip,
                other => return Err(QuotaError(format!("unknown entity type {other:?}"))),
            };
            if slot.replace(EntityName::from_wire(name)).is_some() {
                return Err(QuotaError(format!("entity type {entity_type} named twice")));
            }
        }
        match (&entity.user, &entity.client_id, &entity.ip) {
            (None, None, None) => Err(QuotaError::new("an entity names at least one entity type")),
            (Some(_) | None, Some(_) | None, None) => Ok(entity),
            (None, None, Some(_)) => Ok(entity),
            _ => Err(QuotaError::new(
                "an ip entity cannot be combined with user or client-id",
            )),
        }
    }

    /// The entity's `(type, name)` parts, in Kafka's order (user, client-id, ip).
    pub fn parts(&self) -> Vec<(&'static str, Option<&str>)> {
        [
            (ENTITY_USER, &self.user),
            (ENTITY_CLIENT_ID, &self.client_id),
            (ENTITY_IP, &self.ip),
        ]
        .into_iter()
        .filter_map(|(kind, name)| name.as_ref().map(|name| (kind, name.to_wire())))
        .collect()
    }

    fn is_ip(&self) -> bool {
        self.ip.is_some()
    }
}

impl fmt::Display for QuotaEntity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .parts()
            .into_iter()
            .map(|(kind, name)| format!("{kind}={}", name.unwrap_or("<default>")))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// The quota keys, by Kafka's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QuotaKey {
    /// Bytes a second of produce requests.
    ProducerByteRate,
    /// Bytes a second of fetch responses.
    ConsumerByteRate,
    /// Percent of one request-handling thread's time, a second.
    RequestPercentage,
    /// Partitions created or deleted a second (KIP-599).
    ControllerMutationRate,
    /// New connections a second from one address (an `ip` entity's only key).
    ConnectionCreationRate,
}

impl QuotaKey {
    pub const ALL: [QuotaKey; 5] = [
        QuotaKey::ProducerByteRate,
        QuotaKey::ConsumerByteRate,
        QuotaKey::RequestPercentage,
        QuotaKey::ControllerMutationRate,
        QuotaKey::ConnectionCreationRate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            QuotaKey::ProducerByteRate => "producer_byte_rate",
            QuotaKey::ConsumerByteRate => "consumer_byte_rate",
            QuotaKey::RequestPercentage => "request_percentage",
            QuotaKey::ControllerMutationRate => "controller_mutation_rate",
            QuotaKey::ConnectionCreationRate => "connection_creation_rate",
        }
    }

    pub fn from_name(name: &str) -> Option<QuotaKey> {
        QuotaKey::ALL.into_iter().find(|key| key.name() == name)
    }

    /// Kafka types the byte rates LONG and the connection rate INT: whole numbers.
    fn is_whole(self) -> bool {
        matches!(
            self,
            QuotaKey::ProducerByteRate | QuotaKey::ConsumerByteRate | QuotaKey::ConnectionCreationRate
        )
    }

    /// Whether `value` may be this key's quota: finite, above zero, whole where Kafka's type
    /// is an integer.
    pub fn check_value(self, value: f64) -> Result<(), QuotaError> {
        if !value.is_finite() || value <= 0.0 {
            return Err(QuotaError(format!("{} must be above 0", self.name())));
        }
        if self.is_whole() && (value.fract() != 0.0 || value > i64::MAX as f64) {
            return Err(QuotaError(format!("{} must be a whole number", self.name())));
        }
        Ok(())
    }

    /// Whether this key may be set on `entity`: an ip's only key is its connection rate, which
    /// is an ip's only.
    pub fn check_entity(self, entity: &QuotaEntity) -> Result<(), QuotaError> {
        match (entity.is_ip(), self == QuotaKey::ConnectionCreationRate) {
            (true, true) | (false, false) => Ok(()),
            (true, false) => Err(QuotaError(format!("{} cannot be set on an ip", self.name()))),
            (false, true) => Err(QuotaError::new("connection_creation_rate is set on an ip only")),
        }
    }
}

/// Why an alteration is refused (Kafka answers INVALID_REQUEST with this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QuotaError(pub String);

impl QuotaError {
    fn new(reason: &str) -> QuotaError {
        QuotaError(reason.to_string())
    }
}

/// One entity's quota changes: each key set to a value, or removed (`None`).
pub type QuotaOps = Vec<(QuotaKey, Option<f64>)>;

/// Checks one entity's changes as Kafka's AlterClientQuotas does: known keys, each once, valid
/// for the entity, with valid values.
pub fn check_alteration<'a>(
    entity: &QuotaEntity,
    ops: impl IntoIterator<Item = (&'a str, Option<f64>)>,
) -> Result<QuotaOps, QuotaError> {
    let mut checked: QuotaOps = Vec::new();
    for (name, value) in ops {
        let key =
            QuotaKey::from_name(name).ok_or_else(|| QuotaError(format!("unknown quota key {name:?}")))?;
        if checked.iter().any(|(k, _)| *k == key) {
            return Err(QuotaError(format!("{name} named twice")));
        }
        key.check_entity(entity)?;
        if let Some(value) = value {
            key.check_value(value)?;
        }
        checked.push((key, value));
    }
    Ok(checked)
}

/// Which connections share one quota's rate: the parts of the entity that matched, with the
/// request's own names (a quota on `<default>` gives each user its own rate, as Kafka's).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SensorKey {
    pub user: Option<String>,
    pub client_id: Option<String>,
}

/// A quota that applies to a request: its bound, and whose rate it bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct AppliedQuota {
    pub bound: f64,
    pub sensor: SensorKey,
}

/// Every client quota set, by entity. Owned by whoever publishes it (a store or the metadata);
/// read by every shard through an immutable snapshot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientQuotas {
    entries: BTreeMap<QuotaEntity, BTreeMap<QuotaKey, f64>>,
}

impl ClientQuotas {
    /// The most entities with quotas (as the controller bounds a cluster's).
    pub const ENTITIES_MAX: usize = 10_000;

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn entries(&self) -> impl Iterator<Item = (&QuotaEntity, &BTreeMap<QuotaKey, f64>)> {
        self.entries.iter()
    }

    /// Sets or removes `key` of `entity` (an entity without keys is dropped).
    pub fn apply(&mut self, entity: &QuotaEntity, key: QuotaKey, value: Option<f64>) {
        match value {
            Some(value) => {
                self.entries.entry(entity.clone()).or_default().insert(key, value);
            }
            None => {
                if let Some(keys) = self.entries.get_mut(entity) {
                    keys.remove(&key);
                    if keys.is_empty() {
                        self.entries.remove(entity);
                    }
                }
            }
        }
    }

    /// The quota `key` of a request by `user` (its principal's name) with `client_id`, in
    /// Kafka's order of precedence: user and client id, user and default client, user alone,
    /// default user and client id, default user and default client, default user alone, client
    /// id alone, default client alone.
    pub fn applied(&self, key: QuotaKey, user: &str, client_id: &str) -> Option<AppliedQuota> {
        if self.entries.is_empty() {
            return None;
        }
        let named = |name: &str| Some(EntityName::Named(name.to_string()));
        let default = || Some(EntityName::Default);
        let both = SensorKey {
            user: Some(user.to_string()),
            client_id: Some(client_id.to_string()),
        };
        let user_only = SensorKey {
            user: Some(user.to_string()),
            client_id: None,
        };
        let client_only = SensorKey {
            user: None,
            client_id: Some(client_id.to_string()),
        };
        let candidates = [
            (named(user), named(client_id), &both),
            (named(user), default(), &both),
            (named(user), None, &user_only),
            (default(), named(client_id), &both),
            (default(), default(), &both),
            (default(), None, &user_only),
            (None, named(client_id), &client_only),
            (None, default(), &client_only),
        ];
        let applied = candidates.into_iter().find_map(|(user, client_id, sensor)| {
            let entity = QuotaEntity {
                user,
                client_id,
                ip: None,
            };
            let bound = *self.entries.get(&entity)?.get(&key)?;
            Some(AppliedQuota {
                bound,
                sensor: sensor.clone(),
            })
        });
        applied
    }

    /// The `connection_creation_rate` of connections from `ip`: its own, else the default ip's.
    pub fn ip_quota(&self, ip: &str) -> Option<f64> {
        if self.entries.is_empty() {
            return None;
        }
        let key = QuotaKey::ConnectionCreationRate;
        [EntityName::Named(ip.to_string()), EntityName::Default]
            .into_iter()
            .find_map(|name| {
                let entity = QuotaEntity {
                    user: None,
                    client_id: None,
                    ip: Some(name),
                };
                self.entries.get(&entity)?.get(&key).copied()
            })
    }

    /// The entities DescribeClientQuotas' filter matches, with their quotas.
    pub fn matching<'a>(
        &'a self,
        filter: &'a [EntityFilter],
        strict: bool,
    ) -> impl Iterator<Item = (&'a QuotaEntity, &'a BTreeMap<QuotaKey, f64>)> + 'a {
        self.entries
            .iter()
            .filter(move |(entity, _)| filter_matches(filter, strict, entity))
    }
}

/// One component of DescribeClientQuotas' filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntityFilter {
    pub entity_type: String,
    pub matched: NameMatch,
}

/// How a filter component matches an entity's name of its type (Kafka's match types).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameMatch {
    /// Match type 0: this name.
    Exact(String),
    /// Match type 1: the default.
    Default,
    /// Match type 2: any name, the entity having this type.
    Any,
}

fn filter_matches(filter: &[EntityFilter], strict: bool, entity: &QuotaEntity) -> bool {
    let parts = entity.parts();
    let each = filter.iter().all(|component| {
        let name = parts
            .iter()
            .find(|(kind, _)| *kind == component.entity_type)
            .map(|(_, name)| *name);
        match (&component.matched, name) {
            (_, None) => false,
            (NameMatch::Any, Some(_)) => true,
            (NameMatch::Default, Some(name)) => name.is_none(),
            (NameMatch::Exact(wanted), Some(name)) => name == Some(wanted.as_str()),
        }
    });
    // Strict: the entity has no type the filter does not name.
    each && (!strict || parts.len() == filter.len())
}

#[cfg(test)]
#[path = "quota_tests.rs"]
mod tests;
