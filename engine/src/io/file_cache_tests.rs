//! The file cache over the fault-injecting storage with a tiny descriptor budget.

use super::*;
use crate::io::{CrashMode, DescriptorBudget, FaultyStorage};
use futures::executor::block_on;

const DIR: &str = "/d";

fn path(i: usize) -> PathBuf {
    Path::new(DIR).join(format!("{i}.log"))
}

/// A cache over fresh in-memory storage whose opens take descriptors from `shard`.
fn cache(storage: &FaultyStorage, shard: &Rc<ShardDescriptors>) -> FileCache<FaultyStorage> {
    let inner = storage.clone().with_descriptors(shard.clone());
    FileCache::new(inner, Some(shard.clone()))
}

async fn storage() -> FaultyStorage {
    let storage = FaultyStorage::new(3);
    storage.create_dir_all(Path::new(DIR)).await.unwrap();
    let parent = Path::new(DIR).parent().unwrap();
    storage.sync_dir(parent).await.unwrap();
    storage
}

#[test]
fn more_files_than_descriptors_are_served_least_recently_used_closed_first() {
    block_on(async {
        let storage = storage().await;
        let budget = DescriptorBudget::new(4);
        let cache = cache(&storage, &budget.shard());
        let mut files = Vec::new();
        for i in 0..40 {
            let file = cache.open(&path(i), true).await.unwrap();
            file.write_at(0, &[format!("file {i}").as_bytes()]).await.unwrap();
            files.push(file);
            assert!(budget.used() <= 4);
        }
        for (i, file) in files.iter().enumerate() {
            let read = file.read_at(0, 64).await.unwrap();
            assert_eq!(&read[..], format!("file {i}").as_bytes());
            assert_eq!(file.len(), read.len() as u64);
        }
        let stats = cache.stats();
        assert_eq!(stats.files, 40);
        assert!(stats.parked >= 36, "{stats:?}");
        assert!(stats.reopens >= 36, "{stats:?}");
        assert_eq!(stats.refusals, 0);
        // The most recently used file is still open: only the oldest were closed.
        assert!(files[39].open_handle().is_some());
    });
}

#[test]
fn a_dirty_file_is_synced_before_it_is_closed() {
    block_on(async {
        let storage = storage().await;
        let budget = DescriptorBudget::new(2);
        let cache = cache(&storage, &budget.shard());
        let dirty = cache.open(&path(0), true).await.unwrap();
        storage.sync_dir(path(0).parent().unwrap()).await.unwrap();
        dirty.write_at(0, &[b"unsynced"]).await.unwrap();
        assert_eq!(cache.park_idle(1).await, 1);
        assert!(dirty.open_handle().is_none());
        // The power cut keeps what was synced: all of it.
        storage.crash(CrashMode::LoseUnsynced);
        assert_eq!(storage.file_bytes(&path(0)).unwrap(), b"unsynced");
        assert_eq!(storage.sync_count(), 1);
        // A file not written since it was opened (or last synced) is closed without a sync.
        let clean = cache.open(&path(1), true).await.unwrap();
        clean.read_at(0, 1).await.unwrap();
        assert_eq!(cache.park_idle(1).await, 1);
        assert!(clean.open_handle().is_none());
        assert_eq!(storage.sync_count(), 1);
    });
}

#[test]
fn clean_files_are_closed_before_dirty_ones_however_recently_used() {
    block_on(async {
        let storage = storage().await;
        let budget = DescriptorBudget::new(8);
        let cache = cache(&storage, &budget.shard());
        // The log being written is the oldest file; the index files opened after it were
        // never written (as a partition's files right after its first append).
        let log = cache.open(&path(0), true).await.unwrap();
        log.write_at(0, &[b"appended"]).await.unwrap();
        let indexes = [
            cache.open(&path(1), true).await.unwrap(),
            cache.open(&path(2), true).await.unwrap(),
        ];
        assert_eq!(cache.park_idle(2).await, 2);
        assert!(log.open_handle().is_some(), "the dirty log was parked first");
        assert!(indexes.iter().all(|file| file.open_handle().is_none()));
        assert_eq!(storage.sync_count(), 0, "parking clean files syncs nothing");
        // With nothing clean left, the dirty one goes, synced first.
        assert_eq!(cache.park_idle(1).await, 1);
        assert!(log.open_handle().is_none());
        assert_eq!(storage.sync_count(), 1);
    });
}

