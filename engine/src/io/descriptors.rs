//! The storage's share of the process's file descriptors, and telling the two kinds of
//! resource exhaustion a storage error can mean: no space, no descriptor.
//!
//! Every open file holds a descriptor, and a data dir can hold far more partition files than the
//! process may open. The storage of every shard therefore takes its descriptors from one
//! [`DescriptorBudget`] that stays below the process limit: what is left is kept for sockets
//! (listeners, connections), rings and short-lived files, so a full budget never stops `accept`.
//! An open past the budget fails like an open past the limit (EMFILE), before any system call;
//! the shard's [`super::FileCache`] then closes the files it used least recently and are idle,
//! and opens again.
//!
//! Each shard takes its descriptors through its own [`ShardDescriptors`], which counts what that
//! shard holds. A shard may hold more than its fair share (the budget over the number of shards)
//! while the budget has room; a shard that finds the budget full and nothing idle of its own to
//! close raises [`DescriptorBudget::raise_pressure`], and every shard above its fair share then
//! closes idle files until it is back at it (see `FileCache::give_back`).
//!
//! The budget can lend to others what its storage does not use: the broker's client
//! connections take from the same pool, and while they hold or expect descriptors the budget
//! [`withhold`](DescriptorBudget::withhold)s them. Withholding more than the storage leaves free
//! raises pressure, so the shards close idle files until the storage fits again; so the storage
//! may use what connections do not, and connections get theirs back as they come.
//!
//! Sends lend descriptors too: the network layer's sendfile reads a segment through a duplicate
//! of its descriptor, made for one send and closed when the send is done ([`LentSlot`]). Files
//! keep to [`files_soft_limit`](DescriptorBudget::files_soft_limit) (an open past it first
//! closes idle files), and lent duplicates to the quarter above it: an LRU that filled the whole
//! budget with open files would leave sends none, and every fetch would copy through memory.

use std::cell::Cell;
use std::io;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Sends may hold one descriptor in this many of the storage's limit; files keep to the rest.
pub const LEND_SHARE_DIVISOR: u64 = 4;

/// How many descriptors the storage files of every shard may hold at once. Shared across
/// shards (atomics).
#[derive(Debug)]
pub struct DescriptorBudget {
    limit: u64,
    used: AtomicU64,
    /// Of `used`, descriptors lent to sends ([`LentSlot`]).
    lent: AtomicU64,
    /// Of `limit`, what others (client connections) hold or expect: the storage may use the rest.
    withheld: AtomicU64,
    /// Notified whenever the storage gives descriptors back, for those waiting to be lent some.
    released: event_listener::Event,
    /// Shards taking descriptors from this budget (their fair share is the limit over this).
    shards: AtomicU64,
    /// Raised by a shard that found the budget full with nothing idle of its own to close.
    pressure: event_listener::Event,
    /// How many times pressure was raised (each shard compares it with what it last saw).
    pressure_raised: AtomicU64,
    /// The budget was found too small for the files in use (said once).
    shortage_reported: AtomicBool,
}

