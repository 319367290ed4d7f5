//! The live target: mutated frames over TCP to a running broker, one at a time, each followed
//! on the same connection by an ApiVersions "ping". Answers come back in request order, so the
//! ping's answer tells that the frame was handled (answered, or silently: acks=0); a closed
//! connection that it was refused; neither within the bound, a hang. Every 50th frame goes with
//! a size prefix that lies, then the write side is shut: the broker must close. When the broker
//! stops accepting connections, the frame sent last killed it.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kafka_protocol::messages::ApiKey;

use crate::connection::{Security, Stream};
use crate::mutate::Mutator;
use crate::report::{self, Finding, Outcome, Report};
use crate::seeds;
use crate::waits::Waits;

/// Correlation id of the ping that follows each frame.
const PING_ID: i32 = 0x5049_4e47;
/// Frames saved when the broker is lost (see `run`).
const SUSPECTS: usize = 3;
/// Every this many frames one is sent with a size prefix that lies.
const RAW_FRAMING_EVERY: u64 = 50;

#[derive(Debug, Clone)]
pub struct Options {
    pub broker: String,
    pub frames: u64,
    pub seed: u64,
    pub hang: Duration,
    pub out: PathBuf,
    pub regressions: Vec<PathBuf>,
    /// A fresh connection must get an ApiVersions answer every this many frames.
    pub check_every: u64,
    /// The broker's process id, for its peak RSS (when it runs on this machine).
    pub broker_pid: Option<u32>,
    /// The broker is a node of a cluster: the APIs only cluster mode serves get frames too.
    pub cluster_mode: bool,
    /// TLS and a SASL login before the frames, for a SASL_SSL or SSL listener.
    pub security: Security,
    /// Create the seeds' topics and fill them first. Off for a SASL listener fuzzed before
    /// authentication, which refuses those requests.
    pub prepare: bool,
}

