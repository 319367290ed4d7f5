//! The in-process target: a worker process starts a real broker (one shard, a temporary log
//! directory) and hands frames straight to `handlers::handle` on its shard, no sockets. The
//! broker ends its process on a panic and an allocation failure aborts it, so a supervisor runs
//! the worker, reads from the shared [`Board`] which frame killed it or stopped its heartbeat
//! (a spin), saves that frame, and starts a new worker at the next frame.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use futures::future::{select, Either};
use kafka_protocol::messages::ApiKey;
use laminar_broker::broker::BrokerCtx;
use laminar_broker::config::BrokerConfig;
use laminar_broker::handlers::ConnectionState;
use laminar_broker::handlers::{self, Outcome as Handled};

use crate::board::{now_ms, peak_rss_kib, peak_rss_of, Board};
use crate::mutate::Mutator;
use crate::report::{self, Finding, Outcome, Report};
use crate::seeds;
use crate::waits::Waits;

/// How often a long run tells where it is (on stderr).
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// What an in-process run is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// The `laminar-fuzz` executable (the worker is its hidden `inproc-worker` command).
    pub exe: PathBuf,
    pub frames: u64,
    pub seed: u64,
    /// No answer within this (plus what the request may wait) is a hang.
    pub hang: Duration,
    /// Where crashing and hanging frames are written as hex.
    pub out: PathBuf,
    /// Frames replayed before the generated ones (known crashes and hangs, fixed since).
    pub regressions: Vec<PathBuf>,
}

/// Runs the frames in workers until every one is handled; returns the figures.
pub fn run(options: &Options) -> Result<Report> {
    let started = Instant::now();
    let scratch = tempfile::tempdir().context("creating the board's directory")?;
    let board_path = scratch.path().join("board");
    let board = Board::create(&board_path)?;
    let mut report = Report::default();
    let total = options.regressions.len() as u64 + options.frames;
    let mut from = 0;
    while from < total {
        board.index().store(u64::MAX, Ordering::Release);
        let (status, lines) = run_worker(options, &board_path, &board, from)?;
        // The worker exits without cleaning up (or dies), so its broker's data is removed here.
        let _ = std::fs::remove_dir_all(data_dir(&board_path, from));
        if !matches!(status, WorkerEnd::Finished) && board.index().load(Ordering::Acquire) == u64::MAX {
            bail!("the fuzz worker stopped before its first frame: {status:?}");
        }
        report
            .findings
            .extend(lines.iter().filter_map(|l| parse_finding(l)));
        match status {
            WorkerEnd::Finished => break,
            WorkerEnd::Died(how) => {
                report.findings.push(record_stop(options, &board, "crash", how)?);
                from = board.index().load(Ordering::Acquire) + 1;
            }
            WorkerEnd::Stalled(how) => {
                report.findings.push(record_stop(options, &board, "hang", how)?);
                from = board.index().load(Ordering::Acquire) + 1;
            }
        }
    }
    report.tally = board.tally();
    report.crashes = report.findings.iter().filter(|f| f.kind == "crash").count() as u64;
    report.hangs = report.findings.iter().filter(|f| f.kind == "hang").count() as u64;
    report.peak_rss_kib = board.peak_rss_kib().load(Ordering::Relaxed);
    report.elapsed = started.elapsed();
    Ok(report)
}

#[derive(Debug)]
enum WorkerEnd {
    Finished,
    Died(String),
    Stalled(String),
}

