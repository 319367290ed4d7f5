//! What the stores' line-oriented text files share: percent-escaping of free-text fields,
//! bounded line reads, and atomic replacement of the whole file. Each store documents its own
//! format (`credentials.rs`, `acl_store.rs`).

use std::fs::{self, File};
use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};

/// Escapes `%` and ASCII control characters (tab, CR, LF among them) as `%XX` in upper-case
/// hex, so a field can hold neither a field nor a line separator.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        if character == '%' || character.is_ascii_control() {
            escaped.push_str(&format!("%{:02X}", u32::from(character)));
        } else {
            escaped.push(character);
        }
    }
    escaped
}

/// The text [`escape`] made `escaped` from.
pub fn unescape(escaped: &str) -> Result<String, &'static str> {
    let bytes = escaped.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut position = 0;
    while let Some(&byte) = bytes.get(position) {
        if byte == b'%' {
            let hex = escaped
                .get(position + 1..position + 3)
                .ok_or("truncated %-escape")?;
            // from_str_radix alone would take a sign ("+1"); an escape is exactly two hex digits.
            if !hex.bytes().all(|digit| digit.is_ascii_hexdigit()) {
                return Err("invalid %-escape");
            }
            decoded.push(u8::from_str_radix(hex, 16).map_err(|_| "invalid %-escape")?);
            position += 3;
        } else {
            decoded.push(byte);
            position += 1;
        }
    }
    String::from_utf8(decoded).map_err(|_| "a field is not UTF-8 once unescaped")
}

/// The next line without its `\n`, reading at most `line_len_max` bytes of it; `None` at the
/// end of the file. The inner error is a format fault (too long, no final newline, not UTF-8).
pub fn read_line(
    reader: &mut impl BufRead,
    line_len_max: usize,
) -> io::Result<Option<Result<String, &'static str>>> {
    let mut line = Vec::new();
    let limit = u64::try_from(line_len_max + 1).unwrap_or(u64::MAX);
    reader.by_ref().take(limit).read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Ok(None);
    }
    if line.pop() != Some(b'\n') {
        let reason = if line.len() >= line_len_max {
            "line too long"
        } else {
            "truncated line"
        };
        return Ok(Some(Err(reason)));
    }
    Ok(Some(String::from_utf8(line).map_err(|_| "line is not UTF-8")))
}

/// Opens a store's file; `None` when there is none (a store that holds nothing yet).
pub fn open_if_exists(path: &Path) -> io::Result<Option<File>> {
    match File::open(path) {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Why a store's file could not be read: an I/O error, or a line that breaks its format
/// (`line` counts from 1, the header being line 1).
#[derive(Debug)]
pub enum LoadError {
    Io(io::Error),
    Corrupt { line: usize, reason: String },
}

/// Reads a store's file: the header line `header`, then one record a line, each parsed by
/// `parse` and passed to `keep`, which says why a record cannot be kept (a duplicate, one past
/// the store's bound). Lines are at most `line_len_max` bytes.
pub fn load_records<T>(
    file: File,
    (header, line_len_max): (&str, usize),
    parse: impl Fn(&str) -> Result<T, String>,
    mut keep: impl FnMut(T) -> Result<(), String>,
) -> Result<(), LoadError> {
    let mut reader = io::BufReader::new(file);
    let corrupt = |line, reason: &dyn std::fmt::Display| LoadError::Corrupt {
        line,
        reason: reason.to_string(),
    };
    for line_number in 1.. {
        let Some(line) = read_line(&mut reader, line_len_max).map_err(LoadError::Io)? else {
            if line_number == 1 {
                return Err(corrupt(1, &"empty file: missing header"));
            }
            break;
        };
        let line = line.map_err(|reason| corrupt(line_number, &reason))?;
        if line_number == 1 {
            if line != header {
                return Err(corrupt(1, &"unknown header or format version"));
            }
            continue;
        }
        let record = parse(&line).map_err(|reason| corrupt(line_number, &reason))?;
        keep(record).map_err(|reason| corrupt(line_number, &reason))?;
    }
    Ok(())
}

/// Replaces `dir/name` with `bytes`: written to `name.tmp`, fsynced, renamed over the file, and
/// the directory fsynced, so a crash leaves the old file or the new one, never a mix. An error
/// names the path it happened on.
pub fn replace_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), (PathBuf, io::Error)> {
    let temp_path = dir.join(format!("{name}.tmp"));
    let at = |path: &Path| {
        let path = path.to_owned();
        move |error| (path, error)
    };
    let mut file = File::create(&temp_path).map_err(at(&temp_path))?;
    file.write_all(bytes).map_err(at(&temp_path))?;
    file.sync_all().map_err(at(&temp_path))?;
    drop(file);
    let path = dir.join(name);
    fs::rename(&temp_path, &path).map_err(at(&path))?;
    // The rename is durable only once the directory entry is.
    File::open(dir).and_then(|dir| dir.sync_all()).map_err(at(dir))
}
