use super::*;
use crate::check::NOT_AVAILABLE;

fn fake_host() -> (tempfile::TempDir, HostFs) {
    let dir = tempfile::tempdir().unwrap();
    let fs = HostFs::new(dir.path());
    let files = [
        ("/proc/sys/vm/swappiness", "60"),
        ("/proc/sys/fs/aio-max-nr", "65536"),
        ("/proc/sys/fs/file-max", "9223372036854775807"),
        ("/proc/sys/net/core/somaxconn", "4096"),
        (
            "/sys/kernel/mm/transparent_hugepage/enabled",
            "[always] madvise never",
        ),
        (
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "powersave",
        ),
        (
            "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
            "performance",
        ),
        ("/sys/block/nvme0n1/queue/scheduler", "[mq-deadline] kyber none"),
        ("/sys/block/nvme0n1/queue/nomerges", "0"),
        ("/sys/block/vda/queue/scheduler", "[none] mq-deadline"),
        ("/sys/block/vda/queue/nomerges", "0"),
    ];
    for (path, value) in files {
        let path = fs.path(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("{value}\n")).unwrap();
    }
    (dir, fs)
}

fn find<'a>(checks: &'a [TuneCheck], name: &str) -> &'a TuneCheck {
    checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check {name}"))
}

#[test]
fn fake_host_checks_and_apply() {
    let (dir, fs) = fake_host();
    let options = TuneOptions {
        data_dir: dir.path().join("data"),
        host: fs.clone(),
    };
    let checks = check_all(&options);
    // The temp dir's real device is not in the fake /sys: reported, not failed.
    let scheduler = find(&checks, "io scheduler");
    assert!(!scheduler.applicable && scheduler.current.starts_with(NOT_AVAILABLE));
    let swappiness = find(&checks, "vm.swappiness");
    assert_eq!((swappiness.current.as_str(), swappiness.ok), ("60", false));
    assert_eq!(swappiness.recommended, "<= 1");
    assert!(!find(&checks, "fs.aio-max-nr").ok);
    assert!(find(&checks, "fs.file-max").ok);
    assert!(find(&checks, "net.core.somaxconn").ok);
    let syn = find(&checks, "net.ipv4.tcp_max_syn_backlog");
    assert!(!syn.applicable && syn.ok && syn.current == NOT_AVAILABLE);
    let thp = find(&checks, "transparent hugepages");
    assert_eq!((thp.current.as_str(), thp.ok), ("always", false));
    let governor = find(&checks, "cpu frequency governor");
    assert_eq!(
        (governor.current.as_str(), governor.ok),
        ("performance,powersave", false)
    );
    assert_eq!(governor.fix.len(), 2);

    // Dry run: nothing changes.
    let planned = apply(&options, &checks, false);
    assert!(planned.iter().all(|o| !o.written && o.error.is_none()));
    assert!(planned
        .iter()
        .any(|o| o.path == "/proc/sys/vm/swappiness" && o.value == "1"));
    assert_eq!(fs.read("/proc/sys/vm/swappiness").as_deref(), Some("60"));

    let done = apply(&options, &checks, true);
    assert_eq!(done.len(), planned.len());
    assert!(done.iter().all(|o| o.written), "{done:?}");
    let after = check_all(&options);
    assert!(after.iter().all(|c| c.ok), "{}", render_table(&after));
    assert_eq!(
        fs.read("/sys/kernel/mm/transparent_hugepage/enabled").as_deref(),
        Some("madvise")
    );
}

#[test]
fn disk_checks_follow_the_device_kind() {
    let (_dir, fs) = fake_host();
    let nvme = BlockDevice {
        name: "nvme0n1".into(),
        kind: DiskKind::Nvme,
        rotational: false,
    };
    let virtio = BlockDevice {
        name: "vda".into(),
        kind: DiskKind::Virtio,
        rotational: true,
    };
    let s = scheduler_check(&fs, &nvme);
    assert_eq!(
        (s.current.as_str(), s.recommended.as_str(), s.ok),
        ("mq-deadline", "none", false)
    );
    let s = scheduler_check(&fs, &virtio);
    assert_eq!(
        (s.current.as_str(), s.recommended.as_str(), s.ok),
        ("none", "mq-deadline", false)
    );
    assert_eq!(s.fix[0].path, "/sys/block/vda/queue/scheduler");
    assert!(!nomerges_check(&fs, &nvme).ok);
    assert!(nomerges_check(&fs, &virtio).ok);
    let missing = BlockDevice {
        name: "sdz".into(),
        kind: DiskKind::Scsi,
        rotational: true,
    };
    assert!(!scheduler_check(&fs, &missing).applicable);
}

#[test]
fn a_failed_write_is_reported_not_fatal() {
    let (dir, fs) = fake_host();
    let options = TuneOptions {
        data_dir: dir.path().to_path_buf(),
        host: fs.clone(),
    };
    let mut checks = check_all(&options);
    checks.push(TuneCheck {
        name: "bogus".into(),
        current: "0".into(),
        recommended: "1".into(),
        why: "test".into(),
        applicable: true,
        ok: false,
        fix: vec![FileWrite {
            path: "/proc/sys/does/not/exist".into(),
            value: "1".into(),
        }],
    });
    let outcomes = apply(&options, &checks, true);
    let bogus = outcomes.iter().find(|o| o.check == "bogus").unwrap();
    assert!(!bogus.written && bogus.error.is_some());
    assert!(outcomes.iter().filter(|o| o.check != "bogus").all(|o| o.written));
}

#[test]
fn this_host_produces_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let checks = check_all(&TuneOptions::for_data_dir(dir.path()));
    let table = render_table(&checks);
    println!("{table}");
    assert!(table.starts_with("CHECK"));
    for name in [
        "vm.swappiness",
        "fs.file-max",
        "transparent hugepages",
        "cpu frequency governor",
    ] {
        assert!(table.contains(name), "{name} missing from\n{table}");
    }
    // Every row is either a real reading or says it is unavailable.
    for check in &checks {
        assert!(
            check.applicable || check.current.starts_with(NOT_AVAILABLE),
            "{check:?}"
        );
    }
    let json: serde_json::Value = serde_json::from_str(&render_json(&checks)).unwrap();
    assert_eq!(json.as_array().unwrap().len(), checks.len());
    assert!(json[0]["recommended"].is_string());
}
