//! A piece of a frame to send: bytes in memory, or a range of a segment file that goes to the
//! socket without a user-space copy (sendfile). Responses whose bulk is record bytes (Fetch) are
//! built as a list of chunks; the broker's connection writes them in order.

use bytes::Bytes;
use laminar_engine::io::FileRange;

/// A piece of a response frame.
#[derive(Debug, Clone)]
pub enum Chunk {
    Memory(Bytes),
    File(FileRange),
}

impl Chunk {
    pub fn len(&self) -> usize {
        match self {
            Chunk::Memory(bytes) => bytes.len(),
            Chunk::File(range) => range.len as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
