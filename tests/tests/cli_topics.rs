//! `laminar topic ...`, `produce`, `consume` and `cluster info` against a real broker, and the
//! one-line failures (unreachable broker, unknown topic, invalid name, existing topic).

use anyhow::Result;
use laminar_tests::cli::{fails, ok, rows_starting};
use laminar_tests::Broker;

#[test]
fn topic_lifecycle_create_list_describe_alter_grow_delete() -> Result<()> {
    let broker = Broker::start_default()?;
    let b = broker.bootstrap();
    let created = ok(
        &[
            "topic",
            "create",
            "orders",
            "-p",
            "3",
            "-c",
            "retention.ms=60000",
            "--brokers",
            &b,
        ],
        "",
    )?;
    assert_eq!(created.trim(), "created topic orders");
    ok(&["topic", "create", "audit", "--brokers", &b], "")?;

    let listed = ok(&["topic", "list", "--brokers", &b], "")?;
    assert_eq!(rows_starting(&listed, "orders"), vec![vec!["orders", "3", "1"]]);
    assert_eq!(rows_starting(&listed, "audit").len(), 1);

    ok(&["produce", "orders", "-p", "2", "--brokers", &b], "a\nb\nc\n")?;
    let described = ok(&["topic", "describe", "orders", "--brokers", &b], "")?;
    // PARTITION LEADER REPLICAS ISR LOG-START-OFFSET LOG-END-OFFSET
    assert_eq!(
        rows_starting(&described, "2"),
        vec![vec!["2", "1", "[1]", "[1]", "0", "3"]]
    );
    assert_eq!(
        rows_starting(&described, "0"),
        vec![vec!["0", "1", "[1]", "[1]", "0", "0"]]
    );
    assert_eq!(
        rows_starting(&described, "retention.ms"),
        vec![vec!["retention.ms", "60000", "topic"]]
    );
    assert_eq!(rows_starting(&described, "segment.bytes")[0][2], "default");

    ok(
        &[
            "topic",
            "alter-config",
            "orders",
            "--set",
            "retention.ms=1000",
            "--delete",
            "segment.ms",
            "--brokers",
            &b,
        ],
        "",
    )?;
    let described = ok(&["topic", "describe", "orders", "--brokers", &b], "")?;
    assert_eq!(rows_starting(&described, "retention.ms")[0][1], "1000");

    let grown = ok(
        &["topic", "add-partitions", "orders", "--num", "2", "--brokers", &b],
        "",
    )?;
    assert_eq!(grown.trim(), "topic orders now has 5 partitions");

    ok(&["topic", "delete", "orders", "--brokers", &b], "")?;
    let listed = ok(&["topic", "list", "--brokers", &b], "")?;
    assert!(rows_starting(&listed, "orders").is_empty(), "{listed}");

    // Counts include internal topics (__consumer_offsets): compare with the listing.
    let topics: Vec<Vec<&str>> = listed
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let partitions: usize = topics.iter().map(|t| t[1].parse::<usize>().unwrap()).sum();
    let info = ok(&["cluster", "info", "--brokers", &b], "")?;
    assert!(
        info.contains(&format!("topics:     {}\n", topics.len())),
        "{info}"
    );
    assert!(info.contains(&format!("partitions: {partitions}\n")), "{info}");
    assert!(info.contains(&format!("1   {b}  controller")), "{info}");
    Ok(())
}

#[test]
fn failures_exit_non_zero_with_one_line() -> Result<()> {
    let broker = Broker::start_default()?;
    let b = broker.bootstrap();
    ok(&["topic", "create", "taken", "--brokers", &b], "")?;
    let line = fails(&["topic", "create", "taken", "--brokers", &b])?;
    assert!(line.contains("TopicAlreadyExists"), "{line}");
    let line = fails(&["topic", "create", "bad name", "--brokers", &b])?;
    assert!(
        line.starts_with("laminar: invalid topic name 'bad name'"),
        "{line}"
    );
    for args in [
        ["topic", "describe", "missing"],
        ["topic", "delete", "missing"],
        ["consume", "missing", "-e"],
    ] {
        let mut args = args.to_vec();
        args.extend(["--brokers", &b]);
        assert_eq!(fails(&args)?, "laminar: unknown topic missing", "{args:?}");
    }
    let line = fails(&["topic", "list", "--brokers", "127.0.0.1:1"])?;
    assert!(
        line.starts_with("laminar: cannot reach any broker (127.0.0.1:1:"),
        "{line}"
    );
    Ok(())
}

