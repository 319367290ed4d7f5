//! ACLs on a broker (docs/ARCHITECTURE.md, "Security"): the [`Authorizer`] holds them (a
//! single node's in its `acls` file, `laminar_security::acl_store`; a cluster's in its metadata
//! log, through the controller) and publishes each change as an immutable [`AclSet`] that every
//! shard reads without a lock; [`Access`] is what one request may do, its connection's
//! principal and host against the set of that moment. The checks per API live with the
//! handlers (`handlers::acl_checks`).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use kafka_protocol::error::ResponseError;
use laminar_controller::AccessControlEntryRecord;
use laminar_security::acl::{PatternType, Permission, CLUSTER_NAME};
use laminar_security::{
    AclBinding, AclFilter, AclSet, AclStore, AclStoreError, Action, Operation, Principal, ResourceType,
};

use crate::broker::{PartitionAccessError, TopicPartition};
use crate::config::AuthorizerSettings;
use crate::quorum::ClusterLink;

/// The broker's ACLs. Shared by every shard; changes (CreateAcls, DeleteAcls) go to the store
/// or the controller, off the data path.
pub struct Authorizer {
    settings: AuthorizerSettings,
    source: AclSource,
    current: ArcSwap<AclSet>,
}

/// Where the ACLs are kept.
enum AclSource {
    /// A single node: its `acls` file; changes serialised by the lock.
    Store(Mutex<AclStore>),
    /// A cluster: the metadata this broker last applied. `built_from` is the metadata's set
    /// `current` was built from; a request that finds another set there rebuilds (under the
    /// lock, once per change), unless its image is older than the one built from (the
    /// version under the lock), so a set never goes back to an older one.
    Metadata {
        link: Arc<ClusterLink>,
        built_from: ArcSwap<BTreeSet<AccessControlEntryRecord>>,
        rebuilding: Mutex<u64>,
    },
}

/// Why a change to the ACLs was not made: Kafka's code and message.
pub type AclChangeRefusal = (ResponseError, String);

impl Authorizer {
    /// A single node's authorizer, over the ACLs stored in `log_dir`.
    pub fn open(
        settings: AuthorizerSettings,
        log_dir: &std::path::Path,
    ) -> Result<Authorizer, AclStoreError> {
        let store = AclStore::open(log_dir)?;
        let current = ArcSwap::from_pointee(set_of(&settings, store.acls().iter().cloned()));
        Ok(Authorizer {
            settings,
            source: AclSource::Store(Mutex::new(store)),
            current,
        })
    }

    /// A cluster node's authorizer, over the ACLs of the metadata `link` applies.
    pub fn of_cluster(settings: AuthorizerSettings, link: Arc<ClusterLink>) -> Authorizer {
        let authorizer = Authorizer {
            current: ArcSwap::from_pointee(set_of(&settings, std::iter::empty())),
            settings,
            source: AclSource::Metadata {
                link,
                built_from: ArcSwap::from_pointee(BTreeSet::new()),
                rebuilding: Mutex::new(0),
            },
        };
        authorizer.acls();
        authorizer
    }

    /// The ACLs now.
    pub fn acls(&self) -> Arc<AclSet> {
        if let AclSource::Metadata {
            link,
            built_from,
            rebuilding,
        } = &self.source
        {
            // The common case: the set built is the metadata's; nothing shared is written.
            let changed = link.peek_image(|image| !Arc::ptr_eq(&image.metadata.acls, &built_from.load()));
            if changed {
                let image = link.image();
                let newest = &image.metadata.acls;
                let mut built_version = rebuilding.lock().unwrap_or_else(|p| p.into_inner());
                if image.version >= *built_version && !Arc::ptr_eq(newest, &built_from.load()) {
                    let bindings = newest.iter().filter_map(binding_of);
                    self.current.store(Arc::new(set_of(&self.settings, bindings)));
                    built_from.store(newest.clone());
                    *built_version = image.version;
                }
            }
        }
        self.current.load_full()
    }

    /// Adds `new` (validated). A single node publishes the new set at once; a cluster's
    /// brokers each as they apply the controller's records.
    pub async fn create(&self, new: &[AclBinding]) -> Result<(), AclChangeRefusal> {
        match &self.source {
            AclSource::Store(store) => {
                let mut store = lock(store);
                store.create(new).map_err(store_failed)?;
                self.current
                    .store(Arc::new(set_of(&self.settings, store.acls().iter().cloned())));
                Ok(())
            }
            AclSource::Metadata { link, .. } => {
                let entries = new.iter().map(record_of).collect();
                link.handle.create_acls(entries).await.map_err(controller_refused)
            }
        }
    }