#[test]
fn files_keep_below_their_soft_limit_so_that_sends_have_descriptors() {
    block_on(async {
        let storage = storage().await;
        let budget = DescriptorBudget::new(64);
        let cache = cache(&storage, &budget.shard());
        let mut files = Vec::new();
        for i in 0..100 {
            files.push(cache.open(&path(i), true).await.unwrap());
            assert!(budget.files_used() <= budget.files_soft_limit(), "open {i}");
        }
        assert_eq!(budget.files_soft_limit(), 48);
        assert!(cache.stats().parks > 0);
        // The quarter above the files' share is there for sends.
        let lent: Vec<_> = std::iter::from_fn(|| budget.lend()).take(100).collect();
        assert_eq!(lent.len(), 16);
    });
}

#[test]
fn a_file_in_use_is_never_closed_and_an_open_waits_for_its_use_to_end() {
    block_on(async {
        let storage = storage().await;
        let budget = DescriptorBudget::new(1);
        let cache = cache(&storage, &budget.shard());
        let busy = cache.open(&path(0), true).await.unwrap();
        let in_use = InUse::new(&busy);
        assert_eq!(cache.park_idle(10).await, 0);
        let second = path(1);
        let mut opening = Box::pin(cache.open(&second, true));
        assert!(
            futures::poll!(&mut opening).is_pending(),
            "waits for the use to end"
        );
        drop(in_use);
        opening.await.unwrap();
        assert!(busy.open_handle().is_none(), "closed once idle");
        assert_eq!(cache.stats().refusals, 0);
    });
}

#[test]
fn with_nothing_idle_and_nothing_in_use_an_open_is_refused_and_pressure_raised() {
    block_on(async {
        let storage = storage().await;
        let budget = DescriptorBudget::new(0);
        let shard = budget.shard();
        let cache = cache(&storage, &shard);
        let refused = cache
            .open(&path(1), true)
            .await
            .err()
            .expect("no descriptor at all");
        assert!(is_out_of_descriptors(&refused), "{refused}");
        assert_eq!(cache.stats().refusals, 1);
        assert!(shard.take_pressure(), "raised for the other shards");
    });
}

#[test]
fn a_failed_sync_before_closing_fails_the_file_for_good() {
    block_on(async {
        let storage = storage().await;
        let budget = DescriptorBudget::new(4);
        let cache = cache(&storage, &budget.shard());
        let file = cache.open(&path(0), true).await.unwrap();
        file.write_at(0, &[b"lost?"]).await.unwrap();
        storage.fail_sync_after(1);
        assert_eq!(cache.park_idle(1).await, 0);
        let error = file.write_at(5, &[b"!"]).await.unwrap_err();
        assert!(error.to_string().contains("failed while closed idle"), "{error}");
        assert!(file.fdatasync().await.is_err(), "never reported durable");
        assert!(file.read_at(0, 5).await.is_err());
    });
}

#[test]
fn a_parked_file_reopens_only_as_the_same_file() {
    block_on(async {
        let storage = storage().await;
        let budget = DescriptorBudget::new(8);
        let cache = cache(&storage, &budget.shard());
        let file = cache.open(&path(0), true).await.unwrap();
        file.write_at(0, &[b"original"]).await.unwrap();
        assert_eq!(cache.park_idle(1).await, 1);
        // Replaced behind the cache's back: another inode at the same path.
        storage.set_file_bytes(&path(0), b"imposter".to_vec());
        let error = file.read_at(0, 8).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");

        // A rename through the cache moves the path it reopens by.
        let moved = cache.open(&path(1), true).await.unwrap();
        moved.write_at(0, &[b"moved"]).await.unwrap();
        cache.rename(&path(1), &path(2)).await.unwrap();
        cache.park_idle(8).await;
        assert!(moved.open_handle().is_none());
        assert_eq!(&moved.read_at(0, 5).await.unwrap()[..], b"moved");

        // A removed file serves its bytes while it is open; once parked, it cannot open again.
        cache.remove_file(&path(2)).await.unwrap();
        assert_eq!(&moved.read_at(0, 5).await.unwrap()[..], b"moved");
        cache.park_idle(8).await;
        let error = moved.read_at(0, 5).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound, "{error}");
    });
}

