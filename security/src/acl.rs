//! Kafka's access control lists: who ([`AclBinding::principal`], from a host) may do what
//! ([`Operation`]) to which resources ([`ResourceType`] and a literal or prefixed name), and the
//! decision rules of Kafka's `StandardAuthorizer` ([`AclSet::authorize`]):
//!
//! - a super user may do everything;
//! - a matching DENY wins over any ALLOW;
//! - an ALLOW matches its operation, `All`, and what the operation implies: Read, Write,
//!   Delete and Alter imply Describe; AlterConfigs implies DescribeConfigs;
//! - an ACL matches a resource by its exact name, the wildcard name `*`, or a prefix of the
//!   name (PREFIXED); a principal by its exact `kind:name` or `User:*`; a host by its exact
//!   address or `*`;
//! - a resource no ACL names at all is allowed to everyone only with
//!   `allow.everyone.if.no.acl.found`.
//!
//! Plain data, no I/O; the broker keeps one [`AclSet`] per change and reads it lock-free.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use crate::principal::Principal;

/// What an ACL guards. Kafka's codes are the wire values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    Topic,
    Group,
    Cluster,
    TransactionalId,
}

/// How an ACL's resource name matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PatternType {
    /// The name itself, or every name when it is `*`.
    Literal,
    /// Every name that starts with it.
    Prefixed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Permission {
    Deny,
    Allow,
}

/// The name of the one Cluster resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The resource name, principal name and host that match every one.
pub const WILDCARD: &str = "*";

/// Why a value is not a valid ACL part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AclError(pub String);

/// One ACL, as CreateAcls gives it and DescribeAcls shows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `kind:name`; `User:*` is every user.
    pub principal: Principal,
    /// An IP address as the client connects from, or `*`.
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclBinding {
    /// The longest resource name, principal name or host an ACL may hold (Kafka sets none;
    /// this bounds the stored file and the memory of the set).
    pub const FIELD_LEN_MAX: usize = 1024;

    /// Kafka's checks on a new ACL (`AclControlManager.validateNewAcl`).
    pub fn validate(&self) -> Result<(), AclError> {
        let too_long = [
            &self.resource_name,
            &self.principal.name,
            &self.principal.kind,
            &self.host,
        ]
        .iter()
        .any(|field| field.len() > Self::FIELD_LEN_MAX);
        if too_long {
            return Err(AclError(format!(
                "a resource name, principal or host is longer than {} bytes",
                Self::FIELD_LEN_MAX
            )));
        }
        if self.resource_name.is_empty() {
            return Err(AclError("the resource name is empty".into()));
        }
        if self.resource_type == ResourceType::Cluster && self.resource_name != CLUSTER_NAME {
            return Err(AclError(format!("the cluster resource is named {CLUSTER_NAME}")));
        }
        if self.principal.kind.is_empty() || self.principal.name.is_empty() {
            return Err(AclError("the principal is not kind:name".into()));
        }
        if self.host.is_empty() {
            return Err(AclError("the host is empty (* is every host)".into()));
        }
        if !self.operation.applies_to(self.resource_type) {
            return Err(AclError(format!(
                "{} does not apply to a {} resource",
                self.operation, self.resource_type
            )));
        }
        Ok(())
    }

    fn matches_principal(&self, principal: &Principal) -> bool {
        self.principal.kind == principal.kind
            && (self.principal.name == WILDCARD || self.principal.name == principal.name)
    }

    fn matches_host(&self, host: &str) -> bool {
        self.host == WILDCARD || self.host == host
    }
}

impl Operation {
    /// Whether Kafka lets an ACL grant this operation on this resource type.
    pub fn applies_to(self, resource: ResourceType) -> bool {
        use Operation::*;
        match resource {
            ResourceType::Topic => matches!(
                self,
                All | Read | Write | Create | Delete | Alter | Describe | DescribeConfigs | AlterConfigs
            ),
            ResourceType::Group => matches!(self, All | Read | Delete | Describe),
            ResourceType::Cluster => matches!(
                self,
                All | Create
                    | Alter
                    | Describe
                    | ClusterAction
                    | DescribeConfigs
                    | AlterConfigs
                    | IdempotentWrite
            ),
            ResourceType::TransactionalId => matches!(self, All | Write | Describe),
        }
    }

    /// Whether an ALLOW of `self` grants `wanted`.
    fn allows(self, wanted: Operation) -> bool {
        use Operation::*;
        self == All
            || self == wanted
            || (wanted == Describe && matches!(self, Read | Write | Delete | Alter))
            || (wanted == DescribeConfigs && self == AlterConfigs)
    }
}

