//! Client quotas (docs/ARCHITECTURE.md, "Security"; decision 0036): what each user and client
//! id may produce, fetch, spend of the broker's request time and mutate through the controller,
//! a second. The quotas themselves are a single node's `client-quotas` file or a cluster's
//! metadata log; this module publishes them to every shard and measures each client against
//! them, as Kafka's quota managers do: a request past its quota is answered at once with
//! `throttle_time_ms`, and its connection reads nothing more for that long (the
//! connection's mute, `ConnectionState::throttle`).
//!
//! Rates are per broker, whichever shard a connection is on: one table of rates behind a lock,
//! taken only when some quota is set (the common case, no quota, reads one pointer).

mod rate;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use kafka_protocol::error::ResponseError;
use laminar_controller::api::ClientQuotaAlteration;
use laminar_controller::QuotaEntityPart;
use laminar_security::quota::{QuotaOps, SensorKey};
use laminar_security::{ClientQuotas, QuotaEntity, QuotaKey, QuotaStore};

use crate::quorum::ClusterLink;

pub use rate::Windows;
use rate::{SampledRate, TokenBucket};

/// The most rates measured at once (one per quota key and sharing client): past it, rates idle
/// for the windows' span are dropped, and a client that still finds no room is not measured
/// (never refused for the table's size).
const RATES_MAX: usize = 100_000;

/// Why a change to the quotas was not made: Kafka's code and message.
pub type QuotaChangeRefusal = (ResponseError, String);

/// The broker's client quotas and every client's rates. Shared by every shard.
pub struct ClientQuotaManager {
    source: QuotaSource,
    current: ArcSwap<ClientQuotas>,
    windows: Windows,
    rates: Mutex<Rates>,
}

/// Where the quotas are kept.
enum QuotaSource {
    /// A single node: its `client-quotas` file; changes serialised by the lock.
    Store(Mutex<QuotaStore>),
    /// A cluster: the metadata this broker last applied (`ClientQuotaRecord`s). As the
    /// authorizer's ACLs: `built_from` is the metadata's map `current` was built from, rebuilt
    /// under the lock once per change, never back to an older image's.
    Metadata {
        link: Arc<ClusterLink>,
        built_from: ArcSwap<MetadataQuotas>,
        rebuilding: Mutex<u64>,
    },
}

/// The quotas as the metadata holds them.
type MetadataQuotas =
    BTreeMap<laminar_controller::QuotaEntity, BTreeMap<String, laminar_controller::QuotaValue>>;

#[derive(Default)]
struct Rates {
    sampled: HashMap<(QuotaKey, SensorKey), SampledRate>,
    buckets: HashMap<SensorKey, TokenBucket>,
    /// New connections per client address (`connection_creation_rate` on `ip` entities).
    connections: HashMap<std::net::IpAddr, TokenBucket>,
}

/// Who a request is, for its quotas: its principal's name and its client id.
#[derive(Debug, Clone, Copy)]
pub struct Client<'a> {
    pub user: &'a str,
    pub client_id: &'a str,
}

impl ClientQuotaManager {
    /// A single node's quotas, from `log_dir`.
    pub fn open(log_dir: &std::path::Path, windows: Windows) -> anyhow::Result<ClientQuotaManager> {
        let store =
            QuotaStore::open(log_dir).map_err(|e| anyhow::anyhow!("cannot load the client quotas: {e}"))?;
        Ok(ClientQuotaManager {
            current: ArcSwap::from_pointee(store.quotas().clone()),
            source: QuotaSource::Store(Mutex::new(store)),
            windows,
            rates: Mutex::default(),
        })
    }

    /// A cluster node's quotas, those of the metadata `link` applies.
    pub fn of_cluster(link: Arc<ClusterLink>, windows: Windows) -> ClientQuotaManager {
        let manager = ClientQuotaManager {
            current: ArcSwap::from_pointee(ClientQuotas::default()),
            source: QuotaSource::Metadata {
                link,
                built_from: ArcSwap::from_pointee(BTreeMap::new()),
                rebuilding: Mutex::new(0),
            },
            windows,
            rates: Mutex::default(),
        };
        manager.refresh();
        manager
    }

    /// The quotas now.
    pub fn quotas(&self) -> Arc<ClientQuotas> {
        self.refresh();
        self.current.load_full()
    }

