//! Open client connections per address, against `max.connections.per.ip` and its overrides
//! (`config::connection_limits`). Kafka's acceptor closes a connection past its address's limit
//! as soon as it is accepted; so does this, on every listener.
//!
//! Shared by every shard (each accepts on every listener). Memory: one entry per address with a
//! connection open, removed with its last one, so at most `max.connections` entries.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::config::ConnectionsPerIpLimits;
use crate::connection_slots::LogAtMostEvery;

pub struct ConnectionsPerIp {
    limits: ConnectionsPerIpLimits,
    open: Mutex<HashMap<IpAddr, u32>>,
    refused_total: AtomicU64,
    refusal_log: LogAtMostEvery,
}

/// One connection counted against its address, given back when dropped.
pub struct IpConnection {
    owner: Arc<ConnectionsPerIp>,
    /// `None` when no address is limited, so nothing was counted.
    ip: Option<IpAddr>,
}

impl ConnectionsPerIp {
    pub fn new(limits: ConnectionsPerIpLimits) -> Arc<ConnectionsPerIp> {
        Arc::new(ConnectionsPerIp {
            limits,
            open: Mutex::new(HashMap::new()),
            refused_total: AtomicU64::new(0),
            refusal_log: LogAtMostEvery::minute(),
        })
    }

    /// Counts a new connection from `ip`, or refuses it (counted, logged at most once a
    /// minute) when the address already holds its limit.
    pub fn take(self: &Arc<Self>, ip: IpAddr) -> Option<IpConnection> {
        if self.limits.is_unlimited() {
            return Some(IpConnection {
                owner: self.clone(),
                ip: None,
            });
        }
        let ip = ip.to_canonical();
        let max = self.limits.max_for(ip);
        let mut open = self.lock();
        let count = open.entry(ip).or_insert(0);
        if *count < max {
            *count += 1;
            return Some(IpConnection {
                owner: self.clone(),
                ip: Some(ip),
            });
        }
        let held = *count;
        if held == 0 {
            open.remove(&ip);
        }
        drop(open);
        let refused_total = self.refused_total.fetch_add(1, Ordering::Relaxed) + 1;
        if self.refusal_log.due() {
            tracing::warn!(
                %ip,
                connections_max = max,
                refused_total,
                "refusing new connections from an address at its limit (max.connections.per.ip)"
            );
        }
        None
    }

    /// Counts a connection from `ip` closed for its address's `connection_creation_rate` quota.
    pub fn refused_for_rate(&self, ip: IpAddr) {
        let refused_total = self.refused_total.fetch_add(1, Ordering::Relaxed) + 1;
        if self.refusal_log.due() {
            tracing::warn!(
                %ip,
                refused_total,
                "refusing new connections from an address past its connection_creation_rate quota"
            );
        }
    }

    /// Connections refused for their address's limit since start.
    pub fn refused_total(&self) -> u64 {
        self.refused_total.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, u32>> {
        self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for IpConnection {
    fn drop(&mut self) {
        let Some(ip) = self.ip else {
            return;
        };
        let mut open = self.owner.lock();
        let count = open
            .get_mut(&ip)
            .expect("a counted connection's address has an entry");
        assert!(*count > 0, "a connection was given back twice");
        *count -= 1;
        if *count == 0 {
            open.remove(&ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(default_max: u32, overrides: &str) -> ConnectionsPerIpLimits {
        crate::config::connection_limits::parse(default_max, overrides).expect("valid limits")
    }

    #[test]
    fn an_address_holds_at_most_its_limit_and_gets_each_connection_back() {
        let per_ip = ConnectionsPerIp::new(limits(2, "10.0.0.9:0"));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let first = per_ip.take(a).expect("first");
        let second = per_ip.take(a).expect("second");
        assert!(per_ip.take(a).is_none(), "third refused");
        assert!(
            per_ip.take("10.0.0.2".parse().unwrap()).is_some(),
            "another address"
        );
        assert!(
            per_ip.take("10.0.0.9".parse().unwrap()).is_none(),
            "an override of 0"
        );
        assert_eq!(per_ip.refused_total(), 2);
        drop(first);
        let third = per_ip.take(a).expect("a connection given back is taken again");
        drop((second, third));
        assert!(
            per_ip.lock().is_empty(),
            "no entry stays for an address without connections"
        );
    }
}
