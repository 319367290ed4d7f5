//! Host checks and tuners, the disk probe and the systemd unit.
