//! `laminar consume --group`, `group list | describe | reset-offsets | delete` against a real
//! broker, and the consumer-group lag the broker exports on `/metrics`.

use anyhow::Result;
use laminar_tests::cli::{fails, ok, ok_on, rows_starting};
use laminar_tests::http::{get_ok, MetricsPage};
use laminar_tests::Broker;

/// `(partition, current offset, log end offset, lag)` rows of `group describe`.
fn lag_rows(described: &str, topic: &str) -> Vec<(String, String, String, String)> {
    rows_starting(described, topic)
        .into_iter()
        .map(|r| {
            (
                r[1].to_string(),
                r[2].to_string(),
                r[3].to_string(),
                r[4].to_string(),
            )
        })
        .collect()
}

/// `laminar group reset-offsets billing --topic orders HOW --brokers B`.
fn reset(brokers: &str, how: &[&str]) -> Result<String> {
    let mut args = vec!["group", "reset-offsets", "billing", "--topic", "orders"];
    args.extend_from_slice(how);
    args.extend_from_slice(&["--brokers", brokers]);
    ok(&args, "")
}

/// The lag rows of topic `orders` in `laminar group describe billing`.
fn group_lag(brokers: &str) -> Result<Vec<(String, String, String, String)>> {
    let described = ok(&["group", "describe", "billing", "--brokers", brokers], "")?;
    Ok(lag_rows(&described, "orders"))
}

fn row(p: i32, current: i64, end: i64, lag: i64) -> (String, String, String, String) {
    (
        p.to_string(),
        current.to_string(),
        end.to_string(),
        lag.to_string(),
    )
}

/// Creates `orders` with two partitions and produces ten records `p<partition>-<i>` to each.
fn orders_with_ten_records_per_partition(b: &str) -> Result<()> {
    ok_on(b, &["topic", "create", "orders", "-p", "2"], "")?;
    for partition in ["0", "1"] {
        let lines: String = (0..10).map(|i| format!("p{partition}-{i}\n")).collect();
        ok_on(b, &["produce", "orders", "-p", partition], &lines)?;
    }
    Ok(())
}

/// `laminar consume orders --group billing ARGS`: its stdout.
fn consume_as_billing(b: &str, args: &[&str]) -> Result<String> {
    let mut all = vec!["consume", "orders", "--group", "billing"];
    all.extend_from_slice(args);
    ok_on(b, &all, "")
}

/// The broker's /metrics?partitions=true shows the lag of every `group describe` row, and plain
/// /metrics their sum and largest per group.
fn check_metrics_show_lag(broker: &Broker, rows: &[(String, String, String, String)]) -> Result<()> {
    let totals = MetricsPage::parse(&get_ok(broker.http_addr(), "/metrics")?)?;
    let lags: Vec<f64> = rows
        .iter()
        .map(|(_, _, _, lag)| lag.parse())
        .collect::<Result<_, _>>()?;
    let sum = "laminar_kafka_consumer_group_lag_sum{group=\"billing\"}";
    let max = "laminar_kafka_consumer_group_lag_max{group=\"billing\"}";
    assert_eq!(totals.value(sum), Some(lags.iter().sum()), "{sum}");
    assert_eq!(
        totals.value(max),
        Some(lags.iter().cloned().fold(0.0, f64::max)),
        "{max}"
    );
    assert_eq!(
        totals.sum("laminar_kafka_consumer_group_lag"),
        0.0,
        "no per-partition series"
    );
    let page = MetricsPage::parse(&get_ok(broker.http_addr(), "/metrics?partitions=true")?)?;
    for (partition, current, _, lag) in rows {
        let series = format!(
            "laminar_kafka_consumer_group_lag{{group=\"billing\",topic=\"orders\",partition=\"{partition}\"}}"
        );
        assert_eq!(
            page.value(&series),
            Some(lag.parse()?),
            "{series} (committed {current})"
        );
    }
    Ok(())
}

#[test]
fn a_group_consume_commits_its_offsets_shown_as_lag_and_the_next_resumes_there() -> Result<()> {
    let broker = Broker::start_default()?;
    let b = broker.bootstrap();
    orders_with_ten_records_per_partition(&b)?;
    // One member gets both partitions (range), reads 13 records: 10 of one partition and 3 of
    // the other, or some split; the committed offsets add up to 13 either way.
    let out = consume_as_billing(&b, &["--from-beginning", "-n", "13"])?;
    assert_eq!(out.lines().count(), 13, "{out}");

    let listed = ok_on(&b, &["group", "list"], "")?;
    assert_eq!(
        rows_starting(&listed, "billing"),
        vec![vec!["billing", "Empty", "consumer", "classic"]]
    );
    let described = ok_on(&b, &["group", "describe", "billing"], "")?;
    assert!(described.contains("state:    Empty"), "{described}");
    let rows = lag_rows(&described, "orders");
    assert_eq!(rows.len(), 2, "{described}");
    let committed: i64 = rows.iter().map(|r| r.1.parse::<i64>().unwrap()).sum();
    let lag: i64 = rows.iter().map(|r| r.3.parse::<i64>().unwrap()).sum();
    assert_eq!((committed, lag), (13, 7), "{described}");
    assert!(rows.iter().all(|r| r.2 == "10"));
    check_metrics_show_lag(&broker, &rows)?;

    // A second group consume resumes from the committed offsets.
    let rest = consume_as_billing(&b, &["-n", "7"])?;
    let mut all: Vec<&str> = out.lines().chain(rest.lines()).collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 20, "every record exactly once:\n{out}{rest}");
    Ok(())
}

#[test]
fn reset_offsets_plans_then_executes_per_partition_and_by_timestamp_and_delete_removes_the_group(
) -> Result<()> {
    let broker = Broker::start_default()?;
    let b = broker.bootstrap();
    orders_with_ten_records_per_partition(&b)?;
    consume_as_billing(&b, &["--from-beginning", "-n", "20"])?;
    assert_eq!(group_lag(&b)?, vec![row(0, 10, 10, 0), row(1, 10, 10, 0)]);

    // Reset: dry run changes nothing; --execute commits.
    let plan = reset(&b, &["--to-earliest"])?;
    assert!(plan.contains("dry run"), "{plan}");
    assert_eq!(group_lag(&b)?, vec![row(0, 10, 10, 0), row(1, 10, 10, 0)]);
    reset(&b, &["--to-offset", "4", "--execute"])?;
    assert_eq!(group_lag(&b)?, vec![row(0, 4, 10, 6), row(1, 4, 10, 6)]);
    reset(&b, &["-p", "1", "--to-latest", "--execute"])?;
    assert_eq!(group_lag(&b)?, vec![row(0, 4, 10, 6), row(1, 10, 10, 0)]);
    let out = consume_as_billing(&b, &["-n", "6", "--format", "%v\\n"])?;
    assert_eq!(out, "p0-4\np0-5\np0-6\np0-7\np0-8\np0-9\n");

    // Reset by timestamp: everything was produced after 0, so to the log start.
    reset(&b, &["--to-timestamp", "0", "--execute"])?;
    assert_eq!(group_lag(&b)?, vec![row(0, 0, 10, 10), row(1, 0, 10, 10)]);

    let deleted = ok_on(&b, &["group", "delete", "billing"], "")?;
    assert_eq!(deleted.trim(), "deleted group billing");
    assert_eq!(
        fails(&["group", "describe", "billing", "--brokers", &b])?,
        "laminar: unknown group billing"
    );
    Ok(())
}