/// Runs one worker from frame `from` until it finishes, dies, or stops beating.
fn run_worker(
    options: &Options,
    board_path: &Path,
    board: &Board,
    from: u64,
) -> Result<(WorkerEnd, Vec<String>)> {
    let mut command = Command::new(&options.exe);
    command
        .arg("inproc-worker")
        .args(["--board", &board_path.display().to_string()])
        .args([
            "--from",
            &from.to_string(),
            "--frames",
            &options.frames.to_string(),
        ])
        .args([
            "--seed",
            &options.seed.to_string(),
            "--hang-ms",
            &options.hang.as_millis().to_string(),
        ])
        .args(["--out", &options.out.display().to_string()]);
    for file in &options.regressions {
        command.args(["--regression", &file.display().to_string()]);
    }
    board.beat();
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the fuzz worker")?;
    let lines = collect_lines(&mut child);
    // A spin shows as a heartbeat that stops; the worker beats while it waits, so the bound is
    // the hang bound plus slack for a slow start (a debug build opening its partitions).
    let stall = options.hang * 2 + Duration::from_secs(10);
    let (started, mut told) = (Instant::now(), Instant::now());
    let end = loop {
        if let Some(status) = child.try_wait()? {
            break if status.success() {
                WorkerEnd::Finished
            } else {
                WorkerEnd::Died(status.to_string())
            };
        }
        board.note_rss(peak_rss_of(&child.id().to_string()));
        let silent_ms = now_ms().saturating_sub(board.heartbeat_ms().load(Ordering::Acquire));
        if silent_ms > stall.as_millis() as u64 {
            let _ = child.kill();
            let _ = child.wait();
            break WorkerEnd::Stalled(format!("no heartbeat for {silent_ms} ms (a spin)"));
        }
        if told.elapsed() >= PROGRESS_EVERY {
            told = Instant::now();
            let index = board.index().load(Ordering::Acquire);
            let rate = index.saturating_sub(from) as f64 / started.elapsed().as_secs_f64();
            eprintln!("laminar-fuzz inproc: at frame {index}, {rate:.0} frames/s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let lines = std::mem::take(&mut *lines.lock().expect("reader thread does not panic"));
    Ok((end, lines))
}

/// The worker's stdout lines, gathered by a thread (findings and its summary line).
fn collect_lines(child: &mut Child) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let stdout = child.stdout.take().expect("stdout is piped");
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            sink.lock().expect("no panics").push(line);
        }
    });
    lines
}

/// The finding for a worker that died or stalled: the frame on the board.
fn record_stop(options: &Options, board: &Board, kind: &'static str, how: String) -> Result<Finding> {
    let frame = board.frame();
    let index = board.index().load(Ordering::Acquire);
    let mutator = Mutator::new(seeds::all()?);
    let (api, version, made) = describe(&mutator, options, index);
    let mut finding = Finding {
        kind,
        api,
        version,
        index,
        how: format!("{how}; {made}"),
        file: None,
    };
    finding.file = Some(report::save_frame(&options.out, &finding, &frame)?);
    Ok(finding)
}

/// The seed and mutations of frame `index` (regressions first, then generated frames).
fn describe(mutator: &Mutator, options: &Options, index: u64) -> (ApiKey, i16, String) {
    let regressions = options.regressions.len() as u64;
    if index < regressions {
        let file = &options.regressions[index as usize];
        let frame = report::read_frame(file).unwrap_or_default();
        let (api, version) = header_of(&frame);
        return (api, version, format!("regression {}", file.display()));
    }
    let mutant = mutator.frame(options.seed, index - regressions);
    let seed = &mutator.seeds()[mutant.seed];
    (seed.api, seed.version, mutant.how.join("+"))
}

/// The api key and version a frame's header names.
pub(crate) fn header_of(frame: &[u8]) -> (ApiKey, i16) {
    let word = |at: usize| {
        frame
            .get(at..at + 2)
            .map_or(-1, |b| i16::from_be_bytes([b[0], b[1]]))
    };
    (ApiKey::try_from(word(0)).unwrap_or(ApiKey::ApiVersions), word(2))
}

