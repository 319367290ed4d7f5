//! ACLs on a broker (docs/ARCHITECTURE.md, "Security"): the [`Authorizer`] holds them (a
//! single node's in its `acls` file, `laminar_security::acl_store`) and publishes each change
//! as an immutable [`AclSet`] that every shard reads without a lock; [`Access`] is what one
//! request may do, its connection's principal and host against the set of that moment.
//! The checks per API live with the handlers (`handlers::acl_checks`).

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use laminar_security::acl::CLUSTER_NAME;
use laminar_security::{
    AclBinding, AclFilter, AclSet, AclStore, AclStoreError, Action, Operation, Principal, ResourceType,
};

use crate::broker::{PartitionAccessError, TopicPartition};
use crate::config::AuthorizerSettings;

/// The broker's ACLs. Shared by every shard; changes (CreateAcls, DeleteAcls) are serialised
/// by the store's lock, off the data path.
pub struct Authorizer {
    settings: AuthorizerSettings,
    store: Mutex<AclStore>,
    current: ArcSwap<AclSet>,
}

impl Authorizer {
    /// The authorizer over the ACLs stored in `log_dir`.
    pub fn open(
        settings: AuthorizerSettings,
        log_dir: &std::path::Path,
    ) -> Result<Authorizer, AclStoreError> {
        let store = AclStore::open(log_dir)?;
        let current = ArcSwap::from_pointee(set_of(&settings, &store));
        Ok(Authorizer {
            settings,
            store: Mutex::new(store),
            current,
        })
    }

    /// The ACLs now.
    pub fn acls(&self) -> Arc<AclSet> {
        self.current.load_full()
    }

    /// Adds `new` (validated), then publishes the new set.
    pub fn create(&self, new: &[AclBinding]) -> Result<(), AclStoreError> {
        let mut store = self.lock();
        store.create(new)?;
        self.current.store(Arc::new(set_of(&self.settings, &store)));
        Ok(())
    }

    /// Removes what each filter matches (per filter, what it removed), then publishes.
    pub fn delete(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>, AclStoreError> {
        let mut store = self.lock();
        let removed = store.delete(filters)?;
        self.current.store(Arc::new(set_of(&self.settings, &store)));
        Ok(removed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, AclStore> {
        self.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn set_of(settings: &AuthorizerSettings, store: &AclStore) -> AclSet {
    AclSet::new(
        store.acls().iter().cloned(),
        settings.super_users.clone(),
        settings.allow_everyone_if_no_acl_found,
    )
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
