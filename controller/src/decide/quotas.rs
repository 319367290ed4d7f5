//! AlterClientQuotas through the metadata log, so that every broker of a cluster enforces the
//! same client quotas. The decision checks Kafka's rules (KRaft's `ClientQuotaControlManager`):
//! the entity types and how they combine, the quotas each kind of entity takes, the values;
//! and it bounds what the log holds. As Kafka, it answers entity by entity: a refused entity
//! writes nothing, the valid entities of the same request are written, and only what changes
//! something is.

use std::collections::BTreeSet;
use std::net::IpAddr;

use super::Decision;
use crate::api::{ClientQuotaAlteration, ControllerResponse};
use crate::metadata::{ClusterMetadata, QuotaEntity, QuotaValue};
use crate::records::*;
use crate::refusal::Refusal;

/// The most entities holding quotas in a cluster: bounds the metadata and each broker's quota
/// lookups.
pub const QUOTA_ENTITIES_MAX: usize = 10_000;
/// The most entities one request alters: one log entry.
pub const QUOTA_ENTITIES_PER_REQUEST_MAX: usize = 1000;
/// The longest entity name (a user principal, a client id, an IP address).
const ENTITY_NAME_LEN_MAX: usize = 1024;

/// How Kafka types a quota (`QuotaConfigs`): a LONG or INT quota is a whole number in range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuotaType {
    Long,
    Int,
    Double,
}

/// The quotas of a user, client-id or user and client-id entity (`QuotaConfigs`).
const CLIENT_QUOTAS: &[(&str, QuotaType)] = &[
    ("producer_byte_rate", QuotaType::Long),
    ("consumer_byte_rate", QuotaType::Long),
    ("request_percentage", QuotaType::Double),
    ("controller_mutation_rate", QuotaType::Double),
];
/// The quotas of an ip entity (`QuotaConfigs.ipConfigs`).
const IP_QUOTAS: &[(&str, QuotaType)] = &[("connection_creation_rate", QuotaType::Int)];

/// One result per entity of `entries`, in request order.
pub fn alter_client_quotas(md: &ClusterMetadata, entries: &[ClientQuotaAlteration]) -> Decision {
    if entries.len() > QUOTA_ENTITIES_PER_REQUEST_MAX {
        let reason = format!("at most {QUOTA_ENTITIES_PER_REQUEST_MAX} entities per request");
        return Decision::answer(ControllerResponse::Refused(Refusal::InvalidQuota { reason }));
    }
    let mut entities_held = md.client_quotas.len();
    let mut named = BTreeSet::new();
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(entries.len());
    for entry in entries {
        let entity = QuotaEntity::new(entry.entity.clone());
        let result = match named.insert(entity.clone()) {
            true => alter_entity(md, &entity, &entry.ops, &mut entities_held),
            false => Err("Ignoring duplicate entity: named twice in the request".to_string()),
        };
        let result = result.map(|written| records.extend(written));
        results.push(result.map_err(|reason| Refusal::InvalidQuota { reason }));
    }
    Decision {
        records,
        response: ControllerResponse::ClientQuotas(results),
    }
}

/// The records of one entity's alteration, or why it is refused. `entities_held` counts the
/// entities holding quotas once the records decided before apply; this entity's change is
/// added to it when accepted.
fn alter_entity(
    md: &ClusterMetadata,
    entity: &QuotaEntity,
    ops: &[(String, Option<f64>)],
    entities_held: &mut usize,
) -> Result<Vec<MetadataRecord>, String> {
    let quotas = quotas_of(entity)?;
    let mut keys = BTreeSet::new();
    for (key, value) in ops {
        if !keys.insert(key.as_str()) {
            return Err(format!(
                "Duplicate quota key {key} not updating quota for this entity"
            ));
        }
        // As Kafka, a removal is not checked: it writes something only for a quota held.
        if let Some(value) = value {
            value_error(quotas, key, *value)?;
        }
    }
    let held = md.client_quotas.get(entity);
    let mut after = held.cloned().unwrap_or_default();
    let mut records = Vec::new();
    for (key, value) in ops {
        let changes = match value {
            Some(value) => after.insert(key.clone(), QuotaValue(*value)) != Some(QuotaValue(*value)),
            None => after.remove(key).is_some(),
        };
        if changes {
            records.push(quota_record(entity, key, *value));
        }
    }
    match (held.is_some(), after.is_empty()) {
        (false, false) if *entities_held >= QUOTA_ENTITIES_MAX => {
            return Err(format!(
                "the cluster holds quotas for at most {QUOTA_ENTITIES_MAX} entities"
            ));
        }
        (false, false) => *entities_held += 1,
        (true, true) => *entities_held = entities_held.saturating_sub(1),
        _ => {}
    }
    Ok(records)
}

