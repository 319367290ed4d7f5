//! The workspace's gate on `unsafe` (docs/ARCHITECTURE.md, "Static gates"): unsafe code lives in
//! the `sys` crate (laminar-sys) only. Every other crate's root forbids `unsafe_code`, and no Rust
//! file outside `sys/` holds the keyword `unsafe` in its code (comments and string literals
//! aside) or allows the lint back, so integration tests, benches and examples, which have roots
//! of their own, are held to it too. `vendor/` (third-party code) and build output are skipped.

use std::fs;
use std::path::{Path, PathBuf};

/// Directories never scanned, wherever they are: build output, third-party code, tools' state.
const SKIPPED_DIRS: &[&str] = &["target", "vendor", "node_modules"];

/// The attribute every crate root outside `sys/` carries.
const FORBID: &str = "#![forbid(unsafe_code)]";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the sys crate sits in the workspace root")
        .to_path_buf()
}

/// Whether the walk goes into `dir`: not a skipped or hidden directory, nor the sys crate.
fn is_scanned(root: &Path, dir: &Path) -> bool {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    !(SKIPPED_DIRS.contains(&name) || name.starts_with('.') || dir == root.join("sys"))
}

/// Every file under `dir` whose name ends with `suffix`, in the directories the gate scans.
fn files_named(root: &Path, dir: &Path, suffix: &str, found: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("reading {}: {error}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if is_scanned(root, &path) {
                files_named(root, &path, suffix, found);
            }
        } else if path.to_str().is_some_and(|p| p.ends_with(suffix)) {
            found.push(path);
        }
    }
}

/// A token of Rust code: a word (identifier or keyword) or one punctuation character, with its
/// line. Comments, string and character literals and numbers make none.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    line: usize,
    text: String,
}

/// Reads Rust source into tokens, skipping comments (nested block comments included) and
/// literals, so that a word inside them is never taken for code.
struct Lexer {
    chars: Vec<char>,
    at: usize,
    line: usize,
}

