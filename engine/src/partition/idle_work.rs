//! Which partitions the shard's idle pass visits: only those holding something to give back or
//! checkpoint, so that an idle broker's CPU does not grow with its partition count.
//!
//! The pass (broker `maintenance.rs`) gives back blocks reserved ahead of appends that stopped,
//! drops index entries nothing used, and checkpoints partitions written but idle. Visiting
//! every open partition every 5 s to find the few with such work took 6.7 % of a core at
//! 100 000 written, idle partitions (docs/decisions/0024, what an idle partition costs).
//!
//! Work only appears through the partition's own operations (an append dirties the log and
//! may reserve blocks; a read may bring index entries back into memory; retention,
//! compaction and truncation dirty the log), and each of them ends by listing the partition
//! if it holds work and is not listed yet ([`IdleWork::note`]). The pass takes the list, visits
//! each partition, and lists it again only while it still holds work: a partition leaves
//! the list once its log is clean, its reservation given back and its indexes released.
//!
//! Bounds: a partition is listed at most once (its `listed` flag), so the list is at most
//! as long as the shard's open partitions; entries are weak, so a closed or removed
//! partition is not kept alive by it.

use super::Partition;
use crate::io::Storage;
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

/// The partitions of one shard that hold work for its idle pass. Owned by one shard; not Send.
pub struct IdleList<S: Storage> {
    listed: RefCell<Vec<Weak<Partition<S>>>>,
}

impl<S: Storage> Default for IdleList<S> {
    fn default() -> Self {
        IdleList {
            listed: RefCell::new(Vec::new()),
        }
    }
}

impl<S: Storage> IdleList<S> {
    /// Takes the partitions listed so far, still open, for one pass; each must be handed to
    /// [`IdleList::visited`] after its visit.
    pub fn take_due(&self) -> Vec<Rc<Partition<S>>> {
        let listed = std::mem::take(&mut *self.listed.borrow_mut());
        let open = listed.iter().filter_map(Weak::upgrade);
        open.filter(|partition| !partition.is_closed()).collect()
    }

    /// After the pass visited `partition`: listed again while it holds work, else unlisted
    /// (its next operation that makes work lists it).
    pub fn visited(&self, partition: &Rc<Partition<S>>) {
        if partition.holds_idle_work() {
            self.listed.borrow_mut().push(Rc::downgrade(partition));
        } else {
            partition.idle.listed.set(false);
        }
    }

    /// How many partitions are listed.
    pub fn len(&self) -> usize {
        self.listed.borrow().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A partition's place in its shard's [`IdleList`].
pub(super) struct IdleWork<S: Storage> {
    /// In the list, or taken by a pass that has not handed it back yet.
    listed: Cell<bool>,
    /// `None` until the shard attaches the partition to its list.
    list: RefCell<Option<Attached<S>>>,
}

/// The list, and the partition as the list holds it.
type Attached<S> = (Rc<IdleList<S>>, Weak<Partition<S>>);

impl<S: Storage> Default for IdleWork<S> {
    fn default() -> Self {
        IdleWork {
            listed: Cell::new(false),
            list: RefCell::new(None),
        }
    }
}

impl<S: Storage> IdleWork<S> {
    /// Lists the partition if it holds work (`holds_work`, asked only when it is not listed).
    pub(super) fn note(&self, holds_work: impl FnOnce() -> bool) {
        if self.listed.get() || !holds_work() {
            return;
        }
        if let Some((list, partition)) = &*self.list.borrow() {
            self.listed.set(true);
            list.listed.borrow_mut().push(partition.clone());
        }
    }
}

impl<S: Storage> Partition<S> {
    /// Makes this partition one its shard's idle pass visits while it holds work (see the
    /// module comment); lists it now if it already does (an open may leave its log dirty).
    pub fn attach_idle_list(self: &Rc<Self>, list: Rc<IdleList<S>>) {
        *self.idle.list.borrow_mut() = Some((list, Rc::downgrade(self)));
        self.note_idle_work();
    }

    /// Whether the idle pass has anything to do here (see `Log::holds_idle_work`).
    pub fn holds_idle_work(&self) -> bool {
        self.log.holds_idle_work()
    }

    /// Lists the partition for the idle pass if it holds work: every operation that can make
    /// work ends with this (through [`NoteIdleWork`]).
    pub(super) fn note_idle_work(&self) {
        self.idle.note(|| self.holds_idle_work());
    }

    /// A guard that notes idle work when the operation holding it ends, however it ends.
    pub(super) fn noting_idle_work(&self) -> NoteIdleWork<'_, S> {
        NoteIdleWork(self)
    }
}

/// See [`Partition::noting_idle_work`].
pub(super) struct NoteIdleWork<'a, S: Storage>(&'a Partition<S>);

