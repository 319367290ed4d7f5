//! Finding the whole-disk block devices under a directory, through `/sys/dev/block`.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::Serialize;

use crate::hostfs::{nearest_existing, HostFs};

/// What kind of disk a block device is, which decides its I/O scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DiskKind {
    Nvme,
    /// SATA/SAS/USB disks (`sd*`).
    Scsi,
    Virtio,
    Other,
}

/// A whole disk (not a partition) holding part of a directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockDevice {
    /// Name under `/sys/block`, e.g. `nvme0n1`, `sda`, `vda`.
    pub name: String,
    pub kind: DiskKind,
    pub rotational: bool,
}

impl BlockDevice {
    pub fn sys_path(&self) -> String {
        format!("/sys/block/{}", self.name)
    }
}

/// The whole disks behind `dir` (several for a device-mapper or md device). The error says why
/// there are none, e.g. a directory on tmpfs or overlayfs has no block device.
pub fn block_devices_of(fs: &HostFs, dir: &Path) -> Result<Vec<BlockDevice>, String> {
    let existing = nearest_existing(dir).ok_or_else(|| format!("{} not found", dir.display()))?;
    let dev = std::fs::metadata(existing)
        .map_err(|e| format!("cannot stat {}: {e}", existing.display()))?
        .dev();
    let (major, minor) = split_dev(dev);
    let link = format!("/sys/dev/block/{major}:{minor}");
    let node = fs.canonical(&link).ok_or_else(|| {
        format!(
            "{} is on device {major}:{minor}, which is not a block device (tmpfs, overlayfs?)",
            existing.display()
        )
    })?;
    let mut disks = Vec::new();
    collect_disks(fs, &node, &mut disks, 0);
    if disks.is_empty() {
        return Err(format!("no disk found behind {node}"));
    }
    Ok(disks)
}

/// Linux's `dev_t` encoding (glibc's `gnu_dev_major` / `gnu_dev_minor`).
fn split_dev(dev: u64) -> (u64, u64) {
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0fff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0x00ff);
    (major, minor)
}

/// Walks from a sysfs block node to whole disks: a partition's disk is its parent directory;
/// a stacked device (dm, md) lists its members in `slaves/`.
fn collect_disks(fs: &HostFs, node: &str, disks: &mut Vec<BlockDevice>, depth: usize) {
    if depth > 8 {
        return; // Stacks are never this deep; a loop in a bad tree must not hang us.
    }
    let node = node.trim_end_matches('/');
    let disk_node = if fs.exists(&format!("{node}/partition")) {
        match node.rsplit_once('/') {
            Some((parent, _)) => parent.to_string(),
            None => return,
        }
    } else {
        node.to_string()
    };
    let slaves = fs.list(&format!("{disk_node}/slaves"));
    if !slaves.is_empty() {
        for slave in slaves {
            if let Some(next) = fs.canonical(&format!("{disk_node}/slaves/{slave}")) {
                collect_disks(fs, &next, disks, depth + 1);
            }
        }
        return;
    }
    let Some(name) = disk_node.rsplit('/').next().filter(|n| !n.is_empty()) else {
        return;
    };
    if disks.iter().any(|d| d.name == name) {
        return;
    }
    let kind = if name.starts_with("nvme") {
        DiskKind::Nvme
    } else if name.starts_with("sd") {
        DiskKind::Scsi
    } else if name.starts_with("vd") {
        DiskKind::Virtio
    } else {
        DiskKind::Other
    };
    let rotational = fs.read(&format!("/sys/block/{name}/queue/rotational")).as_deref() == Some("1");
    disks.push(BlockDevice {
        name: name.to_string(),
        kind,
        rotational,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn dev_numbers_split_like_glibc() {
        assert_eq!(split_dev(0xfe00), (254, 0));
        assert_eq!(split_dev(0x0803), (8, 3));
        // Large minors use the high bits.
        assert_eq!(split_dev((1 << 20) | (259 << 8) | 5), (259, 5 | (1 << 8)));
    }

    #[test]
    fn partitions_and_stacked_devices_resolve_to_disks() {
        let dir = tempfile::tempdir().unwrap();
        let fs = HostFs::new(dir.path());
        let mk = |p: &str| std::fs::create_dir_all(fs.path(p)).unwrap();
        mk("/sys/devices/pci/nvme0n1/nvme0n1p2");
        std::fs::write(fs.path("/sys/devices/pci/nvme0n1/nvme0n1p2/partition"), "2").unwrap();
        mk("/sys/devices/virtual/block/dm-0/slaves");
        mk("/sys/devices/pci/sdb");
        mk("/sys/block");
        symlink(fs.path("/sys/devices/pci/sdb"), fs.path("/sys/block/sdb")).unwrap();
        symlink(
            fs.path("/sys/devices/pci/nvme0n1/nvme0n1p2"),
            fs.path("/sys/devices/virtual/block/dm-0/slaves/nvme0n1p2"),
        )
        .unwrap();
        symlink(
            fs.path("/sys/devices/pci/sdb"),
            fs.path("/sys/devices/virtual/block/dm-0/slaves/sdb"),
        )
        .unwrap();
        let mut disks = Vec::new();
        collect_disks(&fs, "/sys/devices/virtual/block/dm-0", &mut disks, 0);
        let names: Vec<(&str, DiskKind)> = disks.iter().map(|d| (d.name.as_str(), d.kind)).collect();
        assert_eq!(names, vec![("nvme0n1", DiskKind::Nvme), ("sdb", DiskKind::Scsi)]);
    }

    #[test]
    fn this_hosts_data_dir_resolves_or_says_why() {
        let dir = tempfile::tempdir().unwrap();
        match block_devices_of(&HostFs::real(), &dir.path().join("not-yet-created")) {
            Ok(disks) => assert!(disks.iter().all(|d| !d.name.is_empty())),
            Err(reason) => assert!(reason.contains("device") || reason.contains("disk"), "{reason}"),
        }
    }
}