    /// In a cluster, rebuilds the quotas if the applied metadata holds others (a pointer
    /// comparison on the common path).
    fn refresh(&self) {
        let QuotaSource::Metadata {
            link,
            built_from,
            rebuilding,
        } = &self.source
        else {
            return;
        };
        let changed =
            link.peek_image(|image| !Arc::ptr_eq(&image.metadata.client_quotas, &built_from.load()));
        if !changed {
            return;
        }
        let image = link.image();
        let newest = &image.metadata.client_quotas;
        let mut built_version = lock(rebuilding);
        if image.version >= *built_version && !Arc::ptr_eq(newest, &built_from.load()) {
            self.current.store(Arc::new(quotas_of(newest)));
            built_from.store(newest.clone());
            *built_version = image.version;
        }
    }

    /// Records `amount` (bytes; for request time, percent-seconds) against `client`'s `key`
    /// quota, if it has one; answers how long it is throttled for.
    pub fn record(&self, key: QuotaKey, client: Client<'_>, amount: f64) -> Duration {
        self.measure(key, client, Some(amount))
    }

    /// How long `client` is throttled for its `key` quota as its rate stands.
    pub fn wait(&self, key: QuotaKey, client: Client<'_>) -> Duration {
        self.measure(key, client, None)
    }

    fn measure(&self, key: QuotaKey, client: Client<'_>, amount: Option<f64>) -> Duration {
        let Some(applied) = self.current_quotas().applied(key, client.user, client.client_id) else {
            return Duration::ZERO;
        };
        let now = Instant::now();
        let mut rates = lock(&self.rates);
        let Some(rate) = rates.sampled_for(key, applied.sensor, (self.windows, now)) else {
            return Duration::ZERO;
        };
        if let Some(amount) = amount {
            rate.record(self.windows, now, amount);
        }
        let (measured, span) = rate.measure(self.windows, now);
        rate::throttle_time(measured, applied.bound, span, self.windows)
    }

    /// Whether any quota is set at all.
    pub fn any_set(&self) -> bool {
        !self.current_quotas().is_empty()
    }

    /// The quotas to measure a request against (refreshed from a cluster's metadata).
    fn current_quotas(&self) -> arc_swap::Guard<Arc<ClientQuotas>> {
        self.refresh();
        self.current.load()
    }

    /// Drops the rates that remember nothing any more, so that their memory comes back once
    /// their clients go away.
    pub fn forget_idle(&self) {
        let now = Instant::now();
        let mut rates = lock(&self.rates);
        let windows = self.windows;
        rates.sampled.retain(|_, rate| !rate.is_idle(windows, now));
        rates.buckets.retain(|_, bucket| !bucket.is_idle(windows, now));
        rates
            .connections
            .retain(|_, bucket| !bucket.is_idle(windows, now));
    }

    /// The most a fetch of `client` may answer at once: its consumer byte rate for one window
    /// (Kafka bounds a throttled consumer's fetches alike), or `None` without a quota.
    pub fn fetch_bytes_max(&self, client: Client<'_>) -> Option<usize> {
        let applied =
            self.current_quotas()
                .applied(QuotaKey::ConsumerByteRate, client.user, client.client_id)?;
        Some((applied.bound * self.windows.size.as_secs_f64()).max(1.0) as usize)
    }

    /// Controller mutations (KIP-599): how long `client` must wait before mutating again
    /// (zero: it may now).
    pub fn mutation_wait(&self, client: Client<'_>) -> Duration {
        self.mutations(client, 0.0)
    }

    /// Counts `partitions` created or deleted by `client`.
    pub fn take_mutations(&self, client: Client<'_>, partitions: u32) {
        self.mutations(client, f64::from(partitions));
    }

    fn mutations(&self, client: Client<'_>, partitions: f64) -> Duration {
        let key = QuotaKey::ControllerMutationRate;
        let Some(applied) = self.current_quotas().applied(key, client.user, client.client_id) else {
            return Duration::ZERO;
        };
        let now = Instant::now();
        let mut rates = lock(&self.rates);
        let Some(bucket) = rates.bucket_for(applied.sensor, (self.windows, now)) else {
            return Duration::ZERO;
        };
        if partitions > 0.0 {
            bucket.take(applied.bound, self.windows, now, partitions);
        }
        bucket.wait(applied.bound, self.windows, now)
    }

    /// Whether a connection just accepted from `ip` is within its address's
    /// `connection_creation_rate` (counted if it is). One past it is closed at once.
    pub fn admits_connection_from(&self, ip: std::net::IpAddr) -> bool {
        let Some(bound) = self.current_quotas().ip_quota(&ip.to_canonical().to_string()) else {
            return true;
        };
        let now = Instant::now();
        let mut rates = lock(&self.rates);
        if !rates.connections.contains_key(&ip) && !rates.make_room((self.windows, now)) {
            return true;
        }
        let bucket = rates
            .connections
            .entry(ip)
            .or_insert_with(|| TokenBucket::new(now));
        if !bucket.wait(bound, self.windows, now).is_zero() {
            return false;
        }
        bucket.take(bound, self.windows, now, 1.0);
        // A bucket that went below zero admits nothing until it refills; one at zero or above
        // admitted this connection within the rate.
        true
    }

