//! The controller's port: mutated frames of the controllers' own transport (a little-endian
//! length, then a bincode `RpcRequest`) to a running node's CONTROLLER listener, one connection
//! each. The seeds are the requests brokers send their controller (registration, heartbeats,
//! topic changes, elections, producer ids) for a broker id no node has; the mutations flip and
//! set bytes, cut, repeat and append, and every 50th frame's length lies. Each frame must be
//! answered or closed within the bound; every 100th, a valid heartbeat must still be answered.
//!
//! Raft's own messages (Vote, AppendEntries, InstallSnapshot) are not sent: the port does not
//! yet authenticate its peers, so forged ones would be obeyed by design, not by a defect.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use laminar_controller::api::ControllerRequest;
use laminar_controller::api::{CreatableTopic, ElectionType};
use laminar_controller::network::{encode_frame, RpcRequest};
use laminar_model::{BrokerEpoch, NodeId};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A broker id no node of a test cluster has.
const STRANGER: i32 = 99;
/// Every this many frames one goes with a length that lies, then the write side is shut.
const LYING_LENGTH_EVERY: u64 = 50;
/// Every this many frames a valid heartbeat must be answered.
const CHECK_EVERY: u64 = 100;

/// What a run against the controller port saw.
#[derive(Debug, Default)]
pub struct PortReport {
    pub frames: u64,
    /// Frames answered with a frame.
    pub answered: u64,
    /// Frames after which the node closed the connection without an answer.
    pub closed: u64,
    /// Frames neither answered nor closed within the bound, with their bytes.
    pub hangs: Vec<Vec<u8>>,
    /// Set when the node stopped accepting connections or answering valid heartbeats.
    pub lost: Option<String>,
    pub elapsed: Duration,
}

/// The valid frames mutations start from.
pub fn seeds() -> Result<Vec<Vec<u8>>> {
    let (broker_id, broker_epoch) = (NodeId::new(STRANGER), BrokerEpoch::new(1));
    let requests = vec![
        ControllerRequest::BrokerHeartbeat {
            broker_id,
            broker_epoch,
        },
        ControllerRequest::AllocateProducerIds {
            broker_id,
            broker_epoch,
        },
        ControllerRequest::ElectLeaders {
            election_type: ElectionType::Preferred,
            partitions: None,
        },
        ControllerRequest::DeleteTopics {
            names: vec!["fuzz-controller-doomed".into()],
        },
        ControllerRequest::CreatePartitions {
            topics: vec![("fuzz-controller".into(), 2)],
        },
        ControllerRequest::CreateTopics {
            topics: vec![CreatableTopic {
                name: "fuzz-controller".into(),
                num_partitions: 1,
                replication_factor: 1,
                configs: Default::default(),
                assignments: Vec::new(),
                topic_id: None,
            }],
        },
    ];
    requests
        .into_iter()
        .map(|request| encode_frame(&RpcRequest::Controller(request)).context("encoding a seed"))
        .collect()
}

/// `seed` changed by one to four mutations; its length prefix rewritten unless `lie`.
fn mutate(seed: &[u8], rng: &mut SmallRng, lie: bool) -> Vec<u8> {
    let mut body = seed[4..].to_vec();
    for _ in 0..rng.gen_range(1..=4) {
        let at = rng.gen_range(0..body.len().max(1));
        match rng.gen_range(0..5) {
            0 if !body.is_empty() => body[at] ^= 1 << rng.gen_range(0..8),
            1 if !body.is_empty() => body[at] = [0, 0x7f, 0x80, 0xff][rng.gen_range(0..4)],
            2 => body.truncate(at),
            3 => body.extend_from_within(at.min(body.len())..),
            _ => body.extend((0..rng.gen_range(1..16)).map(|_| rng.gen::<u8>())),
        }
    }
    let length = match lie {
        true => rng.gen_range(0..=u32::MAX),
        false => body.len() as u32,
    };
    let mut frame = length.to_le_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// Sends `frames` mutated frames to the controller port at `addr`; stops early when the node
/// is lost.
pub fn run(addr: SocketAddr, frames: u64, seed: u64, hang: Duration) -> Result<PortReport> {
    let seeds = seeds()?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let started = Instant::now();
    let mut report = PortReport::default();
    for index in 0..frames {
        let lie = index % LYING_LENGTH_EVERY == LYING_LENGTH_EVERY - 1;
        let frame = mutate(&seeds[rng.gen_range(0..seeds.len())], &mut rng, lie);
        report.frames += 1;
        match exchange(addr, &frame, hang, lie) {
            Ok(Some(true)) => report.answered += 1,
            Ok(Some(false)) => report.closed += 1,
            Ok(None) => report.hangs.push(frame),
            Err(error) => {
                report.lost = Some(format!("frame {index}: {error}"));
                break;
            }
        }
        if (index + 1) % CHECK_EVERY == 0 {
            if let Err(error) = exchange(addr, &seeds[0], hang, false).and_then(|answered| match answered {
                Some(true) => Ok(()),
                other => anyhow::bail!("a valid heartbeat got {other:?}"),
            }) {
                report.lost = Some(format!("after frame {index}: {error}"));
                break;
            }
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Sends `frame` on a new connection: `Some(true)` answered, `Some(false)` closed without an
/// answer, `None` neither within `hang`; an error when the node cannot be reached.
fn exchange(addr: SocketAddr, frame: &[u8], hang: Duration, shut_after: bool) -> Result<Option<bool>> {
    let mut stream = TcpStream::connect_timeout(&addr, hang).context("connecting")?;
    stream.set_read_timeout(Some(hang))?;
    stream.set_write_timeout(Some(hang))?;
    if stream.write_all(frame).is_err() {
        return Ok(Some(false));
    }
    if shut_after {
        let _ = stream.shutdown(Shutdown::Write);
    }
    let mut length = [0u8; 4];
    match stream.read_exact(&mut length) {
        Ok(()) => Ok(Some(true)),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(None),
        Err(_) => Ok(Some(false)),
    }
}
