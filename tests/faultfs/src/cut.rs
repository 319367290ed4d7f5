//! The power cut: its effect on the data no fsync covered, then on the namespace operations no
//! directory sync made durable.

use std::io;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::inodes::InodeTable;
use crate::overlay::{PAGE_SIZE, SECTOR_SIZE};
use crate::state::State;

/// How a power cut treats the data no fsync covered and the namespace operations no directory
/// sync made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Every unsynced write is lost, every namespace operation not durable undone.
    LoseUnsynced,
    /// Each unsynced page independently: lost, kept whole, or kept torn (a random prefix of
    /// its 512-byte sectors); then a random prefix (in journal order) of the namespace
    /// operations not durable is kept and the others are undone. Chosen by a RNG seeded with
    /// `seed` (same seed and same operations → same outcome).
    KeepRandomPages { seed: u64 },
}

/// What a power cut did with the unsynced pages (4096 bytes each) and with the namespace
/// operations not durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CutReport {
    pub pages_lost: u64,
    pub pages_kept: u64,
    pub pages_torn: u64,
    /// Namespace operations no directory sync made durable that the cut kept.
    pub entries_kept: u64,
    /// Namespace operations no directory sync made durable that the cut undid.
    pub entries_lost: u64,
}

/// What the disk holds of one unsynced page after the cut.
enum Fate {
    Lost,
    Kept,
    /// The first `sectors` sectors (at least one, not all).
    Torn {
        sectors: usize,
    },
}

const SECTORS_PER_PAGE: usize = PAGE_SIZE / SECTOR_SIZE;

impl Fate {
    fn draw(rng: &mut StdRng) -> Fate {
        match rng.gen_range(0..3) {
            0 => Fate::Lost,
            1 => Fate::Kept,
            _ => Fate::Torn {
                sectors: rng.gen_range(1..SECTORS_PER_PAGE),
            },
        }
    }
}

/// Applies `cut`: first to the data (see [`apply_to_data`]), then to the namespace operations
/// not durable: with a RNG, a prefix of them of a random length (drawn after the pages) is kept;
/// the others are undone, from the last; the trash is emptied. Both parts are done even if one
/// fails; the first failure is returned.
pub fn apply(state: &mut State, cut: Cut) -> io::Result<CutReport> {
    let mut rng = match cut {
        Cut::LoseUnsynced => None,
        Cut::KeepRandomPages { seed } => Some(StdRng::seed_from_u64(seed)),
    };
    let data = apply_to_data(&mut state.inodes, rng.as_mut());
    let not_durable = state.journal.take_not_durable();
    let kept = rng.map_or(0, |mut rng| rng.gen_range(0..=not_durable.len()));
    let undone = state.undo(&not_durable[kept..]);
    let mut report = data?;
    undone?;
    report.entries_kept = kept as u64;
    report.entries_lost = (not_durable.len() - kept) as u64;
    Ok(report)
}

/// Applies the RNG's draws (none: all lost) to every linked file's unsynced pages, in path then
/// page order (so that a seed gives the same outcome for the same writes), and drops every
/// overlay: what a kept or torn page keeps is written into its backing file (never past the
/// file's logical length, the file extended if the page lies past its end).
fn apply_to_data(inodes: &mut InodeTable, mut rng: Option<&mut StdRng>) -> io::Result<CutReport> {
    let mut report = CutReport::default();
    for inode in inodes.linked_by_path() {
        let Some(overlay) = inode.unsynced.take() else {
            continue;
        };
        let file = inode.file.as_ref().expect("a file with unsynced data is open");
        for (index, page) in overlay.pages() {
            let fate = rng.as_deref_mut().map_or(Fate::Lost, Fate::draw);
            let kept_bytes = match fate {
                Fate::Lost => {
                    report.pages_lost += 1;
                    continue;
                }
                Fate::Kept => {
                    report.pages_kept += 1;
                    PAGE_SIZE
                }
                Fate::Torn { sectors } => {
                    report.pages_torn += 1;
                    sectors * SECTOR_SIZE
                }
            };
            page.write_prefix(file, index, kept_bytes, overlay.len())?;
        }
    }
    Ok(report)
}
