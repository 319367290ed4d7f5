use super::*;

fn entity(parts: &[(&str, Option<&str>)]) -> QuotaEntity {
    QuotaEntity::from_parts(parts.iter().copied()).expect("a valid entity")
}

#[test]
fn entities_follow_kafkas_combinations() {
    assert!(QuotaEntity::from_parts([("user", Some("alice")), ("client-id", None)]).is_ok());
    assert!(QuotaEntity::from_parts([("ip", Some("10.0.0.1"))]).is_ok());
    let refused = [
        vec![],
        vec![("user", Some("a")), ("ip", Some("10.0.0.1"))],
        vec![("user", Some("a")), ("user", Some("b"))],
        vec![("group", Some("a"))],
        vec![("user", Some(""))],
    ];
    for parts in refused {
        assert!(QuotaEntity::from_parts(parts.clone()).is_err(), "{parts:?}");
    }
    let long = "u".repeat(QuotaEntity::NAME_LEN_MAX + 1);
    assert!(QuotaEntity::from_parts([("user", Some(long.as_str()))]).is_err());
}

#[test]
fn parts_keep_their_order_whatever_the_request_named() {
    let one = entity(&[("client-id", Some("c")), ("user", Some("u"))]);
    let other = entity(&[("user", Some("u")), ("client-id", Some("c"))]);
    assert_eq!(one, other);
    assert_eq!(one.parts(), vec![("user", Some("u")), ("client-id", Some("c"))]);
    assert_eq!(one.to_string(), "user=u,client-id=c");
}

#[test]
fn alterations_are_checked_as_kafka_does() {
    let user = entity(&[("user", Some("u"))]);
    let ip = entity(&[("ip", Some("10.0.0.1"))]);
    let ok = check_alteration(
        &user,
        [("producer_byte_rate", Some(1024.0)), ("request_percentage", None)],
    );
    assert_eq!(
        ok,
        Ok(vec![
            (QuotaKey::ProducerByteRate, Some(1024.0)),
            (QuotaKey::RequestPercentage, None)
        ])
    );
    assert!(check_alteration(&user, [("request_percentage", Some(12.5))]).is_ok());
    assert!(check_alteration(&ip, [("connection_creation_rate", Some(10.0))]).is_ok());
    type Ops<'a> = Vec<(&'a str, Option<f64>)>;
    let refused: [(&QuotaEntity, Ops); 7] = [
        (&user, vec![("producer_byte_rate", Some(10.5))]),
        (&user, vec![("producer_byte_rate", Some(0.0))]),
        (&user, vec![("consumer_byte_rate", Some(f64::NAN))]),
        (&user, vec![("no_such_key", Some(1.0))]),
        (&user, vec![("connection_creation_rate", Some(1.0))]),
        (&ip, vec![("producer_byte_rate", Some(1.0))]),
        (
            &user,
            vec![("request_percentage", Some(1.0)), ("request_percentage", None)],
        ),
    ];
    for (entity, ops) in refused {
        assert!(check_alteration(entity, ops.clone()).is_err(), "{entity} {ops:?}");
    }
}

#[test]
fn the_most_specific_quota_applies_with_kafkas_sensor_keys() {
    let mut quotas = ClientQuotas::default();
    let set = |quotas: &mut ClientQuotas, parts: &[(&str, Option<&str>)], value: f64| {
        quotas.apply(&entity(parts), QuotaKey::ProducerByteRate, Some(value));
    };
    set(&mut quotas, &[("client-id", None)], 8.0);
    let applied = |quotas: &ClientQuotas| {
        quotas
            .applied(QuotaKey::ProducerByteRate, "alice", "app")
            .map(|a| (a.bound, a.sensor))
    };
    let sensor = |user: Option<&str>, client: Option<&str>| SensorKey {
        user: user.map(str::to_string),
        client_id: client.map(str::to_string),
    };
    assert_eq!(applied(&quotas), Some((8.0, sensor(None, Some("app")))));
    set(&mut quotas, &[("client-id", Some("app"))], 7.0);
    assert_eq!(applied(&quotas), Some((7.0, sensor(None, Some("app")))));
    set(&mut quotas, &[("user", None)], 6.0);
    assert_eq!(applied(&quotas), Some((6.0, sensor(Some("alice"), None))));
    set(&mut quotas, &[("user", None), ("client-id", None)], 5.0);
    assert_eq!(applied(&quotas), Some((5.0, sensor(Some("alice"), Some("app")))));
    set(&mut quotas, &[("user", None), ("client-id", Some("app"))], 4.0);
    assert_eq!(applied(&quotas), Some((4.0, sensor(Some("alice"), Some("app")))));
    set(&mut quotas, &[("user", Some("alice"))], 3.0);
    assert_eq!(applied(&quotas), Some((3.0, sensor(Some("alice"), None))));
    set(&mut quotas, &[("user", Some("alice")), ("client-id", None)], 2.0);
    assert_eq!(applied(&quotas), Some((2.0, sensor(Some("alice"), Some("app")))));
    set(
        &mut quotas,
        &[("user", Some("alice")), ("client-id", Some("app"))],
        1.0,
    );
    assert_eq!(applied(&quotas), Some((1.0, sensor(Some("alice"), Some("app")))));
    // Another key has no quota; another user falls to the defaults.
    assert_eq!(quotas.applied(QuotaKey::ConsumerByteRate, "alice", "app"), None);
    let bob = quotas
        .applied(QuotaKey::ProducerByteRate, "bob", "app")
        .map(|a| a.bound);
    assert_eq!(bob, Some(4.0));
    quotas.apply(
        &entity(&[("user", Some("alice"))]),
        QuotaKey::ProducerByteRate,
        None,
    );
    assert!(!quotas
        .entries()
        .any(|(e, _)| *e == entity(&[("user", Some("alice"))])));
}

#[test]
fn describe_filters_match_as_kafkas() {
    let mut quotas = ClientQuotas::default();
    for parts in [
        vec![("user", Some("alice"))],
        vec![("user", Some("alice")), ("client-id", Some("app"))],
        vec![("user", None)],
        vec![("client-id", Some("app"))],
    ] {
        quotas.apply(&entity(&parts), QuotaKey::ConsumerByteRate, Some(1.0));
    }
    let filter = |entity_type: &str, matched: NameMatch| EntityFilter {
        entity_type: entity_type.to_string(),
        matched,
    };
    let count = |components: &[EntityFilter], strict| quotas.matching(components, strict).count();
    let alice = [filter("user", NameMatch::Exact("alice".into()))];
    assert_eq!(count(&alice, false), 2);
    assert_eq!(count(&alice, true), 1);
    assert_eq!(count(&[filter("user", NameMatch::Default)], false), 1);
    assert_eq!(count(&[filter("user", NameMatch::Any)], false), 3);
    assert_eq!(count(&[filter("client-id", NameMatch::Any)], true), 1);
    assert_eq!(count(&[], false), 4);
}

#[test]
fn an_ip_has_its_own_connection_rate_else_the_default_ips() {
    let mut quotas = ClientQuotas::default();
    assert_eq!(quotas.ip_quota("10.0.0.1"), None);
    quotas.apply(
        &entity(&[("ip", None)]),
        QuotaKey::ConnectionCreationRate,
        Some(5.0),
    );
    quotas.apply(
        &entity(&[("ip", Some("10.0.0.1"))]),
        QuotaKey::ConnectionCreationRate,
        Some(2.0),
    );
    assert_eq!(quotas.ip_quota("10.0.0.1"), Some(2.0));
    assert_eq!(quotas.ip_quota("10.0.0.2"), Some(5.0));
}
