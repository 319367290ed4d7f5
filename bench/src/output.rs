//! A run's results: the summary printed, the `--json` document and the `--report` page.

use std::path::Path;

use anyhow::Context;
use serde_json::{json, Map, Value};

use crate::limits::Limits;
use crate::result::{RunResult, Section};

/// A section's figures as `--json` has them, with its shares of `limits` when given.
pub(crate) fn section_json(section: &Section, limits: Option<&Limits>) -> Map<String, Value> {
    let m = &section.measurement;
    let mut map = Map::new();
    let mut put = |key: &str, value: Value| {
        map.insert(key.to_owned(), value);
    };
    put("records", json!(m.records));
    put("bytes", json!(m.bytes));
    put("bytes_kind", json!(section.bytes_kind));
    put("seconds", json!(m.seconds));
    put("records_per_sec", json!(m.records_per_sec()));
    put("mb_per_sec", json!(m.mb_per_sec()));
    put("latency_kind", json!(section.latency_kind));
    put("latency_ms_avg", json!(m.latency_ms_avg()));
    for (key, q) in [("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999)] {
        put(&format!("latency_ms_{key}"), json!(m.latency_ms(q)));
    }
    put("latency_ms_max", json!(m.latency_ms_max()));
    if let Some(limits) = limits {
        put(
            "share_of_loopback",
            json!(m.mb_per_sec() / limits.loopback_mb_per_sec),
        );
        put(
            "share_of_disk_write_direct",
            json!(m.mb_per_sec() / limits.disk_write_direct_mb_per_sec),
        );
        if section.name == "consume" {
            put(
                "share_of_loopback_sendfile",
                json!(m.mb_per_sec() / limits.loopback_sendfile_mb_per_sec),
            );
        } else {
            put(
                "share_of_disk_synced_append",
                json!(m.mb_per_sec() / limits.disk_synced_append_mb_per_sec),
            );
        }
    }
    put(
        "timeline",
        Value::Array(
            m.timeline
                .iter()
                .map(|i| {
                    let p99 = (!i.latency_us.is_empty()).then(|| i.latency_us.value_at_quantile(0.99) as f64 / 1e3);
                    json!({"second": i.second, "records": i.records, "mb": i.bytes as f64 / 1e6, "latency_ms_p99": p99})
                })
                .collect(),
        ),
    );
    map
}

impl RunResult {
    /// The `--json` document: the first section's fields at top level, every section under
    /// `sections`, and the limits.
    pub fn to_json(&self) -> Value {
        let limits = self.limits.as_ref();
        let mut top = self
            .sections
            .first()
            .map(|s| section_json(s, limits))
            .unwrap_or_default();
        top.insert("kind".into(), json!(self.kind));
        let sections: Map<String, Value> = self
            .sections
            .iter()
            .map(|s| (s.name.to_owned(), Value::Object(section_json(s, limits))))
            .collect();
        top.insert("sections".into(), Value::Object(sections));
        top.insert(
            "limits".into(),
            serde_json::to_value(&self.limits).expect("limits serialise"),
        );
        top.insert("settings".into(), self.settings.clone());
        if let Some(transactions) = &self.transactions {
            top.insert("transactions".into(), transactions.to_json(self.seconds()));
        }
        Value::Object(top)
    }

    /// The run's length: its first section's.
    fn seconds(&self) -> f64 {
        self.sections.first().map_or(0.0, |s| s.measurement.seconds)
    }

    /// Prints the summary and writes the files asked for.
    pub fn emit(&self, json_path: Option<&Path>, report_path: Option<&Path>) -> anyhow::Result<()> {
        for section in &self.sections {
            println!(
                "{}: {}",
                section.name,
                section.measurement.summary_line(section.verb)
            );
            if let Some(limits) = &self.limits {
                let mb_per_sec = section.measurement.mb_per_sec();
                let (disk, disk_mb_per_sec) = if section.name == "produce" {
                    ("write", limits.disk_write_direct_mb_per_sec)
                } else {
                    ("read", limits.disk_read_direct_mb_per_sec)
                };
                println!(
                    "  {:.1} % of loopback TCP ({:.0} MB/s), {:.1} % of O_DIRECT disk {disk} ({:.0} MB/s)",
                    100.0 * mb_per_sec / limits.loopback_mb_per_sec,
                    limits.loopback_mb_per_sec,
                    100.0 * mb_per_sec / disk_mb_per_sec,
                    disk_mb_per_sec
                );
                if section.name == "consume" {
                    println!(
                        "  {:.1} % of loopback TCP fed by sendfile from the page cache ({:.0} MB/s, the ceiling for zero-copy fetches)",
                        100.0 * mb_per_sec / limits.loopback_sendfile_mb_per_sec,
                        limits.loopback_sendfile_mb_per_sec
                    );
                }
                if section.name == "produce" {
                    println!(
                        "  {:.1} % of synced appends ({} files x {} KiB + fdatasync each: {:.0} MB/s, the ceiling for acks=all)",
                        100.0 * mb_per_sec / limits.disk_synced_append_mb_per_sec,
                        limits.disk_synced_append_streams,
                        limits.disk_synced_append_kib,
                        limits.disk_synced_append_mb_per_sec
                    );
                }
            }
        }
        if let Some(transactions) = &self.transactions {
            println!("transactions: {}", transactions.summary_line(self.seconds()));
        }
        if let Some(limits) = &self.limits {
            println!("{}", limits.describe());
        }
        if let Some(path) = json_path {
            let text = serde_json::to_string_pretty(&self.to_json())?;
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(path) = report_path {
            std::fs::write(path, crate::report::render_html(self))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Measurement, Progress, Recorder};

    #[test]
    fn json_has_the_promised_fields() {
        let mut recorder = Recorder::new(0, Progress::new());
        recorder.count(10, 1000, 1_000_000);
        recorder.latency(10, 3_000, 1000);
        let measurement = Measurement::merge(vec![recorder.finish()], 0.5);
        let result = RunResult {
            kind: "produce",
            settings: json!({"acks": "1"}),
            sections: vec![Section {
                name: "produce",
                verb: "sent",
                latency_kind: "produce",
                bytes_kind: "payload",
                measurement,
            }],
            limits: None,
            transactions: None,
        };
        let value = result.to_json();
        for key in [
            "records",
            "bytes",
            "seconds",
            "records_per_sec",
            "mb_per_sec",
            "latency_ms_p50",
            "latency_ms_p99",
            "latency_ms_p999",
            "latency_ms_max",
            "limits",
        ] {
            assert!(value.get(key).is_some(), "missing {key}");
        }
        assert_eq!(value["records_per_sec"], json!(2000.0));
        assert_eq!(value["mb_per_sec"], json!(2.0));
        assert!((value["latency_ms_p99"].as_f64().unwrap() - 3.0).abs() < 0.01);
        assert_eq!(value["sections"]["produce"]["records"], json!(1000));
        let html = crate::report::render_html(&result);
        assert!(html.contains("<svg") && html.contains("1000 records sent"));
        assert!(!html.contains("<script"));
    }

    #[test]
    fn shares_are_of_the_limits_measured_in_the_same_run() {
        let section = |name: &'static str| {
            let mut recorder = Recorder::new(0, Progress::new());
            recorder.count(10, 1000, 100_000_000);
            Section {
                name,
                verb: "moved",
                latency_kind: name,
                bytes_kind: "payload",
                measurement: Measurement::merge(vec![recorder.finish()], 1.0),
            }
        };
        let limits = Limits {
            dir: "/data".into(),
            disk_write_direct_mb_per_sec: 1000.0,
            disk_read_direct_mb_per_sec: 2000.0,
            disk_write_buffered_mb_per_sec: 900.0,
            disk_read_buffered_mb_per_sec: 800.0,
            fdatasync_per_sec: 5000.0,
            fdatasync_us_p50: 180,
            fdatasync_us_p99: 500,
            fdatasync_us_max: 4000,
            disk_synced_append_mb_per_sec: 400.0,
            disk_synced_append_streams: 4,
            disk_synced_append_kib: 256,
            loopback_mb_per_sec: 4000.0,
            loopback_sendfile_mb_per_sec: 2500.0,
            seconds: 4.5,
        };
        let result = RunResult {
            kind: "e2e",
            settings: json!({}),
            sections: vec![section("produce"), section("consume")],
            limits: Some(limits),
            transactions: None,
        };
        let value = result.to_json();
        // 100 MB in 1 s against 4000 MB/s of loopback and 400 MB/s of synced appends.
        let produce = &value["sections"]["produce"];
        assert_eq!(produce["share_of_loopback"], json!(0.025));
        assert_eq!(produce["share_of_disk_synced_append"], json!(0.25));
        assert_eq!(value["limits"]["disk_synced_append_streams"], json!(4));
        // Reads have no synced-append ceiling, but the sendfile one; writes the other way round.
        let consume = &value["sections"]["consume"];
        assert!(consume.get("share_of_disk_synced_append").is_none());
        assert_eq!(consume["share_of_loopback_sendfile"], json!(0.04));
        assert!(produce.get("share_of_loopback_sendfile").is_none());
    }
}
