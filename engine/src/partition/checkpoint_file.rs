//! Kafka's checkpoint file frame, shared by `leader-epoch-checkpoint` (`leader_epochs.rs`) and
//! `replication-offset-checkpoint` (`high_watermarks.rs`): a version line `0`, a line with the
//! number of entries, then one line per entry, every line ended by `\n`. This module writes and
//! checks the frame; each file's module encodes and parses its own entry lines.

use std::io;
use std::path::Path;

use crate::io::{Storage, StorageFile};

/// The only version Kafka writes.
const VERSION: &str = "0";

/// The file's text for `entries` (each one line, without its `\n`).
pub fn encode(entries: &[String]) -> String {
    let mut out = format!("{VERSION}\n{}\n", entries.len());
    for entry in entries {
        out.push_str(entry);
        out.push('\n');
    }
    out
}

/// The entry lines of `bytes`, once the version, the count and the line ends are right.
pub fn entry_lines(bytes: &[u8]) -> Result<Vec<&str>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not text".to_string())?;
    let body = text.strip_suffix('\n').ok_or("the last line is not ended")?;
    let mut lines = body.split('\n');
    if lines.next() != Some(VERSION) {
        return Err(format!("unknown version (want {VERSION})"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.parse().ok())
        .ok_or("bad entry count")?;
    // Bounded by the file's size (`read`): `count` alone sizes nothing.
    let entries: Vec<&str> = lines.collect();
    if entries.len() != count {
        return Err(format!("{} entries where the count says {count}", entries.len()));
    }
    Ok(entries)
}

/// The bytes of the file at `path`, `None` when there is none; InvalidData past `max_bytes`.
pub async fn read<S: Storage>(
    storage: &S,
    path: &Path,
    max_bytes: usize,
) -> io::Result<Option<bytes::Bytes>> {
    if !storage.exists(path).await? {
        return Ok(None);
    }
    let file = storage.open(path, false).await?;
    let bytes = file.read_at(0, max_bytes + 1).await;
    file.close().await?;
    let bytes = bytes?;
    if bytes.len() > max_bytes {
        return Err(invalid(path, format!("larger than {max_bytes} bytes")));
    }
    Ok(Some(bytes))
}

/// The error for a damaged file at `path`.
pub fn invalid(path: &Path, why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_round_trips_and_refuses_what_is_not_one() {
        let text = encode(&["a 1".to_string(), "b 2".to_string()]);
        assert_eq!(text, "0\n2\na 1\nb 2\n");
        assert_eq!(entry_lines(text.as_bytes()).unwrap(), vec!["a 1", "b 2"]);
        assert_eq!(entry_lines(b"0\n0\n").unwrap(), Vec::<&str>::new());
        for bad in [
            &b"1\n0\n"[..],
            b"0\n2\na 1\n",
            b"0\n1\na 1",
            b"0\nx\n",
            b"",
            b"\xff\n",
        ] {
            assert!(entry_lines(bad).is_err(), "{bad:?}");
        }
    }
}
