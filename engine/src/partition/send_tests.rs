//! Reads meant for a socket (`Partition::read_for_send`): cached batches stay in the segment
//! file, data not cached comes back in memory, and a range missing a few pages has them read
//! back (engine `log/send.rs`).

use super::tests::{batch, headers, open, small_config};
use super::*;
use crate::io::FaultyStorage;
use crate::log::batch::testing::BatchBuilder;
use crate::log::batch::HEADER_LEN;
use futures::executor::block_on;

/// The bytes of a file range, read back the ordinary way.
fn range_bytes(range: &crate::io::FileRange) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut out = vec![0u8; range.len as usize];
    range.file.read_exact_at(&mut out, range.position).unwrap();
    out
}

/// O_DIRECT segment files are never lent to another thread's sendfile (a read through the page
/// cache while an O_DIRECT write of the same block is in flight could leave a stale copy
/// cached): their batches come back in memory, the bytes the file holds.
#[test]
fn reads_for_send_of_direct_segment_files_come_back_in_memory() {
    use crate::io::{GlommioStorage, WriteMode};
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t-0");
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let storage = Rc::new(GlommioStorage::new(WriteMode::Direct));
            let p = Partition::open(storage, path, small_config()).await.unwrap();
            for i in 0..20 {
                p.append(batch(3, i), 0).await.unwrap();
            }
            let in_memory = p.read(Offset::new(6), 1 << 20, true).await.unwrap().data.concat();
            let sent = p.read_for_send(Offset::new(6), 1 << 20, true, ReadEnd::LogEnd);
            let RecordBytes::Memory(batches) = sent.await.unwrap().data else {
                panic!("an O_DIRECT segment file lent for a send");
            };
            assert_eq!(batches.concat(), in_memory);
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn reads_for_send_leave_cached_whole_batches_in_the_file() {
    use crate::io::{GlommioStorage, WriteMode};
    let mode = WriteMode::Buffered;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t-0");
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let config = LogConfig {
                index_interval_bytes: 128,
                ..LogConfig::default()
            };
            let p = Partition::open(Rc::new(GlommioStorage::new(mode)), path, config)
                .await
                .unwrap();
            for i in 0..20 {
                p.append(batch(3, i), 0).await.unwrap();
            }
            let send = |offset, max_bytes, min_one_batch| {
                p.read_for_send(Offset::new(offset), max_bytes, min_one_batch, ReadEnd::LogEnd)
            };
            let in_memory = p.read(Offset::new(6), 1 << 20, true).await.unwrap().data.concat();
            let RecordBytes::File { range, offsets } = send(6, 1 << 20, true).await.unwrap().data else {
                panic!("freshly written batches are in the page cache");
            };
            assert_eq!(
                range_bytes(&range),
                in_memory,
                "{mode:?}: the rest of the segment"
            );
            assert_eq!(offsets, 6..60);

            // A byte limit cuts at a batch boundary the sparse index knows.
            let RecordBytes::File { range, offsets } = send(0, 700, true).await.unwrap().data else {
                panic!("cached");
            };
            assert!(range.len > 0 && range.len <= 700, "{range:?}");
            let cut = headers(&split_batches(&range_bytes(&range)));
            assert_eq!(cut.first().unwrap().base_offset, 0);
            assert_eq!(cut.last().unwrap().next_offset(), offsets.end);

            // Below one batch: the first batch when the client must progress, else nothing.
            let one = send(3, 10, true).await.unwrap().data;
            assert_eq!(one.len(), batch(3, 0).len());
            assert!(send(3, 10, false).await.unwrap().data.is_empty());
            // Granted nothing: nothing, and an offset past the log end is still refused.
            let granted_nothing = send(3, 0, false).await;
            assert!(granted_nothing.unwrap().data.is_empty());
            let past_end = send(61, 0, false).await;
            assert!(
                matches!(past_end, Err(LogError::OffsetOutOfRange { offset: 61, .. })),
                "{:?}",
                past_end.map(|read| read.data.len())
            );
            assert!(send(60, 1 << 20, true).await.unwrap().data.is_empty());

            // The range stays readable after its partition is deleted.
            p.delete().await.unwrap();
            assert_eq!(range_bytes(&range).len() as u64, range.len);
        })
        .unwrap()
        .join()
        .unwrap();
}