fn quota_record(entity: &QuotaEntity, key: &str, value: Option<f64>) -> MetadataRecord {
    MetadataRecord::ClientQuota(ClientQuotaRecord {
        entity: entity.parts().to_vec(),
        key: key.to_string(),
        value: value.unwrap_or(0.0),
        remove: value.is_none(),
    })
}

/// The quotas the entity takes, or why it is not one Kafka has (its words).
fn quotas_of(entity: &QuotaEntity) -> Result<&'static [(&'static str, QuotaType)], String> {
    let parts = entity.parts();
    if parts.is_empty() {
        return Err("Invalid empty client quota entity".to_string());
    }
    // The parts are sorted by type: a type named twice names the one before.
    for (at, part) in parts.iter().enumerate() {
        let entity_type = part.entity_type.as_str();
        if ![QUOTA_ENTITY_USER, QUOTA_ENTITY_CLIENT_ID, QUOTA_ENTITY_IP].contains(&entity_type) {
            return Err("Unhandled client quota entity type: not user, client-id or ip".to_string());
        }
        if at > 0 && parts[at - 1].entity_type == entity_type {
            return Err(format!(
                "Invalid client quota entity, duplicate entity entry {entity_type}"
            ));
        }
        let Some(name) = &part.entity_name else {
            continue;
        };
        if name.is_empty() {
            return Err(format!("Empty {entity_type} not supported"));
        }
        if name.len() > ENTITY_NAME_LEN_MAX {
            return Err(format!(
                "{entity_type} names are at most {ENTITY_NAME_LEN_MAX} bytes"
            ));
        }
        // Kafka resolves the name; a decision does no I/O, and brokers match addresses.
        if entity_type == QUOTA_ENTITY_IP && name.parse::<IpAddr>().is_err() {
            return Err(format!("Invalid IP address {name}"));
        }
    }
    let has = |entity_type: &str| parts.iter().any(|p| p.entity_type == entity_type);
    match (
        has(QUOTA_ENTITY_IP),
        has(QUOTA_ENTITY_USER) || has(QUOTA_ENTITY_CLIENT_ID),
    ) {
        (true, true) => Err(
            "Invalid quota entity combination, IP quota entity cannot be combined with User or ClientId"
                .to_string(),
        ),
        (true, false) => Ok(IP_QUOTAS),
        (false, _) => Ok(CLIENT_QUOTAS),
    }
}

