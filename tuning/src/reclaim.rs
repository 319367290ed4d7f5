//! Whether the kernel pages out memory it has seen idle (DAMON's proactive reclaim).
//!
//! A DAMON scheme with the `pageout` action on physical memory reclaims whatever it finds
//! unused for a while, page cache included. A broker serves recent data from the page cache:
//! on the development VM (docs/decisions/0028, ranges the host's reclaim thinned) a tenth of 10 000 segments
//! lost their
//! last pages within 20 s of being written, and consumers of that data read it from the disk.
//! Either a kdamond started through sysfs (`/sys/kernel/mm/damon/admin`) or the `damon_reclaim`
//! module does this. The host's memory policy decides it, often an agent of the hypervisor, so
//! the check reports and never writes.

use crate::check::TuneCheck;
use crate::hostfs::HostFs;

const NAME: &str = "proactive reclaim (DAMON)";
const WHY: &str = "the kernel pages out page-cache memory it saw idle, so consumers of data \
                   written seconds to minutes before read it from the disk; on a dedicated \
                   broker host stop the scheme (echo off > /sys/kernel/mm/damon/admin/kdamonds/N/state, \
                   or damon_reclaim.enabled=N) where the host's memory policy allows (reported, \
                   never written)";
const KDAMONDS: &str = "/sys/kernel/mm/damon/admin/kdamonds";
const RECLAIM_MODULE_ENABLED: &str = "/sys/module/damon_reclaim/parameters/enabled";

pub fn proactive_reclaim_check(fs: &HostFs) -> TuneCheck {
    let module_present = fs.exists(RECLAIM_MODULE_ENABLED);
    if !fs.exists(KDAMONDS) && !module_present {
        return TuneCheck::unavailable(NAME, "off", WHY, "no DAMON");
    }
    let mut reclaiming: Vec<String> = fs
        .list(KDAMONDS)
        .into_iter()
        .filter(|name| name.parse::<u32>().is_ok())
        .filter_map(|name| {
            kdamond_pageout(fs, &format!("{KDAMONDS}/{name}")).map(|idle| format!("kdamond {name}: {idle}"))
        })
        .collect();
    if module_present && fs.read(RECLAIM_MODULE_ENABLED).as_deref() == Some("Y") {
        reclaiming.push("damon_reclaim enabled".to_string());
    }
    let ok = reclaiming.is_empty();
    TuneCheck {
        name: NAME.to_string(),
        current: if ok {
            "off".to_string()
        } else {
            format!("on ({})", reclaiming.join("; "))
        },
        recommended: "off".to_string(),
        why: WHY.to_string(),
        applicable: true,
        ok,
        fix: Vec::new(),
    }
}

/// For a running kdamond with a `pageout` scheme on physical memory: how long memory must sit
/// idle before it goes ("pages out memory idle 60 s"). `None` when it reclaims nothing.
fn kdamond_pageout(fs: &HostFs, kdamond: &str) -> Option<String> {
    if fs.read(&format!("{kdamond}/state")).as_deref() != Some("on") {
        return None;
    }
    let contexts = entries_where(fs, &format!("{kdamond}/contexts"), "operations", "paddr");
    let idle_ages = contexts.into_iter().filter_map(|context| {
        let aggregation_us = read_number(fs, &format!("{context}/monitoring_attrs/intervals/aggr_us"))?;
        let pageouts = entries_where(fs, &format!("{context}/schemes"), "action", "pageout");
        let ages = pageouts
            .into_iter()
            .filter_map(|scheme| read_number(fs, &format!("{scheme}/access_pattern/age/min")));
        ages.map(|intervals| intervals.saturating_mul(aggregation_us) / 1_000_000)
            .min()
    });
    idle_ages
        .min()
        .map(|seconds| format!("pages out memory idle {seconds} s"))
}

/// The entries of `dir` whose file `name` reads `value`, as paths.
fn entries_where(fs: &HostFs, dir: &str, name: &str, value: &str) -> Vec<String> {
    let entries = fs.list(dir).into_iter().map(|entry| format!("{dir}/{entry}"));
    entries
        .filter(|entry| fs.read(&format!("{entry}/{name}")).as_deref() == Some(value))
        .collect()
}

fn read_number(fs: &HostFs, path: &str) -> Option<u64> {
    fs.read(path)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host whose kdamond 0 runs `action` on `operations` memory idle 12 intervals of 5 s
    /// (the development VM's scheme).
    fn host_with_kdamond(state: &str, operations: &str, action: &str) -> (tempfile::TempDir, HostFs) {
        let dir = tempfile::tempdir().unwrap();
        let fs = HostFs::new(dir.path());
        let context = format!("{KDAMONDS}/0/contexts/0");
        let files = [
            (format!("{KDAMONDS}/0/state"), state),
            (format!("{KDAMONDS}/nr_kdamonds"), "1"),
            (format!("{context}/operations"), operations),
            (format!("{context}/monitoring_attrs/intervals/aggr_us"), "5000000"),
            (format!("{context}/schemes/0/action"), action),
            (format!("{context}/schemes/0/access_pattern/age/min"), "12"),
        ];
        for (path, value) in files {
            let path = fs.path(&path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, format!("{value}\n")).unwrap();
        }
        (dir, fs)
    }

    #[test]
    fn a_running_pageout_scheme_on_physical_memory_is_reported_with_its_idle_age() {
        let (_dir, fs) = host_with_kdamond("on", "paddr", "pageout");
        let check = proactive_reclaim_check(&fs);
        assert!(check.applicable && !check.ok && check.fix.is_empty());
        assert_eq!(check.current, "on (kdamond 0: pages out memory idle 60 s)");
    }

    #[test]
    fn a_stopped_kdamond_or_one_that_reclaims_nothing_is_fine() {
        for (state, operations, action) in [
            ("off", "paddr", "pageout"),
            ("on", "paddr", "stat"),
            ("on", "vaddr", "pageout"),
        ] {
            let (_dir, fs) = host_with_kdamond(state, operations, action);
            let check = proactive_reclaim_check(&fs);
            assert_eq!(
                (check.current.as_str(), check.ok),
                ("off", true),
                "{state} {operations} {action}"
            );
        }
    }

    #[test]
    fn the_reclaim_module_counts_and_no_damon_is_not_applicable() {
        let dir = tempfile::tempdir().unwrap();
        let fs = HostFs::new(dir.path());
        assert!(!proactive_reclaim_check(&fs).applicable);
        let enabled = fs.path(RECLAIM_MODULE_ENABLED);
        std::fs::create_dir_all(enabled.parent().unwrap()).unwrap();
        std::fs::write(&enabled, "Y\n").unwrap();
        let check = proactive_reclaim_check(&fs);
        assert_eq!(
            (check.current.as_str(), check.ok),
            ("on (damon_reclaim enabled)", false)
        );
        std::fs::write(&enabled, "N\n").unwrap();
        assert!(proactive_reclaim_check(&fs).ok);
    }
}