#[test]
fn a_parked_file_reopens_below_its_renamed_directory() {
    block_on(async {
        let storage = storage().await;
        let budget = DescriptorBudget::new(8);
        let cache = cache(&storage, &budget.shard());
        let file = cache.open(&path(0), true).await.unwrap();
        file.write_at(0, &[b"kept"]).await.unwrap();
        file.fdatasync().await.unwrap();
        cache.rename(Path::new(DIR), Path::new("/moved")).await.unwrap();
        assert_eq!(cache.park_idle(8).await, 1);
        assert_eq!(&file.read_at(0, 4).await.unwrap()[..], b"kept");
        assert!(storage.exists(Path::new("/moved/0.log")).await.unwrap());
    });
}

/// Renames and removals reach the files at that path or below that directory, and no other:
/// not a sibling whose name only starts the same (`t-1` and `t-10`).
#[test]
fn a_directory_removed_or_renamed_touches_only_the_files_below_it() {
    block_on(async {
        let storage = storage().await;
        let budget = DescriptorBudget::new(8);
        let cache = cache(&storage, &budget.shard());
        let mut files = Vec::new();
        for dir in ["/d/t-1", "/d/t-10", "/d/t-2"] {
            storage.create_dir_all(Path::new(dir)).await.unwrap();
            let file = cache.open(&Path::new(dir).join("0.log"), true).await.unwrap();
            file.write_at(0, &[dir.as_bytes()]).await.unwrap();
            file.fdatasync().await.unwrap();
            files.push(file);
        }
        cache
            .rename(Path::new("/d/t-2"), Path::new("/d/t-2.gone"))
            .await
            .unwrap();
        cache.remove_dir_all(Path::new("/d/t-1")).await.unwrap();
        assert_eq!(cache.park_idle(8).await, 3);
        let error = files[0].read_at(0, 6).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound, "{error}");
        assert_eq!(&files[1].read_at(0, 7).await.unwrap()[..], b"/d/t-10");
        assert_eq!(&files[2].read_at(0, 6).await.unwrap()[..], b"/d/t-2");
        // The renamed file renamed again, by its new path.
        cache
            .rename(Path::new("/d/t-2.gone/0.log"), Path::new("/d/t-2.gone/1.log"))
            .await
            .unwrap();
        cache.park_idle(8).await;
        assert_eq!(&files[2].read_at(0, 6).await.unwrap()[..], b"/d/t-2");
    });
}

#[test]
fn a_shard_above_its_fair_share_gives_back_when_another_is_short() {
    block_on(async {
        let storage = storage().await;
        let budget = DescriptorBudget::new(8);
        let (one, two) = (budget.shard(), budget.shard());
        let (cache_one, cache_two) = (cache(&storage, &one), cache(&storage, &two));
        let mut held = Vec::new();
        // Six files: up to the files' soft limit (8 less the sends' quarter), so none parked.
        for i in 0..6 {
            held.push(cache_one.open(&path(i), true).await.unwrap());
        }
        assert_eq!(one.held(), 6);
        // Connections take 2: the six fill what the storage may hold.
        budget.withhold(2);
        let refused = cache_two.open(&path(9), true).await.err().expect("budget full");
        assert!(is_out_of_descriptors(&refused));
        // Not its fault: the other shard holds the budget, so no shortage is reported.
        assert!(one.take_pressure());
        assert_eq!(cache_one.give_back().await, 3);
        assert_eq!(one.held(), 3);
        cache_two.open(&path(9), true).await.unwrap();
        // The parked files still serve their bytes.
        for file in &held {
            assert_eq!(file.read_at(0, 1).await.unwrap().len(), 0);
        }
    });
}

#[test]
fn closed_files_refuse_work_and_the_registry_stays_bounded() {
    block_on(async {
        let storage = storage().await;
        let budget = DescriptorBudget::new(4);
        let cache = cache(&storage, &budget.shard());
        for i in 0..1000 {
            let file = cache.open(&path(i % 3), true).await.unwrap();
            file.close().await.unwrap();
            assert!(file.read_at(0, 1).await.is_err());
        }
        assert_eq!(budget.used(), 0);
        assert!(cache.shared.files.borrow().len() <= REGISTRY_SLACK + 2);
    });
}

/// A cache whose open files, `0.log` up to the budget's soft limit, are all written since their
/// last fdatasync (each park then waits for one).
async fn cache_at_its_soft_limit_of_dirty_files(
    storage: &FaultyStorage,
    budget: &std::sync::Arc<DescriptorBudget>,
) -> (FileCache<FaultyStorage>, Vec<Rc<CachedFile<FaultyStorage>>>) {
    let cache = cache(storage, &budget.shard());
    let mut files = Vec::new();
    for i in 0..budget.files_soft_limit() as usize {
        let file = cache.open(&path(i), true).await.unwrap();
        file.write_at(0, &[b"dirty"]).await.unwrap();
        files.push(file);
    }
    (cache, files)
}

