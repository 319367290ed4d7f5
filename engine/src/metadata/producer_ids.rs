//! Producer ids for InitProducerId: unique for the life of the data directory.
//!
//! Ids are handed out from blocks of [`BLOCK_SIZE`]. Before the first id of a block is handed
//! out, the end of that block is persisted, so after any restart (clean or kill -9) allocation
//! resumes past every id that may have been seen by a client; at most a block's unused ids are
//! skipped. A block costs one fsync'd file replacement, so the blocking write is rare.
//!
//! On-disk format: `<log.dirs>/__cluster_metadata/producer-ids.json`, a JSON document
//! `{"format": 1, "next_block_start": <i64>}`: no id at or above it has been handed out. It is
//! replaced atomically like `topics.json` (write `.tmp`, fsync, rename, fsync the directory).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::topic_table::METADATA_DIR;

const FILE_NAME: &str = "producer-ids.json";
const FORMAT_VERSION: u32 = 1;
/// Ids reserved per durable write.
pub const BLOCK_SIZE: i64 = 1000;

#[derive(Serialize, Deserialize)]
struct ProducerIdsFile {
    format: u32,
    next_block_start: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum ProducerIdError {
    #[error("cannot persist producer id blocks at {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("producer ids are exhausted")]
    Exhausted,
}

struct Block {
    next: i64,
    end: i64,
}

/// The broker's producer id allocator. Shared across shards (`Arc`); a mutex serialises the
/// rare allocations.
pub struct ProducerIdAllocator {
    path: PathBuf,
    block: Mutex<Block>,
}

impl ProducerIdAllocator {
    /// Opens the allocator under `log_dir`; nothing is reserved until the first id is asked.
    pub fn open(log_dir: &Path) -> Result<Self, ProducerIdError> {
        let dir = log_dir.join(METADATA_DIR);
        let path = dir.join(FILE_NAME);
        let io_err = |source| ProducerIdError::Io {
            path: path.clone(),
            source,
        };
        // Its entry in the log dir must outlast a power cut as the files in it do.
        crate::io::create_dir_all_durably(&dir).map_err(io_err)?;
        let next_block_start = match std::fs::read(&path) {
            Ok(bytes) => {
                let invalid = |why: String| io_err(std::io::Error::new(std::io::ErrorKind::InvalidData, why));
                let file: ProducerIdsFile =
                    serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
                if file.format != FORMAT_VERSION || file.next_block_start < 0 {
                    return Err(invalid(format!(
                        "format {} with next block start {}",
                        file.format, file.next_block_start
                    )));
                }
                file.next_block_start
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(source) => return Err(io_err(source)),
        };
        Ok(Self {
            path,
            block: Mutex::new(Block {
                next: next_block_start,
                end: next_block_start,
            }),
        })
    }

    /// A producer id never handed out before, in this process or any earlier one.
    pub fn next_id(&self) -> Result<i64, ProducerIdError> {
        let mut block = self.block.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if block.next == block.end {
            let end = block
                .end
                .checked_add(BLOCK_SIZE)
                .ok_or(ProducerIdError::Exhausted)?;
            self.persist(end)?;
            block.end = end;
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }

    fn persist(&self, next_block_start: i64) -> Result<(), ProducerIdError> {
        let io_err = |source| ProducerIdError::Io {
            path: self.path.clone(),
            source,
        };
        let file = ProducerIdsFile {
            format: FORMAT_VERSION,
            next_block_start,
        };
        let bytes = serde_json::to_vec(&file).expect("the producer id file always serialises");
        crate::io::replace_file_durably(&self.path, &bytes).map_err(io_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_blocks_and_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ProducerIdAllocator::open(dir.path()).unwrap();
        let first: Vec<i64> = (0..BLOCK_SIZE + 5).map(|_| ids.next_id().unwrap()).collect();
        assert_eq!(first, (0..BLOCK_SIZE + 5).collect::<Vec<_>>());
        let persisted = std::fs::read_to_string(dir.path().join(METADATA_DIR).join(FILE_NAME)).unwrap();
        assert_eq!(persisted, r#"{"format":1,"next_block_start":2000}"#);
        drop(ids); // a crash mid-block: the rest of the block is skipped, never reused
        let ids = ProducerIdAllocator::open(dir.path()).unwrap();
        assert_eq!(ids.next_id().unwrap(), 2 * BLOCK_SIZE);
        drop(ids);
        let ids = ProducerIdAllocator::open(dir.path()).unwrap();
        assert_eq!(ids.next_id().unwrap(), 3 * BLOCK_SIZE);
    }

    #[test]
    fn a_damaged_file_is_an_error_not_a_reset() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(METADATA_DIR)).unwrap();
        std::fs::write(dir.path().join(METADATA_DIR).join(FILE_NAME), b"{\"format\":1,").unwrap();
        assert!(matches!(
            ProducerIdAllocator::open(dir.path()),
            Err(ProducerIdError::Io { .. })
        ));
    }
}
