//! Host checks and tuners, the disk probe and the systemd integration.
//!
//! - [`probe`]: start-up check for io_uring opcodes and locked memory ([`probe_host`]).
//! - [`check`]: [`TuneCheck`], what every host check reports.
//! - [`tune`]: `laminar tune` — kernel settings for a broker: [`check_all`], [`apply`],
//!   [`render_table`], [`render_json`].
//! - [`iotune`]: `laminar iotune` — measures the data disk and writes `iotune.json`;
//!   [`iotune_appends`], its append cases, choose the write mode.
//! - [`sd_notify`]: readiness, watchdog and status messages to systemd.
//!
//! Everything here runs on one thread, outside the shards; nothing is shared.

#![forbid(unsafe_code)]

mod balloon;
pub mod blockdev;
pub mod check;
pub mod hostfs;
pub mod iotune;
pub mod iotune_appends;
mod irq;
pub mod probe;
mod reclaim;
pub mod sd_notify;
pub mod systemd_units;
pub mod tune;
mod write_pattern;

pub use check::TuneCheck;
pub use probe::{probe_host, probe_host_for, HostError, HostReport};
pub use tune::{apply, check_all, render_json, render_table, TuneOptions};
