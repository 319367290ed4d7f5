//! Directory fsyncs shared by the callers that ask for one at the same time.
//!
//! A directory fsync makes durable every entry created in the directory before it started. So
//! a caller needs an fsync that *started* after it asked; callers that ask while one runs all
//! wait for the next, and one fsync covers them all. Thousands of partitions created at once
//! in one log directory make their first durable syncs together: each needs the log
//! directory synced, and they share a few fsyncs instead of queueing one each.

use crate::local_sync::LocalEvent;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The directories being synced now, with their waiters. Owned by one shard; not Send.
/// Bounded by the directories with an fsync asked and not yet covered: an entry goes once
/// every caller that asked is covered.
#[derive(Default)]
pub struct SharedDirSyncs {
    by_dir: RefCell<HashMap<PathBuf, Rc<DirSync>>>,
}

#[derive(Default)]
struct DirSync {
    /// Tickets handed out, one per caller.
    asked: Cell<u64>,
    /// Every ticket up to this one is covered by an fsync that finished.
    covered: Cell<u64>,
    running: Cell<bool>,
    finished: LocalEvent,
}

/// Marks the directory's fsync as not running and wakes its waiters when the running caller
/// finishes, or is dropped mid-fsync (a waiter then runs the next one).
struct Running<'a>(&'a DirSync);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.set(false);
        self.0.finished.notify_all();
    }
}

impl SharedDirSyncs {
    /// Returns once an fsync of `dir` (run by `sync`) that started after this call finished;
    /// an error is the caller's whose fsync failed (waiters then run their own).
    pub async fn sync<Sync, Fut>(&self, dir: &Path, sync: Sync) -> io::Result<()>
    where
        Sync: Fn() -> Fut,
        Fut: Future<Output = io::Result<()>>,
    {
        let state = self
            .by_dir
            .borrow_mut()
            .entry(dir.to_path_buf())
            .or_default()
            .clone();
        let ticket = state.asked.get() + 1;
        state.asked.set(ticket);
        let result = loop {
            if state.covered.get() >= ticket {
                break Ok(());
            }
            if state.running.get() {
                let finished = state.finished.listen();
                if state.running.get() {
                    finished.await;
                }
                continue;
            }
            state.running.set(true);
            let running = Running(&state);
            let covers = state.asked.get();
            let synced = sync().await;
            if synced.is_ok() {
                state.covered.set(covers);
            }
            drop(running);
            if let Err(error) = synced {
                break Err(error);
            }
        };
        if !state.running.get() && state.covered.get() >= state.asked.get() {
            self.by_dir.borrow_mut().remove(dir);
        }
        result
    }

    /// Directories with an fsync asked and not yet covered.
    pub fn pending(&self) -> usize {
        self.by_dir.borrow().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_tasks::on_executor;
    use std::time::Duration;

    /// An fsync that takes 10 ms and counts its runs; the run numbered `failing` fails.
    fn counted_fsync(runs: &Rc<Cell<u32>>, failing: u32) -> impl Future<Output = io::Result<()>> {
        let runs = runs.clone();
        async move {
            runs.set(runs.get() + 1);
            glommio::timer::sleep(Duration::from_millis(10)).await;
            match runs.get() == failing {
                true => Err(io::Error::other("injected")),
                false => Ok(()),
            }
        }
    }

    #[test]
    fn callers_that_ask_together_share_one_fsync_and_a_later_one_gets_its_own() {
        on_executor(|| async {
            let syncs = SharedDirSyncs::default();
            let runs = Rc::new(Cell::new(0));
            let sync = || counted_fsync(&runs, 0);
            let dir = Path::new("/logs");
            // The first runs at once; the 99 that ask while it runs share the second.
            let all = (0..100).map(|_| syncs.sync(dir, sync));
            let results = futures::future::join_all(all).await;
            assert!(results.iter().all(Result::is_ok));
            assert_eq!(runs.get(), 2, "one fsync started before most asked, one after");
            assert_eq!(syncs.pending(), 0, "nobody waits: the directory is forgotten");
            syncs.sync(dir, sync).await.unwrap();
            assert_eq!(runs.get(), 3, "asked after both finished: an fsync of its own");
        });
    }

    #[test]
    fn a_failed_fsync_fails_its_caller_and_a_waiter_runs_the_next() {
        on_executor(|| async {
            let syncs = SharedDirSyncs::default();
            let runs = Rc::new(Cell::new(0));
            let sync = || counted_fsync(&runs, 1);
            let dir = Path::new("/logs");
            let (first, second) = futures::join!(syncs.sync(dir, sync), syncs.sync(dir, sync));
            assert!(first.is_err(), "its own fsync failed");
            assert!(second.is_ok(), "ran the next fsync itself");
            assert_eq!(runs.get(), 2);
        });
    }
}