/// Why `value` cannot be the quota `key` of an entity taking `quotas`, if it cannot (Kafka's
/// `validateQuotaKeyValue`, and finite).
fn value_error(quotas: &[(&str, QuotaType)], key: &str, value: f64) -> Result<(), String> {
    let Some((_, quota_type)) = quotas.iter().find(|(name, _)| *name == key) else {
        return Err(format!("Invalid configuration key {key}"));
    };
    if !value.is_finite() {
        return Err(format!("Quota {key} must be a finite number"));
    }
    if value <= 0.0 {
        return Err(format!("Quota {key} must be greater than 0"));
    }
    // Kafka compares with the double nearest the bound (`value > Long.MAX_VALUE`).
    let (max, type_name) = match quota_type {
        QuotaType::Double => return Ok(()),
        QuotaType::Long => (i64::MAX as f64, "LONG"),
        QuotaType::Int => (f64::from(i32::MAX), "INT"),
    };
    if value > max {
        return Err(format!(
            "Proposed value for {key} is too large for a {type_name}."
        ));
    }
    if value.fract() > 0.0 {
        return Err(format!("{key} cannot be a fractional value."));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::metadata::ApplyError;

    fn part(entity_type: &str, name: Option<&str>) -> QuotaEntityPart {
        QuotaEntityPart {
            entity_type: entity_type.to_string(),
            entity_name: name.map(str::to_string),
        }
    }

    fn user(name: &str) -> Vec<QuotaEntityPart> {
        vec![part(QUOTA_ENTITY_USER, Some(name))]
    }

    fn alteration(entity: Vec<QuotaEntityPart>, ops: &[(&str, Option<f64>)]) -> ClientQuotaAlteration {
        let ops = ops.iter().map(|(key, value)| (key.to_string(), *value));
        ClientQuotaAlteration {
            entity,
            ops: ops.collect(),
        }
    }

    fn apply(md: &mut ClusterMetadata, decision: &Decision) {
        for record in &decision.records {
            md.apply(record, 1).expect("a decided record applies");
        }
    }

    /// Decides `entries` and applies what the decision writes.
    fn alter_and_apply(md: &mut ClusterMetadata, entries: &[ClientQuotaAlteration]) -> Decision {
        let decision = alter_client_quotas(md, entries);
        apply(md, &decision);
        decision
    }

    fn results(decision: &Decision) -> Vec<Result<(), Refusal>> {
        match &decision.response {
            ControllerResponse::ClientQuotas(results) => results.clone(),
            other => panic!("{other:?}"),
        }
    }

    /// The quotas held for `entity`, as `(key, value)`.
    fn held(md: &ClusterMetadata, entity: Vec<QuotaEntityPart>) -> Vec<(String, f64)> {
        let quotas = md.client_quotas.get(&QuotaEntity::new(entity));
        let each = quotas
            .into_iter()
            .flatten()
            .map(|(key, value)| (key.clone(), value.0));
        each.collect()
    }

    /// The entity of user `alice` with the default client id.
    fn alice_with_any_client() -> Vec<QuotaEntityPart> {
        vec![
            part(QUOTA_ENTITY_USER, Some("alice")),
            part(QUOTA_ENTITY_CLIENT_ID, None),
        ]
    }

    /// One entity of each kind, with each quota it takes: eight quotas in all.
    fn valid_entries() -> Vec<ClientQuotaAlteration> {
        let alice_rates = [
            ("producer_byte_rate", Some(1024.0)),
            ("consumer_byte_rate", Some(2048.0)),
        ];
        let fractions = [
            ("request_percentage", Some(12.5)),
            ("controller_mutation_rate", Some(0.5)),
        ];
        let connections = |value| [("connection_creation_rate", Some(value))];
        vec![
            alteration(user("alice"), &alice_rates),
            alteration(vec![part(QUOTA_ENTITY_CLIENT_ID, None)], &fractions),
            alteration(alice_with_any_client(), &[("producer_byte_rate", Some(10.0))]),
            alteration(vec![part(QUOTA_ENTITY_IP, Some("10.0.0.1"))], &connections(30.0)),
            alteration(vec![part(QUOTA_ENTITY_IP, Some("::1"))], &connections(1.0)),
            alteration(vec![part(QUOTA_ENTITY_IP, None)], &connections(5.0)),
        ]
    }

    #[test]
    fn valid_alterations_are_written_and_applied() {
        let mut md = ClusterMetadata::default();
        let decision = alter_client_quotas(&md, &valid_entries());
        assert_eq!(results(&decision), vec![Ok(()); 6]);
        assert_eq!(decision.records.len(), 8);
        let before = md.client_quotas.clone();
        apply(&mut md, &decision);
        assert!(
            !Arc::ptr_eq(&before, &md.client_quotas),
            "a changed map is a new one"
        );
        assert_eq!(md.client_quotas.len(), 6);
        let alice = [
            ("consumer_byte_rate".to_string(), 2048.0),
            ("producer_byte_rate".to_string(), 1024.0),
        ];
        assert_eq!(held(&md, user("alice")), alice);
        let any_client = [
            ("controller_mutation_rate".to_string(), 0.5),
            ("request_percentage".to_string(), 12.5),
        ];
        assert_eq!(held(&md, vec![part(QUOTA_ENTITY_CLIENT_ID, None)]), any_client);
        let alice_any_client = [("producer_byte_rate".to_string(), 10.0)];
        assert_eq!(held(&md, alice_with_any_client()), alice_any_client);
        let any_ip = [("connection_creation_rate".to_string(), 5.0)];
        assert_eq!(held(&md, vec![part(QUOTA_ENTITY_IP, None)]), any_ip);
        // Asking again changes nothing, so writes nothing; a new value is written alone.
        let again = alter_client_quotas(&md, &valid_entries());
        assert_eq!(results(&again), vec![Ok(()); 6]);
        assert!(again.records.is_empty(), "{:?}", again.records);
        let raised = [
            ("producer_byte_rate", Some(4096.0)),
            ("consumer_byte_rate", Some(2048.0)),
        ];
        let raised = alter_and_apply(&mut md, &[alteration(user("alice"), &raised)]);
        assert_eq!(raised.records.len(), 1);
        assert_eq!(
            held(&md, user("alice"))[1],
            ("producer_byte_rate".to_string(), 4096.0)
        );
    }

    /// One of each entity Kafka refuses, each with a quota that would do otherwise.
    fn refused_entities() -> Vec<ClientQuotaAlteration> {
        let rate = [("producer_byte_rate", Some(10.0))];
        let connections = [("connection_creation_rate", Some(10.0))];
        let ip = |name| vec![part(QUOTA_ENTITY_IP, name)];
        vec![
            alteration(vec![], &rate),
            alteration(vec![part("group", Some("g"))], &rate),
            alteration(
                vec![part(QUOTA_ENTITY_USER, Some("a")), part(QUOTA_ENTITY_USER, None)],
                &rate,
            ),
            alteration(
                vec![part(QUOTA_ENTITY_IP, None), part(QUOTA_ENTITY_USER, None)],
                &connections,
            ),
            alteration(
                vec![part(QUOTA_ENTITY_IP, None), part(QUOTA_ENTITY_CLIENT_ID, None)],
                &rate,
            ),
            alteration(user(""), &rate),
            alteration(user(&"u".repeat(ENTITY_NAME_LEN_MAX + 1)), &rate),
            alteration(ip(Some("not-an-address")), &connections),
            alteration(ip(None), &rate),
            alteration(user("a"), &connections),
            alteration(
                user("a"),
                &[("producer_byte_rate", Some(1.0)), ("unknown_rate", Some(1.0))],
            ),
        ]
    }

    /// One of each value or key list Kafka refuses.
    fn refused_ops() -> Vec<ClientQuotaAlteration> {
        let ops = |ops: &[(&str, Option<f64>)]| alteration(user("a"), ops);
        let connections = |value| {
            let entity = vec![part(QUOTA_ENTITY_IP, Some("10.0.0.1"))];
            alteration(entity, &[("connection_creation_rate", Some(value))])
        };
        vec![
            ops(&[
                ("producer_byte_rate", Some(1.0)),
                ("producer_byte_rate", Some(2.0)),
            ]),
            ops(&[("producer_byte_rate", Some(1.0)), ("producer_byte_rate", None)]),
            ops(&[("request_percentage", None), ("request_percentage", None)]),
            ops(&[("producer_byte_rate", Some(0.0))]),
            ops(&[("request_percentage", Some(-1.0))]),
            ops(&[("request_percentage", Some(f64::NAN))]),
            ops(&[("controller_mutation_rate", Some(f64::INFINITY))]),
            ops(&[
                ("consumer_byte_rate", Some(1.0)),
                ("producer_byte_rate", Some(1.5)),
            ]),
            ops(&[("consumer_byte_rate", Some(1e19))]),
            connections(2.5),
            connections(3e9),
            connections(-3.0),
        ]
    }

    #[test]
    fn each_invalid_entity_is_refused_alone_and_the_valid_ones_are_written() {
        let mut md = ClusterMetadata::default();
        let good = alteration(user("good"), &[("producer_byte_rate", Some(100.0))]);
        let good_records = alter_client_quotas(&md, std::slice::from_ref(&good)).records;
        assert_eq!(good_records.len(), 1);
        for bad in refused_entities().into_iter().chain(refused_ops()) {
            let decision = alter_client_quotas(&md, &[bad.clone(), good.clone()]);
            let answers = results(&decision);
            assert!(
                matches!(&answers[0], Err(Refusal::InvalidQuota { .. })),
                "{bad:?}: {answers:?}"
            );
            assert_eq!(answers[0].as_ref().unwrap_err().response_error().code(), 42);
            assert_eq!(answers[1], Ok(()), "{bad:?}");
            assert_eq!(decision.records, good_records, "{bad:?}");
        }
        // All refused together: one result each, in order, and only the valid entity written.
        let mut entries = refused_entities();
        entries.push(good.clone());
        let decision = alter_client_quotas(&md, &entries);
        let answers = results(&decision);
        assert_eq!(answers.len(), entries.len());
        assert!(answers[..entries.len() - 1].iter().all(Result::is_err));
        assert_eq!(answers.last(), Some(&Ok(())));
        apply(&mut md, &decision);
        assert_eq!(md.client_quotas.len(), 1);
        assert_eq!(
            held(&md, user("good")),
            [("producer_byte_rate".to_string(), 100.0)]
        );
    }

    #[test]
    fn quotas_are_removed_and_an_entity_with_none_left_is_not_held() {
        let mut md = ClusterMetadata::default();
        let set = [alteration(
            user("alice"),
            &[
                ("producer_byte_rate", Some(10.0)),
                ("consumer_byte_rate", Some(20.0)),
            ],
        )];
        alter_and_apply(&mut md, &set);
        let removed = alter_client_quotas(&md, &[alteration(user("alice"), &[("producer_byte_rate", None)])]);
        assert_eq!(results(&removed), [Ok(())]);
        let expected = MetadataRecord::ClientQuota(ClientQuotaRecord {
            entity: user("alice"),
            key: "producer_byte_rate".to_string(),
            value: 0.0,
            remove: true,
        });
        assert_eq!(removed.records, std::slice::from_ref(&expected));
        apply(&mut md, &removed);
        assert_eq!(
            held(&md, user("alice")),
            [("consumer_byte_rate".to_string(), 20.0)]
        );
        // Removing what is not set is no error and writes nothing, for an entity held or not.
        let unset = [
            alteration(
                user("alice"),
                &[("producer_byte_rate", None), ("no_such_quota", None)],
            ),
            alteration(user("bob"), &[("producer_byte_rate", None)]),
        ];
        let unset = alter_client_quotas(&md, &unset);
        assert_eq!(results(&unset), [Ok(()), Ok(())]);
        assert!(unset.records.is_empty(), "{:?}", unset.records);
        // A record removing what is not held does not apply: the decision never writes one.
        let mut after = md.clone();
        assert!(matches!(
            after.apply(&expected, 2),
            Err(ApplyError::UnknownClientQuota { .. })
        ));
        assert_eq!(after, md);
        let last = [alteration(user("alice"), &[("consumer_byte_rate", None)])];
        alter_and_apply(&mut md, &last);
        assert!(md.client_quotas.is_empty(), "{:?}", md.client_quotas);
    }

    #[test]
    fn an_entity_is_the_same_whatever_order_its_parts_are_named_in() {
        let mut md = ClusterMetadata::default();
        let user_first = vec![
            part(QUOTA_ENTITY_USER, Some("alice")),
            part(QUOTA_ENTITY_CLIENT_ID, Some("app")),
        ];
        let client_first: Vec<QuotaEntityPart> = user_first.iter().rev().cloned().collect();
        let set = alter_client_quotas(
            &md,
            &[alteration(
                user_first.clone(),
                &[("producer_byte_rate", Some(10.0))],
            )],
        );
        // The record names the entity's parts sorted by type, whatever the request's order.
        let MetadataRecord::ClientQuota(record) = &set.records[0] else {
            panic!("{:?}", set.records);
        };
        assert_eq!(record.entity, client_first);
        apply(&mut md, &set);
        let same = [alteration(
            client_first.clone(),
            &[("producer_byte_rate", Some(10.0))],
        )];
        assert!(alter_client_quotas(&md, &same).records.is_empty());
        let raised = [alteration(
            client_first.clone(),
            &[("producer_byte_rate", Some(20.0))],
        )];
        alter_and_apply(&mut md, &raised);
        assert_eq!(md.client_quotas.len(), 1);
        assert_eq!(
            held(&md, user_first.clone()),
            [("producer_byte_rate".to_string(), 20.0)]
        );
        // Named twice in one request, in either order: the second is refused.
        let twice = [
            alteration(client_first, &[("producer_byte_rate", Some(30.0))]),
            alteration(user_first, &[("consumer_byte_rate", Some(30.0))]),
        ];
        let twice = alter_client_quotas(&md, &twice);
        let answers = results(&twice);
        assert_eq!(answers[0], Ok(()));
        assert!(
            matches!(answers[1], Err(Refusal::InvalidQuota { .. })),
            "{answers:?}"
        );
        assert_eq!(twice.records.len(), 1);
    }

    /// Metadata holding quotas for `count` users, `user-0` on.
    fn users_with_quotas(count: usize) -> ClusterMetadata {
        let mut md = ClusterMetadata::default();
        let quotas = Arc::make_mut(&mut md.client_quotas);
        for at in 0..count {
            let values = BTreeMap::from([("producer_byte_rate".to_string(), QuotaValue(1.0))]);
            quotas.insert(QuotaEntity::new(user(&format!("user-{at}"))), values);
        }
        md
    }

    #[test]
    fn the_entities_held_and_altered_at_once_are_bounded() {
        let one = |name: &str| alteration(user(name), &[("producer_byte_rate", Some(2.0))]);
        let too_many: Vec<_> = (0..=QUOTA_ENTITIES_PER_REQUEST_MAX)
            .map(|at| one(&format!("u{at}")))
            .collect();
        let refused = alter_client_quotas(&ClusterMetadata::default(), &too_many);
        assert!(refused.records.is_empty());
        assert!(matches!(
            refused.response,
            ControllerResponse::Refused(Refusal::InvalidQuota { .. })
        ));
        let md = users_with_quotas(QUOTA_ENTITIES_MAX - 1);
        let decision = alter_client_quotas(&md, &[one("new-1"), one("new-2"), one("user-0")]);
        let answers = results(&decision);
        assert_eq!(answers[0], Ok(()));
        assert!(
            matches!(answers[1], Err(Refusal::InvalidQuota { .. })),
            "{answers:?}"
        );
        assert_eq!(answers[2], Ok(()));
        assert_eq!(decision.records.len(), 2);
        // An entity whose last quota goes makes room for a new one after it in the request.
        let md = users_with_quotas(QUOTA_ENTITIES_MAX);
        let emptied = alteration(user("user-0"), &[("producer_byte_rate", None)]);
        let decision = alter_client_quotas(&md, &[one("new-1"), emptied, one("new-2")]);
        let answers = results(&decision);
        assert!(answers[0].is_err(), "{answers:?}");
        assert_eq!(answers[1..], [Ok(()), Ok(())]);
    }

    #[test]
    fn a_quota_record_is_the_last_variant_and_crosses_the_log_whole() {
        let record = MetadataRecord::ClientQuota(ClientQuotaRecord {
            entity: alice_with_any_client(),
            key: "request_percentage".to_string(),
            value: 12.5,
            remove: false,
        });
        let bytes = bincode::serialize(&record).unwrap();
        // bincode numbers variants: appended after the 15 before it, so it is number 15.
        assert_eq!(bytes[..4], 15_u32.to_le_bytes());
        let back: MetadataRecord = crate::disk_format::decode_body(&bytes).unwrap();
        assert_eq!(back, record);
        let request = crate::api::ControllerRequest::AlterClientQuotas {
            entries: valid_entries(),
        };
        let bytes = bincode::serialize(&request).unwrap();
        let back: crate::api::ControllerRequest = crate::disk_format::decode_body(&bytes).unwrap();
        assert_eq!(back, request);
    }
}
