//! `laminar tune` on this machine without --apply (reports, changes nothing), and
//! `laminar install-service` writing units that say what the broker needs, and the laminar(8)
//! man page their `Documentation=` names.

use anyhow::Result;
use laminar_tests::cli::ok;

#[test]
fn tune_reports_without_apply() -> Result<()> {
    let table = ok(&["tune", "--dir", "/tmp"], "")?;
    let header = table.lines().next().unwrap_or_default();
    for column in ["CHECK", "CURRENT", "RECOMMENDED", "STATUS", "WHY"] {
        assert!(header.contains(column), "{header}");
    }
    assert!(table.lines().count() > 3, "{table}");
    let json = ok(&["tune", "--dir", "/tmp", "--json"], "")?;
    assert!(json.trim_start().starts_with('['), "{json}");
    assert!(json.contains("\"recommended\""), "{json}");
    Ok(())
}

#[test]
fn install_service_writes_a_notify_unit() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let dir_text = dir.path().display().to_string();
    let man_dir = dir.path().join("man/man8");
    let man_dir_text = man_dir.display().to_string();
    ok(
        &[
            "install-service",
            "--write",
            &dir_text,
            "--binary",
            "/opt/laminar/bin/laminar",
            "--man-dir",
            &man_dir_text,
        ],
        "",
    )?;
    let unit = std::fs::read_to_string(dir.path().join("laminar.service"))?;
    let directive = |key: &str| {
        unit.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_string)
    };
    assert_eq!(directive("Type").as_deref(), Some("notify"));
    assert_eq!(directive("LimitMEMLOCK").as_deref(), Some("infinity"));
    assert_eq!(
        directive("ExecStart").as_deref(),
        Some("/opt/laminar/bin/laminar broker --config /etc/laminar/server.properties")
    );
    // Documentation= points at a page that install-service wrote, rendered from the CLI.
    assert_eq!(directive("Documentation").as_deref(), Some("man:laminar(8)"));
    let page = std::fs::read_to_string(man_dir.join("laminar.8"))?;
    assert!(page.contains(".TH laminar 8"), "{page}");
    for subcommand in ["broker", "topic", "install\\-service"] {
        assert!(page.contains(subcommand), "no {subcommand} in\n{page}");
        // The pages laminar(8) names exist too.
        let sub_page =
            std::fs::read_to_string(man_dir.join(format!("laminar-{}.8", subcommand.replace('\\', ""))))?;
        assert!(sub_page.contains(".TH laminar"), "{sub_page}");
    }
    let broker_page = std::fs::read_to_string(man_dir.join("laminar-broker.8"))?;
    assert!(broker_page.contains("\\-\\-override"), "{broker_page}");
    // man(1) finds it where install-service put it (when man is installed: tests/run.sh's
    // systemd pulls it in on Debian).
    let man_root = dir.path().join("man").display().to_string();
    if let Ok(found) = std::process::Command::new("man")
        .args(["-M", &man_root, "-w", "8", "laminar"])
        .output()
    {
        let path = String::from_utf8_lossy(&found.stdout);
        assert!(
            found.status.success() && path.contains("laminar.8"),
            "man -w: {path}"
        );
    }
    let tune = std::fs::read_to_string(dir.path().join("laminar-tune.service"))?;
    assert!(tune.contains("/opt/laminar/bin/laminar tune --apply"), "{tune}");
    let printed = ok(&["install-service"], "")?;
    assert!(printed.contains("# ---- laminar.service") && printed.contains("Type=notify"));
    Ok(())
}