    /// Applies each entity's checked changes; one result per entity. A single node publishes
    /// the new quotas at once; a cluster's brokers each as they apply the controller's records.
    pub async fn alter(
        &self,
        alterations: &[(QuotaEntity, QuotaOps)],
    ) -> Vec<Result<(), QuotaChangeRefusal>> {
        match &self.source {
            QuotaSource::Store(store) => {
                let mut store = lock(store);
                let stored = store.alter(alterations).map_err(|e| {
                    tracing::error!(error = %e, "client quotas not changed");
                    (ResponseError::UnknownServerError, e.to_string())
                });
                self.current.store(Arc::new(store.quotas().clone()));
                vec![stored; alterations.len()]
            }
            QuotaSource::Metadata { link, .. } => {
                let entries = alterations.iter().map(alteration_of).collect();
                match link.handle.alter_client_quotas(entries).await {
                    Ok(results) => results
                        .into_iter()
                        .map(|r| r.map_err(|refusal| (refusal.response_error(), refusal.to_string())))
                        .collect(),
                    Err(refusal) => {
                        vec![Err((refusal.response_error(), refusal.to_string())); alterations.len()]
                    }
                }
            }
        }
    }
}

/// A checked change as the controller takes it.
fn alteration_of((entity, ops): &(QuotaEntity, QuotaOps)) -> ClientQuotaAlteration {
    let entity = entity.parts().into_iter().map(|(kind, name)| QuotaEntityPart {
        entity_type: kind.to_string(),
        entity_name: name.map(str::to_string),
    });
    ClientQuotaAlteration {
        entity: entity.collect(),
        ops: ops
            .iter()
            .map(|(key, value)| (key.name().to_string(), *value))
            .collect(),
    }
}

/// The metadata's quotas in the model's terms; an entity or key the model does not take is
/// skipped (the controller checked them when it decided), never trusted.
fn quotas_of(metadata: &MetadataQuotas) -> ClientQuotas {
    let mut quotas = ClientQuotas::default();
    for (entity, keys) in metadata {
        let parts = entity
            .parts()
            .iter()
            .map(|p| (p.entity_type.as_str(), p.entity_name.as_deref()));
        let Ok(entity) = QuotaEntity::from_parts(parts) else {
            tracing::warn!(%entity, "a client quota's entity in the metadata is not valid; skipped");
            continue;
        };
        for (key, value) in keys {
            match QuotaKey::from_name(key).filter(|k| k.check_value(value.0).is_ok()) {
                Some(key) => quotas.apply(&entity, key, Some(value.0)),
                None => tracing::warn!(%entity, key, "a client quota in the metadata is not valid; skipped"),
            }
        }
    }
    quotas
}

impl Rates {
    fn sampled_for(
        &mut self,
        key: QuotaKey,
        sensor: SensorKey,
        at: (Windows, Instant),
    ) -> Option<&mut SampledRate> {
        if !self.sampled.contains_key(&(key, sensor.clone())) && !self.make_room(at) {
            return None;
        }
        Some(self.sampled.entry((key, sensor)).or_insert_with(SampledRate::new))
    }

    fn bucket_for(&mut self, sensor: SensorKey, at: (Windows, Instant)) -> Option<&mut TokenBucket> {
        if !self.buckets.contains_key(&sensor) && !self.make_room(at) {
            return None;
        }
        Some(
            self.buckets
                .entry(sensor)
                .or_insert_with(|| TokenBucket::new(at.1)),
        )
    }

    /// Whether one more rate fits, dropping the idle ones when the table is full.
    fn make_room(&mut self, (windows, now): (Windows, Instant)) -> bool {
        let len = |rates: &Rates| rates.sampled.len() + rates.buckets.len() + rates.connections.len();
        if len(self) < RATES_MAX {
            return true;
        }
        self.sampled.retain(|_, rate| !rate.is_idle(windows, now));
        self.buckets.retain(|_, bucket| !bucket.is_idle(windows, now));
        self.connections.retain(|_, bucket| !bucket.is_idle(windows, now));
        len(self) < RATES_MAX
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The throttle time a response carries, in Kafka's `throttle_time_ms`.
pub fn throttle_ms(wait: Duration) -> i32 {
    i32::try_from(wait.as_millis()).unwrap_or(i32::MAX)
}
