//! Tests of `glommio_storage.rs`.

use super::*;
use crate::test_tasks::on_executor;
use std::time::Duration;

#[test]
fn sync_slots_let_at_most_their_count_run_at_once_and_every_run_finish() {
    on_executor(|| async {
        let slots = SyncSlots::new(3);
        let (running, most) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
        let runs = (0..20).map(|i| {
            let (running, most) = (running.clone(), most.clone());
            slots.run(async move {
                running.set(running.get() + 1);
                most.set(most.get().max(running.get()));
                glommio::timer::sleep(Duration::from_millis(1)).await;
                running.set(running.get() - 1);
                i
            })
        });
        let finished: Vec<usize> = futures::future::join_all(runs)
            .await
            .into_iter()
            .map(|run| run.expect("a slot"))
            .collect();
        assert_eq!(finished, (0..20).collect::<Vec<_>>());
        assert_eq!(most.get(), 3, "three at once, never more");
        assert_eq!(slots.0.available(), 3, "every slot given back");
    });
}

#[test]
fn open_creates_only_when_asked_and_reopens_the_same_file_at_its_length() {
    on_executor(|| async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        let storage = GlommioStorage::new(WriteMode::Buffered);
        let missing = storage.open(&path, false).await.err().map(|e| e.kind());
        assert_eq!(missing, Some(io::ErrorKind::NotFound));
        let created = storage.open(&path, true).await.unwrap();
        assert_eq!(created.len(), 0);
        created.write_at(0, &[b"twelve bytes"]).await.unwrap();
        let id = created.id();
        created.close().await.unwrap();
        for create in [false, true] {
            let again = storage.open(&path, create).await.unwrap();
            assert_eq!((again.len(), again.id()), (12, id));
        }
    });
}

#[test]
fn a_logs_small_appends_are_mapped_and_its_length_comes_back_to_its_data() {
    use crate::io::mapped_appends::{SMALL_APPENDS_BEFORE_MAPPING, WINDOW_BYTES};
    on_executor(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (log, index) = (dir.path().join("0.log"), dir.path().join("0.index"));
        let storage = GlommioStorage::new(WriteMode::Buffered);
        let on_disk = |path: &Path| std::fs::metadata(path).unwrap().len();
        let write = |file: Rc<GlommioFile>, pos: u64, bytes: &'static [u8]| async move {
            file.write_at(pos, &[bytes]).await.unwrap();
            file
        };
        // The appends a file takes with pwritev first, one byte each, from its length.
        let log_path = &log;
        let unmapped_appends = |file: Rc<GlommioFile>| async move {
            for _ in 0..SMALL_APPENDS_BEFORE_MAPPING {
                let pos = file.len();
                file.write_at(pos, &[b"."]).await.unwrap();
                assert_eq!(on_disk(log_path), pos + 1, "the first small appends: pwritev");
            }
            file
        };
        let file = unmapped_appends(storage.open(&log, true).await.unwrap()).await;
        let file = write(file, 4, b"twelve bytes").await;
        if on_disk(&log) == 16 {
            return; // not mapped: this test's file system is nearly full
        }
        assert_eq!(
            (on_disk(&log), file.len()),
            (WINDOW_BYTES, 16),
            "the length set for the window"
        );
        assert_eq!(
            &file.read_at(0, 100).await.unwrap()[..],
            b"....twelve bytes",
            "reads stop at the data"
        );
        let file = write(file, 16, b"+3").await;
        file.truncate(17).await.unwrap();
        assert_eq!(on_disk(&log), 17, "a truncate unmaps and sets the length");
        let file = write(unmapped_appends(file).await, 21, b"3").await;
        assert_eq!(on_disk(&log), WINDOW_BYTES, "mapped again");
        file.close().await.unwrap();
        assert_eq!(on_disk(&log), 22, "the close cuts the length back to the data");
        let file = unmapped_appends(storage.open(&log, false).await.unwrap()).await;
        let file = write(file, 26, b"!").await;
        assert_eq!(on_disk(&log), WINDOW_BYTES, "mapped again");
        drop(file);
        assert_eq!(on_disk(&log), 27, "so does a drop");
        assert_eq!(std::fs::read(&log).unwrap(), b"....twelve bytes+....3....!");
        let index_file = storage.open(&index, true).await.unwrap();
        for pos in 0..=SMALL_APPENDS_BEFORE_MAPPING as u64 {
            write(index_file.clone(), pos, b"e").await;
        }
        assert_eq!(on_disk(&index), 5, "only segment data files are mapped");
        index_file.close().await.unwrap();
        let unmapped = GlommioStorage::new(WriteMode::Buffered).with_mapped_appends(false);
        let file = unmapped.open(&log, false).await.unwrap();
        for pos in 27..=27 + SMALL_APPENDS_BEFORE_MAPPING as u64 {
            write(file.clone(), pos, b"?").await;
        }
        assert_eq!(on_disk(&log), 32, "mapped appends turned off");
        file.close().await.unwrap();
    });
}

#[test]
fn files_fdatasync_through_their_storage_slots() {
    on_executor(|| async {
        let dir = tempfile::tempdir().unwrap();
        let storage = GlommioStorage::new(WriteMode::Buffered);
        let mut files = Vec::new();
        for i in 0..40 {
            let file = storage
                .open(&dir.path().join(format!("{i}")), true)
                .await
                .unwrap();
            file.write_at(0, &[b"record"]).await.unwrap();
            files.push(file);
        }
        let synced = futures::future::join_all(files.iter().map(|f| f.fdatasync())).await;
        assert!(synced.iter().all(|r| r.is_ok()));
        assert_eq!(storage.sync_slots.0.available(), SYNCS_IN_FLIGHT_MAX as u64);
        storage.sync_dir(dir.path()).await.unwrap();
    });
}