#[test]
fn opens_that_meet_a_shortage_together_park_one_batch_not_one_each() {
    block_on(async {
        let (storage, budget) = (storage().await, DescriptorBudget::new(64));
        let (cache, _files) = cache_at_its_soft_limit_of_dirty_files(&storage, &budget).await;
        let soft_limit = budget.files_soft_limit() as usize;
        assert_eq!(cache.stats().parks, 0);
        // Every park waits for its fdatasync: the other opens run meanwhile.
        storage.yield_in_syncs();
        let paths: Vec<PathBuf> = (soft_limit..soft_limit + 16).map(path).collect();
        let opened = futures::future::join_all(paths.iter().map(|p| cache.open(p, true))).await;
        assert_eq!(opened.iter().filter(|o| o.is_err()).count(), 0);
        // Each open took a descriptor of a batch being parked, the next batch parked once
        // those were taken: two batches for 16 opens. Each open parking its own batch closed
        // every file written (48).
        assert_eq!(cache.stats().parks, 2 * PARK_BATCH_MIN as u64);
        assert!(budget.files_used() <= budget.files_soft_limit());
    });
}

#[test]
fn an_open_that_fails_gives_back_its_place_among_the_files_being_parked() {
    block_on(async {
        let (storage, budget) = (storage().await, DescriptorBudget::new(64));
        let (cache, _files) = cache_at_its_soft_limit_of_dirty_files(&storage, &budget).await;
        let soft_limit = budget.files_soft_limit() as usize;
        storage.yield_in_syncs();
        // A new file, then missing ones and new ones alternated, all meeting the shortage
        // together: the first parks a batch and leaves 7 places in it for the 7 new files after
        // it; each missing one takes a place, fails, and gives it back.
        let opens = (soft_limit..soft_limit + 15).map(|i| (path(i), i % 2 == 0));
        let opens: Vec<(PathBuf, bool)> = opens.collect();
        let opened = futures::future::join_all(opens.iter().map(|(p, create)| cache.open(p, *create))).await;
        let missing = opened
            .iter()
            .filter(|o| matches!(o, Err(e) if e.kind() == io::ErrorKind::NotFound));
        assert_eq!(missing.count(), 7);
        // One batch for the 8 that opened.
        assert_eq!(cache.stats().parks, PARK_BATCH_MIN as u64);
        assert!(budget.files_used() <= budget.files_soft_limit());
    });
}

#[test]
fn a_checkpoint_gives_back_the_index_files_descriptors_and_keeps_the_log_open() {
    use crate::log::batch::testing::BatchBuilder;
    use crate::partition::{LogConfig, Partition};
    use laminar_model::Offset;
    block_on(async {
        let storage = storage().await;
        let budget = DescriptorBudget::new(64);
        let cache = Rc::new(cache(&storage, &budget.shard()));
        let config = LogConfig {
            index_interval_bytes: 128,
            ..LogConfig::default()
        };
        let dir = Path::new(DIR).join("t-0");
        let p = Partition::open(cache.clone(), dir, config).await.unwrap();
        let batch = |ts| Bytes::from(BatchBuilder::new(ts).records_of(3, 20).build());
        for ts in 0..20 {
            p.append(batch(ts), 0).await.unwrap();
        }
        let before = cache.stats();
        let used = budget.used();
        assert!(p.checkpoint().await.unwrap());
        let after = cache.stats();
        assert_eq!(after.parks - before.parks, 2, "the .index and .timeindex files");
        assert_eq!(
            budget.used(),
            used,
            "the index files, made by the checkpoint, hold no descriptor after it"
        );

        // Entries dropped from memory come back from the file, which opens again; appends
        // and the next checkpoint write to it as before.
        while p.release_unused_indexes() > 0 {}
        let read = p.read(Offset::new(33), 1 << 20, false).await.unwrap().data;
        assert_eq!(read.len(), 20 - 11, "from the batch holding 33 on");
        for ts in 20..30 {
            p.append(batch(ts), 0).await.unwrap();
        }
        assert!(p.checkpoint().await.unwrap());
        assert!(cache.stats().reopens > after.reopens);
        let read = p.read(Offset::new(75), 1 << 20, false).await.unwrap().data;
        assert_eq!(read.len(), 30 - 25);
    });
}