/// `FINDING kind api version index how file` lines from a worker.
fn parse_finding(line: &str) -> Option<Finding> {
    let mut parts = line.strip_prefix("FINDING ")?.splitn(6, ' ');
    let kind = match parts.next()? {
        "hang" => "hang",
        _ => "crash",
    };
    let api = ApiKey::try_from(parts.next()?.parse::<i16>().ok()?).ok()?;
    let version = parts.next()?.parse().ok()?;
    let index = parts.next()?.parse().ok()?;
    let how = parts.next()?.to_string();
    let file = parts.next().map(PathBuf::from);
    Some(Finding {
        kind,
        api,
        version,
        index,
        how,
        file,
    })
}

/// The log directory of the worker that starts at frame `from`, beside the board.
fn data_dir(board: &Path, from: u64) -> PathBuf {
    board.with_file_name(format!("broker-{from}"))
}

/// The worker's side: what the supervisor passes on its command line.
#[derive(Debug, Clone)]
pub struct WorkerArgs {
    pub board: PathBuf,
    pub from: u64,
    pub frames: u64,
    pub seed: u64,
    pub hang: Duration,
    pub out: PathBuf,
    pub regressions: Vec<PathBuf>,
}

/// Starts a broker in this process and handles frames `from..` on its shard.
pub fn worker(args: WorkerArgs) -> Result<()> {
    let board = Board::open(&args.board)?;
    board.beat();
    let dir = data_dir(&args.board, args.from);
    let broker = laminar_broker::server::start(broker_config(&dir)?)?;
    let mutator = Mutator::new(seeds::all()?);
    let regressions = args
        .regressions
        .iter()
        .map(|f| report::read_frame(f))
        .collect::<Result<Vec<_>>>()?;
    let done = broker
        .run_on_shard(0, move |ctx| async move {
            prepare(&ctx).await?;
            Fuzzer {
                ctx,
                board,
                args,
                mutator,
                regressions,
                waits: Waits::default(),
            }
            .run()
            .await
        })
        .map_err(|gone| anyhow::anyhow!("{gone}"))?;
    board.note_rss(peak_rss_kib());
    done?;
    // Exit without the broker's orderly shutdown: parked requests may still be waiting.
    std::process::exit(0)
}

fn broker_config(dir: &Path) -> Result<BrokerConfig> {
    let overrides: Vec<String> = [
        format!("log.dirs={}", dir.display()),
        "listeners=PLAINTEXT://127.0.0.1:0".into(),
        "laminar.http.listen=127.0.0.1:0".into(),
        "laminar.cores=1".into(),
        "laminar.fsync=never".into(),
        "offsets.topic.num.partitions=2".into(),
        "group.initial.rebalance.delay.ms=0".into(),
        "log.segment.bytes=1048576".into(),
    ]
    .into();
    let loaded = BrokerConfig::from_properties("", &overrides).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(loaded.config)
}

/// A new connection's state, as if accepted on the first listener.
fn new_connection(ctx: &Rc<BrokerCtx>) -> ConnectionState {
    let listener = laminar_broker::kafka_listener::ListenerId(0);
    let authentication = laminar_broker::authentication::Authentication::for_listener(
        &ctx.state.shared.config,
        listener,
        "fuzz".into(),
    );
    ConnectionState::new(ctx.id(), ctx.shard_count(), authentication)
}

/// Creates the seeds' topics and puts records in every partition, so that fetches, offsets
/// and deletions find data.
async fn prepare(ctx: &Rc<BrokerCtx>) -> Result<()> {
    let order = new_connection(ctx);
    for frame in seeds::preparation()? {
        let handled = handlers::handle(ctx, &order, Bytes::from(frame)).await;
        match handled {
            Ok(Handled::Deferred(answer)) => {
                answer.await.map_err(|e| anyhow::anyhow!("preparing: {e}"))?;
            }
            Ok(_) => {}
            Err(e) => bail!("preparing: {e}"),
        }
    }
    Ok(())
}

struct Fuzzer {
    ctx: Rc<BrokerCtx>,
    board: Board,
    args: WorkerArgs,
    mutator: Mutator,
    regressions: Vec<Vec<u8>>,
    waits: Waits,
}

