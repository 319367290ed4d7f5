//! `laminar topic ...`, `produce`, `consume` and `cluster info` against a real broker, and the
//! one-line failures (unreachable broker, unknown topic, invalid name, existing topic).

use anyhow::Result;
use laminar_tests::cli::{fails, ok, ok_on, rows_starting};
use laminar_tests::Broker;

/// Creates `orders` (3 partitions, a retention.ms override) and `audit`; both are listed.
fn create_orders_and_audit(b: &str) -> Result<()> {
    let created = ok_on(
        b,
        &["topic", "create", "orders", "-p", "3", "-c", "retention.ms=60000"],
        "",
    )?;
    assert_eq!(created.trim(), "created topic orders");
    ok_on(b, &["topic", "create", "audit"], "")?;
    let listed = ok_on(b, &["topic", "list"], "")?;
    assert_eq!(rows_starting(&listed, "orders"), vec![vec!["orders", "3", "1"]]);
    assert_eq!(rows_starting(&listed, "audit").len(), 1);
    Ok(())
}

/// Three records in partition 2 of `orders`: describe shows its offsets and the configs with
/// their sources.
fn check_orders_described(b: &str) -> Result<()> {
    ok_on(b, &["produce", "orders", "-p", "2"], "a\nb\nc\n")?;
    let described = ok_on(b, &["topic", "describe", "orders"], "")?;
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
    Ok(())
}

/// Alters a config of `orders`, grows it to 5 partitions, deletes it; returns the listing
/// after that.
fn alter_grow_and_delete_orders(b: &str) -> Result<String> {
    let alter = [
        "topic",
        "alter-config",
        "orders",
        "--set",
        "retention.ms=1000",
        "--delete",
        "segment.ms",
    ];
    ok_on(b, &alter, "")?;
    let described = ok_on(b, &["topic", "describe", "orders"], "")?;
    assert_eq!(rows_starting(&described, "retention.ms")[0][1], "1000");
    let grown = ok_on(b, &["topic", "add-partitions", "orders", "--num", "2"], "")?;
    assert_eq!(grown.trim(), "topic orders now has 5 partitions");
    ok_on(b, &["topic", "delete", "orders"], "")?;
    let listed = ok_on(b, &["topic", "list"], "")?;
    assert!(rows_starting(&listed, "orders").is_empty(), "{listed}");
    Ok(listed)
}

/// `cluster info` counts the topics and partitions of `listed` (internal topics included) and
/// names this broker the controller.
fn check_cluster_info_matches(b: &str, listed: &str) -> Result<()> {
    let topics: Vec<Vec<&str>> = listed
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let partitions: usize = topics.iter().map(|t| t[1].parse::<usize>().unwrap()).sum();
    let info = ok_on(b, &["cluster", "info"], "")?;
    assert!(
        info.contains(&format!("topics:     {}\n", topics.len())),
        "{info}"
    );
    assert!(info.contains(&format!("partitions: {partitions}\n")), "{info}");
    assert!(info.contains(&format!("1   {b}  controller")), "{info}");
    Ok(())
}

#[test]
fn topic_lifecycle_create_list_describe_alter_grow_delete() -> Result<()> {
    let broker = Broker::start_default()?;
    let b = broker.bootstrap();
    create_orders_and_audit(&b)?;
    check_orders_described(&b)?;
    let listed = alter_grow_and_delete_orders(&b)?;
    check_cluster_info_matches(&b, &listed)
}

/// Deleting many topics goes in steps (progress on a terminal), and in a script says only what
/// it deleted: no progress line, nothing on stderr.
#[test]
fn deleting_many_topics_in_a_script_prints_no_progress() -> Result<()> {
    let broker = Broker::start_default()?;
    let b = broker.bootstrap();
    let names: Vec<String> = (0..9).map(|i| format!("gone{i}")).collect();
    for name in &names {
        ok_on(&b, &["topic", "create", name, "-p", "2"], "")?;
    }
    let mut args = vec!["topic", "delete"];
    args.extend(names.iter().map(String::as_str));
    args.extend(["--brokers", &b]);
    let run = laminar_tests::cli::run(&args, "")?;
    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.stderr, "", "a script sees no progress");
    let deleted: Vec<&str> = run.stdout.lines().collect();
    let expected: Vec<String> = names.iter().map(|n| format!("deleted topic {n}")).collect();
    assert_eq!(deleted, expected);
    Ok(())
}

