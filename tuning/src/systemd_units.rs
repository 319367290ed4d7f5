//! The systemd units shipped in `tuning/systemd/`, embedded so that an installer can write
//! them out, and verified against `systemd-analyze` in tests.

/// `laminar.service`: the broker (Type=notify; see [`crate::sd_notify`]).
pub const BROKER_UNIT: &str = include_str!("../systemd/laminar.service");
/// `laminar-tune.service`: `laminar tune --apply` once at boot, before the broker.
pub const TUNE_UNIT: &str = include_str!("../systemd/laminar-tune.service");

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn directive<'a>(unit: &'a str, key: &str) -> Option<&'a str> {
        unit.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
    }

    #[test]
    fn units_say_what_the_broker_needs() {
        assert_eq!(directive(BROKER_UNIT, "Type"), Some("notify"));
        assert_eq!(directive(BROKER_UNIT, "LimitMEMLOCK"), Some("infinity"));
        assert_eq!(directive(BROKER_UNIT, "LimitNOFILE"), Some("1048576"));
        assert_eq!(directive(BROKER_UNIT, "Restart"), Some("on-failure"));
        assert_eq!(directive(BROKER_UNIT, "TimeoutStopSec"), Some("120"));
        assert_eq!(
            directive(BROKER_UNIT, "ExecStart"),
            Some("/usr/local/bin/laminar broker --config /etc/laminar/server.properties")
        );
        assert_eq!(directive(TUNE_UNIT, "Type"), Some("oneshot"));
        assert_eq!(directive(TUNE_UNIT, "Before"), Some("laminar.service"));
        assert!(directive(TUNE_UNIT, "ExecStart")
            .unwrap()
            .contains("tune --apply"));
    }

    #[test]
    fn systemd_analyze_verify_accepts_both_units() {
        let available = Command::new("systemd-analyze").arg("--version").output();
        if !available.is_ok_and(|o| o.status.success()) {
            // tests/run.sh installs it, so CI always verifies; a bare `cargo test` may not.
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must have systemd-analyze (tests/run.sh installs systemd)"
            );
            println!("skipped: systemd-analyze is not installed");
            return;
        }
        // verify insists that ExecStart's binary exists; the broker is not installed here.
        let dir = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        for (name, unit) in [
            ("laminar.service", BROKER_UNIT),
            ("laminar-tune.service", TUNE_UNIT),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, unit.replace("/usr/local/bin/laminar", "/bin/true")).unwrap();
            paths.push(path);
        }
        // --man=no: Documentation=man:laminar(8) exists once `laminar install-service` wrote
        // it, which tests/tests/cli_host.rs checks with man(1); it is not installed here.
        let output = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .args(&paths)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "systemd-analyze verify failed:\n{stderr}"
        );
        assert!(!stderr.contains("laminar"), "warnings about our units:\n{stderr}");
    }
}
