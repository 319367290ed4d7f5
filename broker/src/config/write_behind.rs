//! Write-behind settings (`laminar.storage.write_batch_bytes`, `laminar.storage.io_depth`) and
//! the write mode (`laminar.storage.write_mode`), and where each comes from: a key set in the
//! config wins, then the iotune profile
//! (`laminar.iotune.profile`, or `<first log dir>/iotune.json` when present), then the default
//! (write-behind off, buffered writes).
//!
//! The profile file's format belongs to `laminar iotune` (laminar-tuning, which this crate must
//! not depend on): the binary reads it and hands over what it recommends as a
//! [`ProfileRecommendation`].

use std::fmt;
use std::path::PathBuf;

use laminar_engine::io::{WriteBehind, WriteMode};

use super::ConfigError;

pub const WRITE_BATCH_BYTES_KEY: &str = "laminar.storage.write_batch_bytes";
pub const IO_DEPTH_KEY: &str = "laminar.storage.io_depth";
pub const PROFILE_KEY: &str = "laminar.iotune.profile";
/// The profile's name inside the first log dir, where it is read when the key is unset.
pub const PROFILE_FILE_NAME: &str = "iotune.json";
/// Used when a write batch is set but no io depth is (by key or profile).
pub const IO_DEPTH_DEFAULT: u32 = 4;
/// Largest write batch accepted (a larger one would leave gigabytes dirty, the opposite of the
/// point).
pub const WRITE_BATCH_BYTES_MAX: u64 = 1 << 30;

/// Where a write-behind setting or the write mode came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SettingSource {
    /// Set in `server.properties` or by `--override`.
    Config,
    /// Recommended by the iotune profile at this path.
    Profile(PathBuf),
    #[default]
    Default,
}

/// `laminar.storage.write_mode` in force and where it came from. Shared read-only across shards
/// (part of the broker config).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteModeChoice {
    pub mode: WriteMode,
    pub source: SettingSource,
}

impl fmt::Display for WriteModeChoice {
    /// `direct (profile /data/iotune.json)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.mode.name(), self.source)
    }
}

impl fmt::Display for SettingSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingSource::Config => f.write_str("config"),
            SettingSource::Profile(path) => write!(f, "profile {}", path.display()),
            SettingSource::Default => f.write_str("default"),
        }
    }
}

/// What an iotune profile recommends, as read by the binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileRecommendation {
    pub path: PathBuf,
    pub write_batch_bytes: u64,
    pub io_depth: u64,
    /// `None` from a profile written before iotune measured appends.
    pub write_mode: Option<WriteMode>,
}

/// The write-behind settings in force and where each came from. Shared read-only across shards
/// (part of the broker config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteBehindChoice {
    pub settings: WriteBehind,
    pub write_batch_bytes_source: SettingSource,
    pub io_depth_source: SettingSource,
}

impl fmt::Display for WriteBehindChoice {
    /// `write_batch_bytes=131072 (profile /data/iotune.json), io_depth=8 (config)`, or
    /// `off (default)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.settings.is_enabled() {
            return write!(f, "off ({})", self.write_batch_bytes_source);
        }
        write!(
            f,
            "write_batch_bytes={} ({}), io_depth={} ({})",
            self.settings.write_batch_bytes,
            self.write_batch_bytes_source,
            self.settings.io_depth,
            self.io_depth_source
        )
    }
}

