use super::*;

fn acl(
    resource: (ResourceType, &str, PatternType),
    principal: &str,
    host: &str,
    operation: Operation,
    permission: Permission,
) -> AclBinding {
    AclBinding {
        resource_type: resource.0,
        resource_name: resource.1.to_string(),
        pattern_type: resource.2,
        principal: principal.parse().expect("a principal"),
        host: host.to_string(),
        operation,
        permission,
    }
}

fn topic(name: &str) -> (ResourceType, &str, PatternType) {
    (ResourceType::Topic, name, PatternType::Literal)
}

fn prefix(name: &str) -> (ResourceType, &str, PatternType) {
    (ResourceType::Topic, name, PatternType::Prefixed)
}

fn may(set: &AclSet, who: &str, host: &str, operation: Operation, name: &str) -> bool {
    let action = Action {
        operation,
        resource_type: ResourceType::Topic,
        name,
    };
    set.authorize(&who.parse().unwrap(), host, action)
}

use Operation::*;
use Permission::*;

#[test]
fn allows_what_is_granted_with_what_it_implies_and_nothing_else() {
    let set = AclSet::new(
        [acl(topic("orders"), "User:alice", "*", Read, Allow)],
        vec![],
        false,
    );
    assert!(may(&set, "User:alice", "10.0.0.1", Read, "orders"));
    assert!(
        may(&set, "User:alice", "10.0.0.1", Describe, "orders"),
        "Read implies Describe"
    );
    assert!(!may(&set, "User:alice", "10.0.0.1", Write, "orders"));
    assert!(!may(&set, "User:bob", "10.0.0.1", Read, "orders"));
    assert!(
        !may(&set, "User:alice", "10.0.0.1", Read, "payments"),
        "no ACL: denied by default"
    );
}

#[test]
fn a_deny_wins_and_all_covers_every_operation() {
    let set = AclSet::new(
        [
            acl(topic("*"), "User:*", "*", All, Allow),
            acl(prefix("secret-"), "User:mallory", "*", Read, Deny),
            acl(topic("audit"), "User:*", "10.6.6.6", All, Deny),
        ],
        vec![],
        false,
    );
    assert!(may(&set, "User:mallory", "10.0.0.1", Write, "secret-plans"));
    assert!(!may(&set, "User:mallory", "10.0.0.1", Read, "secret-plans"));
    assert!(
        may(&set, "User:mallory", "10.0.0.1", Describe, "secret-plans"),
        "a deny of Read is not one of Describe"
    );
    assert!(
        !may(&set, "User:alice", "10.6.6.6", Describe, "audit"),
        "a host denied"
    );
    assert!(may(&set, "User:alice", "10.0.0.7", Describe, "audit"));
}

#[test]
fn super_users_and_unguarded_resources() {
    let guarded = acl(topic("guarded"), "User:alice", "*", Read, Allow);
    let strict = AclSet::new([guarded.clone()], vec!["User:admin".parse().unwrap()], false);
    assert!(may(&strict, "User:admin", "10.0.0.1", Alter, "guarded"));
    assert!(!may(&strict, "User:bob", "10.0.0.1", Read, "open"));
    let open = AclSet::new([guarded], vec![], true);
    assert!(
        may(&open, "User:bob", "10.0.0.1", Read, "open"),
        "no ACL names it: allowed"
    );
    assert!(
        !may(&open, "User:bob", "10.0.0.1", Read, "guarded"),
        "an ACL names it, not for bob"
    );
}

#[test]
fn write_on_some_topic_is_found_unless_a_wider_deny_cancels_it() {
    let bob = "User:bob".parse().unwrap();
    let allowed = AclSet::new(
        [acl(prefix("logs-"), "User:bob", "*", Write, Allow)],
        vec![],
        false,
    );
    assert!(allowed.authorize_any(&bob, "h", Write, ResourceType::Topic));
    assert!(!allowed.authorize_any(&bob, "h", Read, ResourceType::Topic));
    let cancelled = AclSet::new(
        [
            acl(prefix("logs-"), "User:bob", "*", Write, Allow),
            acl(prefix("logs"), "User:*", "*", Write, Deny),
        ],
        vec![],
        false,
    );
    assert!(!cancelled.authorize_any(&bob, "h", Write, ResourceType::Topic));
}

