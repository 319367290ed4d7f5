//! `laminar consume --format`: kcat's format tokens.
//!
//! `%k` key, `%v` (or `%s`) value, `%t` topic, `%p` partition, `%o` offset, `%T` timestamp (ms),
//! `%h` headers as `k=v,k2=v2`, `%K` key length, `%S` value length (-1 when null), `%%` a
//! percent sign; `\n`, `\t` and `\\` escapes. A null key or value prints as nothing.

use anyhow::bail;

/// One piece of a parsed format.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Key,
    Value,
    Topic,
    Partition,
    Offset,
    Timestamp,
    Headers,
    KeyLength,
    ValueLength,
}

/// A parsed `--format`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFormat {
    pieces: Vec<Piece>,
}

/// A consumed record, as the format sees it.
#[derive(Debug, Clone, Copy)]
pub struct FormattedRecord<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [(String, Option<Vec<u8>>)],
}

impl RecordFormat {
    pub fn parse(format: &str) -> anyhow::Result<RecordFormat> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut chars = format.chars();
        while let Some(c) = chars.next() {
            let piece = match c {
                '%' => match chars.next() {
                    Some('k') => Piece::Key,
                    Some('v' | 's') => Piece::Value,
                    Some('t') => Piece::Topic,
                    Some('p') => Piece::Partition,
                    Some('o') => Piece::Offset,
                    Some('T') => Piece::Timestamp,
                    Some('h') => Piece::Headers,
                    Some('K') => Piece::KeyLength,
                    Some('S') => Piece::ValueLength,
                    Some('%') => {
                        text.push('%');
                        continue;
                    }
                    Some(other) => bail!("unknown format token %{other}"),
                    None => bail!("format ends with a lone %"),
                },
                '\\' => {
                    match chars.next() {
                        Some('n') => text.push('\n'),
                        Some('t') => text.push('\t'),
                        Some('\\') => text.push('\\'),
                        Some(other) => bail!("unknown escape \\{other}"),
                        None => bail!("format ends with a lone \\"),
                    }
                    continue;
                }
                c => {
                    text.push(c);
                    continue;
                }
            };
            if !text.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut text)));
            }
            pieces.push(piece);
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(RecordFormat { pieces })
    }

    /// Appends the formatted record to `out` (raw bytes: keys and values need not be UTF-8).
    pub fn write(&self, record: &FormattedRecord<'_>, out: &mut Vec<u8>) {
        let length = |field: Option<&[u8]>| field.map_or(-1, |f| f.len() as i64).to_string();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.extend_from_slice(text.as_bytes()),
                Piece::Key => out.extend_from_slice(record.key.unwrap_or_default()),
                Piece::Value => out.extend_from_slice(record.value.unwrap_or_default()),
                Piece::Topic => out.extend_from_slice(record.topic.as_bytes()),
                Piece::Partition => out.extend_from_slice(record.partition.to_string().as_bytes()),
                Piece::Offset => out.extend_from_slice(record.offset.to_string().as_bytes()),
                Piece::Timestamp => out.extend_from_slice(record.timestamp_ms.to_string().as_bytes()),
                Piece::KeyLength => out.extend_from_slice(length(record.key).as_bytes()),
                Piece::ValueLength => out.extend_from_slice(length(record.value).as_bytes()),
                Piece::Headers => {
                    for (index, (key, value)) in record.headers.iter().enumerate() {
                        if index > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(key.as_bytes());
                        out.push(b'=');
                        out.extend_from_slice(value.as_deref().unwrap_or_default());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_kcat() {
        let format = RecordFormat::parse("%t/%p@%o %T %k=%v (%K,%S) [%h] 100%%\\n").unwrap();
        let headers = vec![("h1".to_string(), Some(b"x".to_vec())), ("h2".to_string(), None)];
        let record = FormattedRecord {
            topic: "t",
            partition: 2,
            offset: 41,
            timestamp_ms: 1_700,
            key: None,
            value: Some(b"val"),
            headers: &headers,
        };
        let mut out = Vec::new();
        format.write(&record, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "t/2@41 1700 =val (-1,3) [h1=x,h2=] 100%\n"
        );
    }

    #[test]
    fn rejects_unknown_tokens() {
        assert!(RecordFormat::parse("%x").is_err());
        assert!(RecordFormat::parse("%").is_err());
        assert!(RecordFormat::parse("\\q").is_err());
    }
}
