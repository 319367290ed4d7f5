//! The live progress line on a terminal: records/s, MB/s and p99 so far, once a second.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::stats::Progress;

/// Prints progress to stderr until dropped; prints nothing when stderr is not a terminal.
pub struct ProgressLine {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ProgressLine {
    /// Starts printing `label` lines about `progress`.
    pub fn start(label: &'static str, progress: Vec<(&'static str, Arc<Progress>)>) -> ProgressLine {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::io::stderr().is_terminal().then(|| {
            let stop = stop.clone();
            std::thread::spawn(move || print_until(label, &progress, &stop))
        });
        ProgressLine { stop, thread }
    }
}

fn print_until(label: &str, progress: &[(&str, Arc<Progress>)], stop: &AtomicBool) {
    let started = Instant::now();
    let mut last: Vec<(u64, u64)> = vec![(0, 0); progress.len()];
    let mut last_at = started;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        if last_at.elapsed() < Duration::from_secs(1) {
            continue;
        }
        let seconds = last_at.elapsed().as_secs_f64();
        last_at = Instant::now();
        let mut line = format!("\r{label} {:>5.0}s", started.elapsed().as_secs_f64());
        for ((name, progress), last) in progress.iter().zip(last.iter_mut()) {
            let (records, bytes, p99_us) = progress.snapshot();
            line.push_str(&format!(
                " | {name}: {:.0} rec/s, {:.1} MB/s, p99 {:.2} ms",
                (records - last.0) as f64 / seconds,
                (bytes - last.1) as f64 / 1e6 / seconds,
                p99_us as f64 / 1e3
            ));
            *last = (records, bytes);
        }
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "{line}\x1b[K");
        let _ = stderr.flush();
    }
    let _ = writeln!(std::io::stderr());
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
