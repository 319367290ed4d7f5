//! One measured step of `laminar bench scale`: its figures, whether it finished, and in how
//! long. A step that fails or overruns its time is reported with what it measured until then,
//! and the run goes on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It measured everything it set out to.
    Ok,
    /// It stopped on an error (its figures are what it measured before).
    Failed,
    /// It did not finish within its time; it was told to stop.
    TimedOut,
    /// Not run (`--skip-throughput`).
    Skipped,
}

impl Status {
    /// The word in the table and the JSON.
    pub fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::TimedOut => "timed out",
            Status::Skipped => "skipped",
        }
    }
}

/// What a step measures as it goes, shared with the thread that runs it so that a step that
/// times out still reports what it had. Shared across threads.
#[derive(Debug, Clone, Default)]
pub struct StepLog {
    figures: Arc<Mutex<Vec<(&'static str, f64)>>>,
    notes: Arc<Mutex<Vec<String>>>,
    detail: Arc<Mutex<Option<Value>>>,
    cancel: Arc<AtomicBool>,
}

impl StepLog {
    /// Records a figure; its key's last word is its unit (`_bytes`, `_seconds`, `_ms`, …).
    pub fn put(&self, key: &'static str, value: f64) {
        let mut figures = self.figures.lock().expect("step log lock");
        match figures.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => figures.push((key, value)),
        }
    }

    /// A figure recorded earlier.
    pub fn get(&self, key: &str) -> Option<f64> {
        let figures = self.figures.lock().expect("step log lock");
        figures.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// Adds a line of explanation (a limit that shortened the step, what was skipped).
    pub fn note(&self, text: impl Into<String>) {
        self.notes.lock().expect("step log lock").push(text.into());
    }

    /// Structured results too rich for figures (the throughput runs).
    pub fn set_detail(&self, detail: Value) {
        *self.detail.lock().expect("step log lock") = Some(detail);
    }

    /// The flag a step's loops check: set when the step has overrun its time.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        self.cancel.clone()
    }

    /// Whether the step has been told to stop.
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// A finished step.
#[derive(Debug, Clone)]
pub struct Step {
    /// Key in the JSON (`broker_idle`, …).
    pub name: &'static str,
    /// What the table calls it.
    pub title: String,
    /// How it ended.
    pub status: Status,
    /// Wall time of the whole step.
    pub seconds: f64,
    /// `(key, value)`, in the order measured.
    pub figures: Vec<(&'static str, f64)>,
    /// Why it failed or timed out.
    pub error: Option<String>,
    /// Lines of explanation.
    pub notes: Vec<String>,
    /// Structured results, if any.
    pub detail: Option<Value>,
}

impl Step {
    fn from_log(name: &'static str, title: String, log: &StepLog, started: Instant) -> Step {
        Step {
            name,
            title,
            status: Status::Ok,
            seconds: started.elapsed().as_secs_f64(),
            figures: log.figures.lock().expect("step log lock").clone(),
            error: None,
            notes: log.notes.lock().expect("step log lock").clone(),
            detail: log.detail.lock().expect("step log lock").clone(),
        }
    }

    /// A step not run.
    pub fn skipped(name: &'static str, title: String, why: &str) -> Step {
        let log = StepLog::default();
        log.note(why);
        Step {
            status: Status::Skipped,
            ..Step::from_log(name, title, &log, Instant::now())
        }
    }

    /// A figure of this step.
    pub fn figure(&self, key: &str) -> Option<f64> {
        self.figures.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// The step in the `--json` document.
    pub fn to_json(&self) -> Value {
        let figures: Map<String, Value> = self
            .figures
            .iter()
            .map(|(key, value)| ((*key).to_owned(), json!(value)))
            .collect();
        let mut step = json!({
            "name": self.name, "title": self.title, "status": self.status.word(),
            "seconds": self.seconds, "figures": figures, "error": self.error, "notes": self.notes,
        });
        if let Some(detail) = &self.detail {
            step["detail"] = detail.clone();
        }
        step
    }
}

/// Runs `work` on the calling thread (steps that start or stop the broker: the broker dies
/// with the thread that spawned it). `work` bounds its own waits.
pub fn inline(name: &'static str, title: String, work: impl FnOnce(&StepLog) -> anyhow::Result<()>) -> Step {
    announce(&title);
    let log = StepLog::default();
    let started = Instant::now();
    let outcome = work(&log);
    finish(Step::from_log(name, title, &log, started), outcome)
}

/// Runs `work` on a thread of its own for at most `limit`; past it the step is reported as
/// timed out with what it measured so far, told to stop (its loops check
/// [`StepLog::cancelled`]), and left to wind down while the run goes on.
pub fn bounded(
    name: &'static str,
    title: String,
    limit: Duration,
    work: impl FnOnce(&StepLog) -> anyhow::Result<()> + Send + 'static,
) -> Step {
    announce(&title);
    let log = StepLog::default();
    let started = Instant::now();
    let (done, outcome) = mpsc::channel();
    let thread_log = log.clone();
    std::thread::spawn(move || {
        let _ = done.send(work(&thread_log));
    });
    match outcome.recv_timeout(limit) {
        Ok(outcome) => finish(Step::from_log(name, title, &log, started), outcome),
        Err(_) => {
            log.cancel.store(true, Ordering::Relaxed);
            let step = Step {
                status: Status::TimedOut,
                error: Some(format!("did not finish within {} s", limit.as_secs())),
                ..Step::from_log(name, title, &log, started)
            };
            report_progress(&step);
            step
        }
    }
}

fn announce(title: &str) {
    eprintln!("laminar bench scale: {title}…");
}

fn finish(step: Step, outcome: anyhow::Result<()>) -> Step {
    let step = match outcome {
        Ok(()) => step,
        Err(error) => Step {
            status: Status::Failed,
            error: Some(format!("{error:#}")),
            ..step
        },
    };
    report_progress(&step);
    step
}

/// One line on stderr as each step ends, so a long run shows where it is.
fn report_progress(step: &Step) {
    let why = step
        .error
        .as_deref()
        .and_then(|e| e.lines().next())
        .unwrap_or_default();
    eprintln!("    {} in {:.2} s {why}", step.status.word(), step.seconds);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_that_overruns_keeps_its_figures_and_is_told_to_stop() {
        let (stopped, saw_stop) = mpsc::channel();
        let step = bounded("slow", "slow".into(), Duration::from_millis(100), move |log| {
            log.put("done_count", 1.0);
            while !log.cancelled() {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = stopped.send(());
            Ok(())
        });
        assert_eq!(step.status, Status::TimedOut);
        assert_eq!(step.figure("done_count"), Some(1.0));
        saw_stop
            .recv_timeout(Duration::from_secs(5))
            .expect("the step saw the cancel flag");
    }

    #[test]
    fn a_failed_step_keeps_its_figures_and_error() {
        let step = bounded("bad", "bad".into(), Duration::from_secs(5), |log| {
            log.put("rss_bytes", 5.0);
            anyhow::bail!("broken")
        });
        assert_eq!(step.status, Status::Failed);
        assert_eq!(step.figure("rss_bytes"), Some(5.0));
        assert_eq!(step.error.as_deref(), Some("broken"));
        let json = step.to_json();
        assert_eq!(json["status"], "failed");
        assert_eq!(json["figures"]["rss_bytes"], 5.0);
        let ok = inline("fine", "fine".into(), |log| {
            log.put("fds", 3.0);
            Ok(())
        });
        assert_eq!((ok.status, ok.figure("fds")), (Status::Ok, Some(3.0)));
    }
}
