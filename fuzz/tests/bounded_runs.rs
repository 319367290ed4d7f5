//! The bounded fuzzing runs of the test suite: every advertised (api, version) gets mutated
//! frames, in-process and against a live broker process, after the regression frames of
//! defects fixed since (fuzz/corpus/regressions). No frame may crash or hang the broker, and the
//! live broker must still answer afterwards. The longer runs are commands (README, Fuzzing).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kafka_protocol::messages::ApiVersionsRequest;
use laminar_fuzz::connection::Security;
use laminar_fuzz::report::{regression_files, Outcome, Report};
use laminar_fuzz::{controller_port, inproc, live};
use laminar_tests::certs::TestCertificates;
use laminar_tests::wire::{create_topic_replicated, partition_view, produce, record_batch, WireConnection};
use laminar_tests::{wait_for, Broker, BrokerOptions, Cluster};

/// Sized to keep both runs together under a minute of a debug build on two cores.
const INPROC_FRAMES: u64 = 100_000;
const LIVE_FRAMES: u64 = 20_000;
/// Frames to one node of a three-node cluster.
const CLUSTER_FRAMES: u64 = 10_000;
/// Frames to a SASL_SSL listener, before and after authentication (a TLS handshake per
/// refused frame before it).
const SASL_SSL_FRAMES: u64 = 1_000;
/// Frames to a controller port (a connection each).
const CONTROLLER_FRAMES: u64 = 20_000;
const HANG: Duration = Duration::from_secs(5);

/// A fuzzed broker's options: client quotas measured over 2 windows of 1 s, so that a mutated
/// AlterClientQuotas that happens to hold the fuzzer back mutes its connection for 2 s at most,
/// well within [`HANG`] (a quota that applies is the broker doing its job, not a hang).
fn fuzzed(options: BrokerOptions) -> BrokerOptions {
    options.with_override("quota.window.num", "2")
}

fn regressions() -> Vec<PathBuf> {
    regression_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/regressions"))
}

/// Neither crashes nor hangs, every advertised (api, version) got frames, and a good share of
/// them were answered (mutations that reach the handlers, not only the decoder).
fn assert_clean(report: &Report, frames: u64) {
    assert_no_findings(report, frames);
    assert_eq!(
        report.tally.missing(),
        vec![],
        "advertised versions without frames"
    );
    let answered = report.tally.total(Outcome::Answered);
    assert!(
        answered * 10 >= frames,
        "only {answered} of {frames} frames answered"
    );
}

#[test]
fn in_process_frames_for_every_api_and_version_neither_crash_nor_hang() {
    let out = tempfile::tempdir().unwrap();
    let options = inproc::Options {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_laminar-fuzz")),
        frames: INPROC_FRAMES,
        seed: 1,
        hang: HANG,
        out: out.path().to_path_buf(),
        regressions: regressions(),
    };
    let report = inproc::run(&options).expect("the in-process run completes");
    println!("{}", report.table("inproc"));
    assert_clean(&report, INPROC_FRAMES);
}

#[test]
fn a_live_broker_survives_frames_for_every_api_and_version_and_still_answers() {
    let mut broker = Broker::start(fuzzed(BrokerOptions::default())).expect("broker starts");
    let out = tempfile::tempdir().unwrap();
    let options = live::Options {
        broker: broker.addr().to_string(),
        frames: LIVE_FRAMES,
        seed: 2,
        hang: HANG,
        out: out.path().to_path_buf(),
        regressions: regressions(),
        check_every: 500,
        broker_pid: broker.pid(),
        cluster_mode: false,
        security: Default::default(),
        prepare: true,
    };
    let report = live::run(&options).expect("the live run completes");
    println!("{}", report.table("live"));
    assert!(
        broker.is_running(),
        "the broker died; stderr:\n{}",
        broker.stderr_tail()
    );
    assert_clean(&report, LIVE_FRAMES);
    let mut connection = WireConnection::connect(broker.addr()).expect("connects after the run");
    let versions = connection
        .request(&ApiVersionsRequest::default(), 3)
        .expect("ApiVersions answered after the run");
    assert_eq!(versions.error_code, 0);
}

/// A node of a three-node cluster gets frames for every API it serves, the cluster-only ones and
/// followers' fetches among them; afterwards every node still runs and the cluster still
/// replicates: an acks=all record on a new topic with three replicas is acknowledged.
#[test]
fn a_cluster_node_survives_frames_for_every_api_and_the_cluster_still_replicates() {
    let options = fuzzed(Cluster::node_options()).with_override("min.insync.replicas", "2");
    let mut cluster = Cluster::start(3, 3000, options).expect("the cluster starts");
    let out = tempfile::tempdir().unwrap();
    let options = live::Options {
        broker: cluster.node(1).addr().to_string(),
        frames: CLUSTER_FRAMES,
        seed: 3,
        hang: HANG,
        out: out.path().to_path_buf(),
        regressions: regressions(),
        check_every: 500,
        broker_pid: cluster.node(1).pid(),
        cluster_mode: true,
        security: Default::default(),
        prepare: true,
    };
    let report = live::run(&options).expect("the live run completes");
    println!("{}", report.table("live, a cluster's node"));
    if report.crashes + report.hangs > 0 {
        eprintln!("node 1's stderr:\n{}", cluster.node(1).stderr_tail());
    }
    for id in 1..=3 {
        let node = cluster.node(id);
        assert!(
            node.is_running(),
            "node {id} died; stderr:\n{}",
            node.stderr_tail()
        );
    }
    assert_clean(&report, CLUSTER_FRAMES);
    let topic = "after-the-frames";
    let code = create_topic_replicated(&mut cluster.connect(2).unwrap(), topic, (1, 3), &[]).unwrap();
    assert_eq!(code, 0, "CreateTopics after the run");
    let mut acknowledged = None;
    wait_for(Duration::from_secs(30), "an acks=all record acknowledged", || {
        let leader = partition_view(&mut cluster.connect(2)?, topic, 0)?.leader;
        let batch = record_batch(&[b"still replicating"], 1)?;
        let answer = produce(&mut cluster.connect(leader)?, topic, 0, batch, -1)?;
        acknowledged = Some(answer.error_code);
        Ok(answer.error_code == 0)
    })
    .unwrap_or_else(|e| panic!("{e}: last answer {acknowledged:?}"));
}