impl DescriptorBudget {
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(DescriptorBudget {
            limit,
            used: AtomicU64::new(0),
            lent: AtomicU64::new(0),
            withheld: AtomicU64::new(0),
            released: event_listener::Event::new(),
            shards: AtomicU64::new(0),
            pressure: event_listener::Event::new(),
            pressure_raised: AtomicU64::new(0),
            shortage_reported: AtomicBool::new(false),
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Descriptors held now, by every shard.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// What the storage may hold now: the limit less what is withheld for others.
    pub fn storage_limit(&self) -> u64 {
        self.limit.saturating_sub(self.withheld.load(Ordering::Acquire))
    }

    /// Descriptors held by files now (what is used less what sends hold).
    pub fn files_used(&self) -> u64 {
        self.used().saturating_sub(self.lent())
    }

    /// Descriptors lent to sends now.
    pub fn lent(&self) -> u64 {
        self.lent.load(Ordering::Relaxed)
    }

    /// What files should hold at most: past it an open first closes idle files, so that the
    /// rest of the storage's limit stays free for sends.
    pub fn files_soft_limit(&self) -> u64 {
        let storage = self.storage_limit();
        storage - storage / LEND_SHARE_DIVISOR
    }

    /// Lends one descriptor to a send, while lent ones are fewer than their share of the
    /// storage's limit and the budget has room; `None` otherwise (the bytes then go through
    /// memory). Given back when the slot is dropped, on whichever thread.
    pub fn lend(self: &Arc<Self>) -> Option<LentSlot> {
        let share = self.storage_limit() / LEND_SHARE_DIVISOR;
        self.lent
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |lent| {
                (lent < share).then_some(lent + 1)
            })
            .ok()?;
        if self.claim(1).is_err() {
            self.lent.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(LentSlot { budget: self.clone() })
    }

    /// Withholds `count` of the limit for others (replacing what was withheld before). When the
    /// storage holds more than it may now, pressure makes the shards close idle files.
    pub fn withhold(&self, count: u64) {
        self.withheld.store(count.min(self.limit), Ordering::Release);
        if self.used() > self.storage_limit() {
            self.raise_pressure();
        }
    }

    /// Resolves the next time the storage gives descriptors back. Create it before checking
    /// [`used`](Self::used), or a release in between is missed.
    pub fn released(&self) -> event_listener::EventListener {
        self.released.listen()
    }

    fn give_back(&self, count: u64) {
        self.used.fetch_sub(count, Ordering::AcqRel);
        self.released.notify(usize::MAX);
    }

    /// A new shard's account on this budget (call once per shard, on that shard).
    pub fn shard(self: &Arc<Self>) -> Rc<ShardDescriptors> {
        self.shards.fetch_add(1, Ordering::AcqRel);
        let seen = self.pressure_raised.load(Ordering::Acquire);
        Rc::new(ShardDescriptors {
            budget: self.clone(),
            held: Cell::new(0),
            pressure_seen: Cell::new(seen),
        })
    }

    /// Tells every shard that descriptors are wanted: those above their fair share give back
    /// idle ones.
    pub fn raise_pressure(&self) {
        self.pressure_raised.fetch_add(1, Ordering::AcqRel);
        self.pressure.notify(usize::MAX);
    }

    /// Says, once per process, that the budget is too small for the files in use, with the
    /// number of descriptors that would have been needed.
    pub fn report_shortage(&self, wanted: u64, held_in_use_here: u64) {
        if self.shortage_reported.swap(true, Ordering::AcqRel) {
            return;
        }
        let needed = self.used() + wanted;
        tracing::warn!(
            budget = self.limit,
            used = self.used(),
            needed,
            held_in_use_here,
            "the file descriptor budget for partition files ({}) is too small for the files in \
             use: at least {needed} are needed. Opens past it answer KAFKA_STORAGE_ERROR \
             (retriable) until files go idle. Raise the open-file limit (ulimit -n, systemd \
             LimitNOFILE=)",
            self.limit,
        );
    }

    fn claim(&self, count: u64) -> io::Result<()> {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(count)
                    .filter(|after| *after <= self.storage_limit())
            })
            .map(drop)
            .map_err(|_| io::Error::from_raw_os_error(libc::EMFILE))
    }
}

/// One shard's account on a [`DescriptorBudget`]: what this shard holds. Owned by one shard;
/// not Send.
#[derive(Debug)]
pub struct ShardDescriptors {
    budget: Arc<DescriptorBudget>,
    held: Cell<u64>,
    /// The budget's pressure count when this shard last answered it.
    pressure_seen: Cell<u64>,
}

impl ShardDescriptors {
    pub fn budget(&self) -> &Arc<DescriptorBudget> {
        &self.budget
    }

    /// Descriptors this shard holds now.
    pub fn held(&self) -> u64 {
        self.held.get()
    }