/// Combines the explicitly set keys (already range-checked by the registry) with the profile's
/// recommendation. A profile value outside what the keys accept is an error naming the file.
pub(super) fn choose(
    write_batch_bytes: Option<u64>,
    io_depth: Option<u32>,
    profile: Option<&ProfileRecommendation>,
) -> Result<WriteBehindChoice, ConfigError> {
    if let Some(bytes) = write_batch_bytes {
        if bytes != 0 && bytes < WriteBehind::WRITE_BATCH_BYTES_MIN {
            return Err(ConfigError::Rejected {
                key: WRITE_BATCH_BYTES_KEY.to_string(),
                value: bytes.to_string(),
                reason: format!(
                    "must be 0 (off) or at least {}",
                    WriteBehind::WRITE_BATCH_BYTES_MIN
                ),
            });
        }
    }
    if let Some(profile) = profile {
        check_profile(profile)?;
    }
    let from_profile = |value: u64| profile.map(|p| (value, SettingSource::Profile(p.path.clone())));
    let (batch, batch_source) = match write_batch_bytes {
        Some(bytes) => (bytes, SettingSource::Config),
        None => profile
            .and_then(|p| from_profile(p.write_batch_bytes))
            .unwrap_or((0, SettingSource::Default)),
    };
    let (depth, depth_source) = match io_depth {
        Some(depth) => (u64::from(depth), SettingSource::Config),
        None => profile
            .and_then(|p| from_profile(p.io_depth))
            .unwrap_or((u64::from(IO_DEPTH_DEFAULT), SettingSource::Default)),
    };
    let settings = WriteBehind {
        write_batch_bytes: batch,
        io_depth: u32::try_from(depth).expect("io depth checked against IO_DEPTH_MAX"),
    };
    assert_eq!(settings.invalid_reason(), None, "checked above");
    Ok(WriteBehindChoice {
        settings,
        write_batch_bytes_source: batch_source,
        io_depth_source: depth_source,
    })
}