    /// Removes what each filter matches; answers, per filter, what it removed.
    pub async fn delete(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>, AclChangeRefusal> {
        match &self.source {
            AclSource::Store(store) => {
                let mut store = lock(store);
                let removed = store.delete(filters).map_err(store_failed)?;
                self.current
                    .store(Arc::new(set_of(&self.settings, store.acls().iter().cloned())));
                Ok(removed)
            }
            AclSource::Metadata { link, .. } => {
                let acls = self.acls();
                let matched: Vec<Vec<AclBinding>> = filters
                    .iter()
                    .map(|f| acls.bindings().filter(|acl| f.matches(acl)).cloned().collect())
                    .collect();
                let entries: BTreeSet<AccessControlEntryRecord> =
                    matched.iter().flatten().map(record_of).collect();
                let removed: BTreeSet<AccessControlEntryRecord> = link
                    .handle
                    .delete_acls(entries.into_iter().collect())
                    .await
                    .map_err(controller_refused)?
                    .into_iter()
                    .collect();
                Ok(matched
                    .into_iter()
                    .map(|acls| {
                        acls.into_iter()
                            .filter(|acl| removed.contains(&record_of(acl)))
                            .collect()
                    })
                    .collect())
            }
        }
    }
}

fn lock(store: &Mutex<AclStore>) -> std::sync::MutexGuard<'_, AclStore> {
    store.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn store_failed(error: AclStoreError) -> AclChangeRefusal {
    tracing::error!(%error, "cannot store ACLs");
    (ResponseError::UnknownServerError, error.to_string())
}

fn controller_refused(refusal: laminar_controller::Refusal) -> AclChangeRefusal {
    (refusal.response_error(), refusal.to_string())
}

fn set_of(settings: &AuthorizerSettings, bindings: impl Iterator<Item = AclBinding>) -> AclSet {
    AclSet::new(
        bindings,
        settings.super_users.clone(),
        settings.allow_everyone_if_no_acl_found,
    )
}

/// An ACL as the metadata log holds it (Kafka's wire codes).
fn record_of(acl: &AclBinding) -> AccessControlEntryRecord {
    AccessControlEntryRecord {
        resource_type: acl.resource_type.code(),
        resource_name: acl.resource_name.clone(),
        pattern_type: acl.pattern_type.code(),
        principal: acl.principal.to_string(),
        host: acl.host.clone(),
        operation: acl.operation.code(),
        permission_type: acl.permission.code(),
    }
}

/// The ACL a record holds, if it is a valid one: read from the metadata log, so checked as
/// CreateAcls checks an ACL; one that is not is logged and left out.
fn binding_of(record: &AccessControlEntryRecord) -> Option<AclBinding> {
    let binding = AclBinding {
        resource_type: ResourceType::from_code(record.resource_type)?,
        resource_name: record.resource_name.clone(),
        pattern_type: PatternType::from_code(record.pattern_type)?,
        principal: record.principal.parse().ok()?,
        host: record.host.clone(),
        operation: Operation::from_code(record.operation)?,
        permission: Permission::from_code(record.permission_type)?,
    };
    match binding.validate() {
        Ok(()) => Some(binding),
        Err(error) => {
            tracing::warn!(?record, %error, "an ACL of the metadata log is not valid; left out");
            None
        }
    }
}

/// What one request may do. Built per request from the connection's principal and host;
/// `acls: None` (no authorizer) allows everything. Owned by the request, on its shard.
pub struct Access {
    acls: Option<Arc<AclSet>>,
    principal: Arc<Principal>,
    host: Arc<str>,
}

impl Access {
    pub fn new(acls: Option<Arc<AclSet>>, principal: Arc<Principal>, host: Arc<str>) -> Access {
        Access {
            acls,
            principal,
            host,
        }
    }

    /// Everything allowed: the admin HTTP API's own requests, which its own access rules guard.
    pub fn unrestricted() -> Access {
        Access::new(None, crate::authentication::ANONYMOUS.clone(), "".into())
    }

    /// May the principal do `operation` to the resource?
    pub fn allows(&self, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        let Some(acls) = &self.acls else {
            return true;
        };
        let action = Action {
            operation,
            resource_type,
            name,
        };
        acls.authorize(&self.principal, &self.host, action)
    }

    /// The client's address, as Kafka reports it (`/127.0.0.1`-style without the slash).
    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn allows_topic(&self, operation: Operation, topic: &str) -> bool {
        self.allows(operation, ResourceType::Topic, topic)
    }

    pub fn allows_group(&self, operation: Operation, group: &str) -> bool {
        self.allows(operation, ResourceType::Group, group)
    }

    pub fn allows_cluster(&self, operation: Operation) -> bool {
        self.allows(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// May the principal do `operation` to some topic (Kafka's `authorizeByResourceType`)?
    pub fn allows_some_topic(&self, operation: Operation) -> bool {
        match &self.acls {
            None => true,
            Some(acls) => acls.authorize_any(&self.principal, &self.host, operation, ResourceType::Topic),
        }
    }

    /// Whether ACLs are on at all.
    pub fn is_enforced(&self) -> bool {
        self.acls.is_some()
    }
}

/// Kafka's per-partition refusal when the principal may not `operation` a topic.
pub fn topic_refusal() -> PartitionAccessError {
    PartitionAccessError::Refused(kafka_protocol::error::ResponseError::TopicAuthorizationFailed)
}

/// Items of a per-partition request, some refused before they reach their shard.
type Items<T> = Vec<(TopicPartition, Result<T, PartitionAccessError>)>;

impl Access {
    /// `items` with those of topics the principal may not `operation` refused
    /// (TOPIC_AUTHORIZATION_FAILED).
    pub fn refuse_topics<T>(&self, items: Vec<(TopicPartition, T)>, operation: Operation) -> Items<T> {
        let mut items: Items<T> = items.into_iter().map(|(tp, item)| (tp, Ok(item))).collect();
        self.refuse_topics_in_place(&mut items, operation);
        items
    }

    /// Refuses in place the items of topics the principal may not `operation`: one check per
    /// run of a topic's partitions, nothing allocated (Produce's path).
    pub fn refuse_topics_in_place<T>(&self, items: &mut Items<T>, operation: Operation) {
        if !self.is_enforced() {
            return;
        }
        let mut last: Option<(std::sync::Arc<str>, bool)> = None;
        for (tp, item) in items.iter_mut() {
            let allowed = match &last {
                Some((topic, allowed)) if *topic == tp.topic => *allowed,
                _ => self.allows_topic(operation, &tp.topic),
            };
            if !allowed {
                *item = Err(topic_refusal());
            }
            last = Some((tp.topic.clone(), allowed));
        }
    }
}