impl Lexer {
    fn tokens(source: &str) -> Vec<Token> {
        let mut lexer = Lexer {
            chars: source.chars().collect(),
            at: 0,
            line: 1,
        };
        let mut tokens = Vec::new();
        while let Some(token) = lexer.next_token() {
            tokens.push(token);
        }
        tokens
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.at += 1;
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn next_token(&mut self) -> Option<Token> {
        loop {
            let c = self.peek(0)?;
            match c {
                '/' if self.peek(1) == Some('/') => self.skip_line(),
                '/' if self.peek(1) == Some('*') => self.skip_block_comment(),
                '"' => self.skip_string(),
                '\'' => self.skip_char_or_lifetime(),
                c if c.is_ascii_digit() => self.skip_word(),
                c if c == '_' || c.is_alphabetic() => {
                    let line = self.line;
                    let text = self.word();
                    if self.starts_literal(&text) {
                        continue;
                    }
                    return Some(Token { line, text });
                }
                c if c.is_whitespace() => {
                    self.bump();
                }
                c => {
                    let line = self.line;
                    self.bump();
                    return Some(Token {
                        line,
                        text: c.to_string(),
                    });
                }
            }
        }
    }

    fn word(&mut self) -> String {
        let start = self.at;
        self.skip_word();
        self.chars[start..self.at].iter().collect()
    }

    fn skip_word(&mut self) {
        while self.peek(0).is_some_and(|c| c == '_' || c.is_alphanumeric()) {
            self.bump();
        }
    }

    /// Whether `prefix`, just read, begins a literal (`b"…"`, `r#"…"#`, `b'…'`, …), which is
    /// then skipped.
    fn starts_literal(&mut self, prefix: &str) -> bool {
        match (prefix, self.peek(0)) {
            ("b" | "c", Some('"')) => self.skip_string(),
            ("b", Some('\'')) => self.skip_char_or_lifetime(),
            ("r" | "br" | "cr", Some('"' | '#')) => {
                let hashes = (0..).take_while(|&n| self.peek(n) == Some('#')).count();
                if self.peek(hashes) != Some('"') {
                    return false; // a raw identifier, `r#name`
                }
                self.skip_raw_string(hashes);
            }
            _ => return false,
        }
        true
    }

    fn skip_line(&mut self) {
        while self.peek(0).is_some_and(|c| c != '\n') {
            self.bump();
        }
    }

    fn skip_block_comment(&mut self) {
        let mut depth = 0usize;
        while let Some(c) = self.bump() {
            match (c, self.peek(0)) {
                ('/', Some('*')) => {
                    self.bump();
                    depth += 1;
                }
                ('*', Some('/')) => {
                    self.bump();
                    depth -= 1;
                    if depth == 0 {
                        return;
                    }
                }
                _ => {}
            }
        }
    }

    fn skip_string(&mut self) {
        self.bump(); // the opening quote
        while let Some(c) = self.bump() {
            match c {
                '\\' => {
                    self.bump();
                }
                '"' => return,
                _ => {}
            }
        }
    }

    fn skip_raw_string(&mut self, hashes: usize) {
        self.at += hashes + 1; // the hashes and the opening quote, all on one line
        while let Some(c) = self.bump() {
            if c == '"' && (0..hashes).all(|n| self.peek(n) == Some('#')) {
                self.at += hashes;
                return;
            }
        }
    }

    /// A character literal (`'a'`, `'\n'`, `'\u{7f}'`) is skipped; a lifetime or label (`'a`)
    /// makes no token either.
    fn skip_char_or_lifetime(&mut self) {
        self.bump(); // the quote
        if self.peek(0) == Some('\\') {
            self.bump(); // the backslash
            self.bump(); // the character it escapes, a quote perhaps
            while let Some(c) = self.bump() {
                if c == '\'' {
                    return;
                }
            }
        } else if self.peek(1) == Some('\'') {
            self.bump();
            self.bump();
        } else {
            self.skip_word();
        }
    }
}

/// What in `tokens` breaks the gate: the keyword `unsafe`, or the lint `unsafe_code` under any
/// level but `forbid` or `deny`.
fn violations(tokens: &[Token]) -> Vec<String> {
    let mut found = Vec::new();
    for (index, token) in tokens.iter().enumerate() {
        match token.text.as_str() {
            "unsafe" => found.push(format!("line {}: the keyword `unsafe`", token.line)),
            "unsafe_code" => {
                let open = tokens[..index].iter().rposition(|t| t.text == "(");
                let level = open
                    .and_then(|open| open.checked_sub(1))
                    .map(|at| tokens[at].text.as_str());
                if !matches!(level, Some("forbid" | "deny")) {
                    found.push(format!("line {}: `unsafe_code` under {level:?}", token.line));
                }
            }
            _ => {}
        }
    }
    found
}

#[test]
fn no_rust_file_outside_the_sys_crate_holds_unsafe_code() {
    let root = workspace_root();
    let mut files = Vec::new();
    files_named(&root, &root, ".rs", &mut files);
    assert!(
        files.len() > 100,
        "the walk found only {} Rust files",
        files.len()
    );
    let mut broken = Vec::new();
    for file in &files {
        let source = fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        for violation in violations(&Lexer::tokens(&source)) {
            broken.push(format!(
                "{}: {violation}",
                file.strip_prefix(&root).unwrap().display()
            ));
        }
    }
    assert!(
        broken.is_empty(),
        "unsafe code belongs in the sys crate (laminar-sys), behind a safe function:\n{}",
        broken.join("\n")
    );
}

/// The roots of a package's library and binaries (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`).
fn crate_roots(package: &Path) -> Vec<PathBuf> {
    let src = package.join("src");
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|name| src.join(name))
        .filter(|path| path.is_file())
        .collect();
    if let Ok(entries) = fs::read_dir(src.join("bin")) {
        let bins = entries.map(|entry| entry.expect("a directory entry").path());
        roots.extend(bins.filter(|path| path.extension().is_some_and(|e| e == "rs")));
    }
    roots
}

#[test]
fn every_crate_outside_the_sys_crate_forbids_unsafe_code_at_its_root() {
    let root = workspace_root();
    let mut manifests = Vec::new();
    files_named(&root, &root, "/Cargo.toml", &mut manifests);
    let packages = manifests
        .iter()
        .filter(|manifest| fs::read_to_string(manifest).is_ok_and(|text| text.contains("[package]")))
        .map(|manifest| manifest.parent().expect("a manifest's directory"));
    let roots: Vec<PathBuf> = packages.flat_map(crate_roots).collect();
    assert!(roots.len() >= 10, "found only the crate roots {roots:?}");
    let missing: Vec<String> = roots
        .iter()
        .filter(|path| !fs::read_to_string(path).is_ok_and(|text| text.contains(FORBID)))
        .map(|path| path.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    assert!(missing.is_empty(), "crate roots without {FORBID}: {missing:?}");
}

#[test]
fn the_lexer_finds_unsafe_in_code_only() {
    let source = r####"
        // unsafe in a line comment
        /* unsafe in a block /* nested unsafe */ still unsafe */
        /// unsafe in a doc comment
        let text = "unsafe \" unsafe";
        let raw = r#"unsafe "quoted" unsafe"#;
        let bytes = b"unsafe";
        let c = '"'; let e = '\''; let lifetime: &'static str = "x";
        unsafe { call() }
        #![forbid(unsafe_code)]
        #[allow(dead_code, unsafe_code)]
        let r#type = 1u8;
    "####;
    let found = violations(&Lexer::tokens(source));
    assert_eq!(
        found,
        vec![
            "line 9: the keyword `unsafe`".to_string(),
            "line 11: `unsafe_code` under Some(\"allow\")".to_string(),
        ]
    );
}