impl Fuzzer {
    async fn run(mut self) -> Result<()> {
        let mut order = Rc::new(new_connection(&self.ctx));
        let regressions = self.regressions.len() as u64;
        for index in self.args.from..regressions + self.args.frames {
            let (frame, slot, how) = self.frame(index);
            self.board.begin(index, &frame);
            self.board.count(slot, Outcome::Frames);
            let outcome = self.handle(&order, frame.clone()).await;
            if let Some(outcome) = outcome {
                self.board.count(slot, outcome);
            }
            match outcome {
                // A refused request closes its connection, and a stuck one is left behind
                // with it: later frames come as from a new connection.
                Some(Outcome::Closed) | Some(Outcome::Parked) => order = Rc::new(new_connection(&self.ctx)),
                Some(_) => {}
                None => {
                    self.report_hang(index, slot, &how, &frame)?;
                    order = Rc::new(new_connection(&self.ctx));
                }
            }
            if index % 1024 == 0 {
                self.board.note_rss(peak_rss_kib());
            }
        }
        Ok(())
    }

    /// Frame `index`: a regression frame, then generated ones. Its counter slot and its making.
    fn frame(&self, index: u64) -> (Vec<u8>, usize, String) {
        let regressions = self.regressions.len() as u64;
        if index < regressions {
            let frame = self.regressions[index as usize].clone();
            let (api, version) = header_of(&frame);
            return (frame, report::slot(api, version), "regression".into());
        }
        let mutant = self.mutator.frame(self.args.seed, index - regressions);
        let seed = &self.mutator.seeds()[mutant.seed];
        (
            mutant.bytes,
            report::slot(seed.api, seed.version),
            mutant.how.join("+"),
        )
    }

    /// Handles one frame on a task of its own, beating while it waits. `None`: a hang.
    async fn handle(&mut self, order: &Rc<ConnectionState>, frame: Vec<u8>) -> Option<Outcome> {
        let (bound, parks) = crate::waits::deadline(self.args.hang, self.waits.allowed(&frame));
        let started = Instant::now();
        let mut task = glommio::spawn_local(handle_frame(self.ctx.clone(), order.clone(), frame));
        loop {
            let tick = std::pin::pin!(glommio::timer::sleep(Duration::from_millis(50)));
            match select(&mut task, tick).await {
                Either::Left((outcome, _)) => return Some(outcome),
                Either::Right(_) => self.board.beat(),
            }
            if started.elapsed() > bound {
                // Left running, as for a client that moved on.
                task.detach();
                return parks.then_some(Outcome::Parked);
            }
        }
    }

    fn report_hang(&self, index: u64, slot: usize, how: &str, frame: &[u8]) -> Result<()> {
        let api = ApiKey::try_from((slot / report::VERSIONS) as i16).unwrap_or(ApiKey::ApiVersions);
        let version = (slot % report::VERSIONS) as i16;
        let mut finding = Finding {
            kind: "hang",
            api,
            version,
            index,
            how: how.to_string(),
            file: None,
        };
        let file = report::save_frame(&self.args.out, &finding, frame)?;
        finding.file = Some(file.clone());
        println!(
            "FINDING hang {} {version} {index} {how} {}",
            api as i16,
            file.display()
        );
        Ok(())
    }
}

/// What the connection would do with the frame: write an answer, write none, or close.
async fn handle_frame(ctx: Rc<BrokerCtx>, order: Rc<ConnectionState>, frame: Vec<u8>) -> Outcome {
    match handlers::handle(&ctx, &order, Bytes::from(frame)).await {
        Ok(Handled::Respond(_)) | Ok(Handled::RespondChunks(_)) => Outcome::Answered,
        Ok(Handled::NoResponse) => Outcome::Silent,
        Ok(Handled::Deferred(answer)) => match answer.await {
            Ok(Some(_)) => Outcome::Answered,
            Ok(None) => Outcome::Silent,
            Err(_) => Outcome::Closed,
        },
        Err(_) => Outcome::Closed,
    }
}
