//! The bounded fuzzing runs of the test suite: every advertised (api, version) gets mutated
//! frames, in-process and against a live broker process, after the regression frames of
//! defects fixed since (fuzz/corpus/regressions). No frame may crash or hang the broker, and the
//! live broker must still answer afterwards. The longer runs are commands (README, Fuzzing).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kafka_protocol::messages::ApiVersionsRequest;
use laminar_fuzz::report::{regression_files, Outcome, Report};
use laminar_fuzz::{inproc, live};
use laminar_tests::wire::WireConnection;
use laminar_tests::{Broker, BrokerOptions};

/// Sized to keep both runs together under a minute of a debug build on two cores.
const INPROC_FRAMES: u64 = 100_000;
const LIVE_FRAMES: u64 = 20_000;
const HANG: Duration = Duration::from_secs(5);

fn regressions() -> Vec<PathBuf> {
    regression_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/regressions"))
}

/// Neither crashes nor hangs, every advertised (api, version) got frames, and a good share of
/// them were answered (mutations that reach the handlers, not only the decoder).
fn assert_clean(report: &Report, frames: u64) {
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
    let mut broker = Broker::start(BrokerOptions::default()).expect("broker starts");
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
