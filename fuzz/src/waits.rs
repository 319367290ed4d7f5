//! How long the broker may take to answer a frame: a hang is no answer within the hang bound
//! plus this. Kafka lets a request ask for a wait (Fetch's max_wait_ms; a JoinGroup waits for
//! the group's members up to their rebalance timeouts; admin requests carry timeout_ms); a
//! frame that does not decode must be refused at once.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;

use crate::seeds::{decodable_body, decode_recorded, header_version};
use crate::tokens::Recorder;

/// A request allowed to wait longer than the hang bound is not waited for past this: it is
/// left running ("parked"), as by a client that moved on, and the run goes on.
pub const PARK_AFTER: Duration = Duration::from_millis(10);

/// How long to wait for an answer to a frame allowed `allowed`, and whether running out of it
/// parks the frame (`true`) or is a hang.
pub fn deadline(hang: Duration, allowed: Duration) -> (Duration, bool) {
    if allowed > hang {
        (PARK_AFTER, true)
    } else {
        (hang + allowed, false)
    }
}

/// The longest group timeout any JoinGroup sent so far asked for: a SyncGroup or JoinGroup may
/// wait on other members that long.
#[derive(Debug, Default)]
pub struct Waits {
    group_ms: i64,
}

impl Waits {
    /// The wait `frame` (header and body, no size prefix) may take.
    pub fn allowed(&mut self, frame: &[u8]) -> Duration {
        let Some(request) = decode(frame) else {
            return Duration::ZERO;
        };
        let ms = match &request {
            RequestKind::Fetch(r) => i64::from(r.max_wait_ms),
            RequestKind::JoinGroup(r) => {
                let asked = i64::from(r.session_timeout_ms.max(r.rebalance_timeout_ms));
                self.group_ms = self.group_ms.max(asked);
                self.group_ms
            }
            RequestKind::SyncGroup(_) | RequestKind::Heartbeat(_) => self.group_ms,
            RequestKind::CreateTopics(r) => i64::from(r.timeout_ms),
            RequestKind::DeleteTopics(r) => i64::from(r.timeout_ms),
            RequestKind::CreatePartitions(r) => i64::from(r.timeout_ms),
            RequestKind::DeleteRecords(r) => i64::from(r.timeout_ms),
            _ => 0,
        };
        Duration::from_millis(ms.max(0) as u64)
    }
}

fn decode(frame: &[u8]) -> Option<RequestKind> {
    decode_frame(frame).ok().map(|(_, request, _)| request)
}

/// The header and request in `frame`, decoded as the broker does (bytes after the body are
/// ignored: their count is the third value).
pub fn decode_frame(frame: &[u8]) -> anyhow::Result<(RequestHeader, RequestKind, usize)> {
    if frame.len() < 4 {
        anyhow::bail!("{} bytes: no header", frame.len());
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let api = ApiKey::try_from(key).map_err(|_| anyhow::anyhow!("unknown api key {key}"))?;
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let mut header_buf = Recorder::new(Bytes::copy_from_slice(frame));
    let header = RequestHeader::decode(&mut header_buf, header_version(api, version))?;
    let body_at = frame.len() - header_buf.left();
    let (body, decode_version) = decodable_body(api, version, &frame[body_at..]);
    let mut body_buf = Recorder::new(body);
    let request = decode_recorded(api, &mut body_buf, decode_version)?;
    Ok((header, request, body_buf.left()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seeds::build;

    #[test]
    fn fetch_may_wait_as_asked_and_group_requests_as_long_as_any_join_asked() {
        let mut waits = Waits::default();
        let fetch = build(ApiKey::Fetch, 11, 0).unwrap();
        assert_eq!(waits.allowed(&fetch.frame), Duration::from_millis(20));
        let sync = build(ApiKey::SyncGroup, 3, 0).unwrap();
        assert_eq!(waits.allowed(&sync.frame), Duration::ZERO);
        let join = build(ApiKey::JoinGroup, 5, 0).unwrap();
        assert_eq!(
            waits.allowed(&join.frame),
            Duration::from_secs(6),
            "its session timeout"
        );
        assert_eq!(waits.allowed(&sync.frame), Duration::from_secs(6));
        let produce = build(ApiKey::Produce, 9, 1).unwrap();
        assert_eq!(waits.allowed(&produce.frame), Duration::ZERO);
        assert_eq!(
            waits.allowed(&fetch.frame[..20]),
            Duration::ZERO,
            "cut short: refused at once"
        );
    }
}
