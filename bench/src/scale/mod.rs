//! `laminar bench scale`: starts a broker, gives it N partitions, and measures what they cost
//! and how the broker behaves with them (the goals of docs/decisions/0029, "bench scale and its goals").
//! It measures whatever the broker does, failures included: every step is bounded, and a step
//! that fails is reported with its error while the run goes on.

pub(crate) mod broker;
mod connections;
mod goals;
pub(crate) mod partitions;
pub(crate) mod probe;
mod report;
pub(crate) mod requests;
mod step;
mod throughput;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::cli::ScaleArgs;
use broker::{BrokerProcess, TopicSpec};
use partitions::DiskFloor;
use probe::{cpu_seconds, sample_broker, Baseline};
use report::ScaleReport;
use step::{bounded, inline, Step, StepLog};
use throughput::Series;

/// How long the broker is watched idle, for its CPU time.
const IDLE_WINDOW: Duration = Duration::from_secs(5);
/// Partitions written to just before the kill -9 of the crash-recovery step.
const CRASH_PARTITIONS: u64 = 1_000;
/// Descriptors the harness keeps for itself besides the idle connections.
const HARNESS_FDS_RESERVE: u64 = 256;

/// Where a run keeps its files: a temporary directory removed at the end, or one the user
/// named, kept.
pub(crate) enum RunDir {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

impl RunDir {
    /// The empty directory `named` (created if missing), or a new one in the current directory
    /// (on its disk, not a tmpfs) whose name starts with `prefix`.
    pub(crate) fn create(named: Option<&Path>, prefix: &str) -> anyhow::Result<RunDir> {
        match named {
            Some(path) => {
                std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?;
                if std::fs::read_dir(path)?.next().is_some() {
                    bail!("--data-dir {} is not empty", path.display());
                }
                Ok(RunDir::Kept(path.to_path_buf()))
            }
            None => Ok(RunDir::Temporary(
                tempfile::Builder::new()
                    .prefix(prefix)
                    .tempdir_in(std::env::current_dir().context("finding the current directory")?)
                    .context("creating a directory for the run in the current directory")?,
            )),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        match self {
            RunDir::Temporary(dir) => dir.path(),
            RunDir::Kept(path) => path,
        }
    }
}

/// What every step needs to know.
struct Setup {
    args: ScaleArgs,
    dir: RunDir,
    binary: PathBuf,
    topics: Vec<TopicSpec>,
    open_files: laminar_sys::limits::Limit,
    step_limit: Duration,
    /// Topics the broker created (some may have been refused).
    created: Arc<Mutex<Vec<TopicSpec>>>,
}

impl Setup {
    fn prepare(args: ScaleArgs) -> anyhow::Result<Setup> {
        let binary = broker::binary(args.broker_bin.as_deref())?;
        let dir = RunDir::create(args.data_dir.as_deref(), "laminar-scale-")?;
        let open_files =
            laminar_sys::limits::raise_open_files_limit().context("raising the open-file limit")?;
        Ok(Setup {
            topics: partitions::topic_specs("scale", args.partitions, args.partitions_per_topic),
            step_limit: Duration::from_secs(args.step_timeout_s),
            args,
            dir,
            binary,
            open_files,
            created: Arc::default(),
        })
    }

    fn floor(&self) -> DiskFloor {
        DiskFloor {
            dir: self.dir.path().to_path_buf(),
            min_free_bytes: self.args.min_free_mib << 20,
        }
    }

    fn created(&self) -> Vec<TopicSpec> {
        self.created.lock().expect("created topics lock").clone()
    }

    fn created_partitions(&self) -> u64 {
        self.created().iter().map(|t| t.partitions as u64).sum()
    }

