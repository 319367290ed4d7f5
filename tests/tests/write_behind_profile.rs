//! A broker sized by an iotune profile (`laminar.iotune.profile`, or `iotune.json` in its log
//! dir): the startup line and `/v1/status` report the profile's values and where they came
//! from, appends are written behind (`laminar_storage_writeback_*` on `/metrics`), the
//! profile's write mode is taken unless `laminar.storage.write_mode` is set, and a malformed
//! profile stops the start with a message naming the file.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use laminar_tests::http::{get_ok, MetricsPage};
use laminar_tests::wire::{auto_create, produce, record_batch, WireConnection};
use laminar_tests::{Broker, BrokerOptions};

/// An `iotune.json` as `laminar iotune` wrote it before it measured appends (format version
/// 1), with the recommendation `write_batch_bytes` / `io_depth`.
fn write_profile(path: &Path, write_batch_bytes: u64, io_depth: u64) -> Result<()> {
    let text = format!(
        r#"{{
  "version": 1,
  "data_dir": "/var/lib/laminar",
  "device": "vda",
  "direct_io": true,
  "file_bytes": 268435456,
  "duration_ms": 10012,
  "cases": [
    {{ "op": "write", "block_bytes": 131072, "queue_depth": 8, "bytes": 1048576000,
       "seconds": 0.8, "mb_per_s": 1310.7, "iops": 10000.0 }}
  ],
  "fdatasync_samples": 120,
  "fdatasync_latency_us_p50": 250.0,
  "fdatasync_latency_us_p99": 900.0,
  "recommended_write_batch_bytes": {write_batch_bytes},
  "recommended_io_depth": {io_depth}
}}
"#
    );
    std::fs::write(path, text)?;
    Ok(())
}

#[test]
fn a_profile_sizes_write_behind_and_appends_are_written_behind() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let profile = dir.path().join("iotune.json");
    write_profile(&profile, 131072, 8)?;
    let options =
        BrokerOptions::default().with_override("laminar.iotune.profile", &profile.display().to_string());
    let broker = Broker::start(options)?;
    let source = format!("profile {}", profile.display());
    let expected = format!("write_batch_bytes=131072 ({source}), io_depth=8 ({source})");
    broker.stderr_tail_with(&expected, Duration::from_secs(10))?;

    let status = get_ok(broker.http_addr(), "/v1/status")?;
    for field in [
        "\"active\": true".to_string(),
        "\"write_batch_bytes\": 131072".to_string(),
        "\"io_depth\": 8".to_string(),
        format!("\"io_depth_source\": \"{source}\""),
    ] {
        ensure!(status.contains(&field), "/v1/status lacks {field}:\n{status}");
    }

    // 1 MiB into one partition: at least seven whole 128 KiB ranges to write behind.
    let mut conn = WireConnection::connect(broker.addr())?;
    auto_create(&mut conn, "behind")?;
    let value = vec![b'x'; 1024];
    for i in 0..16 {
        let values: Vec<&[u8]> = (0..64).map(|_| value.as_slice()).collect();
        let batch = record_batch(&values, 1_700_000_000_000 + i)?;
        let answer = produce(&mut conn, "behind", 0, batch, 1)?;
        ensure!(answer.error_code == 0, "produce: {answer:?}");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let page = MetricsPage::parse(&get_ok(broker.http_addr(), "/metrics")?)?;
        let submitted = page.sum("laminar_storage_writeback_ranges_submitted_total");
        let completed = page.sum("laminar_storage_writeback_ranges_completed_total");
        let bytes = page.sum("laminar_storage_writeback_bytes_total");
        let failed = page.sum("laminar_storage_writeback_ranges_failed_total");
        ensure!(failed == 0.0, "write-behind failed");
        if submitted > 0.0 && completed == submitted && bytes >= 7.0 * 131072.0 {
            ensure!(bytes % 131072.0 == 0.0, "whole batches only: {bytes}");
            ensure!(page.sum("laminar_storage_writeback_in_flight") == 0.0);
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "write-behind did not catch up: submitted {submitted}, completed {completed}, bytes {bytes}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

#[test]
fn iotune_json_in_the_log_dir_is_read_and_config_keys_win() -> Result<()> {
    let options = BrokerOptions::default().with_override("laminar.storage.io_depth", "2");
    let mut broker = Broker::start(options)?;
    let status = get_ok(broker.http_addr(), "/v1/status")?;
    ensure!(
        status.contains("\"active\": false"),
        "off without a profile:\n{status}"
    );
    let profile = broker.data_dir().join("iotune.json");
    write_profile(&profile, 1 << 20, 16)?;
    broker.restart()?;
    let expected = format!(
        "write_batch_bytes=1048576 (profile {}), io_depth=2 (config)",
        profile.display()
    );
    broker.stderr_tail_with(&expected, Duration::from_secs(10))?;
    Ok(())
}

#[test]
fn a_malformed_profile_fails_the_start_naming_the_file() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let profile = dir.path().join("broken-iotune.json");
    std::fs::write(&profile, "{\"version\": 1, \"recommended_io_depth\": ")?;
    let options =
        BrokerOptions::default().with_override("laminar.iotune.profile", &profile.display().to_string());
    let error = match Broker::start(options) {
        Ok(_) => anyhow::bail!("the broker started with a malformed profile"),
        Err(e) => format!("{e:#}"),
    };
    let named = format!(
        "laminar.iotune.profile: cannot read the iotune profile {}",
        profile.display()
    );
    ensure!(error.contains(&named), "error lacks {named:?}:\n{error}");

    write_profile(&profile, 131072, 64)?;
    let options =
        BrokerOptions::default().with_override("laminar.iotune.profile", &profile.display().to_string());
    let error = match Broker::start(options) {
        Ok(_) => anyhow::bail!("the broker started with an io depth of 64"),
        Err(e) => format!("{e:#}"),
    };
    let named = format!("iotune profile {}: recommended_io_depth 64", profile.display());
    ensure!(error.contains(&named), "error lacks {named:?}:\n{error}");
    Ok(())
}

#[test]
fn the_write_mode_iotune_measured_is_taken_unless_the_key_is_set() -> Result<()> {
    let mut broker = Broker::start(BrokerOptions::default())?;
    broker.stderr_tail_with("write_mode=buffered (default)", Duration::from_secs(10))?;
    let profile = broker.data_dir().join("iotune.json");
    let iotune = std::process::Command::new(laminar_tests::default_binary())
        .args(["iotune", "--duration", "2", "--dir"])
        .arg(broker.data_dir())
        .output()?;
    let printed = String::from_utf8_lossy(&iotune.stdout);
    ensure!(
        iotune.status.success(),
        "laminar iotune: {printed}{}",
        String::from_utf8_lossy(&iotune.stderr)
    );
    let measured: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&profile)?)?;
    let chosen = measured["recommended_write_mode"]
        .as_str()
        .unwrap_or("none")
        .to_string();
    ensure!(
        ["buffered", "direct"].contains(&chosen.as_str()),
        "iotune recommended {chosen}:\n{measured}"
    );
    ensure!(
        printed.contains(&format!("recommended write mode {chosen}")),
        "{printed}"
    );
    let cases = measured["append_cases"].as_array().map_or(0, Vec::len);
    ensure!(cases >= 1, "no append case measured:\n{measured}");

    broker.restart()?;
    broker.stderr_tail_with(
        &format!("write_mode={chosen} (profile {})", profile.display()),
        Duration::from_secs(10),
    )?;
    Ok(())
}

