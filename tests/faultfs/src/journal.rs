//! The journal of namespace operations: each one applied to the backing directory at once and
//! recorded here, in order, with what it changed (names in directories), so that a power cut
//! can undo those no directory sync made durable.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;

use crate::inodes::BackingId;

/// A name in a directory, the directory by its backing file (whatever its path: a directory
/// keeps its identity through renames; none is freed while mounted, the trash keeping every
/// removed one).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    pub dir: BackingId,
    pub name: OsString,
}

/// One undoable namespace operation.
#[derive(Debug)]
pub enum Op {
    /// A name added (create, mknod, symlink, link, mkdir): undone by removing what it names
    /// (a directory with whatever is under it).
    Added(Entry),
    /// A name removed (unlink, rmdir): what it named was moved to the trash as `trashed`, and
    /// goes back.
    Removed { entry: Entry, trashed: OsString },
    /// A rename; `replaced` is the trash name of what `to` named before, if anything: undone
    /// by renaming back, then bringing `replaced` back.
    Renamed {
        from: Entry,
        to: Entry,
        replaced: Option<OsString>,
    },
}

impl Op {
    /// The names it changed (one, or a rename's two).
    fn entries(&self) -> impl Iterator<Item = &Entry> {
        let (first, second) = match self {
            Op::Added(entry) | Op::Removed { entry, .. } => (entry, None),
            Op::Renamed { from, to, .. } => (from, Some(to)),
        };
        std::iter::once(first).chain(second)
    }
}

/// The namespace operations since the mount, in order, and how far each directory was synced.
#[derive(Default)]
pub struct Journal {
    ops: Vec<Op>,
    /// For each directory synced: the journal's length at its last sync (every operation
    /// before that index had its changes to this directory made durable).
    synced_up_to: HashMap<BackingId, usize>,
}

impl Journal {
    pub fn record(&mut self, op: Op) {
        self.ops.push(op);
    }

    /// An `fsyncdir` (or `fsync` of a directory): its entries as they now are become durable.
    pub fn sync_dir(&mut self, dir: BackingId) {
        self.synced_up_to.insert(dir, self.ops.len());
    }

    /// Whether the directory of every name `ops[index]` changed was synced after it.
    fn synced_after(&self, index: usize) -> bool {
        self.ops[index].entries().all(|entry| {
            self.synced_up_to
                .get(&entry.dir)
                .is_some_and(|&up_to| up_to > index)
        })
    }

    /// Empties the journal, returning the operations that are not durable, in journal order.
    /// An operation is durable when every directory it changed was synced after it, or when a
    /// later durable operation changed one of the same names (a name's history reaches the
    /// disk in order: this only matters for a rename across directories, the one operation
    /// changing two, whose other directory was not synced). So for each name, the operations
    /// returned are the last ones to change it: undone from the last, they give back its
    /// earlier state, whatever the durable operations did to other names.
    pub fn take_not_durable(&mut self) -> Vec<Op> {
        let durable = self.durable();
        self.synced_up_to.clear();
        let ops = std::mem::take(&mut self.ops);
        ops.into_iter()
            .zip(durable)
            .filter_map(|(op, durable)| (!durable).then_some(op))
            .collect()
    }

    /// Which operations are durable, by index: from the last, each synced one, and each that
    /// changed a name a later durable one changed.
    fn durable(&self) -> Vec<bool> {
        let mut durable = vec![false; self.ops.len()];
        let mut names_kept: HashSet<&Entry> = HashSet::new();
        for index in (0..self.ops.len()).rev() {
            let op = &self.ops[index];
            if self.synced_after(index) || op.entries().any(|entry| names_kept.contains(entry)) {
                durable[index] = true;
                names_kept.extend(op.entries());
            }
        }
        durable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(ino: u64) -> BackingId {
        BackingId::new(1, ino)
    }

    fn entry(d: u64, name: &str) -> Entry {
        Entry {
            dir: dir(d),
            name: name.into(),
        }
    }

    fn names(ops: &[Op]) -> Vec<String> {
        ops.iter()
            .map(|op| {
                let entry = op.entries().last().expect("every operation changes a name");
                entry.name.to_string_lossy().into_owned()
            })
            .collect()
    }

    #[test]
    fn a_sync_makes_the_earlier_operations_of_its_directory_durable() {
        let mut journal = Journal::default();
        journal.record(Op::Added(entry(1, "a")));
        journal.record(Op::Added(entry(2, "b")));
        journal.sync_dir(dir(1));
        journal.record(Op::Added(entry(1, "c")));
        assert_eq!(names(&journal.take_not_durable()), ["b", "c"]);
        assert!(journal.take_not_durable().is_empty(), "the journal was emptied");
    }

    #[test]
    fn a_rename_across_directories_needs_both_synced() {
        let rename = || Op::Renamed {
            from: entry(1, "x"),
            to: entry(2, "y"),
            replaced: None,
        };
        let mut journal = Journal::default();
        journal.record(rename());
        journal.sync_dir(dir(2));
        assert_eq!(journal.take_not_durable().len(), 1);

        journal.record(rename());
        journal.sync_dir(dir(2));
        journal.sync_dir(dir(1));
        assert!(journal.take_not_durable().is_empty());
    }

    #[test]
    fn a_later_durable_change_of_a_name_makes_the_earlier_ones_durable() {
        let mut journal = Journal::default();
        journal.record(Op::Renamed {
            from: entry(1, "x"),
            to: entry(2, "y"),
            replaced: None,
        });
        journal.record(Op::Added(entry(1, "unrelated")));
        journal.record(Op::Removed {
            entry: entry(2, "y"),
            trashed: "0".into(),
        });
        journal.sync_dir(dir(2));
        assert_eq!(names(&journal.take_not_durable()), ["unrelated"]);
    }
}
