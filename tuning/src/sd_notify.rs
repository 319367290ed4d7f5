//! The systemd notification protocol (`sd_notify`): `KEY=VALUE` lines in one datagram to the
//! unix socket named by `$NOTIFY_SOCKET`. A name starting with `@` is an abstract socket. When
//! the variable is unset (not run by systemd, or `Type=simple`) every call is a no-op.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// One state change to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotifyState {
    /// Start-up finished: listeners bound, logs recovered.
    Ready,
    /// Shutdown began.
    Stopping,
    /// Still alive (send more often than `WatchdogSec`).
    Watchdog,
    /// Free-form text shown by `systemctl status`.
    Status(String),
}

impl NotifyState {
    fn line(&self) -> String {
        match self {
            NotifyState::Ready => "READY=1".to_string(),
            NotifyState::Stopping => "STOPPING=1".to_string(),
            NotifyState::Watchdog => "WATCHDOG=1".to_string(),
            // A newline would start another assignment.
            NotifyState::Status(text) => format!("STATUS={}", text.replace('\n', " ")),
        }
    }
}

/// Sends `states` to `$NOTIFY_SOCKET`. Returns whether a message was sent (false when the
/// variable is unset).
pub fn notify(states: &[NotifyState]) -> io::Result<bool> {
    notify_socket(std::env::var_os("NOTIFY_SOCKET").as_deref(), states)
}

/// Sends `states` to the socket `socket` names (`None` or empty: do nothing).
pub fn notify_socket(socket: Option<&OsStr>, states: &[NotifyState]) -> io::Result<bool> {
    let Some(socket) = socket.filter(|s| !s.is_empty()) else {
        return Ok(false);
    };
    let address = socket_address(socket)?;
    let message: String = states.iter().map(|s| s.line() + "\n").collect();
    let sender = UnixDatagram::unbound()?;
    let sent = sender.send_to_addr(message.as_bytes(), &address)?;
    if sent != message.len() {
        return Err(io::Error::other(format!(
            "sd_notify: sent {sent} of {} bytes",
            message.len()
        )));
    }
    Ok(true)
}

fn socket_address(socket: &OsStr) -> io::Result<SocketAddr> {
    let bytes = socket.as_bytes();
    match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name)
        }
        None => SocketAddr::from_pathname(std::path::Path::new(socket)),
    }
}

/// How often systemd expects `WATCHDOG=1` (`$WATCHDOG_USEC`), when the watchdog is on and
/// meant for this process (`$WATCHDOG_PID`, if set, is ours). Ping at half this interval.
pub fn watchdog_interval() -> Option<Duration> {
    watchdog_interval_from(
        std::env::var("WATCHDOG_USEC").ok().as_deref(),
        std::env::var("WATCHDOG_PID").ok().as_deref(),
        std::process::id(),
    )
}

fn watchdog_interval_from(usec: Option<&str>, pid: Option<&str>, own_pid: u32) -> Option<Duration> {
    if let Some(pid) = pid {
        if pid.trim().parse::<u32>().ok()? != own_pid {
            return None;
        }
    }
    let usec: u64 = usec?.trim().parse().ok().filter(|&u| u > 0)?;
    Some(Duration::from_micros(usec))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receive(listener: &UnixDatagram) -> String {
        listener.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 1024];
        let n = listener.recv(&mut buf).unwrap();
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn path_socket_receives_every_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let listener = UnixDatagram::bind(&path).unwrap();
        let states = [
            NotifyState::Ready,
            NotifyState::Status("serving 12 partitions\non 2 shards".into()),
        ];
        assert!(notify_socket(Some(path.as_os_str()), &states).unwrap());
        assert_eq!(
            receive(&listener),
            "READY=1\nSTATUS=serving 12 partitions on 2 shards\n"
        );
        notify_socket(
            Some(path.as_os_str()),
            &[NotifyState::Watchdog, NotifyState::Stopping],
        )
        .unwrap();
        assert_eq!(receive(&listener), "WATCHDOG=1\nSTOPPING=1\n");
    }

    #[test]
    fn abstract_socket_with_at_sign() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("laminar-notify-test-{}", std::process::id());
        let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&address).unwrap();
        let socket = format!("@{name}");
        assert!(notify_socket(Some(OsStr::new(&socket)), &[NotifyState::Ready]).unwrap());
        assert_eq!(receive(&listener), "READY=1\n");
    }

    #[test]
    fn unset_socket_is_a_no_op_and_a_dead_one_an_error() {
        assert!(!notify_socket(None, &[NotifyState::Ready]).unwrap());
        assert!(!notify_socket(Some(OsStr::new("")), &[NotifyState::Ready]).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nobody-listens.sock");
        assert!(notify_socket(Some(missing.as_os_str()), &[NotifyState::Ready]).is_err());
    }

    #[test]
    fn watchdog_interval_respects_pid() {
        let d = watchdog_interval_from(Some("30000000"), None, 7);
        assert_eq!(d, Some(Duration::from_secs(30)));
        assert_eq!(watchdog_interval_from(Some("30000000"), Some("7"), 7), d);
        assert_eq!(watchdog_interval_from(Some("30000000"), Some("8"), 7), None);
        assert_eq!(watchdog_interval_from(None, None, 7), None);
        assert_eq!(watchdog_interval_from(Some("0"), None, 7), None);
    }
}
