//! The segment that rolled, synced in the background (`log/rolled.rs`), seen from a partition.

use super::tests::{batch, open, read_all, small_config};
use crate::io::{CrashMode, FaultyStorage};
use futures::executor::block_on;

/// A roll leaves the old segment unsynced (appends go on at once): a crash before its
/// background sync loses its unsynced bytes, and recovery removes the segment after it rather
/// than leave a hole in the offsets. Once the background sync ran, the crash loses only the
/// active segment's unsynced bytes.
#[test]
fn a_rolled_segment_is_synced_in_the_background_and_a_crash_before_cuts_the_log_there() {
    block_on(async {
        let storage = FaultyStorage::new(11);
        let p = open(&storage, small_config()).await;
        let mut rolled_at = 0;
        for ts in 0..8 {
            rolled_at = p.append(batch(3, ts), 0).await.unwrap().base_offset.get();
            if p.log.segment_count() == 2 {
                break;
            }
        }
        assert_eq!(p.log.segment_count(), 2, "the appends rolled");
        p.append(batch(3, 99), 0).await.unwrap();
        assert!(p.claim_rolled_sync(), "the roll asks for its sync");
        drop(p);
        storage.crash(CrashMode::LoseUnsynced);
        let p = open(&storage, small_config()).await;
        assert_eq!(
            (p.log_end_offset().get(), p.log.segment_count()),
            (0, 1),
            "nothing was synced"
        );

        for ts in 0..8 {
            rolled_at = p.append(batch(3, ts), 0).await.unwrap().base_offset.get();
            if p.log.segment_count() == 2 {
                break;
            }
        }
        p.append(batch(3, 99), 0).await.unwrap();
        assert!(p.claim_rolled_sync());
        p.finish_rolled_sync().await.unwrap();
        drop(p);
        storage.crash(CrashMode::TornTailWithGarbage);
        let p = open(&storage, small_config()).await;
        assert!(
            p.log_end_offset().get() >= rolled_at,
            "the synced segment survives"
        );
        let read = read_all(&p, 0).await;
        assert_eq!(
            read.last().map(|h| h.next_offset()),
            Some(p.log_end_offset().get())
        );
    });
}