/// A question to the authorizer: may `principal`, connected from `host`, do `operation` to
/// the resource `resource_type` named `name`?
#[derive(Clone, Copy, Debug)]
pub struct Action<'a> {
    pub operation: Operation,
    pub resource_type: ResourceType,
    pub name: &'a str,
}

/// Every ACL, indexed for [`AclSet::authorize`], and the authorizer's settings. Immutable: a
/// change makes a new set.
#[derive(Clone, Debug, Default)]
pub struct AclSet {
    /// LITERAL ACLs by resource type, then name (`*` included).
    literal: HashMap<ResourceType, HashMap<String, Vec<AclBinding>>>,
    /// PREFIXED ACLs by resource type.
    prefixed: HashMap<ResourceType, PrefixIndex>,
    super_users: Vec<Principal>,
    allow_if_no_acl_found: bool,
}

impl AclSet {
    /// The set of `bindings` with the settings `super.users` and
    /// `allow.everyone.if.no.acl.found`.
    pub fn new(
        bindings: impl IntoIterator<Item = AclBinding>,
        super_users: Vec<Principal>,
        allow_if_no_acl_found: bool,
    ) -> AclSet {
        let mut set = AclSet {
            super_users,
            allow_if_no_acl_found,
            ..AclSet::default()
        };
        for binding in bindings {
            match binding.pattern_type {
                PatternType::Literal => set
                    .literal
                    .entry(binding.resource_type)
                    .or_default()
                    .entry(binding.resource_name.clone())
                    .or_default()
                    .push(binding),
                PatternType::Prefixed => set
                    .prefixed
                    .entry(binding.resource_type)
                    .or_default()
                    .insert(binding),
            }
        }
        set
    }

    /// Every ACL, in no particular order.
    pub fn bindings(&self) -> impl Iterator<Item = &AclBinding> {
        let literal = self
            .literal
            .values()
            .flat_map(|by_name| by_name.values().flatten());
        let prefixed = self
            .prefixed
            .values()
            .flat_map(|index| index.by_prefix.values().flatten());
        literal.chain(prefixed)
    }

    pub fn is_super_user(&self, principal: &Principal) -> bool {
        self.super_users.contains(principal)
    }

    /// Kafka's decision (module documentation). Allocates nothing.
    pub fn authorize(&self, principal: &Principal, host: &str, action: Action<'_>) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        let mut found_resource_acl = false;
        let mut allowed = false;
        for acl in self.matching(action.resource_type, action.name) {
            found_resource_acl = true;
            if !acl.matches_principal(principal) || !acl.matches_host(host) {
                continue;
            }
            match acl.permission {
                Permission::Deny
                    if matches!(acl.operation, Operation::All) || acl.operation == action.operation =>
                {
                    return false;
                }
                Permission::Deny => {}
                Permission::Allow => allowed |= acl.operation.allows(action.operation),
            }
        }
        allowed || (!found_resource_acl && self.allow_if_no_acl_found)
    }

    /// Whether `principal` may do `operation` to some resource of `resource_type` (Kafka's
    /// `authorizeByResourceType`, as InitProducerId asks it for Write on any topic): an ALLOW
    /// that a DENY of the same pattern or a wider one does not cancel.
    pub fn authorize_any(
        &self,
        principal: &Principal,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        if self.allow_if_no_acl_found && !self.bindings().any(|acl| acl.resource_type == resource_type) {
            return true;
        }
        let applies = |acl: &&AclBinding| {
            acl.resource_type == resource_type && acl.matches_principal(principal) && acl.matches_host(host)
        };
        // The principal's denies of the operation, gathered once: each allow is checked against
        // them, not against the whole set again.
        let denies: Vec<&AclBinding> = self
            .bindings()
            .filter(applies)
            .filter(|deny| {
                deny.permission == Permission::Deny
                    && (deny.operation == Operation::All || deny.operation == operation)
            })
            .collect();
        let denied = |name: &str, pattern: PatternType| {
            denies.iter().any(|deny| match deny.pattern_type {
                PatternType::Literal => {
                    deny.resource_name == WILDCARD
                        || (pattern == PatternType::Literal && deny.resource_name == name)
                }
                PatternType::Prefixed => name.starts_with(&deny.resource_name),
            })
        };
        self.bindings().filter(applies).any(|allow| {
            allow.permission == Permission::Allow
                && allow.operation.allows(operation)
                && !denied(&allow.resource_name, allow.pattern_type)
        })
    }