/// A controller port gets mutated frames of the controllers' transport (the requests brokers
/// send their controller); every frame is answered or closed within the bound, the node keeps
/// answering valid heartbeats, and afterwards the quorum still decides: a topic with three
/// replicas is created.
#[test]
fn a_controller_port_survives_mutated_frames_and_the_quorum_still_decides() {
    let mut cluster = Cluster::start(3, 3000, Cluster::node_options()).expect("the cluster starts");
    let port = cluster.controller_ports[1];
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let report = controller_port::run(addr, CONTROLLER_FRAMES, 4, HANG).expect("the run completes");
    println!("controller port: {report:?}");
    assert_eq!(
        report.lost,
        None,
        "node 2's controller; stderr:\n{}",
        cluster.node(2).stderr_tail()
    );
    assert_eq!(
        report.hangs,
        Vec::<Vec<u8>>::new(),
        "frames neither answered nor closed"
    );
    assert_eq!(report.frames, CONTROLLER_FRAMES);
    assert!(
        report.answered * 10 >= CONTROLLER_FRAMES,
        "only {} answered",
        report.answered
    );
    for id in 1..=3 {
        assert!(
            cluster.node(id).is_running(),
            "node {id} died:\n{}",
            cluster.node(id).stderr_tail()
        );
    }
    let code = create_topic_replicated(
        &mut cluster.connect(1).unwrap(),
        "after-the-controller-frames",
        (1, 3),
        &[],
    );
    assert_eq!(code.unwrap(), 0, "CreateTopics after the run");
}

/// Neither crashes nor hangs, and every frame was sent.
fn assert_no_findings(report: &Report, frames: u64) {
    let findings: Vec<String> = report.findings.iter().map(|f| format!("{f:?}")).collect();
    assert_eq!(
        (report.crashes, report.hangs),
        (0, 0),
        "findings:\n{}",
        findings.join("\n")
    );
    assert!(
        report.frames() >= frames,
        "{} frames of {frames}",
        report.frames()
    );
}

/// A SASL_SSL listener gets frames for every API before authentication (where it must refuse
/// all but ApiVersions and the SASL requests, and close) and after a PLAIN login (where every
/// API is served); the broker neither crashes nor hangs, and still answers afterwards.
#[test]
fn a_sasl_ssl_listener_survives_frames_before_and_after_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCertificates::write(dir.path()).expect("test certificates");
    let options = BrokerOptions {
        extra_listeners: vec!["SASL_SSL".to_string()],
        ..BrokerOptions::default()
    }
    .with_override(
        "ssl.keystore.location",
        &certs.server_keystore.display().to_string(),
    )
    .with_override("sasl.enabled.mechanisms", "PLAIN")
    .with_override(
        "listener.name.sasl_ssl.plain.sasl.jaas.config",
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_fuzzer="fuzzer-secret";"#,
    )
    .with_override("connection.failed.authentication.delay.ms", "0");
    let mut broker = Broker::start(fuzzed(options)).expect("broker starts");
    let address = broker.listener_addr("SASL_SSL").expect("the SASL_SSL listener");
    for (login, prepare) in [(None, false), (Some(("fuzzer", "fuzzer-secret")), true)] {
        let out = tempfile::tempdir().unwrap();
        let options = live::Options {
            broker: address.to_string(),
            frames: SASL_SSL_FRAMES,
            seed: 4,
            hang: HANG,
            out: out.path().to_path_buf(),
            regressions: Vec::new(),
            check_every: 500,
            broker_pid: broker.pid(),
            cluster_mode: false,
            security: Security {
                tls_ca: Some(certs.ca.clone()),
                plain_login: login.map(|(user, password)| (user.to_string(), password.to_string())),
            },
            prepare,
        };
        let report = live::run(&options).expect("the live run completes");
        println!(
            "{}",
            report.table(if login.is_some() {
                "after login"
            } else {
                "before login"
            })
        );
        assert_no_findings(&report, SASL_SSL_FRAMES);
        let (answered, closed) = (
            report.tally.total(Outcome::Answered),
            report.tally.total(Outcome::Closed),
        );
        match login {
            // Before authentication nearly everything closes the connection.
            None => assert!(closed * 2 >= SASL_SSL_FRAMES, "only {closed} closed before login"),
            Some(_) => assert!(
                answered * 10 >= SASL_SSL_FRAMES,
                "only {answered} answered after login"
            ),
        }
        assert!(
            broker.is_running(),
            "the broker died; stderr:\n{}",
            broker.stderr_tail()
        );
    }
}
