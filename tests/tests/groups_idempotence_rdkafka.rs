//! Consumer groups and the idempotent producer. Skipped, with a message, unless
//! LAMINAR_TEST_GROUPS=1 (`tests/run.sh` sets it).
//!
//! Proves: two members of a group split the partitions; a member leaving hands its partitions
//! over; a new member resumes from committed offsets; committed offsets survive kill -9; an
//! idempotent producer with 5 requests in flight writes thousands of records exactly once, in order.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use laminar_tests::rdkafka_client::{
    assert_records_match, assigned_consumer, commit, consume, create_topic, first_offset_seen, group_member,
    produce_all, producer, sample_records, unique_topic, OP_TIMEOUT,
};
use laminar_tests::{groups_enabled, Broker, GROUPS_ENV};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

fn skip(test: &str) -> bool {
    if !groups_enabled() {
        eprintln!("SKIPPED {test}: set {GROUPS_ENV}=1 once the broker serves groups and idempotence");
        return true;
    }
    false
}

/// Polls every member until each owns a non-empty assignment whose union is `partitions` and
/// which do not overlap; returns each member's partitions.
fn await_balanced(members: &[&BaseConsumer], partitions: i32) -> Result<Vec<BTreeSet<i32>>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for member in members {
            if let Some(Err(err)) = member.poll(Duration::from_millis(100)) {
                bail!("member poll: {err}");
            }
        }
        let owned: Vec<BTreeSet<i32>> = members
            .iter()
            .map(|m| {
                m.assignment()
                    .map(|a| a.elements().iter().map(|e| e.partition()).collect())
            })
            .collect::<Result<_, _>>()?;
        let union: BTreeSet<i32> = owned.iter().flatten().copied().collect();
        let total: usize = owned.iter().map(BTreeSet::len).sum();
        if owned.iter().all(|o| !o.is_empty()) && union.len() == partitions as usize && total == union.len() {
            return Ok(owned);
        }
        if Instant::now() >= deadline {
            bail!("group never balanced: {owned:?}");
        }
    }
}

#[tokio::test]
async fn two_members_split_partitions_and_a_leaver_hands_them_over() -> Result<()> {
    if skip("two_members_split_partitions_and_a_leaver_hands_them_over") {
        return Ok(());
    }
    let broker = Broker::start_default()?;
    let (topic, group) = (unique_topic("group-split"), unique_topic("group"));
    create_topic(&broker.bootstrap(), &topic, 4, &[]).await?;
    let first = group_member(&broker.bootstrap(), &group)?;
    let second = group_member(&broker.bootstrap(), &group)?;
    first.subscribe(&[&topic])?;
    second.subscribe(&[&topic])?;
    let owned = await_balanced(&[&first, &second], 4)?;
    assert_eq!(
        owned.iter().map(BTreeSet::len).collect::<Vec<_>>(),
        vec![2, 2],
        "range split of 4"
    );

    second.unsubscribe();
    drop(second); // LeaveGroup: the remaining member must get everything quickly.
    let owned = await_balanced(&[&first], 4)?;
    assert_eq!(owned[0], (0..4).collect());
    Ok(())
}

#[tokio::test]
async fn committed_offsets_resume_a_new_member_and_survive_kill9() -> Result<()> {
    if skip("committed_offsets_resume_a_new_member_and_survive_kill9") {
        return Ok(());
    }
    let mut broker = Broker::start_default()?;
    let (topic, group) = (unique_topic("group-commit"), unique_topic("group"));
    create_topic(&broker.bootstrap(), &topic, 1, &[]).await?;
    produce_all(
        &producer(&broker.bootstrap(), &[])?,
        &topic,
        0,
        &sample_records(100),
    )
    .await?;
    {
        let member = group_member(&broker.bootstrap(), &group)?;
        member.subscribe(&[&topic])?;
        assert_eq!(first_offset_seen(&member)?, 0);
        commit(&member, &topic, 0, 40)?;
    }
    let member = group_member(&broker.bootstrap(), &group)?;
    member.subscribe(&[&topic])?;
    assert_eq!(
        first_offset_seen(&member)?,
        40,
        "a new member resumes at the committed offset"
    );
    commit(&member, &topic, 0, 61)?;
    drop(member);

    broker.kill9()?;
    broker.restart()?;
    let member = group_member(&broker.bootstrap(), &group)?;
    let committed = member.committed_offsets(
        {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition(&topic, 0);
            tpl
        },
        OP_TIMEOUT,
    )?;
    assert_eq!(
        committed.find_partition(&topic, 0).map(|e| e.offset()),
        Some(Offset::Offset(61))
    );
    member.subscribe(&[&topic])?;
    assert_eq!(
        first_offset_seen(&member)?,
        61,
        "committed offset survives kill -9"
    );
    Ok(())
}

#[tokio::test]
async fn idempotent_producer_writes_each_record_exactly_once_in_order() -> Result<()> {
    if skip("idempotent_producer_writes_each_record_exactly_once_in_order") {
        return Ok(());
    }
    let broker = Broker::start_default()?;
    let topic = unique_topic("idempotent");
    create_topic(&broker.bootstrap(), &topic, 2, &[]).await?;
    let settings = [
        ("enable.idempotence", "true"),
        ("max.in.flight.requests.per.connection", "5"),
        ("batch.num.messages", "50"),
        ("linger.ms", "2"),
    ];
    let producer = producer(&broker.bootstrap(), &settings)?;
    let records = sample_records(5000);
    let mut offsets = BTreeMap::new();
    for partition in 0..2 {
        offsets.insert(
            partition,
            produce_all(&producer, &topic, partition, &records).await?,
        );
    }
    for (partition, acked) in offsets {
        assert_eq!(
            acked,
            (0..5000).collect::<Vec<i64>>(),
            "partition {partition}: offsets"
        );
        let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
        let consumed = consume(&consumer, &topic, partition, Offset::Beginning, records.len())?;
        assert_records_match(&records, &consumed, 0);
        let (low, high) = consumer.fetch_watermarks(&topic, partition, OP_TIMEOUT)?;
        assert_eq!((low, high), (0, 5000), "partition {partition}: no duplicates");
    }
    Ok(())
}
