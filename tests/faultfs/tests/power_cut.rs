//! The fault model through a real mount: what survives a power cut and what does not. Each test
//! mounts a fresh backing directory on the target's disk (not /tmp, which may be a tmpfs) and
//! returns early, saying so, where this process cannot mount (not root, or no /dev/fuse), unless
//! `FAULTFS_TESTS_MUST_MOUNT` is set (`laminar_faultfs::available_for_tests`).

#![forbid(unsafe_code)]

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use laminar_faultfs::{available_for_tests, Cut, CutReport, FaultFs, TRASH_DIR_NAME};
use laminar_sys::mapping::MappedWindow;
use tempfile::TempDir;

const PAGE: usize = 4096;
const SECTOR: usize = 512;

/// A backing directory and a mount point, in a scratch directory on the target's disk.
struct Scratch {
    dir: TempDir,
}

impl Scratch {
    /// `None` (saying why) where this process cannot mount.
    fn new() -> Option<Scratch> {
        if !available_for_tests() {
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("faultfs-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        fs::create_dir(dir.path().join("backing")).unwrap();
        fs::create_dir(dir.path().join("mount")).unwrap();
        Some(Scratch { dir })
    }

    fn mount(&self) -> FaultFs {
        FaultFs::mount(&self.backing(""), &self.mounted("")).unwrap()
    }

    /// `path` in the backing directory (what the disk holds).
    fn backing(&self, path: &str) -> PathBuf {
        self.dir.path().join("backing").join(path)
    }

    /// `path` under the mount.
    fn mounted(&self, path: &str) -> PathBuf {
        self.dir.path().join("mount").join(path)
    }

    /// Syncs the directory `path` under the mount: its entries become durable.
    fn sync_dir(&self, path: &str) {
        sync_dir(&self.mounted(path));
    }

    /// The names in the backing directory `path` (what the disk holds), sorted.
    fn backing_names(&self, path: &str) -> Vec<String> {
        names_in(&self.backing(path))
    }
}

/// `fsync` of a directory (the kernel sends the daemon an `fsyncdir`).
fn sync_dir(path: &Path) {
    File::open(path).unwrap().sync_all().unwrap();
}

/// The names in the directory at `path`, sorted.
fn names_in(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(path)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn write_file(path: &Path, data: &[u8], sync: bool) -> File {
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap();
    file.write_all(data).unwrap();
    if sync {
        file.sync_all().unwrap();
    }
    file
}

#[test]
fn fsynced_data_survives_a_cut() {
    let Some(scratch) = Scratch::new() else { return };
    let faultfs = scratch.mount();
    let synced = vec![7u8; 3 * PAGE + 100];
    write_file(&scratch.mounted("fsync"), &synced, false)
        .sync_all()
        .unwrap();
    write_file(&scratch.mounted("fdatasync"), b"fdatasync", false)
        .sync_data()
        .unwrap();
    assert_eq!(faultfs.unsynced_bytes(), 0);
    assert_eq!(
        fs::read(scratch.backing("fsync")).unwrap(),
        synced,
        "fsync writes through at once"
    );
    scratch.sync_dir(""); // the files' entries

    let report = faultfs.cut_power(Cut::LoseUnsynced).unwrap();

    assert_eq!(report, CutReport::default());
    assert_eq!(fs::read(scratch.backing("fsync")).unwrap(), synced);
    assert_eq!(fs::read(scratch.backing("fdatasync")).unwrap(), b"fdatasync");
}

#[test]
fn unsynced_data_is_readable_before_a_cut_and_lost_by_it() {
    let Some(scratch) = Scratch::new() else { return };
    let faultfs = scratch.mount();
    let path = scratch.mounted("log");
    let synced = vec![1u8; 5000];
    let file = write_file(&path, &synced, true);
    scratch.sync_dir("");
    file.write_all_at(&[2; 10], 0).unwrap();
    file.write_all_at(&[3; 3000], 5000).unwrap();
    drop(file); // a close persists nothing

    let mut expected = synced.clone();
    expected[..10].fill(2);
    expected.extend([3; 3000]);
    assert_eq!(
        fs::read(&path).unwrap(),
        expected,
        "the mount shows the unsynced writes"
    );
    assert_eq!(fs::metadata(&path).unwrap().len(), 8000);
    assert_eq!(faultfs.unsynced_bytes(), 3010);
    assert_eq!(
        fs::read(scratch.backing("log")).unwrap(),
        synced,
        "the disk does not"
    );

    let report = faultfs.cut_power(Cut::LoseUnsynced).unwrap();

    let lost_both_pages = CutReport {
        pages_lost: 2,
        ..CutReport::default()
    };
    assert_eq!(report, lost_both_pages);
    assert_eq!(fs::read(scratch.backing("log")).unwrap(), synced);
    let remounted = scratch.mount();
    assert_eq!(fs::read(&path).unwrap(), synced);
    drop(remounted);
}

#[test]
fn dropping_the_mount_loses_unsynced_data() {
    let Some(scratch) = Scratch::new() else { return };
    let faultfs = scratch.mount();
    write_file(&scratch.mounted("a"), b"synced", true)
        .write_all_at(b"UNSYNCED", 0)
        .unwrap();
    scratch.sync_dir("");
    drop(faultfs);
    assert_eq!(fs::read(scratch.backing("a")).unwrap(), b"synced");
}

/// The broker's appends: extend the file (ftruncate), copy into a shared mapping of its end,
/// fdatasync.
#[test]
fn fdatasync_covers_a_shared_mapping_and_a_later_mapped_write_is_lost() {
    let Some(scratch) = Scratch::new() else { return };
    let faultfs = scratch.mount();
    let file = write_file(&scratch.mounted("segment"), &[1; 100], true);
    scratch.sync_dir("");
    file.set_len(2 * PAGE as u64).unwrap();
    let mapping = MappedWindow::map(file.as_raw_fd(), 0, 2 * PAGE).unwrap();
    mapping.write(100, &[&[2; 100]]);
    mapping.write(5000, &[&[3; 100]]);
    file.sync_data().unwrap();
    assert_eq!(faultfs.unsynced_bytes(), 0);

    mapping.write(300, &[&[4; 100]]);
    drop(mapping); // munmap writes the dirty page back (to the daemon: unsynced)
    assert!(
        faultfs.unsynced_bytes() >= 100,
        "{} bytes unsynced",
        faultfs.unsynced_bytes()
    );
    drop(file);
    faultfs.cut_power(Cut::LoseUnsynced).unwrap();

    let mut expected = vec![0; 2 * PAGE];
    expected[..100].fill(1);
    expected[100..200].fill(2);
    expected[5000..5100].fill(3);
    assert_eq!(fs::read(scratch.backing("segment")).unwrap(), expected);
}

/// Set in the child process of the next test: the file it maps and writes, then waits to be
/// killed in.
const CHILD_FILE: &str = "FAULTFS_TEST_MAPPED_FILE";
const CHILD_READY: &str = "faultfs-child-ready";

/// A broker killed by SIGKILL with pages dirty in a shared mapping: the kernel writes them back
/// to the daemon as the process dies (unsynced: lost), the fdatasynced ones stay.
#[test]
fn a_killed_process_s_mapped_writes_reach_the_daemon_and_are_lost() {
    if let Some(path) = std::env::var_os(CHILD_FILE) {
        return map_write_and_wait_to_be_killed(Path::new(&path));
    }
    let Some(scratch) = Scratch::new() else { return };
    let faultfs = scratch.mount();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_killed_process_s_mapped_writes_reach_the_daemon_and_are_lost",
        ])
        .args(["--nocapture", "--test-threads=1"])
        .env(CHILD_FILE, scratch.mounted("segment"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        // libtest has printed "test <name> ... " on the line before the child's own output.
        .any(|line| line.ends_with(CHILD_READY));
    assert!(ready, "the child died before it was ready");
    child.kill().unwrap();
    child.wait().unwrap();
    scratch.sync_dir(""); // the entry of the file the child created
    let unsynced = faultfs.unsynced_bytes();

    faultfs.cut_power(Cut::LoseUnsynced).unwrap();

    assert!(
        unsynced >= 100,
        "the dirty page reached the daemon: {unsynced} bytes unsynced"
    );
    let mut expected = vec![0; 2 * PAGE];
    expected[..PAGE].fill(5);
    assert_eq!(fs::read(scratch.backing("segment")).unwrap(), expected);
}

fn map_write_and_wait_to_be_killed(path: &Path) {
    let file = write_file(path, &[], false);
    file.set_len(2 * PAGE as u64).unwrap();
    let mapping = MappedWindow::map(file.as_raw_fd(), 0, 2 * PAGE).unwrap();
    mapping.write(0, &[&[5; PAGE]]);
    file.sync_data().unwrap();
    mapping.write(PAGE as u64, &[&[6; 100]]);
    println!("{CHILD_READY}");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(60)); // killed long before
}

/// Creations, a rename over a file, an unlink, a subdirectory, and a rename of the directory:
/// all there after the cut when each directory they changed was synced, none without.
#[test]
fn namespace_operations_survive_with_directory_syncs_and_are_lost_without() {
    for synced in [true, false] {
        let Some(scratch) = Scratch::new() else { return };
        let faultfs = scratch.mount();
        fs::create_dir(scratch.mounted("dir")).unwrap();
        write_file(&scratch.mounted("dir/a"), b"a", true);
        write_file(&scratch.mounted("dir/b"), b"b", true);
        write_file(&scratch.mounted("dir/gone"), b"gone", true);
        fs::rename(scratch.mounted("dir/a"), scratch.mounted("dir/b")).unwrap();
        fs::remove_file(scratch.mounted("dir/gone")).unwrap();
        fs::create_dir(scratch.mounted("dir/sub")).unwrap();
        File::create(scratch.mounted("dir/sub/empty")).unwrap();
        fs::rename(scratch.mounted("dir"), scratch.mounted("renamed")).unwrap();
        // Data ops on a file under a renamed directory reach it under its new name.
        write_file(&scratch.mounted("renamed/sub/empty"), b"after the rename", true);
        assert_eq!(names_in(&scratch.mounted("renamed")), ["b", "sub"]);
        if synced {
            // A directory is synced by its descriptor, whatever its name now.
            scratch.sync_dir("renamed");
            scratch.sync_dir("renamed/sub");
            scratch.sync_dir("");
        }

        let report = faultfs.cut_power(Cut::LoseUnsynced).unwrap();

        if !synced {
            assert_eq!(scratch.backing_names(""), Vec::<String>::new());
            assert_eq!(report.entries_lost, 9, "{report:?}");
            continue;
        }
        assert_eq!(report.entries_lost, 0, "{report:?}");
        assert_eq!(scratch.backing_names(""), ["renamed"]);
        assert_eq!(scratch.backing_names("renamed"), ["b", "sub"]);
        assert_eq!(fs::read(scratch.backing("renamed/b")).unwrap(), b"a");
        assert_eq!(
            fs::read(scratch.backing("renamed/sub/empty")).unwrap(),
            b"after the rename"
        );
    }
}

#[test]
fn a_synced_file_whose_directory_was_never_synced_is_gone_after_a_cut() {
    let Some(scratch) = Scratch::new() else { return };
    let faultfs = scratch.mount();
    write_file(&scratch.mounted("new"), b"synced data", true);
    assert_eq!(names_in(&scratch.mounted("")), ["new"], "the mount shows it");
    assert_eq!(fs::read(scratch.mounted("new")).unwrap(), b"synced data");

    let report = faultfs.cut_power(Cut::LoseUnsynced).unwrap();

    let lost_the_entry = CutReport {
        entries_lost: 1,
        ..CutReport::default()
    };
    assert_eq!(report, lost_the_entry);
    assert_eq!(scratch.backing_names(""), Vec::<String>::new());
}

#[test]
fn a_synced_file_survives_once_its_directory_is_synced() {
    let Some(scratch) = Scratch::new() else { return };
    let faultfs = scratch.mount();
    write_file(&scratch.mounted("new"), b"synced data", true);
    scratch.sync_dir("");

    let report = faultfs.cut_power(Cut::LoseUnsynced).unwrap();

    assert_eq!(report, CutReport::default());
    assert_eq!(fs::read(scratch.backing("new")).unwrap(), b"synced data");
}

#[test]
fn a_synced_subdirectory_whose_parent_was_never_synced_is_gone_whole() {
    let Some(scratch) = Scratch::new() else { return };
    let faultfs = scratch.mount();
    fs::create_dir(scratch.mounted("sub")).unwrap();
    write_file(&scratch.mounted("sub/file"), b"synced data", true);
    scratch.sync_dir("sub");
    assert_eq!(names_in(&scratch.mounted("sub")), ["file"]);

    let report = faultfs.cut_power(Cut::LoseUnsynced).unwrap();

    assert_eq!(report.entries_lost, 1, "the mkdir: {report:?}");
    assert_eq!(scratch.backing_names(""), Vec::<String>::new());
}

/// A durable file with synced data (and some unsynced), then unlinked: without a sync of its
/// directory the unlink is undone and the file is back with its synced data; with it, gone.
#[test]
fn an_unlink_is_undone_without_a_directory_sync() {
    for synced in [false, true] {
        let Some(scratch) = Scratch::new() else { return };
        let faultfs = scratch.mount();
        let file = write_file(&scratch.mounted("victim"), b"synced data", true);
        scratch.sync_dir("");
        file.write_all_at(b"UNSYNCED", 0).unwrap();
        drop(file);
        fs::remove_file(scratch.mounted("victim")).unwrap();
        assert!(!scratch.mounted("victim").exists());
        assert_eq!(faultfs.unsynced_bytes(), 0, "an unlinked file's data is no one's");
        if synced {
            scratch.sync_dir("");
        }

        let report = faultfs.cut_power(Cut::LoseUnsynced).unwrap();

        if synced {
            assert_eq!(report, CutReport::default());
            assert_eq!(scratch.backing_names(""), Vec::<String>::new());
        } else {
            assert_eq!(report.entries_lost, 1, "{report:?}");
            assert_eq!(scratch.backing_names(""), ["victim"]);
            assert_eq!(fs::read(scratch.backing("victim")).unwrap(), b"synced data");
        }
    }
}

/// The durable replacement of a file: write `<name>.tmp`, fsync it, rename it over the file,
/// fsync the directory. Up to the directory's fsync, a cut leaves the state before the rename.
#[test]
fn a_file_replaced_by_a_rename_needs_the_directory_sync() {
    // Which directory syncs are done: after the tmp file's creation, after the rename.
    for (tmp_synced, rename_synced) in [(true, true), (true, false), (false, false)] {
        let Some(scratch) = Scratch::new() else { return };
        let faultfs = scratch.mount();
        write_file(&scratch.mounted("state"), b"old", true);
        scratch.sync_dir("");
        write_file(&scratch.mounted("state.tmp"), b"new", true);
        if tmp_synced {
            scratch.sync_dir("");
        }
        fs::rename(scratch.mounted("state.tmp"), scratch.mounted("state")).unwrap();
        assert_eq!(fs::read(scratch.mounted("state")).unwrap(), b"new");
        assert_eq!(names_in(&scratch.mounted("")), ["state"]);
        if rename_synced {
            scratch.sync_dir("");
        }

        faultfs.cut_power(Cut::LoseUnsynced).unwrap();

        let case = format!("tmp synced {tmp_synced}, rename synced {rename_synced}");
        if rename_synced {
            assert_eq!(scratch.backing_names(""), ["state"], "{case}");
            assert_eq!(fs::read(scratch.backing("state")).unwrap(), b"new");
            continue;
        }
        assert_eq!(fs::read(scratch.backing("state")).unwrap(), b"old", "{case}");
        if tmp_synced {
            assert_eq!(scratch.backing_names(""), ["state", "state.tmp"], "{case}");
            assert_eq!(fs::read(scratch.backing("state.tmp")).unwrap(), b"new");
        } else {
            assert_eq!(scratch.backing_names(""), ["state"], "{case}");
        }
    }
}

#[test]
fn a_directory_rename_is_reverted_without_a_sync() {
    for synced in [false, true] {
        let Some(scratch) = Scratch::new() else { return };
        let faultfs = scratch.mount();
        fs::create_dir(scratch.mounted("before")).unwrap();
        write_file(&scratch.mounted("before/file"), b"data", true);
        scratch.sync_dir("before");
        scratch.sync_dir("");
        fs::rename(scratch.mounted("before"), scratch.mounted("after")).unwrap();
        // A file created in the renamed directory, its entry synced: it follows the directory.
        write_file(&scratch.mounted("after/later"), b"later", true);
        scratch.sync_dir("after");
        if synced {
            scratch.sync_dir("");
        }

        let report = faultfs.cut_power(Cut::LoseUnsynced).unwrap();

        let dir = if synced { "after" } else { "before" };
        assert_eq!(scratch.backing_names(""), [dir]);
        assert_eq!(scratch.backing_names(dir), ["file", "later"]);
        assert_eq!(
            fs::read(scratch.backing(&format!("{dir}/file"))).unwrap(),
            b"data"
        );
        assert_eq!(report.entries_lost, u64::from(!synced), "{report:?}");
    }
}

/// Links and symbolic links are entries like any other; a rename across directories needs both.
#[test]
fn links_symlinks_and_renames_across_directories_need_their_directories_synced() {
    let Some(scratch) = Scratch::new() else { return };
    let faultfs = scratch.mount();
    fs::create_dir(scratch.mounted("a")).unwrap();
    fs::create_dir(scratch.mounted("b")).unwrap();
    write_file(&scratch.mounted("a/file"), b"data", true);
    write_file(&scratch.mounted("a/moved"), b"moved", true);
    for dir in ["", "a", "b"] {
        scratch.sync_dir(dir);
    }
    fs::hard_link(scratch.mounted("a/file"), scratch.mounted("b/hard")).unwrap();
    std::os::unix::fs::symlink("../a/file", scratch.mounted("b/soft")).unwrap();
    assert_eq!(fs::metadata(scratch.mounted("a/file")).unwrap().len(), 4);
    fs::rename(scratch.mounted("a/moved"), scratch.mounted("b/moved")).unwrap();
    fs::remove_file(scratch.mounted("b/hard")).unwrap();
    fs::hard_link(scratch.mounted("a/file"), scratch.mounted("a/kept")).unwrap();
    scratch.sync_dir("b"); // the rename's other directory, `a`, is not synced
    assert_eq!(names_in(&scratch.mounted("b")), ["moved", "soft"]);

    let report = faultfs.cut_power(Cut::LoseUnsynced).unwrap();

    assert_eq!(report.entries_lost, 2, "the rename and the last link: {report:?}");
    assert_eq!(scratch.backing_names("a"), ["file", "moved"]);
    assert_eq!(scratch.backing_names("b"), ["soft"]);
    assert_eq!(fs::read(scratch.backing("a/moved")).unwrap(), b"moved");
    assert_eq!(fs::read(scratch.backing("b/soft")).unwrap(), b"data");
}

const PREFIX_PAIRS: usize = 8;

/// Durable files `old-<i>`, then `PREFIX_PAIRS` times: create `new-<i>`, unlink `old-<i>`, none
/// of it synced; a seeded cut. The names the backing root then holds, and the report.
fn seeded_namespace_cut(seed: u64) -> Option<(Vec<String>, CutReport)> {
    let scratch = Scratch::new()?;
    let faultfs = scratch.mount();
    for i in 0..PREFIX_PAIRS {
        write_file(&scratch.mounted(&format!("old-{i}")), b"old", true);
    }
    scratch.sync_dir("");
    for i in 0..PREFIX_PAIRS {
        write_file(&scratch.mounted(&format!("new-{i}")), b"new", true);
        fs::remove_file(scratch.mounted(&format!("old-{i}"))).unwrap();
    }
    let report = faultfs.cut_power(Cut::KeepRandomPages { seed }).unwrap();
    Some((scratch.backing_names(""), report))
}

#[test]
fn a_seeded_cut_keeps_a_prefix_of_the_namespace_operations() {
    let mut kept_counts = Vec::new();
    for seed in 0..6 {
        let Some((names, report)) = seeded_namespace_cut(seed) else {
            return;
        };
        let (again, report_again) = seeded_namespace_cut(seed).unwrap();
        assert_eq!(
            (&names, report),
            (&again, report_again),
            "seed {seed}: deterministic"
        );
        assert_eq!(
            report.entries_kept + report.entries_lost,
            2 * PREFIX_PAIRS as u64,
            "{report:?}"
        );
        assert_eq!(report.pages_lost + report.pages_kept + report.pages_torn, 0);
        // Operation 2i creates new-i, 2i + 1 unlinks old-i: the first `kept` are kept.
        let kept = report.entries_kept as usize;
        let mut expected: Vec<String> = (0..PREFIX_PAIRS)
            .flat_map(|i| {
                let new = (2 * i < kept).then(|| format!("new-{i}"));
                let old = (2 * i + 1 >= kept).then(|| format!("old-{i}"));
                new.into_iter().chain(old)
            })
            .collect();
        expected.sort();
        assert_eq!(names, expected, "seed {seed}, {report:?}");
        kept_counts.push(kept);
    }
    assert!(
        kept_counts
            .iter()
            .any(|&kept| kept > 0 && kept < 2 * PREFIX_PAIRS),
        "some seed keeps part of the operations: {kept_counts:?}"
    );
}

#[test]
fn the_trash_is_never_visible_through_the_mount_and_is_gone_after_the_cut() {
    let Some(scratch) = Scratch::new() else { return };
    let faultfs = scratch.mount();
    fs::create_dir(scratch.mounted("dir")).unwrap();
    write_file(&scratch.mounted("a"), b"a", true);
    write_file(&scratch.mounted("b"), b"b", true);
    fs::hard_link(scratch.mounted("a"), scratch.mounted("a2")).unwrap();
    scratch.sync_dir("");
    fs::remove_file(scratch.mounted("a2")).unwrap();
    fs::rename(scratch.mounted("b"), scratch.mounted("a")).unwrap();
    fs::remove_dir(scratch.mounted("dir")).unwrap();

    assert!(
        scratch.backing(TRASH_DIR_NAME).is_dir(),
        "the removed files are in the trash"
    );
    assert_eq!(names_in(&scratch.mounted("")), ["a"]);
    let trash = scratch.mounted(TRASH_DIR_NAME);
    assert!(!trash.exists(), "no lookup finds it");
    assert!(fs::create_dir(&trash).is_err(), "its name cannot be taken");
    assert!(File::create(&trash).is_err(), "its name cannot be taken");
    assert_eq!(fs::metadata(scratch.mounted("")).unwrap().nlink(), 2);
    assert_eq!(fs::metadata(scratch.mounted("a")).unwrap().nlink(), 1);

    let report = faultfs.cut_power(Cut::LoseUnsynced).unwrap();

    assert_eq!(report.entries_lost, 3, "{report:?}");
    assert_eq!(scratch.backing_names(""), ["a", "a2", "b", "dir"]);
    assert_eq!(fs::read(scratch.backing("a")).unwrap(), b"a");
    assert_eq!(fs::read(scratch.backing("b")).unwrap(), b"b");
}

/// A file with unsynced data replaced by a rename: its data is no longer the disk's concern, and
/// new files (which the backing file system may give its inode number) never see it.
#[test]
fn a_replaced_file_s_unsynced_data_leaks_into_no_later_file() {
    let Some(scratch) = Scratch::new() else { return };
    let faultfs = scratch.mount();
    write_file(&scratch.mounted("victim"), &[1; PAGE], true)
        .write_all_at(&[0xEE; PAGE], 0)
        .unwrap();
    write_file(&scratch.mounted("replacement"), b"replacement", true);
    assert_eq!(faultfs.unsynced_bytes(), PAGE as u64);
    fs::rename(scratch.mounted("replacement"), scratch.mounted("victim")).unwrap();
    assert_eq!(faultfs.unsynced_bytes(), 0, "the replaced file's data is gone");

    for i in 0..20 {
        let path = scratch.mounted(&format!("new-{i}"));
        write_file(&path, &[], false).sync_all().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"", "new file {i} is empty");
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .write_all_at(b"x", 10)
            .unwrap();
    }
    scratch.sync_dir(""); // the rename and the new files' entries
    let report = faultfs.cut_power(Cut::KeepRandomPages { seed: 1 }).unwrap();

    assert_eq!(report.pages_lost + report.pages_kept + report.pages_torn, 20);
    assert_eq!(report.entries_kept + report.entries_lost, 0);
    assert_eq!(fs::read(scratch.backing("victim")).unwrap(), b"replacement");
    for i in 0..20 {
        let data = fs::read(scratch.backing(&format!("new-{i}"))).unwrap();
        assert!(
            data.iter().all(|&b| b == 0 || b == b'x'),
            "new file {i} holds {data:?}"
        );
    }
}

#[test]
fn truncation_is_durable_at_once() {
    let Some(scratch) = Scratch::new() else { return };
    let faultfs = scratch.mount();
    let shrunk = write_file(&scratch.mounted("shrunk"), &[1; 10_000], true);
    shrunk.set_len(3000).unwrap();
    let grown = write_file(&scratch.mounted("grown"), &[1; 3000], true);
    grown.write_all_at(&[2; 100], 5000).unwrap();
    grown.set_len(8000).unwrap();
    write_file(&scratch.mounted("emptied"), &[1; 100], true);
    write_file(&scratch.mounted("emptied"), b"unsynced", false); // O_TRUNC, then a write
    assert_eq!(fs::read(scratch.mounted("grown")).unwrap()[5000..5100], [2; 100]);
    drop((shrunk, grown));
    scratch.sync_dir("");

    faultfs.cut_power(Cut::LoseUnsynced).unwrap();

    assert_eq!(fs::read(scratch.backing("shrunk")).unwrap(), [1; 3000]);
    let mut grown = vec![0; 8000];
    grown[..3000].fill(1); // the unsynced write below the new length: zeros
    assert_eq!(fs::read(scratch.backing("grown")).unwrap(), grown);
    assert_eq!(fs::read(scratch.backing("emptied")).unwrap(), b"");
}

const SEEDED_FILES: usize = 3;
const SEEDED_PAGES: usize = 40;

/// Files of old pages (synced), every page then overwritten with new bytes (unsynced), cut with
/// the seed: the backing files, and the report.
fn seeded_cut(seed: u64) -> Option<(Vec<Vec<u8>>, CutReport)> {
    let scratch = Scratch::new()?;
    let faultfs = scratch.mount();
    for f in 0..SEEDED_FILES {
        let file = write_file(
            &scratch.mounted(&format!("f{f}")),
            &[0xAA; SEEDED_PAGES * PAGE],
            true,
        );
        file.write_all_at(&[0xBB; SEEDED_PAGES * PAGE], 0).unwrap();
    }
    scratch.sync_dir("");
    assert_eq!(
        faultfs.unsynced_bytes(),
        (SEEDED_FILES * SEEDED_PAGES * PAGE) as u64
    );
    let report = faultfs.cut_power(Cut::KeepRandomPages { seed }).unwrap();
    let files = (0..SEEDED_FILES)
        .map(|f| fs::read(scratch.backing(&format!("f{f}"))).unwrap())
        .collect();
    Some((files, report))
}

#[test]
fn a_seeded_cut_is_deterministic_and_accounts_for_every_page() {
    let Some((files, report)) = seeded_cut(42) else {
        return;
    };
    let (again, report_again) = seeded_cut(42).unwrap();
    assert_eq!(report, report_again);
    assert!(files == again, "same seed, same writes: same disk");

    let mut seen = CutReport::default();
    for page in files.iter().flat_map(|file| file.chunks(PAGE)) {
        let new_sectors = page.iter().take_while(|&&b| b == 0xBB).count();
        assert!(
            page[new_sectors..].iter().all(|&b| b == 0xAA),
            "new bytes, then old ones"
        );
        match new_sectors {
            0 => seen.pages_lost += 1,
            PAGE => seen.pages_kept += 1,
            torn => {
                assert_eq!(torn % SECTOR, 0, "torn at a sector boundary");
                seen.pages_torn += 1;
            }
        }
    }
    assert_eq!(report, seen);
    assert_eq!(
        report.pages_lost + report.pages_kept + report.pages_torn,
        (SEEDED_FILES * SEEDED_PAGES) as u64
    );
    assert!(
        report.pages_lost > 0 && report.pages_kept > 0 && report.pages_torn > 0,
        "{report:?}"
    );
}

/// A process still using the mount at the cut: the unmount retries, then detaches, and the
/// process's later writes fail instead of reaching the disk.
#[test]
fn a_mount_still_in_use_is_detached_and_its_writes_then_fail() {
    let Some(scratch) = Scratch::new() else { return };
    let faultfs = scratch.mount();
    let file = write_file(&scratch.mounted("open"), b"synced", true);
    scratch.sync_dir("");
    file.write_all_at(b"UNSYNCED", 0).unwrap();

    let started = Instant::now();
    let report = faultfs.cut_power(Cut::LoseUnsynced).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the cut took {:?}",
        started.elapsed()
    );

    assert_eq!(report.pages_lost, 1);
    assert!(file.write_all_at(b"after the cut", 0).is_err());
    drop(file);
    assert_eq!(fs::read(scratch.backing("open")).unwrap(), b"synced");
}