impl<S: Storage> Drop for NoteIdleWork<'_, S> {
    fn drop(&mut self) {
        self.0.note_idle_work();
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{batch, small_config};
    use super::*;
    use crate::io::FaultyStorage;
    use futures::executor::block_on;
    use laminar_model::Offset;
    use std::path::PathBuf;

    async fn open_listed(
        storage: &FaultyStorage,
        name: &str,
        list: &Rc<IdleList<FaultyStorage>>,
    ) -> Rc<Partition<FaultyStorage>> {
        let dir = PathBuf::from("/data").join(name);
        let partition = Partition::open(Rc::new(storage.clone()), dir, small_config());
        let partition = Rc::new(partition.await.unwrap());
        partition.attach_idle_list(list.clone());
        partition
    }

    /// One idle pass as the broker's maintenance runs it, without its clock: every listed
    /// partition checkpointed and its unused indexes released.
    async fn pass(list: &IdleList<FaultyStorage>) -> usize {
        let due = list.take_due();
        for partition in &due {
            partition.release_unused_indexes();
            partition.checkpoint().await.unwrap();
            list.visited(partition);
        }
        due.len()
    }

    #[test]
    fn a_partition_is_listed_while_it_holds_idle_work_and_leaves_once_all_is_given_back() {
        block_on(async {
            let storage = FaultyStorage::new(1);
            let list = Rc::new(IdleList::default());
            let mut partitions = Vec::new();
            for name in ["t-0", "t-1", "t-2"] {
                partitions.push(open_listed(&storage, name, &list).await);
            }
            assert!(
                partitions.iter().all(|p| !p.log.is_clean()),
                "dirty until checkpointed"
            );
            assert_eq!(list.len(), 3, "so listed at their open");
            assert_eq!(pass(&list).await, 3);
            assert!(
                list.is_empty(),
                "checkpointed, and no index entries: nothing left"
            );
            for partition in &partitions[..2] {
                for ts in 0..10 {
                    partition.append(batch(3, 1000 + ts), 5).await.unwrap();
                }
            }
            assert_eq!(list.len(), 2, "the two written are listed, once each");
            assert_eq!(pass(&list).await, 2);
            assert_eq!(
                list.len(),
                2,
                "clean now, but their indexes were used in this period"
            );
            assert_eq!(pass(&list).await, 2);
            assert!(
                list.is_empty(),
                "checkpointed and indexes released: nothing left to visit"
            );
            assert_eq!(pass(&list).await, 0, "an idle shard's pass visits none");

            let read = partitions[1].read(Offset::ZERO, 1 << 20, true).await.unwrap();
            assert!(!read.data.is_empty());
            assert!(list.is_empty(), "a read from the segment's start needs no index");
            let read = partitions[1].read(Offset::new(27), 1 << 20, true).await.unwrap();
            assert!(!read.data.is_empty());
            assert_eq!(list.len(), 1, "a read brought index entries back: listed again");
            partitions[1].close().await.unwrap();
            assert!(list.take_due().is_empty(), "a closed partition is not visited");
        });
    }
}
