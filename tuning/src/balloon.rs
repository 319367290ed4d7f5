//! Whether the hypervisor takes freed guest memory back (virtio-balloon free page reporting).
//!
//! With reporting on, the guest tells the host about free memory, and the host drops it. The
//! next time the guest uses such a page (the page cache taking it for a segment append, say),
//! the host must fault it in again. On the development VM (docs/decisions/0008) buffered writes
//! into memory reported this way ran at 441–525 MB/s, and at 2060 MB/s into memory freed a
//! moment before, so a broker's append rate there depends on how recently its memory was freed.
//! Only the VM's configuration can turn it off, so the check reports and never writes.

use crate::check::TuneCheck;
use crate::hostfs::HostFs;

const NAME: &str = "free page reporting (virtio-balloon)";
const WHY: &str = "the hypervisor drops memory the guest frees, so each page the page cache \
                   takes again costs a host fault (buffered appends measured 4x slower); a \
                   dedicated broker VM keeps its memory: turn reporting off in the VM's balloon \
                   settings (reported, never written: it is the hypervisor's setting)";
/// virtio device id of a memory balloon.
const BALLOON_DEVICE_ID: &str = "0x0005";
/// VIRTIO_BALLOON_F_REPORTING: the feature bit, counted from the first character of `features`.
const REPORTING_FEATURE_BIT: usize = 5;

pub fn free_page_reporting_check(fs: &HostFs) -> TuneCheck {
    let balloons: Vec<String> = fs
        .list("/sys/bus/virtio/devices")
        .into_iter()
        .map(|name| format!("/sys/bus/virtio/devices/{name}"))
        .filter(|dir| fs.read(&format!("{dir}/device")).as_deref() == Some(BALLOON_DEVICE_ID))
        .collect();
    if balloons.is_empty() {
        return TuneCheck::unavailable(NAME, "off", WHY, "no virtio balloon");
    }
    let reporting = balloons.iter().any(|dir| {
        fs.read(&format!("{dir}/features"))
            .is_some_and(|bits| bits.as_bytes().get(REPORTING_FEATURE_BIT) == Some(&b'1'))
    });
    TuneCheck {
        name: NAME.to_string(),
        current: if reporting { "on" } else { "off" }.to_string(),
        recommended: "off".to_string(),
        why: WHY.to_string(),
        applicable: true,
        ok: !reporting,
        fix: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(devices: &[(&str, &str, &str)]) -> (tempfile::TempDir, HostFs) {
        let dir = tempfile::tempdir().unwrap();
        let fs = HostFs::new(dir.path());
        for (name, device, features) in devices {
            let base = fs.path(&format!("/sys/bus/virtio/devices/{name}"));
            std::fs::create_dir_all(&base).unwrap();
            std::fs::write(base.join("device"), format!("{device}\n")).unwrap();
            std::fs::write(base.join("features"), format!("{features}\n")).unwrap();
        }
        (dir, fs)
    }

    #[test]
    fn a_balloon_with_the_reporting_bit_is_reported_not_fixed() {
        // Feature string of the development VM's balloon: bits 1, 2, 5 and 7 set.
        let (_dir, fs) = host(&[
            ("virtio0", "0x0005", "01100101000000000000000000000000"),
            ("virtio1", "0x0002", "00100010011001000000000000000100"),
        ]);
        let check = free_page_reporting_check(&fs);
        assert_eq!((check.current.as_str(), check.ok), ("on", false));
        assert!(check.applicable && check.fix.is_empty());
    }

    #[test]
    fn a_balloon_without_it_is_fine_and_no_balloon_is_not_applicable() {
        let (_dir, fs) = host(&[("virtio0", "0x0005", "01100001")]);
        let check = free_page_reporting_check(&fs);
        assert_eq!((check.current.as_str(), check.ok), ("off", true));

        let (_dir, fs) = host(&[("virtio1", "0x0002", "00100110")]);
        let check = free_page_reporting_check(&fs);
        assert!(!check.applicable && check.ok);
    }
}
