//! Progress of long CLI operations (deleting many topics, committing offsets over many
//! partitions): one line on stderr, redrawn in place, only when stderr is a terminal. In scripts
//! and pipes nothing is drawn, so their output stays what the command prints on stdout.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Least time between two redraws (a terminal does not need more, and a fast loop stays fast).
const REDRAW_EVERY: Duration = Duration::from_millis(100);

/// A `label: done/total` line on a terminal; inert otherwise.
pub struct Progress {
    label: String,
    total: usize,
    done: usize,
    started: Instant,
    drawn_at: Option<Instant>,
    on_terminal: bool,
}

impl Progress {
    pub fn new(label: impl Into<String>, total: usize) -> Progress {
        Progress {
            label: label.into(),
            total,
            done: 0,
            started: Instant::now(),
            drawn_at: None,
            on_terminal: std::io::stderr().is_terminal(),
        }
    }

    /// `count` more units done.
    pub fn advance(&mut self, count: usize) {
        self.done = (self.done + count).min(self.total);
        if !self.on_terminal {
            return;
        }
        let due = self.drawn_at.is_none_or(|at| at.elapsed() >= REDRAW_EVERY);
        if due || self.done == self.total {
            self.draw();
        }
    }

    fn draw(&mut self) {
        let seconds = self.started.elapsed().as_secs_f64();
        // \r and "erase to end of line": the line is redrawn in place.
        eprint!(
            "\r{}: {}/{} ({seconds:.1} s)\x1b[K",
            self.label, self.done, self.total
        );
        let _ = std::io::stderr().flush();
        self.drawn_at = Some(Instant::now());
    }

    /// Clears the line (it is drawn again on the next step), so that what the command prints
    /// meanwhile starts on a clean one.
    pub fn clear(&mut self) {
        if self.on_terminal && self.drawn_at.is_some() {
            eprint!("\r\x1b[K");
            let _ = std::io::stderr().flush();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}
