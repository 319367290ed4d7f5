//! `laminar tune`: compare the host's kernel settings with what a broker wants, and (only when
//! asked) write the recommended values. Everything is read from `/sys` and `/proc`; a setting
//! the host does not expose is reported "not available on this host", never an error.

use std::path::PathBuf;

use serde::Serialize;

use crate::balloon::free_page_reporting_check;
use crate::blockdev::{block_devices_of, BlockDevice, DiskKind};
use crate::check::{FileWrite, TuneCheck};
use crate::hostfs::HostFs;
use crate::irq::irq_checks;
use crate::reclaim::proactive_reclaim_check;

/// What `check_all` and `apply` look at.
#[derive(Debug, Clone)]
pub struct TuneOptions {
    /// The broker's data directory (its disks are tuned).
    pub data_dir: PathBuf,
    /// Where `/sys` and `/proc` are; [`HostFs::real`] on a host.
    pub host: HostFs,
}

impl TuneOptions {
    pub fn for_data_dir(data_dir: impl Into<PathBuf>) -> TuneOptions {
        TuneOptions {
            data_dir: data_dir.into(),
            host: HostFs::real(),
        }
    }
}

/// Every check, in a stable order.
pub fn check_all(options: &TuneOptions) -> Vec<TuneCheck> {
    let fs = &options.host;
    let mut checks = Vec::new();
    match block_devices_of(fs, &options.data_dir) {
        Ok(disks) => {
            for disk in &disks {
                checks.push(scheduler_check(fs, disk));
                checks.push(nomerges_check(fs, disk));
            }
            checks.extend(irq_checks(fs, &disks));
        }
        Err(reason) => {
            checks.push(TuneCheck::unavailable(
                "io scheduler",
                "none (NVMe) / mq-deadline",
                SCHEDULER_WHY,
                &reason,
            ));
            checks.extend(irq_checks(fs, &[]));
        }
    }
    checks.push(governor_check(fs));
    checks.push(thp_check(fs));
    checks.push(free_page_reporting_check(fs));
    checks.push(proactive_reclaim_check(fs));
    checks.extend(SYSCTLS.iter().map(|s| sysctl_check(fs, s)));
    checks
}

/// What `apply` did (or, in a dry run, would do) for one write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApplyOutcome {
    pub check: String,
    pub path: String,
    pub value: String,
    pub written: bool,
    pub error: Option<String>,
}

/// Brings every applicable, not-ok check to its recommended value. Writes nothing unless
/// `write` is true (the CLI's `--apply`); a dry run lists the writes it would make. A failed
/// write (no root, read-only /proc/sys in a container) is reported, and the others still run.
pub fn apply(options: &TuneOptions, checks: &[TuneCheck], write: bool) -> Vec<ApplyOutcome> {
    checks
        .iter()
        .filter(|c| c.applicable && !c.ok)
        .flat_map(|c| c.fix.iter().map(move |w| (c, w)))
        .map(|(check, w)| {
            let result = if write {
                options.host.write(&w.path, &w.value).map_err(|e| e.to_string())
            } else {
                Ok(())
            };
            ApplyOutcome {
                check: check.name.clone(),
                path: w.path.clone(),
                value: w.value.clone(),
                written: write && result.is_ok(),
                error: result.err(),
            }
        })
        .collect()
}

const SCHEDULER_WHY: &str = "none for NVMe (deep hardware queues: a scheduler only adds CPU), \
                             mq-deadline for SATA/virtio (batches requests, bounds latency)";

fn scheduler_check(fs: &HostFs, disk: &BlockDevice) -> TuneCheck {
    let name = format!("io scheduler ({})", disk.name);
    let path = format!("{}/queue/scheduler", disk.sys_path());
    let Some(text) = fs.read(&path) else {
        return TuneCheck::unavailable(&name, "", SCHEDULER_WHY, "");
    };
    let available: Vec<&str> = text
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '[' || c == ']'))
        .collect();
    let current = text
        .split_whitespace()
        .find(|w| w.starts_with('['))
        .map_or(text.as_str(), |w| w.trim_matches(|c| c == '[' || c == ']'));
    let wanted = if disk.kind == DiskKind::Nvme || !available.contains(&"mq-deadline") {
        "none"
    } else {
        "mq-deadline"
    };
    if !available.contains(&wanted) {
        return TuneCheck::unavailable(&name, wanted, SCHEDULER_WHY, &format!("offers {text}"));
    }
    setting(name, current, wanted, SCHEDULER_WHY, &path)
}

fn nomerges_check(fs: &HostFs, disk: &BlockDevice) -> TuneCheck {
    let name = format!("nomerges ({})", disk.name);
    let path = format!("{}/queue/nomerges", disk.sys_path());
    let (wanted, why) = if disk.kind == DiskKind::Nvme {
        (
            "2",
            "the broker already writes large sequential chunks; merge lookups cost CPU on NVMe",
        )
    } else {
        ("0", "merging adjacent requests helps devices with shallow queues")
    };
    match fs.read(&path) {
        Some(current) => setting(name, &current, wanted, why, &path),
        None => TuneCheck::unavailable(&name, wanted, why, ""),
    }
}

/// A single-file setting that is ok when it equals `wanted`.
fn setting(name: String, current: &str, wanted: &str, why: &str, path: &str) -> TuneCheck {
    TuneCheck {
        name,
        current: current.to_string(),
        recommended: wanted.to_string(),
        why: why.to_string(),
        applicable: true,
        ok: current == wanted,
        fix: vec![FileWrite {
            path: path.to_string(),
            value: wanted.to_string(),
        }],
    }
}