#[test]
fn filters_select_by_every_field_and_match_finds_what_applies() {
    let acls = [
        acl(topic("orders"), "User:alice", "*", Read, Allow),
        acl(topic("*"), "User:bob", "*", Write, Allow),
        acl(prefix("ord"), "User:carol", "*", Read, Deny),
        acl(prefix("pay"), "User:carol", "*", Read, Deny),
    ];
    let select = |filter: AclFilter| acls.iter().filter(|a| filter.matches(a)).count();
    assert_eq!(select(AclFilter::default()), 4);
    let matching = AclFilter {
        resource_name: Some("orders".into()),
        pattern_type: PatternFilter::Match,
        ..AclFilter::default()
    };
    assert_eq!(
        select(matching),
        3,
        "the literal, the wildcard and the prefix ord"
    );
    let prefixed = AclFilter {
        pattern_type: PatternFilter::Exactly(PatternType::Prefixed),
        permission: Some(Deny),
        ..AclFilter::default()
    };
    assert_eq!(select(prefixed), 2);
}

#[test]
fn new_acls_are_validated_as_kafka_validates_them() {
    let ok = acl(topic("orders"), "User:alice", "*", Read, Allow);
    assert!(ok.validate().is_ok());
    let mut wrong_operation = ok.clone();
    wrong_operation.operation = ClusterAction;
    assert!(
        wrong_operation.validate().is_err(),
        "ClusterAction is not a topic operation"
    );
    let mut wrong_cluster = ok.clone();
    wrong_cluster.resource_type = ResourceType::Cluster;
    wrong_cluster.operation = Alter;
    assert!(wrong_cluster.validate().is_err(), "the cluster is kafka-cluster");
    wrong_cluster.resource_name = CLUSTER_NAME.into();
    assert!(wrong_cluster.validate().is_ok());
    for code in 0..16 {
        if let Some(operation) = Operation::from_code(code) {
            assert_eq!(operation.name().parse::<Operation>(), Ok(operation));
            assert_eq!(operation.code(), code);
        }
    }
}

/// The rules written as plainly as possible: every ACL looked at, nothing indexed.
fn reference(
    acls: &[AclBinding],
    allow_if_none: bool,
    who: &Principal,
    host: &str,
    action: Action<'_>,
) -> bool {
    let names = |a: &AclBinding| match a.pattern_type {
        PatternType::Literal => a.resource_name == action.name || a.resource_name == "*",
        PatternType::Prefixed => action.name.starts_with(&a.resource_name),
    };
    let on_resource: Vec<&AclBinding> = acls
        .iter()
        .filter(|a| a.resource_type == action.resource_type && names(a))
        .collect();
    let applies = |a: &&&AclBinding| {
        a.principal.kind == who.kind
            && (a.principal.name == "*" || a.principal.name == who.name)
            && (a.host == "*" || a.host == host)
    };
    let denied = on_resource
        .iter()
        .filter(applies)
        .any(|a| a.permission == Deny && (a.operation == All || a.operation == action.operation));
    let implied = |granted: Operation| {
        granted == All
            || granted == action.operation
            || (action.operation == Describe && [Read, Write, Delete, Alter].contains(&granted))
            || (action.operation == DescribeConfigs && granted == AlterConfigs)
    };
    let allowed = on_resource
        .iter()
        .filter(applies)
        .any(|a| a.permission == Allow && implied(a.operation));
    !denied && (allowed || (on_resource.is_empty() && allow_if_none))
}

#[test]
fn the_indexed_set_decides_as_the_plain_rules_on_random_acls() {
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let names = ["a", "ab", "abc", "b", "*", "ba"];
    let users = ["User:alice", "User:bob", "User:*"];
    let hosts = ["*", "10.0.0.1", "10.0.0.2"];
    let operations = [
        All,
        Read,
        Write,
        Create,
        Delete,
        Alter,
        Describe,
        DescribeConfigs,
        AlterConfigs,
    ];
    for round in 0..300 {
        let acls: Vec<AclBinding> = (0..next(8))
            .map(|_| {
                let pattern = [PatternType::Literal, PatternType::Prefixed][next(2)];
                acl(
                    (ResourceType::Topic, names[next(names.len())], pattern),
                    users[next(users.len())],
                    hosts[next(hosts.len())],
                    operations[next(operations.len())],
                    [Allow, Deny][next(2)],
                )
            })
            .collect();
        let allow_if_none = next(2) == 0;
        let set = AclSet::new(acls.clone(), vec![], allow_if_none);
        for _ in 0..40 {
            let who: Principal = users[next(2)].parse().unwrap();
            let host = hosts[1 + next(2)];
            let action = Action {
                operation: operations[1 + next(operations.len() - 1)],
                resource_type: ResourceType::Topic,
                name: names[next(names.len() - 2)],
            };
            assert_eq!(
                set.authorize(&who, host, action),
                reference(&acls, allow_if_none, &who, host, action),
                "round {round}: {who} {host} {action:?} with {acls:?}"
            );
        }
    }
}