    /// What the storage may hold over the number of shards: what a shard keeps when others
    /// are short.
    pub fn fair_share(&self) -> u64 {
        self.budget.storage_limit() / self.budget.shards.load(Ordering::Acquire).max(1)
    }

    /// Takes `count` descriptors, or fails with EMFILE when that would pass the budget.
    pub fn take(self: &Rc<Self>, count: u64) -> io::Result<DescriptorSlots> {
        self.budget.claim(count)?;
        self.held.set(self.held.get() + count);
        Ok(DescriptorSlots {
            owner: self.clone(),
            count,
        })
    }

    /// Whether pressure was raised since this shard last looked (and marks it seen).
    pub fn take_pressure(&self) -> bool {
        let raised = self.budget.pressure_raised.load(Ordering::Acquire);
        raised != self.pressure_seen.replace(raised)
    }

    /// Resolves the next time some shard raises pressure. Wakes this shard's executor from
    /// another thread.
    pub fn pressure_raised(&self) -> event_listener::EventListener {
        self.budget.pressure.listen()
    }
}

/// Descriptors taken from a [`DescriptorBudget`], given back when dropped. Owned by the file
/// that holds them (one shard).
#[derive(Debug)]
pub struct DescriptorSlots {
    owner: Rc<ShardDescriptors>,
    count: u64,
}

impl DescriptorSlots {
    /// The budget these slots were taken from.
    pub fn budget(&self) -> &Arc<DescriptorBudget> {
        &self.owner.budget
    }

    /// Gives back `count` of these slots (a descriptor taken for a file that was not opened).
    pub fn shrink(&mut self, count: u64) {
        assert!(count <= self.count, "slots give back at most what they hold");
        self.owner.budget.give_back(count);
        self.owner.held.set(self.owner.held.get() - count);
        self.count -= count;
    }

    /// Takes `count` more from the same budget.
    pub fn grow(&mut self, count: u64) -> io::Result<()> {
        self.owner.budget.claim(count)?;
        self.owner.held.set(self.owner.held.get() + count);
        self.count += count;
        Ok(())
    }
}

impl Drop for DescriptorSlots {
    fn drop(&mut self) {
        self.owner.budget.give_back(self.count);
        let held = self.owner.held.get();
        assert!(held >= self.count, "a shard gives back descriptors it holds");
        self.owner.held.set(held - self.count);
    }
}