fn check_profile(profile: &ProfileRecommendation) -> Result<(), ConfigError> {
    let rejected = |reason: String| ConfigError::Profile {
        path: profile.path.display().to_string(),
        reason,
    };
    let batch_range = WriteBehind::WRITE_BATCH_BYTES_MIN..=WRITE_BATCH_BYTES_MAX;
    if !batch_range.contains(&profile.write_batch_bytes) {
        return Err(rejected(format!(
            "recommended_write_batch_bytes {} is outside {}..={}",
            profile.write_batch_bytes,
            batch_range.start(),
            batch_range.end()
        )));
    }
    let depth_range = 1..=u64::from(WriteBehind::IO_DEPTH_MAX);
    if !depth_range.contains(&profile.io_depth) {
        return Err(rejected(format!(
            "recommended_io_depth {} is outside {}..={}",
            profile.io_depth,
            depth_range.start(),
            depth_range.end()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BrokerConfig;

    fn profile(write_batch_bytes: u64, io_depth: u64) -> ProfileRecommendation {
        ProfileRecommendation {
            write_mode: None,
            path: PathBuf::from("/d/iotune.json"),
            write_batch_bytes,
            io_depth,
        }
    }

    fn config(overrides: &[&str]) -> Result<BrokerConfig, ConfigError> {
        let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        BrokerConfig::from_properties("", &overrides).map(|loaded| loaded.config)
    }

    #[test]
    fn off_by_default_and_the_profile_fills_what_keys_leave_unset() {
        let mut plain = config(&[]).unwrap();
        assert!(!plain.write_behind.settings.is_enabled());
        assert_eq!(plain.write_behind.to_string(), "off (default)");
        assert_eq!(plain.value_of(WRITE_BATCH_BYTES_KEY).as_deref(), Some("0"));
        plain.apply_iotune_profile(&profile(131072, 8)).unwrap();
        assert_eq!(
            plain.write_behind.settings,
            WriteBehind {
                write_batch_bytes: 131072,
                io_depth: 8
            }
        );
        assert_eq!(
            plain.write_behind.to_string(),
            "write_batch_bytes=131072 (profile /d/iotune.json), io_depth=8 (profile /d/iotune.json)"
        );
        assert_eq!(plain.value_of(IO_DEPTH_KEY).as_deref(), Some("8"));

        let mut mixed = config(&["laminar.storage.io_depth=2"]).unwrap();
        mixed.apply_iotune_profile(&profile(1 << 20, 8)).unwrap();
        assert_eq!(
            mixed.write_behind.to_string(),
            "write_batch_bytes=1048576 (profile /d/iotune.json), io_depth=2 (config)"
        );
        let mut keys_win = config(&["laminar.storage.write_batch_bytes=0"]).unwrap();
        keys_win.apply_iotune_profile(&profile(1 << 20, 8)).unwrap();
        assert!(!keys_win.write_behind.settings.is_enabled(), "0 turns it off");
        assert_eq!(keys_win.write_behind.to_string(), "off (config)");
        let only_batch = config(&["laminar.storage.write_batch_bytes=65536"]).unwrap();
        assert_eq!(
            only_batch.write_behind.to_string(),
            "write_batch_bytes=65536 (config), io_depth=4 (default)"
        );
    }

    #[test]
    fn the_profile_chooses_the_write_mode_unless_the_key_is_set() {
        const KEY: &str = "laminar.storage.write_mode";
        let direct = ProfileRecommendation {
            write_mode: Some(WriteMode::Direct),
            ..profile(131072, 8)
        };
        let mut plain = config(&[]).unwrap();
        assert_eq!(plain.write_mode.to_string(), "buffered (default)");
        plain.apply_iotune_profile(&profile(131072, 8)).unwrap();
        assert_eq!(
            plain.write_mode.to_string(),
            "buffered (default)",
            "an older profile says nothing"
        );
        plain.apply_iotune_profile(&direct).unwrap();
        assert_eq!(plain.write_mode.mode, WriteMode::Direct);
        assert_eq!(plain.write_mode.to_string(), "direct (profile /d/iotune.json)");
        assert_eq!(plain.value_of(KEY).as_deref(), Some("direct"));
        let dynamic = plain.with_dynamic(Default::default()).unwrap();
        assert_eq!(dynamic.write_mode.to_string(), "direct (profile /d/iotune.json)");

        let mut key_wins = config(&["laminar.storage.write_mode=buffered"]).unwrap();
        key_wins.apply_iotune_profile(&direct).unwrap();
        assert_eq!(key_wins.write_mode.to_string(), "buffered (config)");
        assert!(config(&["laminar.storage.write_mode=mmap"]).is_err());
    }

    #[test]
    fn bad_values_name_the_key_or_the_file() {
        let small = config(&["laminar.storage.write_batch_bytes=100"]).unwrap_err();
        assert!(small.to_string().contains(WRITE_BATCH_BYTES_KEY), "{small}");
        assert!(small.to_string().contains("at least 4096"), "{small}");
        let deep = config(&["laminar.storage.io_depth=33"]).unwrap_err();
        assert_eq!(deep.key(), Some(IO_DEPTH_KEY), "{deep}");
        let zero = config(&["laminar.storage.io_depth=0"]).unwrap_err();
        assert_eq!(zero.key(), Some(IO_DEPTH_KEY), "{zero}");
        let huge = config(&["laminar.storage.write_batch_bytes=2147483648"]).unwrap_err();
        assert_eq!(huge.key(), Some(WRITE_BATCH_BYTES_KEY), "{huge}");
        let empty = config(&["laminar.iotune.profile= "]).unwrap_err();
        assert_eq!(empty.key(), Some(PROFILE_KEY), "{empty}");

        let mut c = config(&[]).unwrap();
        let bad = c.apply_iotune_profile(&profile(100, 8)).unwrap_err();
        let text = bad.to_string();
        assert!(text.contains("/d/iotune.json") && text.contains("recommended_write_batch_bytes"));
        let bad = c.apply_iotune_profile(&profile(1 << 20, 64)).unwrap_err();
        assert!(bad.to_string().contains("recommended_io_depth 64"), "{bad}");
        // Even a profile whose values the keys override is checked: a broken file is reported.
        let mut set = config(&[
            "laminar.storage.write_batch_bytes=65536",
            "laminar.storage.io_depth=2",
        ])
        .unwrap();
        assert!(set.apply_iotune_profile(&profile(1 << 20, 0)).is_err());
    }

    #[test]
    fn the_profile_is_the_key_else_iotune_json_in_the_first_log_dir_if_present() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().display().to_string();
        let c = config(&[&format!("log.dirs={data},/elsewhere")]).unwrap();
        assert_eq!(c.iotune_profile_path(), None, "no file there");
        std::fs::write(dir.path().join(PROFILE_FILE_NAME), "{}").unwrap();
        assert_eq!(c.iotune_profile_path(), Some(dir.path().join(PROFILE_FILE_NAME)));
        let named = config(&[
            &format!("log.dirs={data}"),
            "laminar.iotune.profile=/etc/laminar/io.json",
        ])
        .unwrap();
        assert_eq!(
            named.iotune_profile_path(),
            Some(PathBuf::from("/etc/laminar/io.json")),
            "the key wins, present or not (reading it reports a missing file)"
        );
    }
}
