//! The board: a file mapped shared by the in-process supervisor and its worker. The worker
//! writes the frame it is about to handle, its counters and a heartbeat; when the worker dies
//! (an abort, a panic: the broker ends the process on either) or stops beating (a spin), the
//! supervisor reads from the board which frame did it, and the counters survive the worker.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};
use laminar_sys::shared_memory::SharedBoard;

use crate::mutate::FRAME_BYTES_MAX;
use crate::report::{Outcome, Tally, OUTCOMES, SLOTS};

/// The board's counters by index: the milliseconds since the epoch at the worker's last sign of
/// life, the index of the frame being handled, the worker's peak RSS, and the length of the
/// frame on the board.
const HEARTBEAT_MS: usize = 0;
const INDEX: usize = 1;
const PEAK_RSS_KIB: usize = 2;
const FRAME_LEN: usize = 3;
const WORDS: usize = 4;

/// The board's layout in its file: the counters above, a count per slot and outcome, and the
/// frame being handled.
type Layout = SharedBoard<WORDS, SLOTS, OUTCOMES, FRAME_BYTES_MAX>;

/// The board, mapped for the rest of the process.
#[derive(Clone, Copy)]
pub struct Board(&'static Layout);

impl Board {
    /// Creates the board file, zeroed (every counter 0), and maps it.
    pub fn create(path: &Path) -> Result<Board> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .with_context(|| format!("creating {}", path.display()))?;
        file.set_len(Layout::SIZE_BYTES as u64)?;
        Ok(Board(Layout::map(&file)?))
    }

    /// Maps an existing board (the worker's side).
    pub fn open(path: &Path) -> Result<Board> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        let board =
            Layout::map(&file).with_context(|| format!("{} is not a board of this build", path.display()))?;
        Ok(Board(board))
    }

    /// Milliseconds since the epoch at the worker's last sign of life.
    pub fn heartbeat_ms(&self) -> &AtomicU64 {
        &self.0.words[HEARTBEAT_MS]
    }

    /// Index of the frame being handled.
    pub fn index(&self) -> &AtomicU64 {
        &self.0.words[INDEX]
    }

    /// The worker's peak resident set, in KiB.
    pub fn peak_rss_kib(&self) -> &AtomicU64 {
        &self.0.words[PEAK_RSS_KIB]
    }

    /// Records the frame about to be handled (before handing it to the broker).
    pub fn begin(&self, index: u64, frame: &[u8]) {
        let len = self.0.bytes.write(frame);
        self.0.words[FRAME_LEN].store(len as u64, Ordering::Release);
        self.index().store(index, Ordering::Release);
        self.beat();
    }

    /// The frame last begun. Call only while the worker is stopped.
    pub fn frame(&self) -> Vec<u8> {
        self.0
            .bytes
            .read(self.0.words[FRAME_LEN].load(Ordering::Acquire) as usize)
    }

    pub fn count(&self, slot: usize, outcome: Outcome) {
        self.0.table[slot][outcome as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn beat(&self) {
        self.heartbeat_ms().store(now_ms(), Ordering::Release);
    }

    pub fn tally(&self) -> Tally {
        let mut tally = Tally::default();
        for (slot, outcomes) in self.0.table.iter().enumerate() {
            for (outcome, count) in outcomes.iter().enumerate() {
                tally.counts[slot][outcome] = count.load(Ordering::Relaxed);
            }
        }
        tally
    }

    pub fn note_rss(&self, kib: u64) {
        self.peak_rss_kib().fetch_max(kib, Ordering::Relaxed);
    }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// This process's peak resident set (VmHWM), in KiB.
pub fn peak_rss_kib() -> u64 {
    peak_rss_of("self")
}

/// The peak resident set of process `pid` ("self" for this one), in KiB; 0 if unknown.
pub fn peak_rss_of(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_board_is_shared_through_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("board");
        let writer = Board::create(&path).unwrap();
        let reader = Board::open(&path).unwrap();
        writer.begin(41, b"frame bytes");
        writer.count(3, Outcome::Closed);
        writer.count(3, Outcome::Closed);
        assert_eq!(reader.index().load(Ordering::Acquire), 41);
        assert_eq!(reader.frame(), b"frame bytes");
        assert_eq!(reader.tally().counts[3][Outcome::Closed as usize], 2);
        assert!(peak_rss_kib() > 0);
    }
}