    /// The ACLs that name the resource: by its name, the wildcard, or a prefix of the name.
    fn matching<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a AclBinding> {
        let by_name = self.literal.get(&resource_type);
        let exact = by_name.and_then(|m| m.get(name)).into_iter().flatten();
        let wildcard = by_name
            .filter(|_| name != WILDCARD)
            .and_then(|m| m.get(WILDCARD))
            .into_iter()
            .flatten();
        let prefixed = self
            .prefixed
            .get(&resource_type)
            .into_iter()
            .flat_map(move |index| index.of(name));
        exact.chain(wildcard).chain(prefixed)
    }
}

/// PREFIXED ACLs of one resource type by prefix, with the prefixes' lengths: the ACLs that
/// apply to a name are found with one lookup per distinct length, not a scan of them all.
#[derive(Clone, Debug, Default)]
struct PrefixIndex {
    by_prefix: HashMap<String, Vec<AclBinding>>,
    lengths: std::collections::BTreeSet<usize>,
}

impl PrefixIndex {
    fn insert(&mut self, binding: AclBinding) {
        self.lengths.insert(binding.resource_name.len());
        self.by_prefix
            .entry(binding.resource_name.clone())
            .or_default()
            .push(binding);
    }

    /// The ACLs whose prefix starts `name`.
    fn of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a AclBinding> {
        self.lengths
            .range(..=name.len())
            .filter_map(move |length| name.get(..*length))
            .filter_map(|prefix| self.by_prefix.get(prefix))
            .flatten()
    }
}

/// A DescribeAcls or DeleteAcls filter: `None` matches any value. `pattern_type` adds Kafka's
/// MATCH: the ACLs that would apply to the named resource (literal, wildcard and prefixes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub resource_name: Option<String>,
    pub pattern_type: PatternFilter,
    pub principal: Option<Principal>,
    pub host: Option<String>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PatternFilter {
    #[default]
    Any,
    Match,
    Exactly(PatternType),
}

impl AclFilter {
    pub fn matches(&self, acl: &AclBinding) -> bool {
        let name_matches = match (&self.resource_name, self.pattern_type) {
            (None, PatternFilter::Exactly(p)) => acl.pattern_type == p,
            (None, _) => true,
            (Some(name), PatternFilter::Any) => acl.resource_name == *name,
            (Some(name), PatternFilter::Exactly(p)) => acl.pattern_type == p && acl.resource_name == *name,
            (Some(name), PatternFilter::Match) => match acl.pattern_type {
                PatternType::Literal => acl.resource_name == *name || acl.resource_name == WILDCARD,
                PatternType::Prefixed => name.starts_with(&acl.resource_name),
            },
        };
        name_matches
            && self.resource_type.is_none_or(|t| t == acl.resource_type)
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && self.operation.is_none_or(|o| o == acl.operation)
            && self.permission.is_none_or(|p| p == acl.permission)
    }
}

macro_rules! names {
    ($type:ident { $($variant:ident = $name:literal / $code:literal),* $(,)? }) => {
        impl $type {
            /// Kafka's name, as its tools and this crate's file write it.
            pub fn name(self) -> &'static str {
                match self { $($type::$variant => $name),* }
            }

            /// Kafka's wire code.
            pub fn code(self) -> i8 {
                match self { $($type::$variant => $code),* }
            }

            /// The value of a wire code, if it names one.
            pub fn from_code(code: i8) -> Option<$type> {
                match code { $($code => Some($type::$variant),)* _ => None }
            }
        }

        impl fmt::Display for $type {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $type {
            type Err = AclError;
            fn from_str(text: &str) -> Result<$type, AclError> {
                $(if text.eq_ignore_ascii_case($name) { return Ok($type::$variant); })*
                Err(AclError(format!(concat!("unknown ", stringify!($type), " {:?}"), text)))
            }
        }
    };
}

names!(ResourceType {
    Topic = "TOPIC" / 2,
    Group = "GROUP" / 3,
    Cluster = "CLUSTER" / 4,
    TransactionalId = "TRANSACTIONAL_ID" / 5,
});
names!(PatternType { Literal = "LITERAL" / 3, Prefixed = "PREFIXED" / 4 });
names!(Operation {
    All = "ALL" / 2,
    Read = "READ" / 3,
    Write = "WRITE" / 4,
    Create = "CREATE" / 5,
    Delete = "DELETE" / 6,
    Alter = "ALTER" / 7,
    Describe = "DESCRIBE" / 8,
    ClusterAction = "CLUSTER_ACTION" / 9,
    DescribeConfigs = "DESCRIBE_CONFIGS" / 10,
    AlterConfigs = "ALTER_CONFIGS" / 11,
    IdempotentWrite = "IDEMPOTENT_WRITE" / 12,
});
names!(Permission { Deny = "DENY" / 2, Allow = "ALLOW" / 3 });

#[cfg(test)]
#[path = "acl_tests.rs"]
mod tests;
