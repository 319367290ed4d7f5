//! A cluster id chosen before the first start, as Kafka's `kafka-storage random-uuid` and
//! `format --cluster-id`: every log dir's `meta.properties` names the cluster, the node and the
//! dir itself; a cluster formatted so answers that id; and a node whose log dirs name another
//! cluster or another node exits with a message naming both, having changed nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use kafka_protocol::messages::DescribeClusterRequest;
use laminar_tests::{cli, default_binary, Cluster};

/// What a cluster-mode config needs to load; the ports are never bound by `format`.
const CLUSTER_MODE: [(&str, &str); 3] = [
    ("process.roles", "broker,controller"),
    (
        "controller.quorum.voters",
        "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3",
    ),
    ("listeners", "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:1"),
];

fn random_uuid() -> Result<String> {
    let made = cli::run(&["storage", "random-uuid"], "")?;
    ensure!(made.success, "random-uuid: {}", made.stderr);
    Ok(made.stdout.trim().to_string())
}

/// `laminar storage format --cluster-id` of `log_dirs` with `overrides`.
fn format(log_dirs: &[&Path], cluster_id: &str, overrides: &[(&str, &str)]) -> Result<cli::CliRun> {
    let dirs: Vec<String> = log_dirs.iter().map(|d| d.display().to_string()).collect();
    let mut args = vec![
        "storage".to_string(),
        "format".into(),
        "--cluster-id".into(),
        cluster_id.into(),
        "--override".into(),
        format!("log.dirs={}", dirs.join(",")),
    ];
    for (key, value) in overrides {
        args.extend(["--override".into(), format!("{key}={value}")]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cli::run(&args, "")
}

/// `key=value` lines of a log dir's `meta.properties`.
fn meta_properties(log_dir: &Path) -> Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(log_dir.join("meta.properties"))?;
    let pairs = text.lines().filter_map(|l| l.split_once('='));
    Ok(pairs.map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

#[test]
fn a_cluster_formatted_with_one_id_answers_it_and_every_log_dir_names_itself() -> Result<()> {
    let cluster_id = random_uuid()?;
    ensure!(cluster_id.len() == 22, "Kafka's form: {cluster_id}");
    ensure!(random_uuid()? != cluster_id, "two ids alike");
    let root = tempfile::tempdir()?;
    let log_dirs: Vec<PathBuf> = (1..=3).map(|n| root.path().join(format!("node-{n}"))).collect();
    for (node, dir) in (1..=3).zip(&log_dirs) {
        let node_id = node.to_string();
        let mut overrides = CLUSTER_MODE.to_vec();
        overrides.push(("node.id", &node_id));
        let formatted = format(&[dir], &cluster_id, &overrides)?;
        ensure!(formatted.success, "format node {node}: {}", formatted.stderr);
    }
    let mut cluster = Cluster::start_on_log_dirs(3, 3000, Cluster::node_options(), &log_dirs)?;
    let mut directory_ids = Vec::new();
    for (node, dir) in (1..=3).zip(&log_dirs) {
        let described = cluster
            .connect(node)?
            .request(&DescribeClusterRequest::default(), 0)?;
        ensure!(
            described.cluster_id.as_str() == cluster_id,
            "node {node} answers {}",
            described.cluster_id
        );
        let properties = meta_properties(dir)?;
        ensure!(
            properties.get("cluster.id") == Some(&cluster_id),
            "{properties:?}"
        );
        ensure!(
            properties.get("node.id") == Some(&node.to_string()),
            "{properties:?}"
        );
        directory_ids.push(
            properties
                .get("directory.id")
                .cloned()
                .context("a directory id")?,
        );
    }
    directory_ids.sort();
    directory_ids.dedup();
    ensure!(
        directory_ids.len() == 3,
        "each log dir its own id: {directory_ids:?}"
    );
    Ok(())
}

#[test]
fn a_node_on_log_dirs_of_another_cluster_or_node_exits_naming_both_and_changes_nothing() -> Result<()> {
    let root = tempfile::tempdir()?;
    let (first, second) = (root.path().join("first"), root.path().join("second"));
    let (ours, theirs) = (random_uuid()?, random_uuid()?);
    ensure!(format(&[&first], &ours, &[])?.success);
    ensure!(format(&[&second], &theirs, &[])?.success);
    let both = format!("log.dirs={},{}", first.display(), second.display());
    let before = tree(root.path())?;
    let refused = broker_exit(&[&both])?;
    ensure!(refused.contains(&ours) && refused.contains(&theirs), "{refused}");
    ensure!(
        tree(root.path())? == before,
        "the refused start changed the log dirs"
    );

    // A log dir formatted for node 2 of a cluster, started as node 3.
    let node_two = root.path().join("node-two");
    let mut overrides = CLUSTER_MODE.to_vec();
    overrides.push(("node.id", "2"));
    ensure!(format(&[&node_two], &ours, &overrides)?.success);
    let mut args = vec![
        format!("log.dirs={}", node_two.display()),
        "node.id=3".to_string(),
    ];
    args.extend(CLUSTER_MODE.iter().map(|(k, v)| format!("{k}={v}")));
    let before = tree(root.path())?;
    let refused = broker_exit(&args.iter().map(String::as_str).collect::<Vec<_>>())?;
    ensure!(refused.contains("node 2's, but node.id is 3"), "{refused}");
    ensure!(
        tree(root.path())? == before,
        "the refused start changed the log dir"
    );
    // Formatting it for another cluster is refused too.
    let reformatted = format(&[&node_two], &theirs, &overrides)?;
    ensure!(
        !reformatted.success && reformatted.stderr.contains(&ours),
        "{}",
        reformatted.stderr
    );
    Ok(())
}

/// Every file under `dir` with its bytes.
fn tree(dir: &Path) -> Result<BTreeMap<PathBuf, Vec<u8>>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next)? {
            let path = entry?.path();
            match path.is_dir() {
                true => pending.push(path),
                false => {
                    files.insert(path.clone(), std::fs::read(&path)?);
                }
            }
        }
    }
    Ok(files)
}

/// Starts `laminar broker` with `overrides`; it must exit with an error within 20 s. Its
/// standard error.
fn broker_exit(overrides: &[&str]) -> Result<String> {
    let mut command = Command::new(default_binary());
    command.arg("broker");
    for value in overrides {
        command.args(["--override", value]);
    }
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait()? {
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().context("stderr")?, &mut stderr)?;
            ensure!(!status.success(), "the broker exited cleanly: {stderr}");
            return Ok(stderr);
        }
        if Instant::now() >= deadline {
            child.kill()?;
            bail!("the broker did not refuse its log dirs within 20 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