fn governor_check(fs: &HostFs) -> TuneCheck {
    const NAME: &str = "cpu frequency governor";
    const WHY: &str = "shards spin on their rings; ramping the clock up on demand adds latency";
    let paths: Vec<String> = fs
        .list("/sys/devices/system/cpu")
        .into_iter()
        .filter(|n| n.strip_prefix("cpu").is_some_and(|id| id.parse::<u32>().is_ok()))
        .map(|cpu| format!("/sys/devices/system/cpu/{cpu}/cpufreq/scaling_governor"))
        .filter(|p| fs.exists(p))
        .collect();
    if paths.is_empty() {
        return TuneCheck::unavailable(NAME, "performance", WHY, "no cpufreq driver");
    }
    let governors: Vec<String> = paths.iter().filter_map(|p| fs.read(p)).collect();
    let mut distinct = governors.clone();
    distinct.sort();
    distinct.dedup();
    TuneCheck {
        name: NAME.to_string(),
        current: distinct.join(","),
        recommended: "performance".to_string(),
        why: WHY.to_string(),
        applicable: true,
        ok: governors.len() == paths.len() && governors.iter().all(|g| g == "performance"),
        fix: paths
            .into_iter()
            .map(|path| FileWrite {
                path,
                value: "performance".to_string(),
            })
            .collect(),
    }
}

fn thp_check(fs: &HostFs) -> TuneCheck {
    const NAME: &str = "transparent hugepages";
    const PATH: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
    const WHY: &str = "with `always`, khugepaged compaction stalls cause latency spikes; \
                       madvise leaves huge pages to code that asks";
    let Some(text) = fs.read(PATH) else {
        return TuneCheck::unavailable(NAME, "madvise", WHY, "");
    };
    let current = text
        .split_whitespace()
        .find(|w| w.starts_with('['))
        .map_or(text.clone(), |w| {
            w.trim_matches(|c| c == '[' || c == ']').to_string()
        });
    let mut check = setting(NAME.to_string(), &current, "madvise", WHY, PATH);
    check.ok = current == "madvise" || current == "never";
    check
}

/// A sysctl and the bound it should meet.
struct Sysctl {
    name: &'static str,
    /// Recommended value; `at_most` says whether lower (true) or higher (false) is better.
    recommended: u64,
    at_most: bool,
    why: &'static str,
}

#[rustfmt::skip]
const SYSCTLS: &[Sysctl] = &[
    Sysctl { name: "vm.swappiness", recommended: 1, at_most: true,
        why: "swapping out broker memory stalls a whole shard; keep the page cache for logs" },
    Sysctl { name: "fs.aio-max-nr", recommended: 1_048_576, at_most: false,
        why: "asynchronous I/O contexts for many cores and tools sharing the host" },
    Sysctl { name: "fs.file-max", recommended: 1_048_576, at_most: false,
        why: "every segment, index and connection is a file descriptor" },
    Sysctl { name: "net.core.somaxconn", recommended: 4096, at_most: false,
        why: "bursts of client connections overflow a short accept queue" },
    Sysctl { name: "net.ipv4.tcp_max_syn_backlog", recommended: 4096, at_most: false,
        why: "bursts of client connections overflow a short SYN queue" },
];

fn sysctl_check(fs: &HostFs, sysctl: &Sysctl) -> TuneCheck {
    let path = format!("/proc/sys/{}", sysctl.name.replace('.', "/"));
    let bound = if sysctl.at_most { "<=" } else { ">=" };
    let recommended = format!("{bound} {}", sysctl.recommended);
    let current = fs.read(&path);
    let Some(value) = current.as_deref().and_then(|v| v.parse::<u64>().ok()) else {
        return TuneCheck::unavailable(sysctl.name, &recommended, sysctl.why, "");
    };
    let ok = if sysctl.at_most {
        value <= sysctl.recommended
    } else {
        value >= sysctl.recommended
    };
    TuneCheck {
        name: sysctl.name.to_string(),
        current: value.to_string(),
        recommended,
        why: sysctl.why.to_string(),
        applicable: true,
        ok,
        fix: vec![FileWrite {
            path,
            value: sysctl.recommended.to_string(),
        }],
    }
}

/// The checks as an aligned text table (one row per check; `why` last, so it may run long).
pub fn render_table(checks: &[TuneCheck]) -> String {
    let status = |c: &TuneCheck| match (c.applicable, c.ok) {
        (false, _) => "n/a",
        (true, true) => "ok",
        (true, false) => "TUNE",
    };
    let headers = ["CHECK", "CURRENT", "RECOMMENDED", "STATUS", "WHY"];
    let rows: Vec<[String; 5]> = checks
        .iter()
        .map(|c| {
            [
                c.name.clone(),
                c.current.clone(),
                c.recommended.clone(),
                status(c).to_string(),
                c.why.clone(),
            ]
        })
        .collect();
    let mut widths = headers.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 5]| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i == cells.len() - 1 {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut table = line(headers);
    for row in &rows {
        table.push_str(&line([&row[0], &row[1], &row[2], &row[3], &row[4]]));
    }
    table
}

/// The checks as pretty JSON.
pub fn render_json(checks: &[TuneCheck]) -> String {
    serde_json::to_string_pretty(checks).expect("checks serialise")
}

#[cfg(test)]
#[path = "tune_tests.rs"]
mod tests;