#[test]
fn a_profile_recommending_direct_writes_segments_with_o_direct() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let profile = dir.path().join("iotune.json");
    write_profile(&profile, 131072, 8)?;
    let text = std::fs::read_to_string(&profile)?;
    let recommending = text.replacen(
        "\"version\": 1,",
        "\"version\": 1,\n  \"recommended_write_mode\": \"direct\",",
        1,
    );
    std::fs::write(&profile, recommending)?;
    let path = profile.display().to_string();
    let broker = Broker::start(BrokerOptions::default().with_override("laminar.iotune.profile", &path))?;
    broker.stderr_tail_with(
        &format!("write_mode=direct (profile {path})"),
        Duration::from_secs(10),
    )?;
    let mut conn = WireConnection::connect(broker.addr())?;
    auto_create(&mut conn, "direct")?;
    let value = vec![b'd'; 1024];
    let values: Vec<&[u8]> = (0..64).map(|_| value.as_slice()).collect();
    let answer = produce(
        &mut conn,
        "direct",
        0,
        record_batch(&values, 1_700_000_000_000)?,
        1,
    )?;
    ensure!(answer.error_code == 0, "produce: {answer:?}");
    let page = MetricsPage::parse(&get_ok(broker.http_addr(), "/metrics")?)?;
    let written = page.sum("laminar_storage_direct_bytes_total");
    ensure!(
        written >= 64.0 * 1024.0,
        "the batch was not written O_DIRECT: {written} bytes"
    );

    let options = BrokerOptions::default()
        .with_override("laminar.iotune.profile", &path)
        .with_override("laminar.storage.write_mode", "buffered");
    let keyed = Broker::start(options)?;
    keyed.stderr_tail_with("write_mode=buffered (config)", Duration::from_secs(10))?;
    Ok(())
}