#[test]
fn produce_and_consume_keys_headers_offsets_and_formats() -> Result<()> {
    let broker = Broker::start_default()?;
    let b = broker.bootstrap();
    ok(&["topic", "create", "events", "-p", "4", "--brokers", &b], "")?;
    let input: String = (0..20).map(|i| format!("key{}:value{i}\n", i % 5)).collect();
    ok(
        &[
            "produce",
            "events",
            "--key-separator",
            ":",
            "--headers",
            "src=cli,v=2",
            "--compression",
            "zstd",
            "--brokers",
            &b,
        ],
        &input,
    )?;
    let out = ok(
        &[
            "consume",
            "events",
            "--from-beginning",
            "-e",
            "--format",
            "%p %o %k %v %h\\n",
            "--brokers",
            &b,
        ],
        "",
    )?;
    let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 20, "{out}");
    for line in &lines {
        assert_eq!(line[4], "src=cli,v=2");
        let key_index = &line[2][3..];
        assert!(line[3].starts_with("value"), "{line:?}");
        // Same key, same partition; values of one key in produced order.
        let same_key: Vec<&Vec<&str>> = lines.iter().filter(|l| l[2] == line[2]).collect();
        assert!(
            same_key.iter().all(|l| l[0] == line[0]),
            "key{key_index} split over partitions"
        );
    }
    // (murmur2 itself is checked against Kafka's test vectors in src/cli/partitioner.rs.)

    // -n stops after that many; --offset starts inside the log; -p limits partitions.
    ok(
        &["produce", "events", "-p", "1", "--brokers", &b],
        "x0\nx1\nx2\nx3\n",
    )?;
    let end_before: i64 = lines.iter().filter(|l| l[0] == "1").count() as i64;
    let offset = (end_before + 2).to_string();
    let out = ok(
        &[
            "consume",
            "events",
            "-p",
            "1",
            "--offset",
            &offset,
            "-e",
            "--brokers",
            &b,
        ],
        "",
    )?;
    assert_eq!(out, "x2\nx3\n");
    let out = ok(
        &[
            "consume",
            "events",
            "-p",
            "1",
            "--from-beginning",
            "-n",
            "2",
            "--format",
            "%o\\n",
            "--brokers",
            &b,
        ],
        "",
    )?;
    assert_eq!(out, "0\n1\n");
    // --timestamp past every record starts at the end.
    let out = ok(
        &[
            "consume",
            "events",
            "--timestamp",
            "99999999999999",
            "-e",
            "--brokers",
            &b,
        ],
        "",
    )?;
    assert_eq!(out, "");
    let out = ok(
        &[
            "consume",
            "events",
            "--timestamp",
            "0",
            "-e",
            "--format",
            "%v\\n",
            "--brokers",
            &b,
        ],
        "",
    )?;
    assert_eq!(out.lines().count(), 24);
    Ok(())
}

#[test]
fn every_command_has_help_with_examples() -> Result<()> {
    for command in [
        vec!["topic", "create"],
        vec!["topic", "describe"],
        vec!["produce"],
        vec!["consume"],
        vec!["group", "reset-offsets"],
        vec!["cluster", "info"],
        vec!["tune"],
        vec!["iotune"],
        vec!["install-service"],
    ] {
        let mut args = command.clone();
        args.push("--help");
        let help = ok(&args, "")?;
        assert!(help.contains("Example"), "{command:?}: {help}");
        if !["tune", "iotune", "install-service"].contains(&command[0]) {
            assert!(help.contains("--brokers"), "{command:?}: {help}");
        }
    }
    Ok(())
}
