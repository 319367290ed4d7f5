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

#[test]
fn direct_appends_read_back_truncate_and_reopen_with_every_byte() {
    on_executor(|| async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        let storage = GlommioStorage::new(WriteMode::Direct);
        let file = storage.open(&path, true).await.unwrap();
        let mut expected = Vec::new();
        for (n, size) in [482usize, 512, 3000, 5000, 100].into_iter().enumerate() {
            let part = vec![n as u8 + 1; size];
            file.write_at(expected.len() as u64, &[&part[..size / 2], &part[size / 2..]])
                .await
                .unwrap();
            expected.extend_from_slice(&part);
            assert_eq!(file.len(), expected.len() as u64);
        }
        let read = file.read_at(0, expected.len()).await.unwrap();
        assert_eq!(&read[..], &expected[..], "read back while appending");
        file.truncate(994).await.unwrap();
        expected.truncate(994);
        file.write_at(994, &[b"after the cut"]).await.unwrap();
        expected.extend_from_slice(b"after the cut");
        file.fdatasync().await.unwrap();
        file.close().await.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), expected, "closed at its data");
        let stats = storage.direct_append_stats().expect("a segment file opened");
        assert!(stats.writes > 0);
    });
}

/// O_DIRECT appends against a model (a `Vec` of the file's bytes), in random operations: appends
/// of 1 byte to 1.5 MiB in one to three parts (past a staging buffer, so copied in parts),
/// reads anywhere (while writes are in flight), truncates, syncs, an occasional overwrite, and
/// a close and reopen, with and without recent writes kept for reads; the file always reads as
/// the model, and holds exactly it once closed.
#[test]
fn direct_appends_match_a_model_under_random_operations() {
    use rand::{rngs::StdRng, Rng, SeedableRng};
    for seed in 0..4u64 {
        on_executor(move || async move {
            let mut rng = StdRng::seed_from_u64(seed);
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("00000000000000000000.log");
            // Odd seeds keep recent writes for reads, in a cache small enough to evict.
            let cache_bytes = (seed % 2) * (4 << 20);
            let storage = GlommioStorage::new(WriteMode::Direct).with_recent_writes(cache_bytes);
            let mut file = storage.open(&path, true).await.unwrap();
            let mut model: Vec<u8> = Vec::new();
            for step in 0..300 {
                let len = model.len() as u64;
                match rng.gen_range(0..100) {
                    0..60 => {
                        let size = if rng.gen_bool(0.05) {
                            rng.gen_range(1..1_500_000)
                        } else {
                            rng.gen_range(1..20_000)
                        };
                        let first: u8 = rng.gen();
                        let bytes: Vec<u8> = (0..size).map(|i| first.wrapping_add((i % 251) as u8)).collect();
                        let cut = rng.gen_range(0..=size);
                        file.write_at(len, &[&bytes[..cut], &bytes[cut..]]).await.unwrap();
                        model.extend_from_slice(&bytes);
                    }
                    60..80 if len > 0 => {
                        let pos = rng.gen_range(0..len);
                        let n = rng.gen_range(1..=(len - pos).min(100_000)) as usize;
                        let read = file.read_at(pos, n).await.unwrap();
                        assert_eq!(
                            &read[..],
                            &model[pos as usize..pos as usize + n],
                            "seed {seed} step {step}: read at {pos}"
                        );
                    }
                    80..86 if len > 0 => {
                        let to = rng.gen_range(0..=len);
                        file.truncate(to).await.unwrap();
                        model.truncate(to as usize);
                    }
                    86..88 if len > 10 => {
                        let pos = rng.gen_range(0..len - 10);
                        file.write_at(pos, &[b"overwrite!"]).await.unwrap();
                        model[pos as usize..pos as usize + 10].copy_from_slice(b"overwrite!");
                    }
                    88..95 => file.fdatasync().await.unwrap(),
                    95..97 => {
                        file.close().await.unwrap();
                        file = storage.open(&path, false).await.unwrap();
                    }
                    _ => {}
                }
                assert_eq!(file.len(), model.len() as u64, "seed {seed} step {step}");
            }
            let stats = storage.direct_append_stats().unwrap();
            assert_eq!(stats.cache_hits > 0, cache_bytes > 0, "seed {seed}: {stats:?}");
            assert!(stats.cache_bytes <= cache_bytes);
            file.close().await.unwrap();
            assert!(
                std::fs::read(&path).unwrap() == model,
                "seed {seed}: the closed file holds the model"
            );
        });
    }
}

/// More files taking large appends at once than the shard has staging buffers and write slots:
/// every append completes (none waits for good on a buffer), what waited for a slot is written
/// without any sync or read asking for it, every file holds what was appended, and no idle file
/// holds a buffer (a buffer never given back would leave the shard short of them, and its
/// appends waiting).
#[test]
fn direct_appends_to_many_files_share_a_bounded_number_of_staging_buffers() {
    use super::super::direct_appends::BUFFERS_OUT_MAX;
    on_executor(|| async {
        let dir = tempfile::tempdir().unwrap();
        let storage = GlommioStorage::new(WriteMode::Direct);
        let count = BUFFERS_OUT_MAX + 22;
        let mut files = Vec::new();
        for n in 0..count {
            let path = dir.path().join(format!("{n:020}.log"));
            files.push((path.clone(), storage.open(&path, true).await.unwrap()));
        }
        let appends = files.iter().enumerate().map(|(n, (_, file))| async move {
            let bytes = vec![n as u8; 100_000 + n];
            file.write_at(0, &[&bytes[..7], &bytes[7..]]).await.unwrap();
        });
        futures::future::join_all(appends).await;
        // Nobody syncs or reads: the appends that found every write slot taken are written
        // as slots free up, and their buffers come back.
        for _ in 0..10_000 {
            if storage.direct_append_stats().unwrap().buffers_out == 0 {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(
            storage.direct_append_stats().unwrap().buffers_out,
            0,
            "idle files hold none"
        );
        for (n, (path, file)) in files.into_iter().enumerate() {
            file.close().await.unwrap();
            let held = std::fs::read(&path).unwrap();
            assert_eq!(held.len(), 100_000 + n);
            assert!(held.iter().all(|b| *b == n as u8), "file {n}");
        }
    });
}
