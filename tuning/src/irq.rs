//! IRQ affinity of the NICs and of the data disks (report only: placing interrupts well depends
//! on which cores run shards, which is the operator's call or irqbalance's).

use std::collections::BTreeSet;

use crate::blockdev::BlockDevice;
use crate::check::TuneCheck;
use crate::hostfs::{parse_cpu_list, HostFs};

const WHY: &str = "interrupts all landing on one core steal it from its shard; spread them \
                   (irqbalance, or smp_affinity_list by hand)";
const RECOMMENDED: &str = "spread over cores";

/// One check per physical NIC and per data disk that has MSI interrupts.
pub fn irq_checks(fs: &HostFs, disks: &[BlockDevice]) -> Vec<TuneCheck> {
    let online = fs
        .read("/sys/devices/system/cpu/online")
        .map(|s| parse_cpu_list(&s))
        .unwrap_or_default();
    let nics = fs
        .list("/sys/class/net")
        .into_iter()
        .filter(|n| fs.exists(&format!("/sys/class/net/{n}/device")))
        .map(|n| (format!("/sys/class/net/{n}/device"), n));
    let disks = disks
        .iter()
        .map(|d| (format!("{}/device", d.sys_path()), d.name.clone()));
    let mut checks: Vec<TuneCheck> = nics
        .chain(disks)
        .filter_map(|(device, name)| {
            let irqs = msi_irqs(fs, &device);
            (!irqs.is_empty()).then(|| affinity_check(fs, &name, &irqs, &online))
        })
        .collect();
    if checks.is_empty() {
        checks.push(TuneCheck::unavailable(
            "irq affinity",
            RECOMMENDED,
            WHY,
            "no device with MSI interrupts visible",
        ));
    }
    checks
}

/// A device's MSI interrupts are listed by its PCI function, which is the device itself
/// (NIC), its `device` link (NVMe namespace → controller) or its parent (virtio).
fn msi_irqs(fs: &HostFs, device: &str) -> Vec<u32> {
    let Some(node) = fs.canonical(device) else {
        return Vec::new();
    };
    let parent = node
        .rsplit_once('/')
        .map_or(String::new(), |(p, _)| p.to_string());
    [node.clone(), format!("{node}/device"), parent]
        .iter()
        .map(|dir| fs.list(&format!("{dir}/msi_irqs")))
        .find(|irqs| !irqs.is_empty())
        .unwrap_or_default()
        .iter()
        .filter_map(|irq| irq.parse().ok())
        .collect()
}

fn affinity_check(fs: &HostFs, name: &str, irqs: &[u32], online: &[u32]) -> TuneCheck {
    let mut effective = BTreeSet::new();
    let mut all_movable = true;
    for irq in irqs {
        let read = |file: &str| fs.read(&format!("/proc/irq/{irq}/{file}"));
        let allowed = read("smp_affinity_list")
            .map(|s| parse_cpu_list(&s))
            .unwrap_or_default();
        all_movable &= online.iter().all(|cpu| allowed.contains(cpu));
        let landed = read("effective_affinity_list").map(|s| parse_cpu_list(&s));
        effective.extend(landed.unwrap_or(allowed));
    }
    let cpus: Vec<String> = effective.iter().map(u32::to_string).collect();
    TuneCheck {
        name: format!("irq affinity ({name})"),
        current: format!(
            "{} irqs on cpus {}{}",
            irqs.len(),
            cpus.join(","),
            if all_movable { " (movable to any core)" } else { "" }
        ),
        recommended: RECOMMENDED.to_string(),
        why: WHY.to_string(),
        applicable: true,
        ok: effective.len() > 1 || online.len() <= 1 || irqs.len() == 1 || all_movable,
        fix: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn pinned_interrupts_are_flagged_and_report_only() {
        let dir = tempfile::tempdir().unwrap();
        let fs = HostFs::new(dir.path());
        let write = |p: &str, v: &str| {
            let path = fs.path(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, v).unwrap();
        };
        write("/sys/devices/system/cpu/online", "0-3\n");
        write("/sys/devices/pci0/0000:01:00.0/msi_irqs/40", "msix");
        write("/sys/devices/pci0/0000:01:00.0/msi_irqs/41", "msix");
        std::fs::create_dir_all(fs.path("/sys/class/net")).unwrap();
        symlink(
            fs.path("/sys/devices/pci0/0000:01:00.0"),
            fs.path("/sys/class/net/eth9"),
        )
        .unwrap();
        symlink(
            fs.path("/sys/devices/pci0/0000:01:00.0"),
            fs.path("/sys/devices/pci0/0000:01:00.0/device"),
        )
        .unwrap();
        write("/proc/irq/40/smp_affinity_list", "2\n");
        write("/proc/irq/41/smp_affinity_list", "2\n");
        let checks = irq_checks(&fs, &[]);
        assert_eq!(checks.len(), 1);
        assert_eq!(checks[0].name, "irq affinity (eth9)");
        assert_eq!(checks[0].current, "2 irqs on cpus 2");
        assert!(!checks[0].ok && checks[0].fix.is_empty());
        write("/proc/irq/41/smp_affinity_list", "3\n");
        assert!(irq_checks(&fs, &[])[0].ok);
    }
}
