//! What one ACL check costs (ns): a principal allowed by a wildcard ACL, asked about a topic,
//! with ACLS_OTHER prefixed ACLs of other principals in the set (each request's checks walk the
//! literal, wildcard and prefixed ACLs of its resource), and a super user for comparison.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use laminar_security::acl::{AclBinding, AclSet, Action};
use laminar_security::{Operation, PatternType, Permission, Principal, ResourceType};

fn acl(name: &str, pattern_type: PatternType, principal: &str, operation: Operation) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: name.to_string(),
        pattern_type,
        principal: principal.parse().expect("a principal"),
        host: "*".to_string(),
        operation,
        permission: Permission::Allow,
    }
}

fn authorize(c: &mut Criterion) {
    let mut group = c.benchmark_group("acl_authorize");
    let alice: Principal = "User:alice".parse().expect("a principal");
    let action = Action {
        operation: Operation::Write,
        resource_type: ResourceType::Topic,
        name: "orders-eu-7",
    };
    for others in [0usize, 20, 200, 2000] {
        let mut acls: Vec<AclBinding> = (0..others)
            .map(|i| {
                acl(
                    &format!("team-{i}-"),
                    PatternType::Prefixed,
                    &format!("User:user-{i}"),
                    Operation::Read,
                )
            })
            .collect();
        acls.push(acl("*", PatternType::Literal, "User:alice", Operation::All));
        let set = AclSet::new(acls, vec!["User:admin".parse().expect("a principal")], false);
        group.bench_with_input(BenchmarkId::new("allowed_by_wildcard", others), &set, |b, set| {
            b.iter(|| assert!(set.authorize(&alice, "10.0.0.1", action)))
        });
    }
    let set = AclSet::new(
        Vec::new(),
        vec!["User:alice".parse().expect("a principal")],
        false,
    );
    group.bench_function("super_user", |b| {
        b.iter(|| assert!(set.authorize(&alice, "10.0.0.1", action)))
    });
    group.finish();
}

criterion_group!(benches, authorize);
criterion_main!(benches);