/// Whether `error` is a write refused for lack of space (ENOSPC, or EDQUOT for a quota). Only
/// a write's own errno counts: such a write put nothing in the page cache past the bytes it
/// reported, so it can be undone and retried once space returns. Callers must not ask it about
/// fdatasync or write-behind failures, which are never retried: after one, the kernel may have
/// dropped dirty pages it could not write.
pub fn is_out_of_space(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// Whether `error` means no descriptor was left (EMFILE, ENFILE, or the [`DescriptorBudget`]).
pub fn is_out_of_descriptors(error: &io::Error) -> bool {
    const CODES: [i32; 2] = [libc::EMFILE, libc::ENFILE];
    match error.raw_os_error() {
        Some(code) => CODES.contains(&code),
        // glommio reports a failed open with the errno's text only (its error loses the code).
        None => {
            let text = error.to_string();
            CODES
                .iter()
                .any(|code| text.contains(&format!("(os error {code})")))
        }
    }
}

/// One descriptor of the budget lent to a send; given back when dropped. Send: the send that
/// holds it runs on the connection's shard, not the file's.
#[derive(Debug)]
pub struct LentSlot {
    budget: Arc<DescriptorBudget>,
}

impl Drop for LentSlot {
    fn drop(&mut self) {
        let before = self.budget.lent.fetch_sub(1, Ordering::AcqRel);
        assert!(before > 0, "a lent slot was counted when it was made");
        self.budget.give_back(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_refuses_past_its_limit_and_dropped_slots_give_back() {
        let budget = DescriptorBudget::new(4);
        let (one, two) = (budget.shard(), budget.shard());
        assert_eq!(one.fair_share(), 2);
        let mut three = one.take(3).unwrap();
        let refused = two.take(2).unwrap_err();
        assert!(is_out_of_descriptors(&refused), "{refused}");
        assert!(three.grow(2).is_err());
        three.grow(1).unwrap();
        assert_eq!((budget.used(), one.held(), two.held()), (4, 4, 0));
        drop(three);
        assert_eq!((budget.used(), one.held()), (0, 0));
        let _again = two.take(4).unwrap();
        assert_eq!(two.held(), 4);
    }

    #[test]
    fn what_is_withheld_for_others_shrinks_the_storage_and_raises_pressure_past_its_use() {
        let budget = DescriptorBudget::new(10);
        let (one, two) = (budget.shard(), budget.shard());
        let held = one.take(6).unwrap();
        budget.withhold(3);
        assert_eq!((budget.storage_limit(), one.fair_share()), (7, 3));
        assert!(!one.take_pressure(), "6 fit in 7: no pressure");
        assert!(two.take(2).is_err(), "6 + 2 would pass the 7 left");
        budget.withhold(5);
        assert!(one.take_pressure(), "6 no longer fit in 5");
        let released = budget.released();
        drop(held);
        futures::executor::block_on(released);
        assert_eq!(budget.used(), 0);
        budget.withhold(100);
        assert_eq!(budget.storage_limit(), 0, "never more withheld than the limit");
    }

    #[test]
    fn sends_borrow_only_their_share_and_files_keep_to_the_rest() {
        let budget = DescriptorBudget::new(16);
        let shard = budget.shard();
        assert_eq!(budget.files_soft_limit(), 12);
        let files = shard.take(10).unwrap();
        let lent: Vec<LentSlot> = (0..4).map(|_| budget.lend().unwrap()).collect();
        assert!(budget.lend().is_none(), "a quarter of 16 is lent already");
        assert_eq!((budget.used(), budget.lent(), budget.files_used()), (14, 4, 10));
        // Files may still take what sends leave (the soft limit is kept by closing idle ones).
        let more = shard.take(2).unwrap();
        assert!(shard.take(1).is_err());
        let released = budget.released();
        let sent = std::thread::spawn(move || drop(lent));
        futures::executor::block_on(released);
        sent.join().unwrap();
        assert_eq!((budget.used(), budget.lent()), (12, 0));
        drop((files, more));
        // Lending needs room in the budget, not only in the sends' share.
        let _all = shard.take(16).unwrap();
        assert!(budget.lend().is_none());
        assert_eq!(budget.lent(), 0, "a refused lend counts nothing");
    }

    #[test]
    fn pressure_is_seen_once_by_every_shard() {
        let budget = DescriptorBudget::new(4);
        let (one, two) = (budget.shard(), budget.shard());
        assert!(!one.take_pressure());
        let woken = two.pressure_raised();
        budget.raise_pressure();
        futures::executor::block_on(woken);
        assert!(one.take_pressure());
        assert!(!one.take_pressure());
        assert!(two.take_pressure());
    }

    #[test]
    fn exhaustion_is_told_by_errno_or_by_glommio_text() {
        assert!(is_out_of_space(&io::Error::from_raw_os_error(libc::ENOSPC)));
        assert!(is_out_of_space(&io::Error::from_raw_os_error(libc::EDQUOT)));
        // A write-behind failure keeps the kind of ENOSPC but not its errno: never retried.
        let wrapped = io::Error::new(io::ErrorKind::StorageFull, "write-behind failed");
        assert!(!is_out_of_space(&wrapped));
        assert!(is_out_of_descriptors(&io::Error::from_raw_os_error(libc::ENFILE)));
        let glommio = io::Error::other("Too many open files (os error 24), op: Open path: x");
        assert!(is_out_of_descriptors(&glommio));
        assert!(!is_out_of_descriptors(&io::Error::from_raw_os_error(libc::EIO)));
    }
}
