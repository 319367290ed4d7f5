//! Consumer groups against the real broker binary, driven by librdkafka through Python's
//! confluent-kafka (`groups_confluent.py` beside this file says what it checks).
//!
//! Skipped unless `LAMINAR_TEST_GROUPS=1`: it needs the `laminar` binary (`cargo build` first,
//! or `LAMINAR_BIN=path`) and a `python3` with confluent-kafka on `PATH` (`tests/run.sh` puts its
//! venv first).

use std::path::PathBuf;
use std::process::Command;

#[test]
fn confluent_kafka_consumer_groups() {
    if std::env::var("LAMINAR_TEST_GROUPS").as_deref() != Ok("1") {
        eprintln!("skipped: set LAMINAR_TEST_GROUPS=1 to run");
        return;
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let binary = std::env::var_os("LAMINAR_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("../target/debug/laminar"));
    assert!(
        binary.exists(),
        "no broker binary at {}: run `cargo build` first",
        binary.display()
    );
    let status = Command::new("python3")
        .arg(manifest.join("tests/groups_confluent.py"))
        .arg(&binary)
        .status()
        .expect("python3 runs");
    assert!(status.success(), "groups_confluent.py failed: {status}");
}
