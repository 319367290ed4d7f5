//! `laminar cluster info | brokers | quorum | unregister`, `topic describe`, `produce` and `consume` (with and
//! without a group) against a real three-broker cluster (combined mode on loopback), and
//! `cluster quorum` refusing a single node.

use std::time::Duration;

use anyhow::Result;
use kafka_protocol::messages::DescribeClusterRequest;
use laminar_tests::cli::{ok, ok_on, run};
use laminar_tests::wire::WireConnection;
use laminar_tests::{Broker, Cluster};

/// Data rows of a table (the header skipped), split on whitespace.
fn rows(table: &str, after: &str) -> Vec<Vec<String>> {
    let section = table.split_once(after).map_or("", |(_, rest)| rest);
    let lines = section.lines().skip_while(|l| !l.starts_with("ID")).skip(1);
    lines
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn cluster_info_brokers_and_quorum_describe_a_three_node_cluster() -> Result<()> {
    let mut cluster = Cluster::start(3, 3000, Cluster::node_options())?;
    let b = cluster.bootstrap();
    ok_on(&b, &["topic", "create", "spread", "-p", "6", "-r", "3"], "")?;
    let mut conn = WireConnection::connect(cluster.node(1).addr())?;
    let described = conn.request(&DescribeClusterRequest::default(), 0)?;
    let info = ok_on(&b, &["cluster", "info"], "")?;
    assert!(
        info.contains(&format!("cluster id: {}\n", described.cluster_id)),
        "{info}"
    );
    assert!(
        info.contains(&format!("controller: {}\n", described.controller_id.0)),
        "{info}"
    );
    assert!(info.contains("brokers:    3\n"), "{info}");
    assert!(info.contains("partitions: 6\n"), "{info}");
    let brokers = ok_on(&b, &["cluster", "brokers"], "")?;
    let listed = rows(&brokers, "");
    assert_eq!(listed.len(), 3, "{brokers}");
    let led: usize = listed.iter().map(|r| r[4].parse::<usize>().unwrap_or(0)).sum();
    assert_eq!(led, 6, "{brokers}");
    for (row, id) in listed.iter().zip(1..=3) {
        let endpoint = cluster.node(id).bootstrap();
        assert_eq!(
            row[..4],
            [id.to_string(), endpoint, "-".into(), "no".into()],
            "{brokers}"
        );
    }
    let admin: Vec<String> = (1..=3)
        .map(|id| cluster.node(id).http_addr().to_string())
        .collect();
    let quorum = ok(&["cluster", "quorum", "--admin", &admin.join(",")], "")?;
    assert!(
        quorum.contains(&format!("leader:       {}\n", described.controller_id.0)),
        "{quorum}"
    );
    let voters = rows(&quorum, "VOTERS");
    assert_eq!(voters.len(), 3, "{quorum}");
    assert!(
        voters.iter().all(|v| v[2].parse::<u64>().is_ok()),
        "a lag per voter: {quorum}"
    );
    // A fenced broker is listed as such: kill -9 broker 3 and wait out its session.
    cluster.node(3).kill9()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let brokers = ok_on(&cluster.node(1).bootstrap(), &["cluster", "brokers"], "")?;
        let fenced = rows(&brokers, "").iter().any(|r| r[0] == "3" && r[3] == "yes");
        if fenced {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "broker 3 not shown fenced: {brokers}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    unregister_broker_3(&mut cluster)
}

/// `cluster unregister 3` is refused while broker 3 holds replicas, and removes it once it
/// holds none; an unknown id is BROKER_ID_NOT_REGISTERED.
fn unregister_broker_3(cluster: &mut Cluster) -> Result<()> {
    let b = cluster.node(1).bootstrap();
    let holding = run(&["cluster", "unregister", "3", "--brokers", &b], "")?;
    assert!(!holding.success, "{}", holding.stdout);
    assert!(
        holding.stderr.contains("still holds 6 replicas"),
        "{}",
        holding.stderr
    );
    let unknown = run(&["cluster", "unregister", "99", "--brokers", &b], "")?;
    assert!(
        !unknown.success && unknown.stderr.contains("BrokerIdNotRegistered"),
        "{}",
        unknown.stderr
    );
    ok_on(&b, &["topic", "delete", "spread"], "")?;
    let removed = ok_on(&b, &["cluster", "unregister", "3"], "")?;
    assert!(removed.contains("unregistered broker 3"), "{removed}");
    for node in [1, 2] {
        let brokers = ok_on(&cluster.node(node).bootstrap(), &["cluster", "brokers"], "")?;
        let ids: Vec<String> = rows(&brokers, "").into_iter().map(|r| r[0].clone()).collect();
        assert_eq!(ids, ["1", "2"], "through node {node}: {brokers}");
    }
    Ok(())
}

#[test]
fn cluster_quorum_on_a_single_node_says_it_has_none() -> Result<()> {
    let broker = Broker::start(Cluster::node_options())?;
    let outcome = run(
        &["cluster", "quorum", "--admin", &broker.http_addr().to_string()],
        "",
    )?;
    assert!(!outcome.success);
    assert!(outcome.stderr.contains("single-node mode"), "{}", outcome.stderr);
    let info = ok_on(&broker.bootstrap(), &["cluster", "info"], "")?;
    assert!(info.contains("brokers:    1\n"), "{info}");
    Ok(())
}

#[test]
fn produce_consume_and_topic_describe_reach_each_partitions_leader_and_a_group_its_coordinator() -> Result<()>
{
    let mut cluster = Cluster::start(3, 3000, Cluster::node_options())?;
    let b = cluster.bootstrap();
    ok_on(&b, &["topic", "create", "spread", "-p", "6", "-r", "3"], "")?;
    ok_on(&b, &["produce", "spread"], "a\nb\nc\nd\ne\nf\ng\nh\n")?;
    let described = ok_on(&b, &["topic", "describe", "spread"], "")?;
    let partitions = described
        .split_once("PARTITIONS\n")
        .map_or("", |(_, rest)| rest)
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty());
    let ends: Vec<i64> = partitions
        .map(|l| {
            l.split_whitespace()
                .last()
                .and_then(|e| e.parse().ok())
                .unwrap_or(-1)
        })
        .collect();
    assert_eq!(ends.len(), 6, "{described}");
    assert_eq!(
        ends.iter().sum::<i64>(),
        8,
        "every record counted once: {described}"
    );
    let consumed = ok_on(&b, &["consume", "spread", "--from-beginning", "-e"], "")?;
    let mut values: Vec<&str> = consumed.lines().collect();
    values.sort_unstable();
    assert_eq!(values, ["a", "b", "c", "d", "e", "f", "g", "h"], "{consumed}");
    group_consumes_through_any_broker(&mut cluster)
}

/// One group consumed through each broker in turn: two of them are not its coordinator, and the
/// CLI finds the coordinator. The first reads everything, the others find it committed.
fn group_consumes_through_any_broker(cluster: &mut Cluster) -> Result<()> {
    let args = ["consume", "spread", "--group", "g", "--from-beginning", "-e"];
    for node in 1..=3 {
        let consumed = ok_on(&cluster.node(node).bootstrap(), &args, "")?;
        let mut values: Vec<&str> = consumed.lines().collect();
        values.sort_unstable();
        let expected: &[&str] = match node {
            1 => &["a", "b", "c", "d", "e", "f", "g", "h"],
            _ => &[],
        };
        assert_eq!(values, expected, "group consume through node {node}");
    }
    Ok(())
}