/// Where the frames go and how each connection there is made.
struct Target {
    addr: SocketAddr,
    bound: Duration,
    security: Security,
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl Target {
    fn of(options: &Options) -> Result<Target> {
        let addr = options
            .broker
            .to_socket_addrs()
            .with_context(|| format!("resolving {}", options.broker))?
            .next()
            .with_context(|| format!("{} resolves to nothing", options.broker))?;
        Ok(Target {
            addr,
            bound: options.hang,
            security: options.security.clone(),
            tls: crate::connection::tls_config(&options.security).context("the TLS trust store")?,
        })
    }

    fn connect(&self) -> std::io::Result<Stream> {
        crate::connection::connect(self.addr, self.bound, (&self.security, self.tls.as_ref()))
    }
}

/// One frame to send, and where it came from.
struct Sent {
    index: u64,
    frame: Vec<u8>,
    api: ApiKey,
    version: i16,
    how: String,
}

/// Sends the frames; stops early when the broker dies or stops answering.
pub fn run(options: &Options) -> Result<Report> {
    let target = Target::of(options)?;
    let started = Instant::now();
    let mutator = Mutator::new(seeds_for(options)?);
    let regressions = options
        .regressions
        .iter()
        .map(|f| report::read_frame(f))
        .collect::<Result<Vec<_>>>()?;
    if options.prepare {
        prepare(&target)?;
    }
    let mut report = Report::default();
    let mut waits = Waits::default();
    let mut connection: Option<Stream> = None;
    // A dying broker may still accept a connection or two while it prints its backtrace, so a
    // crash is blamed on the frame sent last and the two before it are saved beside it.
    let mut recent: VecDeque<Sent> = VecDeque::with_capacity(SUSPECTS);
    let total = regressions.len() as u64 + options.frames;
    for index in 0..total {
        let sent = frame(&mutator, options.seed, &regressions, index);
        let slot = report::slot(sent.api, sent.version);
        if connection.is_none() {
            match target.connect() {
                Ok(stream) => connection = Some(stream),
                Err(e) => {
                    broker_lost(&mut report, options, &recent, &e.to_string())?;
                    break;
                }
            }
        }
        report.tally.add(slot, Outcome::Frames);
        let allowed = waits.allowed(&sent.frame);
        let stream = connection.as_mut().expect("connected above");
        let outcome = if index % RAW_FRAMING_EVERY == RAW_FRAMING_EVERY - 1 {
            connection_after_lying_prefix(stream, &sent.frame, options.hang)
        } else {
            exchange(stream, &sent.frame, options.hang, allowed)
        };
        match outcome {
            Some(outcome @ (Outcome::Answered | Outcome::Silent)) => report.tally.add(slot, outcome),
            Some(outcome) => {
                report.tally.add(slot, outcome);
                connection = None;
            }
            None => {
                record(&mut report, options, "hang", &sent, "no answer within the bound")?;
                connection = None;
            }
        }
        if recent.len() == SUSPECTS {
            recent.pop_front();
        }
        recent.push_back(sent);
        if (index + 1) % options.check_every == 0 || index + 1 == total {
            if let Err(e) = health_check(&target) {
                broker_lost(&mut report, options, &recent, &e.to_string())?;
                break;
            }
        }
    }
    report.crashes = report.findings.iter().filter(|f| f.kind == "crash").count() as u64;
    report.hangs = report.findings.iter().filter(|f| f.kind == "hang").count() as u64;
    report.elapsed = started.elapsed();
    if let Some(pid) = options.broker_pid {
        report.peak_rss_kib = crate::board::peak_rss_of(&pid.to_string());
    }
    Ok(report)
}

/// Every seed a single node's APIs give, and a cluster node's own when the target is one.
fn seeds_for(options: &Options) -> Result<Vec<seeds::Seed>> {
    let mut all = seeds::all()?;
    if options.cluster_mode {
        all.extend(seeds::cluster_mode()?);
    }
    Ok(all)
}

fn frame(mutator: &Mutator, seed: u64, regressions: &[Vec<u8>], index: u64) -> Sent {
    if let Some(frame) = regressions.get(index as usize) {
        let (api, version) = crate::inproc::header_of(frame);
        return Sent {
            index,
            frame: frame.clone(),
            api,
            version,
            how: "regression".into(),
        };
    }
    let mutant = mutator.frame(seed, index - regressions.len() as u64);
    let seed = &mutator.seeds()[mutant.seed];
    Sent {
        index,
        frame: mutant.bytes,
        api: seed.api,
        version: seed.version,
        how: mutant.how.join("+"),
    }
}

/// The broker refused a connection or stopped answering: a crash (refused) or a hang, blamed
/// on the frame sent last; the frames before it are saved as `suspect-*` files.
fn broker_lost(report: &mut Report, options: &Options, recent: &VecDeque<Sent>, why: &str) -> Result<()> {
    let kind = if why.contains("refused") { "crash" } else { "hang" };
    let Some(last) = recent.back() else {
        anyhow::bail!("the broker at {} cannot be reached: {why}", options.broker);
    };
    for sent in recent.iter().take(recent.len() - 1) {
        let suspect = Finding {
            kind: "suspect",
            api: sent.api,
            version: sent.version,
            index: sent.index,
            how: sent.how.clone(),
            file: None,
        };
        report::save_frame(&options.out, &suspect, &sent.frame)?;
    }
    record(report, options, kind, last, why)
}

fn record(report: &mut Report, options: &Options, kind: &'static str, sent: &Sent, why: &str) -> Result<()> {
    let mut finding = Finding {
        kind,
        api: sent.api,
        version: sent.version,
        index: sent.index,
        how: format!("{}; {why}", sent.how),
        file: None,
    };
    finding.file = Some(report::save_frame(&options.out, &finding, &sent.frame)?);
    report.findings.push(finding);
    Ok(())
}

/// Sends the frame and a ping; waits for the ping's answer. `None`: a hang.
fn exchange(stream: &mut Stream, frame: &[u8], hang: Duration, allowed: Duration) -> Option<Outcome> {
    let mut wire = Vec::with_capacity(frame.len() + 64);
    wire.extend_from_slice(&(frame.len() as i32).to_be_bytes());
    wire.extend_from_slice(frame);
    wire.extend_from_slice(&ping());
    if stream.write_all(&wire).is_err() {
        return Some(Outcome::Closed);
    }
    let (bound, parks) = crate::waits::deadline(hang, allowed);
    let deadline = Instant::now() + bound;
    let mut answers = 0;
    loop {
        match read_frame(stream, deadline) {
            Got::Frame(answer) if answer.get(..4) == Some(&PING_ID.to_be_bytes()[..]) => {
                return Some(if answers > 0 {
                    Outcome::Answered
                } else {
                    Outcome::Silent
                });
            }
            Got::Frame(_) => answers += 1,
            Got::Closed => return Some(Outcome::Closed),
            Got::TimedOut => return parks.then_some(Outcome::Parked),
        }
    }
}

/// Sends the frame behind a size prefix that lies, then shuts the write side: whatever the
/// broker makes of it, it must close the connection within the bound.
fn connection_after_lying_prefix(stream: &mut Stream, frame: &[u8], hang: Duration) -> Option<Outcome> {
    let len = frame.len() as i64;
    let lies = [
        len + 1,
        len + 1000,
        len - 1,
        -1,
        i64::from(i32::MIN),
        0,
        0x7fff_ffff,
    ];
    let lie = lies[frame.len() % lies.len()] as i32;
    let mut wire = lie.to_be_bytes().to_vec();
    wire.extend_from_slice(frame);
    if stream.write_all(&wire).is_err() || stream.shutdown_write().is_err() {
        return Some(Outcome::Closed);
    }
    let deadline = Instant::now() + hang;
    loop {
        match read_frame(stream, deadline) {
            Got::Frame(_) => {}
            Got::Closed => return Some(Outcome::Closed),
            Got::TimedOut => return None,
        }
    }
}

/// ApiVersions v0 with [`PING_ID`], size prefix included.
fn ping() -> Vec<u8> {
    let header = seeds::encode_header(ApiKey::ApiVersions, 0, PING_ID).expect("a v0 header encodes");
    let mut wire = (header.len() as i32).to_be_bytes().to_vec();
    wire.extend_from_slice(&header);
    wire
}

/// Sends the valid frames that create the seeds' topics and fill their partitions (answers
/// such as "topic exists" are fine: the broker may have served a run before).
fn prepare(target: &Target) -> Result<()> {
    let mut stream = target.connect().context("connecting to prepare the topics")?;
    for frame in seeds::preparation()? {
        if exchange(&mut stream, &frame, target.bound, Duration::ZERO) != Some(Outcome::Answered) {
            anyhow::bail!("the broker did not answer a valid preparation request");
        }
    }
    Ok(())
}

/// A fresh connection gets an answer to ApiVersions within the bound.
fn health_check(target: &Target) -> Result<()> {
    let (mut stream, bound) = (target.connect().context("connecting")?, target.bound);
    stream.write_all(&ping()).context("sending ApiVersions")?;
    match read_frame(&mut stream, Instant::now() + bound) {
        Got::Frame(answer) if answer.get(..4) == Some(&PING_ID.to_be_bytes()[..]) => Ok(()),
        Got::Frame(_) => anyhow::bail!("ApiVersions answered with another correlation id"),
        Got::Closed => anyhow::bail!("connection closed before the ApiVersions answer"),
        Got::TimedOut => anyhow::bail!("no ApiVersions answer within {bound:?}"),
    }
}

enum Got {
    Frame(Vec<u8>),
    Closed,
    TimedOut,
}

/// Reads one response frame (without its size prefix) before `deadline`.
fn read_frame(stream: &mut Stream, deadline: Instant) -> Got {
    let mut prefix = [0u8; 4];
    if let Some(end) = read_exact_by(stream, &mut prefix, deadline) {
        return end;
    }
    let size = i32::from_be_bytes(prefix).max(0) as usize;
    let mut body = vec![0u8; size];
    match read_exact_by(stream, &mut body, deadline) {
        Some(end) => end,
        None => Got::Frame(body),
    }
}

/// Fills `buf`; `Some` when the stream closed or the deadline passed first.
fn read_exact_by(stream: &mut Stream, buf: &mut [u8], deadline: Instant) -> Option<Got> {
    let mut filled = 0;
    while filled < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Some(Got::TimedOut);
        }
        stream.set_read_timeout(Some(left)).ok()?;
        match stream.read(&mut buf[filled..]) {
            Ok(0) => return Some(Got::Closed),
            Ok(n) => filled += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Some(Got::Closed),
        }
    }
    None
}
