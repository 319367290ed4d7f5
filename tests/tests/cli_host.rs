//! `laminar tune` on this machine without --apply (reports, changes nothing), and
//! `laminar install-service` writing units that say what the broker needs.

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
    ok(
        &[
            "install-service",
            "--write",
            &dir_text,
            "--binary",
            "/opt/laminar/bin/laminar",
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
    let tune = std::fs::read_to_string(dir.path().join("laminar-tune.service"))?;
    assert!(tune.contains("/opt/laminar/bin/laminar tune --apply"), "{tune}");
    let printed = ok(&["install-service"], "")?;
    assert!(printed.contains("# ---- laminar.service") && printed.contains("Type=notify"));
    Ok(())
}
