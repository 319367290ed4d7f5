//! Counters per (api, version) and outcome, findings (crashes and hangs with the frame that
//! caused them), and the table both targets print.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use kafka_protocol::messages::ApiKey;
use laminar_protocol::codec::SUPPORTED_APIS;

/// Versions counted per api key.
pub const VERSIONS: usize = 16;
/// Counter slots: api keys 0..128 times [`VERSIONS`].
pub const SLOTS: usize = 128 * VERSIONS;

/// What became of a frame. `Frames` counts every frame sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Frames = 0,
    /// A response came back.
    Answered = 1,
    /// The broker refused the frame and closed the connection (a malformed request).
    Closed = 2,
    /// Handled without a response (Produce acks=0).
    Silent = 3,
    /// Still waiting past the hang bound, as the request allowed (a long max_wait_ms, say).
    Parked = 4,
}

pub const OUTCOMES: usize = 5;

/// The counter slot of the seed (api, version) a frame was made from.
pub fn slot(api: ApiKey, version: i16) -> usize {
    (api as i16 as usize % 128) * VERSIONS + (version as usize).min(VERSIONS - 1)
}

#[derive(Debug, Clone)]
pub struct Tally {
    pub counts: Vec<[u64; OUTCOMES]>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            counts: vec![[0; OUTCOMES]; SLOTS],
        }
    }
}

impl Tally {
    pub fn add(&mut self, slot: usize, outcome: Outcome) {
        self.counts[slot][outcome as usize] += 1;
    }

    pub fn frames_of(&self, api: ApiKey, version: i16) -> u64 {
        self.counts[slot(api, version)][Outcome::Frames as usize]
    }

    pub fn total(&self, outcome: Outcome) -> u64 {
        self.counts.iter().map(|c| c[outcome as usize]).sum()
    }

    /// Advertised (api, version) pairs that got no frame.
    pub fn missing(&self) -> Vec<(ApiKey, i16)> {
        SUPPORTED_APIS
            .iter()
            .flat_map(|s| (s.min..=s.max).map(move |v| (s.key, v)))
            .filter(|&(api, v)| self.frames_of(api, v) == 0)
            .collect()
    }
}

/// A crash or a hang, and the file holding its frame.
#[derive(Debug, Clone)]
pub struct Finding {
    pub kind: &'static str,
    pub api: ApiKey,
    pub version: i16,
    pub index: u64,
    pub how: String,
    pub file: Option<PathBuf>,
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub tally: Tally,
    pub crashes: u64,
    pub hangs: u64,
    pub peak_rss_kib: u64,
    pub elapsed: Duration,
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn frames(&self) -> u64 {
        self.tally.total(Outcome::Frames)
    }

    /// One line per API (its versions summed), then the totals.
    pub fn table(&self, target: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<24} {:>8} {:>10} {:>10} {:>10} {:>8} {:>8}",
            "api (versions)", "", "frames", "answered", "closed", "silent", "parked"
        );
        for support in SUPPORTED_APIS {
            let mut sum = [0u64; OUTCOMES];
            for version in support.min..=support.max {
                for (total, count) in sum.iter_mut().zip(self.tally.counts[slot(support.key, version)]) {
                    *total += count;
                }
            }
            let versions = format!("v{}-{}", support.min, support.max);
            let _ = writeln!(
                out,
                "{:<24} {:>8} {:>10} {:>10} {:>10} {:>8} {:>8}",
                format!("{:?}", support.key),
                versions,
                sum[0],
                sum[1],
                sum[2],
                sum[3],
                sum[4]
            );
        }
        let seconds = self.elapsed.as_secs_f64().max(1e-9);
        let _ = writeln!(
            out,
            "{target}: {} frames in {:.1} s ({:.0} frames/s), crashes {}, hangs {}, peak RSS {:.1} MiB",
            self.frames(),
            seconds,
            self.frames() as f64 / seconds,
            self.crashes,
            self.hangs,
            self.peak_rss_kib as f64 / 1024.0
        );
        for finding in &self.findings {
            let file = finding
                .file
                .as_ref()
                .map(|f| f.display().to_string())
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {} {:?} v{} frame {} ({}) {file}",
                finding.kind, finding.api, finding.version, finding.index, finding.how
            );
        }
        out
    }
}

/// Writes a finding's frame as hex (one line, after a comment line) to `dir`.
pub fn save_frame(dir: &Path, finding: &Finding, frame: &[u8]) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!(
        "{}-{:?}-v{}-{}.hex",
        finding.kind, finding.api, finding.version, finding.index
    ));
    let text = format!(
        "# {} {:?} v{} frame {}: {}\n{}\n",
        finding.kind,
        finding.api,
        finding.version,
        finding.index,
        finding.how,
        hex(frame)
    );
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads a frame written by [`save_frame`] (or by hand: hex, `#` comment lines ignored).
pub fn read_frame(path: &Path) -> Result<Vec<u8>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let digits: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .flat_map(|line| line.chars().filter(|c| !c.is_whitespace()))
        .collect();
    (0..digits.len() / 2 * 2)
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&digits[i..i + 2], 16).with_context(|| format!("{}: not hex", path.display()))
        })
        .collect()
}

/// The regression frames under `dir` (every `*.hex`), in name order.
pub fn regression_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "hex"));
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_frames_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let finding = Finding {
            kind: "hang",
            api: ApiKey::Fetch,
            version: 4,
            index: 9,
            how: "int-boundary".into(),
            file: None,
        };
        let path = save_frame(dir.path(), &finding, &[0, 1, 0xab, 0xff]).unwrap();
        assert_eq!(read_frame(&path).unwrap(), vec![0, 1, 0xab, 0xff]);
        assert_eq!(regression_files(dir.path()), vec![path]);
    }

    #[test]
    fn missing_pairs_are_the_ones_without_frames() {
        let mut tally = Tally::default();
        for support in SUPPORTED_APIS {
            for version in support.min..=support.max {
                tally.add(slot(support.key, version), Outcome::Frames);
            }
        }
        assert!(tally.missing().is_empty());
        tally.counts[slot(ApiKey::Fetch, 7)][0] = 0;
        assert_eq!(tally.missing(), vec![(ApiKey::Fetch, 7)]);
    }
}