    fn settings(&self, broker: &BrokerProcess) -> Value {
        let args = &self.args;
        json!({
            "partitions": args.partitions, "partitions_per_topic": args.partitions_per_topic,
            "topics": self.topics.len(), "connections": args.connections,
            "throughput_mib": args.throughput_mib, "step_timeout_s": args.step_timeout_s,
            "min_free_mib": args.min_free_mib, "run_dir": self.dir.path().display().to_string(),
            "broker_binary": self.binary.display().to_string(), "broker_args": broker.command_line(),
            "open_files_soft_limit": self.open_files.soft, "open_files_hard_limit": self.open_files.hard,
            "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
            "throughput_tries": args.throughput_tries,
            "free_page_reporting_kib": free_page_reporting_kib(),
        })
    }
}

/// `laminar bench scale`.
pub fn run(args: ScaleArgs) -> anyhow::Result<()> {
    let setup = Setup::prepare(args)?;
    let data_dir = setup.dir.path().join("data");
    std::fs::create_dir(&data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
    let mut broker = BrokerProcess::new(&setup.binary, &setup.args.overrides, &data_dir, setup.dir.path())?;
    eprintln!(
        "laminar bench scale: {} partitions in {} topics; broker: {} {}; files under {}",
        setup.args.partitions,
        setup.topics.len(),
        setup.binary.display(),
        broker.command_line().join(" "),
        setup.dir.path().display()
    );
    let settings = setup.settings(&broker);
    let mut steps = Vec::new();
    partition_steps(&setup, &mut broker, &mut steps);
    steps.push(requests_step(&setup, &broker));
    steps.push(connections_step(&setup, &broker));
    restart_steps(&setup, &mut broker, &mut steps);
    let series = throughput_step(&setup, broker, &mut steps);
    let goals = goals::judge(&steps, setup.args.partitions, series.as_deref());
    let report = ScaleReport {
        settings,
        steps,
        series,
        goals,
    };
    report.emit(setup.args.json.as_deref())
}

/// The broker at 0 partitions, creating N, N idle, one record to each, and after it.
fn partition_steps(setup: &Setup, broker: &mut BrokerProcess, steps: &mut Vec<Step>) {
    let mut empty = None;
    steps.push(inline("broker_empty", "broker at 0 partitions".into(), |log| {
        let spawned = broker.spawn()?;
        let ready = broker.wait_ready(spawned, &[], setup.step_limit)?;
        log.put("first_answer_seconds", ready.first_answer.as_secs_f64());
        log.put("ready_seconds", ready.metadata_complete.as_secs_f64());
        empty = Some(sample_broker(log, broker.pid()?, broker.data_dir(), None)?);
        Ok(())
    }));
    let (bootstrap, topics, created) = (broker.bootstrap(), setup.topics.clone(), setup.created.clone());
    let (limit, partitions) = (setup.step_limit, setup.args.partitions);
    let title = format!("create {partitions} partitions in {} topics", topics.len());
    let data_dir = broker.data_dir().to_path_buf();
    steps.push(bounded("create_partitions", title, limit, move |log| {
        let entries = || std::fs::read_dir(&data_dir).map(Iterator::count).unwrap_or(0);
        let before = entries();
        partitions::create_topics(&bootstrap, &topics, limit, log, &created)?;
        if entries() == before {
            log.note("no directory appeared in the data dir: the partitions' directories and files are made on first write, not by CreateTopics");
        }
        Ok(())
    }));
    let created = setup.created_partitions();
    let title = format!("broker with {created} idle partitions");
    let name = ("broker_idle", title);
    steps.push(sample_step(setup, broker, name, empty, created, IdleCpu::Measure));
    let (bootstrap, topics, floor) = (broker.bootstrap(), setup.created(), setup.floor());
    let title = "one 100-byte record to every partition".to_owned();
    steps.push(bounded("produce_every_partition", title, limit, move |log| {
        partitions::produce_one_each(&bootstrap, &topics, u64::MAX, &floor, log)
    }));
    // Per-partition figures are of the partitions that took their record: dividing by those
    // that refused it would hide what a written partition costs.
    let written = steps
        .last()
        .and_then(|s| s.figure("partitions_acked"))
        .unwrap_or(0.0) as u64;
    let title = format!("broker after one record to each partition ({written} took it)");
    let name = ("broker_after_produce", title);
    steps.push(sample_step(setup, broker, name, empty, written, IdleCpu::Skip));
    if written < created {
        let note = format!("per-partition figures divide by the {written} partitions that hold a record, not by all {created}");
        steps.last_mut().expect("pushed above").notes.push(note);
    }
}

/// Whether a sample step also watches the idle broker's CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdleCpu {
    Measure,
    Skip,
}

/// RSS, descriptors and disk, and per partition (of `partitions`) against `empty` (the
/// broker at 0 partitions).
fn sample_step(
    setup: &Setup,
    broker: &BrokerProcess,
    (name, title): (&'static str, String),
    empty: Option<Baseline>,
    partitions: u64,
    idle_cpu: IdleCpu,
) -> Step {
    let pid = broker.pid();
    let data_dir = broker.data_dir().to_path_buf();
    bounded(name, title, setup.step_limit, move |log| {
        let pid = pid?;
        let empty = empty.context("no figures at 0 partitions to compare with")?;
        let now = sample_broker(log, pid, &data_dir, Some((partitions, &empty)))?;
        if (now.disk.files, now.disk.dirs) == (empty.disk.files, empty.disk.dirs) {
            log.note(format!(
                "the data dir holds no file or directory more than at 0 partitions: the {partitions} partitions have none until written"
            ));
        }
        if idle_cpu == IdleCpu::Measure {
            let before = cpu_seconds(pid)?;
            std::thread::sleep(IDLE_WINDOW);
            let used = cpu_seconds(pid)? - before;
            log.put("cpu_seconds_while_idle", used);
            log.put("cpu_share_while_idle", used / IDLE_WINDOW.as_secs_f64());
        }
        Ok(())
    })
}

fn requests_step(setup: &Setup, broker: &BrokerProcess) -> Step {
    let (bootstrap, http) = (broker.bootstrap(), broker.http_addr());
    let topic = setup.created().first().map(|t| t.name.clone());
    let title = format!("requests over {} partitions", setup.created_partitions());
    bounded("requests", title, setup.step_limit, move |log| {
        requests::time_requests(&bootstrap, http, topic.as_deref(), log)
    })
}

fn connections_step(setup: &Setup, broker: &BrokerProcess) -> Step {
    let asked = setup.args.connections;
    let budget = connections::connection_budget(setup.open_files.soft, HARNESS_FDS_RESERVE);
    let count = budget.as_ref().map_or(asked, |budget| asked.min(*budget));
    let (pid, addr) = (broker.pid(), broker.addr());
    let title = format!("{count} idle connections");
    let soft_limit = setup.open_files.soft;
    bounded("idle_connections", title, setup.step_limit, move |log| {
        log.put("connections_asked", asked as f64);
        if count < asked {
            log.note(format!(
                "the harness's open-file limit ({soft_limit}, its hard limit) leaves room for {count} connections, not {asked}: raise the hard limit (ulimit -Hn) to open them all"
            ));
        }
        connections::idle_connections(pid?, addr, count as usize, IDLE_WINDOW, log)
    })
}

/// Clean shutdown, the start after it, and a crash (kill -9) and the start after that.
fn restart_steps(setup: &Setup, broker: &mut BrokerProcess, steps: &mut Vec<Step>) {
    let created = setup.created();
    let partitions = setup.created_partitions();
    let limit = setup.step_limit;
    let title = format!("clean shutdown at {partitions} partitions (SIGTERM to exit)");
    steps.push(inline("clean_shutdown", title, |log| {
        log.put("seconds", broker.terminate(limit)?.as_secs_f64());
        Ok(())
    }));
    let start = |broker: &mut BrokerProcess, log: &StepLog| -> anyhow::Result<()> {
        let spawned = broker.spawn()?;
        let ready = broker.wait_ready(spawned, &created, limit)?;
        log.put("first_answer_seconds", ready.first_answer.as_secs_f64());
        log.put("ready_seconds", ready.metadata_complete.as_secs_f64());
        log.put("rss_bytes", probe::rss_bytes(broker.pid()?)? as f64);
        Ok(())
    };
    let title = "start after clean shutdown (spawn to Metadata listing every partition)".to_owned();
    steps.push(inline("start_after_clean_shutdown", title, |log| {
        start(broker, log)
    }));
    let written_partitions = partitions.min(CRASH_PARTITIONS);
    let title = format!("start after kill -9 (just after writing to {written_partitions} partitions)");
    steps.push(inline("start_after_crash", title, |log| {
        let written = StepLog::default();
        let bootstrap = broker.bootstrap();
        let outcome =
            partitions::produce_one_each(&bootstrap, &created, written_partitions, &setup.floor(), &written);
        if let Err(error) = outcome {
            log.note(format!("writing before the kill: {error:#}"));
        }
        log.put(
            "partitions_written_before_kill",
            written.get("partitions_acked").unwrap_or(0.0),
        );
        broker.kill9()?;
        start(broker, log)
    }));
}

/// The throughput runs, on a fresh broker with an empty data dir (the N-partition one is
/// removed first, to give its disk back).
fn throughput_step(setup: &Setup, mut broker: BrokerProcess, steps: &mut Vec<Step>) -> Option<Vec<Series>> {
    if setup.args.skip_throughput {
        steps.push(Step::skipped(
            "throughput",
            "throughput".into(),
            "--skip-throughput",
        ));
        return None;
    }
    let mut series = None;
    let title = "throughput as the work spreads (fresh broker)".to_owned();
    steps.push(inline("throughput", title, |log| {
        if broker.terminate(setup.step_limit).is_err() {
            broker.kill9()?;
        }
        std::fs::remove_dir_all(broker.data_dir()).context("removing the N-partition data dir")?;
        drop(broker);
        let data_dir = setup.dir.path().join("throughput-data");
        std::fs::create_dir(&data_dir)?;
        let mut fresh =
            BrokerProcess::new(&setup.binary, &setup.args.overrides, &data_dir, setup.dir.path())?;
        let spawned = fresh.spawn()?;
        fresh.wait_ready(spawned, &[], setup.step_limit)?;
        let plan = throughput::Plan {
            bootstrap: fresh.bootstrap(),
            budget_bytes: setup.args.throughput_mib << 20,
            run_limit: setup.step_limit,
            floor: setup.floor(),
            tries: setup.args.throughput_tries as usize,
            broker_pid: fresh.pid()?,
        };
        if let Some(kib) = free_page_reporting_kib().filter(|kib| *kib > 0) {
            log.note(format!(
                "this VM hands freed memory back to its host (free page reporting, {} GiB so far): a run writing into memory freed long ago can be up to 2× slower than the same run just after a deletion (docs/decisions/0008); each figure is the fastest of {} tries, one per round, every point tried once a round",
                kib >> 20,
                setup.args.throughput_tries
            ));
        }
        let runs = throughput::run_all(&plan, log);
        let all = throughput::series(&runs);
        log.put("runs", runs.len() as f64);
        log.put(
            "runs_failed",
            runs.iter().filter(|r| r.mb_per_sec().is_none()).count() as f64,
        );
        log.put(
            "runs_below_goal",
            all.iter().map(Series::short_points).sum::<usize>() as f64,
        );
        log.set_detail(json!(runs
            .iter()
            .map(throughput::Run::to_json)
            .collect::<Vec<_>>()));
        series = Some(all);
        let _ = fresh.terminate(setup.step_limit);
        Ok(())
    }));
    series
}

/// Memory this VM's balloon has reported free to its host so far, if the kernel reports free
/// pages at all.
fn free_page_reporting_kib() -> Option<u64> {
    let text = std::fs::read_to_string("/sys/module/page_reporting/parameters/reported_kib").ok()?;
    text.trim().parse().ok()
}
