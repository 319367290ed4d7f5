//! What every host check reports: [`TuneCheck`], one setting with its current and recommended
//! value, and the [`FileWrite`]s that would fix it. The checks themselves live in `tune`,
//! `irq` and `balloon`, which all build these.

use serde::Serialize;

/// A kernel file write that brings a setting to its recommended value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileWrite {
    pub path: String,
    pub value: String,
}

/// One setting: what it is, what it should be and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TuneCheck {
    pub name: String,
    pub current: String,
    pub recommended: String,
    pub why: String,
    /// False when the host does not expose the setting (then `ok` is true: nothing to do).
    pub applicable: bool,
    pub ok: bool,
    /// The writes `apply` would make; empty for report-only checks.
    pub fix: Vec<FileWrite>,
}

pub const NOT_AVAILABLE: &str = "not available on this host";

impl TuneCheck {
    pub(crate) fn unavailable(name: &str, recommended: &str, why: &str, detail: &str) -> TuneCheck {
        let current = if detail.is_empty() {
            NOT_AVAILABLE.to_string()
        } else {
            format!("{NOT_AVAILABLE} ({detail})")
        };
        TuneCheck {
            name: name.to_string(),
            current,
            recommended: recommended.to_string(),
            why: why.to_string(),
            applicable: false,
            ok: true,
            fix: Vec::new(),
        }
    }
}