/// On a terminal (script(1) gives the command one) the same deletion draws its progress on
/// stderr, and clears the line when done.
#[test]
fn deleting_many_topics_on_a_terminal_shows_progress() -> Result<()> {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipped: script(1) is not installed");
        return Ok(());
    }
    let broker = Broker::start_default()?;
    let b = broker.bootstrap();
    let names: Vec<String> = (0..6).map(|i| format!("shown{i}")).collect();
    for name in &names {
        ok_on(&b, &["topic", "create", name], "")?;
    }
    let binary = laminar_tests::default_binary();
    let command = format!(
        "{} topic delete {} --brokers {b}",
        binary.display(),
        names.join(" ")
    );
    let run = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()?;
    let shown = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{shown}");
    assert!(shown.contains("deleting topics: 6/6"), "{shown:?}");
    assert!(shown.contains("\r\u{1b}[K"), "the line is cleared: {shown:?}");
    assert!(shown.contains("deleted topic shown5"), "{shown:?}");
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

/// Creates `events` (4 partitions) and produces 20 records `key<i % 5>:value<i>` with the
/// headers `src=cli,v=2`, zstd-compressed.
fn produce_keyed_events(b: &str) -> Result<()> {
    ok_on(b, &["topic", "create", "events", "-p", "4"], "")?;
    let input: String = (0..20).map(|i| format!("key{}:value{i}\n", i % 5)).collect();
    let produce = [
        "produce",
        "events",
        "--key-separator",
        ":",
        "--headers",
        "src=cli,v=2",
        "--compression",
        "zstd",
    ];
    ok_on(b, &produce, &input)?;
    Ok(())
}

/// Every record of `events`, one line each: partition, offset, key, value, headers.
fn consume_events_formatted(b: &str) -> Result<String> {
    let format = "%p %o %k %v %h\\n";
    ok_on(
        b,
        &["consume", "events", "--from-beginning", "-e", "--format", format],
        "",
    )
}

#[test]
fn produced_keys_headers_and_values_consume_back_one_partition_per_key() -> Result<()> {
    let broker = Broker::start_default()?;
    let b = broker.bootstrap();
    produce_keyed_events(&b)?;
    let out = consume_events_formatted(&b)?;
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
    Ok(())
}

#[test]
fn consume_starts_at_an_offset_or_a_timestamp_and_stops_after_n_records() -> Result<()> {
    let broker = Broker::start_default()?;
    let b = broker.bootstrap();
    produce_keyed_events(&b)?;
    let keyed = consume_events_formatted(&b)?;
    let end_before = keyed.lines().filter(|l| l.starts_with("1 ")).count() as i64;
    // -n stops after that many; --offset starts inside the log; -p limits partitions.
    ok_on(&b, &["produce", "events", "-p", "1"], "x0\nx1\nx2\nx3\n")?;
    let offset = (end_before + 2).to_string();
    let out = ok_on(
        &b,
        &["consume", "events", "-p", "1", "--offset", &offset, "-e"],
        "",
    )?;
    assert_eq!(out, "x2\nx3\n");
    let first_two = [
        "consume",
        "events",
        "-p",
        "1",
        "--from-beginning",
        "-n",
        "2",
        "--format",
        "%o\\n",
    ];
    assert_eq!(ok_on(&b, &first_two, "")?, "0\n1\n");
    // --timestamp past every record starts at the end.
    let past_every_record = ["consume", "events", "--timestamp", "99999999999999", "-e"];
    assert_eq!(ok_on(&b, &past_every_record, "")?, "");
    let from_zero = ["consume", "events", "--timestamp", "0", "-e", "--format", "%v\\n"];
    assert_eq!(ok_on(&b, &from_zero, "")?.lines().count(), 24);
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
