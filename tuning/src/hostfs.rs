//! Access to the kernel's `/sys` and `/proc` files under a root directory: `/` on a real host,
//! a directory tree shaped like it in tests (so that `apply` can be tested without root).

use std::io;
use std::path::{Path, PathBuf};

/// A view of `/sys` and `/proc` rooted at `root`. Used from one thread at a time.
#[derive(Debug, Clone)]
pub struct HostFs {
    root: PathBuf,
}

impl HostFs {
    pub fn new(root: impl Into<PathBuf>) -> HostFs {
        HostFs { root: root.into() }
    }

    /// The running host.
    pub fn real() -> HostFs {
        HostFs::new("/")
    }

    /// Where the absolute kernel path `path` (e.g. `/proc/sys/vm/swappiness`) lives.
    pub fn path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// The file's contents, trimmed; `None` when it is missing or unreadable (a kernel without
    /// that feature, or a container that hides it).
    pub fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.path(path))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// Writes `value` (with a newline, as `echo` would) to an existing kernel file.
    pub fn write(&self, path: &str, value: &str) -> io::Result<()> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(self.path(path))?;
        file.write_all(format!("{value}\n").as_bytes())
    }

    /// Names in a directory, sorted; empty when it is missing.
    pub fn list(&self, path: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(path))
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    pub fn exists(&self, path: &str) -> bool {
        self.path(path).exists()
    }

    /// The kernel path a symlink under the root points at, as an absolute kernel path.
    pub fn canonical(&self, path: &str) -> Option<String> {
        let resolved = std::fs::canonicalize(self.path(path)).ok()?;
        let root = std::fs::canonicalize(&self.root).ok()?;
        let relative = resolved.strip_prefix(&root).ok()?;
        Some(format!("/{}", relative.display()))
    }
}

/// Parses a CPU list such as `0-3,8,10-11` into CPU numbers.
pub fn parse_cpu_list(text: &str) -> Vec<u32> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((lo, hi)) => {
                if let (Ok(lo), Ok(hi)) = (lo.trim().parse::<u32>(), hi.trim().parse::<u32>()) {
                    cpus.extend(lo..=hi);
                }
            }
            None => cpus.extend(part.trim().parse::<u32>().ok()),
        }
    }
    cpus
}

/// The nearest existing ancestor of `path` (itself if it exists): the data dir may not have
/// been created yet, but its device is that of its parent.
pub fn nearest_existing(path: &Path) -> Option<&Path> {
    path.ancestors()
        .find(|p| !p.as_os_str().is_empty() && p.exists())
        .or_else(|| Some(Path::new(".")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpu_list("1"), vec![1]);
        assert!(parse_cpu_list("").is_empty());
    }

    #[test]
    fn rooted_reads_and_writes() {
        let dir = tempfile::tempdir().unwrap();
        let fs = HostFs::new(dir.path());
        std::fs::create_dir_all(fs.path("/proc/sys/vm")).unwrap();
        std::fs::write(fs.path("/proc/sys/vm/swappiness"), "60\n").unwrap();
        assert_eq!(fs.read("/proc/sys/vm/swappiness").as_deref(), Some("60"));
        fs.write("/proc/sys/vm/swappiness", "1").unwrap();
        assert_eq!(fs.read("/proc/sys/vm/swappiness").as_deref(), Some("1"));
        assert!(
            fs.write("/proc/sys/vm/missing", "1").is_err(),
            "never creates files"
        );
        assert_eq!(fs.list("/proc/sys"), vec!["vm".to_string()]);
        assert_eq!(fs.read("/nope"), None);
        assert_eq!(nearest_existing(&dir.path().join("a/b/c")), Some(dir.path()));
    }
}
