//! Logs and messages fit their readers (issue 17): a broker whose stderr is a file writes no
//! ANSI escape codes into it, and a bad config value is reported with "config error:" once.

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
fn a_bad_config_value_says_config_error_once() -> Result<()> {
    let run = cli::run(&["broker", "--override", "log.segment.bytes=abc"], "")?;
    assert!(!run.success);
    assert_eq!(run.stderr.matches("config error").count(), 1, "{}", run.stderr);
    assert!(run.stderr.contains("log.segment.bytes"), "{}", run.stderr);
    assert!(!run.stderr.contains('\u{1b}'), "{:?}", run.stderr);
    Ok(())
}
