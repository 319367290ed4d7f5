//! A reader for Java `.properties` text, the format of Kafka's `server.properties`.
//!
//! The rules follow `java.util.Properties.load`, with one deliberate difference noted below:
//! - A *natural line* ends at `\n`, `\r` or `\r\n`. Leading whitespace (space, tab, form feed) is
//!   skipped. A line whose first other character is `#` or `!` is a comment; an empty line is
//!   skipped.
//! - A natural line ending in an odd number of backslashes continues on the next natural line;
//!   the next line's leading whitespace is dropped. Comment lines never continue.
//! - The key runs to the first unescaped `=`, `:` or whitespace. Whitespace after the key, then
//!   at most one `=` or `:`, then more whitespace separate it from the value.
//! - Escapes: `\t`, `\n`, `\r`, `\f`, `\uXXXX`; any other escaped character stands for itself.
//! - Unlike Java, unescaped trailing whitespace of a value is dropped: Kafka trims values before
//!   parsing them anyway, and a stray space after `9092` should not turn into a config error.
//!
//! A later entry for the same key replaces an earlier one, as in Java.

use super::ConfigError;

/// One `key=value` entry, with the (1-based) natural line on which it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertyEntry {
    pub key: String,
    pub value: String,
    pub line: usize,
}

/// Parses properties text into its entries, in file order (duplicates kept; the caller lets the
/// last one win).
pub fn parse_properties(text: &str) -> Result<Vec<PropertyEntry>, ConfigError> {
    let mut entries = Vec::new();
    let mut lines = natural_lines(text).peekable();
    while let Some((line_number, line)) = lines.next() {
        let trimmed = line.trim_start_matches(is_blank);
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
            continue;
        }
        let mut logical = String::from(trimmed);
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches(is_blank)),
                None => break,
            }
        }
        let (key, value) = split_entry(&logical, line_number)?;
        entries.push(PropertyEntry {
            key,
            value,
            line: line_number,
        });
    }
    Ok(entries)
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// Natural lines with their 1-based numbers; `\r\n`, `\r` and `\n` all end a line.
fn natural_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut rest = text;
    let mut number = 0;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        number += 1;
        let end = rest.find(['\n', '\r']).unwrap_or(rest.len());
        let line = &rest[..end];
        let after = &rest[end..];
        rest = after
            .strip_prefix("\r\n")
            .or_else(|| after.strip_prefix(['\n', '\r']))
            .unwrap_or(after);
        Some((number, line))
    })
}

fn ends_with_odd_backslashes(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Splits one logical line (leading whitespace already removed) into unescaped key and value.
fn split_entry(logical: &str, line: usize) -> Result<(String, String), ConfigError> {
    let mut chars = logical.chars().peekable();
    let mut key = Unescaper::default();
    while let Some(&c) = chars.peek() {
        if c == '=' || c == ':' || is_blank(c) {
            break;
        }
        chars.next();
        key.push(c, &mut chars, line)?;
    }
    while chars.peek().copied().is_some_and(is_blank) {
        chars.next();
    }
    if matches!(chars.peek(), Some('=') | Some(':')) {
        chars.next();
    }
    while chars.peek().copied().is_some_and(is_blank) {
        chars.next();
    }
    let mut value = Unescaper::default();
    while let Some(c) = chars.next() {
        value.push(c, &mut chars, line)?;
    }
    Ok((key.finish(), value.finish()))
}

/// Accumulates unescaped text and remembers where the last escaped or non-blank character
/// ended, so that unescaped trailing whitespace can be dropped.
#[derive(Default)]
struct Unescaper {
    text: String,
    significant_len: usize,
}

impl Unescaper {
    fn push(
        &mut self,
        c: char,
        rest: &mut std::iter::Peekable<std::str::Chars<'_>>,
        line: usize,
    ) -> Result<(), ConfigError> {
        if c != '\\' {
            self.text.push(c);
            if !is_blank(c) {
                self.significant_len = self.text.len();
            }
            return Ok(());
        }
        let unescaped = match rest.next() {
            // A lone backslash at the very end of the input (continuation with no next line).
            None => return Ok(()),
            Some('t') => '\t',
            Some('n') => '\n',
            Some('r') => '\r',
            Some('f') => '\x0c',
            Some('u') => {
                let hex: String = rest.by_ref().take(4).collect();
                let code = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .and_then(char::from_u32);
                code.ok_or_else(|| ConfigError::Syntax {
                    line,
                    reason: format!("malformed \\uXXXX escape \"\\u{hex}\""),
                })?
            }
            Some(other) => other,
        };
        self.text.push(unescaped);
        self.significant_len = self.text.len();
        Ok(())
    }

    fn finish(mut self) -> String {
        self.text.truncate(self.significant_len);
        self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse_properties(text)
            .unwrap()
            .into_iter()
            .map(|e| (e.key, e.value))
            .collect()
    }

    fn pair(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn comments_blank_lines_and_separators() {
        let text = "# comment\n! also a comment\n\n   \nnode.id=3\nlog.dirs: /var/lib/x\n\
                    num.partitions 4\n  indented = yes  \nempty=\nbare\n";
        assert_eq!(
            pairs(text),
            vec![
                pair("node.id", "3"),
                pair("log.dirs", "/var/lib/x"),
                pair("num.partitions", "4"),
                pair("indented", "yes"),
                pair("empty", ""),
                pair("bare", ""),
            ]
        );
    }

    #[test]
    fn separator_inside_value_is_kept() {
        assert_eq!(
            pairs("listeners=PLAINTEXT://0.0.0.0:9092\na:b=c"),
            vec![pair("listeners", "PLAINTEXT://0.0.0.0:9092"), pair("a", "b=c")]
        );
    }

    #[test]
    fn continuation_joins_lines_and_drops_leading_whitespace() {
        let text = "log.dirs=/a,\\\n    /b,\\\r\n\t/c\nnext=1";
        assert_eq!(pairs(text), vec![pair("log.dirs", "/a,/b,/c"), pair("next", "1")]);
        // An even number of backslashes is an escaped backslash, not a continuation.
        assert_eq!(
            pairs("path=C:\\\\\nnext=1"),
            vec![pair("path", "C:\\"), pair("next", "1")]
        );
        // A comment line ending in a backslash does not swallow the next line.
        assert_eq!(pairs("# c \\\nk=v"), vec![pair("k", "v")]);
        // Continuation at end of input is harmless.
        assert_eq!(pairs("k=v\\"), vec![pair("k", "v")]);
    }

    #[test]
    fn escapes_and_line_numbers() {
        let entries = parse_properties("\r\n\rkey\\ with\\:colon=tab\\there\\u0041\\ \n").unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].key, "key with:colon");
        // The escaped trailing space is significant; unescaped trailing blanks are not.
        assert_eq!(entries[0].value, "tab\there\u{41} ");
        assert_eq!(entries[0].line, 3);
    }

    #[test]
    fn malformed_unicode_escape_names_the_line() {
        let err = parse_properties("a=1\nb=\\u12G4\n").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        assert!(err.to_string().contains("\\u12G4"), "{err}");
    }
}