/// Drops `[pos, pos + len)` of `fd` from the page cache (`len` 0: to the end), again while a
/// page under I/O or in another CPU's LRU batch stays; whether all went (a kernel without
/// cachestat(2) cannot tell: yes).
fn drop_pages(fd: std::os::fd::RawFd, pos: u64, len: u64) -> bool {
    (0..50).any(|_| {
        laminar_sys::page_cache::drop_page_cache(fd, pos, len).unwrap();
        let cached = laminar_sys::page_cache::cachestat(fd, pos, len).map(|c| c.nr_cache > 0);
        let gone = !cached.unwrap_or(false);
        if !gone {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        gone
    })
}

/// Runs `check` on a partition on real files holding 40 batches of about 61 KB (larger than
/// the read-ahead of the batch lookup), all durable, so that their pages can be dropped, and its
/// segment file opened for reading.
fn with_durable_big_batches<F, Fut>(check: F)
where
    F: FnOnce(Partition<crate::io::GlommioStorage>, std::fs::File) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    use crate::io::{GlommioStorage, WriteMode};
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t-0");
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let storage = Rc::new(GlommioStorage::new(WriteMode::Buffered));
            let p = Partition::open(storage, path.clone(), LogConfig::default())
                .await
                .unwrap();
            for i in 0..40 {
                let big = BatchBuilder::new(i).records_of(60, 1000).build();
                p.append(Bytes::from(big), 0).await.unwrap();
            }
            p.wait_durable(Offset::new(2399)).await.unwrap();
            let log = std::fs::File::open(path.join("00000000000000000000.log")).unwrap();
            check(p, log).await;
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn reads_for_send_of_data_no_longer_cached_come_back_in_memory() {
    use std::os::fd::AsRawFd;
    with_durable_big_batches(|p, log| async move {
        assert!(drop_pages(log.as_raw_fd(), 0, 0), "every page dropped");
        let RecordBytes::Memory(batches) = p
            .read_for_send(Offset::new(0), 8 << 20, true, ReadEnd::LogEnd)
            .await
            .unwrap()
            .data
        else {
            panic!("a sendfile of uncached bytes would block the shard on the disk");
        };
        assert_eq!(batches, p.read(Offset::new(0), 8 << 20, true).await.unwrap().data);
        assert_eq!(headers(&batches).last().unwrap().next_offset(), 2400);
    });
}

#[test]
fn reads_for_send_of_a_range_missing_a_few_pages_read_them_back_and_stay_in_the_file() {
    use std::os::fd::AsRawFd;
    with_durable_big_batches(|p, log| async move {
        let (fd, len) = (log.as_raw_fd(), log.metadata().unwrap().len());
        // 128 KiB in the middle, as reclaim takes them: a twentieth of the segment.
        assert!(drop_pages(fd, 1 << 20, 128 << 10));
        let Some(missing) = laminar_sys::page_cache::uncached_runs(fd, 0, len, 64).unwrap() else {
            return; // a file system whose files cannot be mapped cannot tell
        };
        assert!(!missing.is_empty(), "dropped, so not cached");
        let RecordBytes::File { range, offsets } = p
            .read_for_send(Offset::new(0), 8 << 20, true, ReadEnd::LogEnd)
            .await
            .unwrap()
            .data
        else {
            panic!("a few pages missing are read back in, not the whole range");
        };
        assert_eq!((range.position, range.len, offsets), (0, len, 0..2400));
        assert_eq!(
            laminar_sys::page_cache::range_cached(fd, 0, len).unwrap(),
            Some(true)
        );
        assert_eq!(
            range_bytes(&range),
            p.read(Offset::new(0), 8 << 20, true).await.unwrap().data.concat()
        );
    });
}

#[test]
fn reads_for_send_without_kernel_files_come_back_in_memory() {
    block_on(async {
        let storage = FaultyStorage::new(3);
        let p = open(&storage, small_config()).await;
        for i in 0..5 {
            p.append(batch(2, i), 0).await.unwrap();
        }
        let RecordBytes::Memory(batches) = p
            .read_for_send(Offset::new(0), 1 << 20, true, ReadEnd::LogEnd)
            .await
            .unwrap()
            .data
        else {
            panic!("FaultyStorage has no descriptors to send from");
        };
        assert_eq!(batches, p.read(Offset::new(0), 1 << 20, true).await.unwrap().data);
    });
}

fn split_batches(bytes: &[u8]) -> Vec<Bytes> {
    crate::log::batch::BatchIter::new(bytes, usize::MAX)
        .map(|item| Bytes::copy_from_slice(&bytes[item.unwrap().0]))
        .collect()
}

/// A segment of 40 batches of three records (offsets 0 to 119), with a sparse index.
async fn forty_batches(storage: &FaultyStorage) -> Partition<FaultyStorage> {
    let config = LogConfig {
        index_interval_bytes: 128,
        ..LogConfig::default()
    };
    let p = open(storage, config).await;
    for i in 0..40 {
        p.append(batch(3, i), 0).await.unwrap();
    }
    p
}

#[test]
fn a_read_from_where_the_last_found_or_sent_its_batches_needs_no_index_or_scan() {
    block_on(async {
        let storage = FaultyStorage::new(9);
        let p = forty_batches(&storage).await;
        let one_batch = batch(3, 0).len();
        let send = |offset, max_bytes, min_one_batch| {
            p.read_for_send(Offset::new(offset), max_bytes, min_one_batch, ReadEnd::LogEnd)
        };
        // A fetch whose budget ran out grants less than the first batch, fetch after fetch.
        assert!(send(30, one_batch - 1, false).await.unwrap().data.is_empty());
        let before = storage.bytes_read();
        for _ in 0..3 {
            assert!(send(30, one_batch - 1, false).await.unwrap().data.is_empty());
        }
        assert_eq!(storage.bytes_read(), before, "the batch was found once");

        // The next read starts where the last one's batches ended: its header and its batches
        // are all it reads (the scan from an index entry reads a whole chunk).
        let sent = send(30, 2 * one_batch, false).await.unwrap();
        assert_eq!(sent.data.len(), 2 * one_batch);
        let before = storage.bytes_read();
        let next = send(36, one_batch, false).await.unwrap();
        let read = storage.bytes_read() - before;
        assert_eq!(read, (HEADER_LEN + one_batch) as u64, "header and batch only");
        let RecordBytes::Memory(batches) = next.data else {
            panic!("FaultyStorage reads into memory");
        };
        assert_eq!(
            batches,
            p.read(Offset::new(36), one_batch, false).await.unwrap().data
        );
    });
}

#[test]
fn a_read_after_the_log_was_cut_finds_the_batches_written_since() {
    block_on(async {
        let storage = FaultyStorage::new(10);
        let p = forty_batches(&storage).await;
        let sent = p
            .read_for_send(Offset::new(30), 1 << 20, true, ReadEnd::LogEnd)
            .await
            .unwrap();
        assert_eq!(sent.high_watermark.get(), 120);
        assert!(!p
            .read_for_send(Offset::new(60), 1000, false, ReadEnd::LogEnd)
            .await
            .unwrap()
            .data
            .is_empty());
        // A consumer at 51 granted less than its batch: the hint holds that batch's header.
        let one_batch = batch(3, 0).len();
        let granted_too_little = p.read_for_send(Offset::new(51), one_batch - 1, false, ReadEnd::LogEnd);
        assert!(granted_too_little.await.unwrap().data.is_empty());
        // The log is cut inside the batches read, and other batches take their offsets: a
        // hint left by the reads before the cut would point inside one of them.
        assert_eq!(p.truncate_to(Offset::new(51)).await.unwrap().get(), 51);
        for ts in 0..12 {
            p.append(batch(1, 100 + ts), 0).await.unwrap();
        }
        // Exactly one of the new batches fits: a header kept from before the cut would say the
        // batch at 51 is one of three records, too long for it, and nothing would be sent.
        let one_new = batch(1, 0).len();
        let sent = p
            .read_for_send(Offset::new(51), one_new, false, ReadEnd::LogEnd)
            .await
            .unwrap();
        assert_eq!(sent.data.len(), one_new);
        for offset in [51, 60, 62].map(Offset::new) {
            let sent = p
                .read_for_send(offset, 1 << 20, false, ReadEnd::LogEnd)
                .await
                .unwrap();
            let expected = p.read(offset, 1 << 20, false).await.unwrap().data;
            let RecordBytes::Memory(batches) = sent.data else {
                panic!("FaultyStorage reads into memory");
            };
            assert_eq!(batches, expected, "from {offset}");
            assert_eq!(headers(&batches)[0].base_offset, offset.get());
        }
    });
}
