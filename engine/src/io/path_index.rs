//! Values by file path, for the lookups the shard's file cache makes at every rename and
//! removal: one path, or a whole directory's subtree, in O(log n + found) rather than a walk of
//! every open file. At 100 000 partitions checkpointing, or a topic of 100 000 partitions
//! deleted, the walk per rename made the work quadratic (decision 0020).
//!
//! Paths order by component (`Path`'s `Ord`), so the paths under a directory follow it
//! contiguously in the map, and a subtree is one range.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};

/// Owned by one shard's file cache.
pub struct PathIndex<T> {
    by_path: BTreeMap<PathBuf, Vec<T>>,
    /// Values held, in all.
    entries: usize,
}

impl<T> Default for PathIndex<T> {
    fn default() -> Self {
        PathIndex {
            by_path: BTreeMap::new(),
            entries: 0,
        }
    }
}

impl<T> PathIndex<T> {
    pub fn insert(&mut self, path: PathBuf, value: T) {
        self.by_path.entry(path).or_default().push(value);
        self.entries += 1;
    }

    /// Removes and returns the values at `path` and, with `below`, at every path under it.
    pub fn take(&mut self, path: &Path, below: bool) -> Vec<(PathBuf, Vec<T>)> {
        let keys: Vec<PathBuf> = if below {
            let from = (Bound::Included(path), Bound::Unbounded);
            let subtree = self.by_path.range::<Path, _>(from);
            subtree
                .take_while(|(key, _)| key.starts_with(path))
                .map(|(key, _)| key.clone())
                .collect()
        } else {
            vec![path.to_path_buf()]
        };
        let mut taken = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(values) = self.by_path.remove(&key) {
                self.entries -= values.len();
                taken.push((key, values));
            }
        }
        taken
    }

    /// Keeps only the values `keep` says, and the paths that still have one.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.by_path.retain(|_, values| {
            values.retain(&mut keep);
            !values.is_empty()
        });
        self.entries = self.by_path.values().map(Vec::len).sum();
    }

    /// Values held, in all.
    pub fn len(&self) -> usize {
        self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(paths: &[&str]) -> PathIndex<usize> {
        let mut index = PathIndex::default();
        for (i, path) in paths.iter().enumerate() {
            index.insert(PathBuf::from(path), i);
        }
        index
    }

    fn taken(index: &mut PathIndex<usize>, path: &str, below: bool) -> Vec<usize> {
        let taken = index.take(Path::new(path), below);
        taken.into_iter().flat_map(|(_, values)| values).collect()
    }

    #[test]
    fn a_subtree_is_taken_whole_and_nothing_beside_it() {
        let paths = [
            "/d/t-1/a.log",
            "/d/t-1/b.index",
            "/d/t-10/a.log",
            "/d/t-1.x/a",
            "/d/t-1",
            "/d/t-0/a",
        ];
        let mut index = index(&paths);
        let mut below = taken(&mut index, "/d/t-1", true);
        below.sort();
        assert_eq!(below, vec![0, 1, 4]);
        assert_eq!(index.len(), 3);
        assert_eq!(taken(&mut index, "/d/t-10", false), Vec::<usize>::new());
        assert_eq!(taken(&mut index, "/d/t-10/a.log", false), vec![2]);
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn several_values_at_one_path_and_retain_counts_what_is_left() {
        let mut index = index(&["/a", "/a", "/b", "/c"]);
        assert_eq!(index.len(), 4);
        index.retain(|v| *v != 1 && *v != 2);
        assert_eq!(index.len(), 2);
        assert_eq!(taken(&mut index, "/a", false), vec![0]);
        assert_eq!(taken(&mut index, "/b", true), Vec::<usize>::new());
    }
}
