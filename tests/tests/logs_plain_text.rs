//! Logs and messages fit their readers: a broker whose stderr is a file writes no
//! ANSI escape codes into it, `laminar.log.format=json` writes one JSON object per line, and a
//! bad config value is reported with "config error:" once.

use anyhow::Result;
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::{cli, Broker, BrokerOptions};

#[test]
fn a_broker_logging_to_a_file_writes_no_colour_codes() -> Result<()> {
    let mut broker = Broker::start(BrokerOptions::default())?;
    // Some log lines beyond start-up: a topic created, then a clean stop.
    wire::create_topic(&mut WireConnection::connect(broker.addr())?, "plain", 2)?;
    broker.terminate()?;
    let stderr = broker.stderr_tail();
    assert!(stderr.contains("stopped cleanly"), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "escape codes in the log file:\n{stderr:?}"
    );
    Ok(())
}

#[test]
fn json_format_writes_one_object_per_line() -> Result<()> {
    let mut broker = Broker::start(BrokerOptions {
        overrides: vec![("laminar.log.format".into(), "json".into())],
        ..BrokerOptions::default()
    })?;
    wire::create_topic(&mut WireConnection::connect(broker.addr())?, "shipped", 1)?;
    broker.terminate()?;
    let stderr = broker.stderr_tail();
    let mut messages = Vec::new();
    // A tail cut mid-file starts with "[...]" and a partial line: skip it.
    let whole_lines = stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("[...]"));
    for line in whole_lines {
        let object: serde_json::Value =
            serde_json::from_str(line).map_err(|e| anyhow::anyhow!("not a JSON line ({e}): {line:?}"))?;
        for field in ["timestamp", "level", "message"] {
            anyhow::ensure!(object.get(field).is_some(), "no {field} in {line}");
        }
        messages.push(object["message"].as_str().unwrap_or_default().to_string());
    }
    anyhow::ensure!(
        messages.iter().any(|m| m == "laminar broker started"),
        "{messages:?}"
    );
    anyhow::ensure!(
        messages.iter().any(|m| m == "laminar broker stopped cleanly"),
        "{messages:?}"
    );
    Ok(())
}

#[test]
fn an_unknown_log_format_is_a_config_error() -> Result<()> {
    let run = cli::run(&["broker", "--override", "laminar.log.format=xml"], "")?;
    assert!(!run.success);
    assert_eq!(run.stderr.matches("config error").count(), 1, "{}", run.stderr);
    assert!(run.stderr.contains("laminar.log.format"), "{}", run.stderr);
    Ok(())
}

#[test]
fn a_bad_config_value_says_config_error_once() -> Result<()> {
    let run = cli::run(&["broker", "--override", "log.segment.bytes=abc"], "")?;
    assert!(!run.success);
    assert_eq!(run.stderr.matches("config error").count(), 1, "{}", run.stderr);
    assert!(run.stderr.contains("log.segment.bytes"), "{}", run.stderr);
    assert!(!run.stderr.contains('\u{1b}'), "{:?}", run.stderr);
    Ok(())
}
