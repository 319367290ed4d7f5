//! `max.connections.per.ip` and `max.connections.per.ip.overrides`: how many connections one
//! client address may hold open, as Kafka's `ConnectionQuotas` reads them.

use std::collections::BTreeMap;
use std::net::{IpAddr, ToSocketAddrs};

use super::ConfigError;

const OVERRIDES_KEY: &str = "max.connections.per.ip.overrides";

/// Per-address connection limits, read once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionsPerIpLimits {
    /// `max.connections.per.ip`.
    pub default_max: u32,
    /// `max.connections.per.ip.overrides`, host names resolved to every address they had.
    pub overrides: BTreeMap<IpAddr, u32>,
}

impl ConnectionsPerIpLimits {
    /// Kafka's default: no limit per address.
    pub const UNLIMITED: u32 = i32::MAX as u32;

    /// The most connections `ip` may hold open.
    pub fn max_for(&self, ip: IpAddr) -> u32 {
        self.overrides
            .get(&ip.to_canonical())
            .copied()
            .unwrap_or(self.default_max)
    }

    /// Whether no address is limited (nothing needs counting).
    pub fn is_unlimited(&self) -> bool {
        self.default_max == Self::UNLIMITED && self.overrides.values().all(|max| *max == Self::UNLIMITED)
    }
}

/// The limits from `max.connections.per.ip` (`default_max`, already range-checked) and the
/// overrides' text: `host:count` or `ip:count` entries, comma-separated.
pub fn parse(default_max: u32, overrides_text: &str) -> Result<ConnectionsPerIpLimits, ConfigError> {
    let rejected = |reason: String| ConfigError::Rejected {
        key: OVERRIDES_KEY.to_string(),
        value: overrides_text.to_string(),
        reason,
    };
    let mut overrides = BTreeMap::new();
    for entry in overrides_text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (host, count) = entry
            .rsplit_once(':')
            .ok_or_else(|| rejected(format!("{entry:?} is not host:count")))?;
        let count: u32 = count
            .trim()
            .parse()
            .ok()
            .filter(|c| *c <= ConnectionsPerIpLimits::UNLIMITED)
            .ok_or_else(|| rejected(format!("{entry:?}: the count is not an int from 0")))?;
        for ip in addresses_of(host.trim()).map_err(rejected)? {
            overrides.insert(ip, count);
        }
    }
    if default_max == 0 && overrides.is_empty() {
        return Err(ConfigError::Rejected {
            key: "max.connections.per.ip".to_string(),
            value: "0".to_string(),
            reason: format!("0 lets no address in; it needs {OVERRIDES_KEY}"),
        });
    }
    Ok(ConnectionsPerIpLimits {
        default_max,
        overrides,
    })
}

/// An address as written (`[v6]` or bare), or every address a host name resolves to.
fn addresses_of(host: &str) -> Result<Vec<IpAddr>, String> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(vec![ip.to_canonical()]);
    }
    let resolved = (bare, 0)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host:?}: {e}"))?;
    let ips: Vec<IpAddr> = resolved.map(|a| a.ip().to_canonical()).collect();
    if ips.is_empty() {
        return Err(format!("{host:?} resolves to no address"));
    }
    Ok(ips)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn overrides_name_addresses_and_hosts_and_the_rest_get_the_default() {
        let limits = parse(5, " 10.0.0.1:2, [::1]:7,localhost:3 ,").expect("valid");
        assert_eq!(limits.max_for(ip("10.0.0.1")), 2);
        assert_eq!(limits.max_for(ip("127.0.0.1")), 3, "localhost resolved");
        assert_eq!(
            limits.max_for(ip("::ffff:10.0.0.1")),
            2,
            "a mapped IPv4 address is itself"
        );
        assert_eq!(limits.max_for(ip("10.0.0.2")), 5);
        assert!(!limits.is_unlimited());
        assert!(parse(ConnectionsPerIpLimits::UNLIMITED, "")
            .expect("default")
            .is_unlimited());
    }

    #[test]
    fn malformed_overrides_and_a_zero_default_alone_are_refused() {
        for bad in [
            "10.0.0.1",
            "10.0.0.1:-1",
            "10.0.0.1:x",
            "10.0.0.1:2147483648",
            "no-such-host.invalid:1",
        ] {
            assert!(parse(5, bad).is_err(), "{bad:?} must be refused");
        }
        assert!(parse(0, "").is_err(), "0 without overrides lets nobody in");
        assert_eq!(parse(0, "10.0.0.1:1").expect("valid").max_for(ip("10.0.0.9")), 0);
    }
}
