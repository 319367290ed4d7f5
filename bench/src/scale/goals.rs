//! The goals of one broker serving 100 000 partitions (docs/decisions/0029), each read off one figure
//! of one step. Nothing here is asserted: the table says met or not met, the JSON says the
//! same, and a goal whose step did not finish is not met.

use serde_json::{json, Value};

use super::step::{Status, Step};
use super::throughput::{Series, RATIO_GOAL};

/// Which way a figure must lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// The figure may not exceed the limit.
    AtMost,
    /// The figure may not fall below the limit.
    AtLeast,
}

/// One goal and what the run measured for it.
#[derive(Debug, Clone)]
pub struct Goal {
    /// The goal in words, with its limit.
    pub text: String,
    /// Step and figure it reads.
    pub step: &'static str,
    /// Key of the figure.
    pub figure: &'static str,
    /// The limit.
    pub limit: f64,
    /// Which way.
    pub bound: Bound,
    /// The figure, if the step measured it.
    pub value: Option<f64>,
    /// Met, not met, or unknown (no figure).
    pub met: Option<bool>,
    /// Whether the step that measured the figure finished (a figure of a step that did not
    /// meets nothing, whatever its value).
    pub step_finished: bool,
}

impl Goal {
    /// The goal in the `--json` document.
    pub fn to_json(&self) -> Value {
        let bound = match self.bound {
            Bound::AtMost => "at_most",
            Bound::AtLeast => "at_least",
        };
        json!({"goal": self.text, "step": self.step, "figure": self.figure, "limit": self.limit,
               "bound": bound, "value": self.value, "met": self.met,
               "step_finished": self.step_finished})
    }
}

/// The start-up goal at `partitions`: 2 s up to 10 000, 10 s from 100 000, and the
/// straight line between them.
pub fn start_goal_seconds(partitions: u32) -> f64 {
    let n = f64::from(partitions);
    if n <= 10_000.0 {
        2.0
    } else if n >= 100_000.0 {
        10.0
    } else {
        2.0 + 8.0 * (n - 10_000.0) / 90_000.0
    }
}

fn goal(
    steps: &[Step],
    text: String,
    (step, figure): (&'static str, &'static str),
    bound: Bound,
    limit: f64,
) -> Goal {
    let found = steps.iter().find(|s| s.name == step);
    let value = found.and_then(|s| s.figure(figure));
    let finished = found.is_some_and(|s| s.status == Status::Ok);
    let met = value.map(|value| {
        finished
            && match bound {
                Bound::AtMost => value <= limit,
                Bound::AtLeast => value >= limit,
            }
    });
    Goal {
        text,
        step,
        figure,
        limit,
        bound,
        value,
        met,
        step_finished: finished,
    }
}

/// The goals with a fixed limit: words, step, figure, bound, limit.
const FIXED_GOALS: [(&str, &str, &str, Bound, f64); 8] = [
    (
        "≤ 16 KiB broker memory per idle partition (created, never written)",
        "broker_idle",
        "rss_bytes_per_partition",
        Bound::AtMost,
        16.0 * 1024.0,
    ),
    (
        "≤ 16 KiB broker memory per idle partition (written once)",
        "broker_after_produce",
        "rss_bytes_per_partition",
        Bound::AtMost,
        16.0 * 1024.0,
    ),
    (
        "creation of 100 000 partitions in < 10 s: ≥ 10 000 partitions/s",
        "create_partitions",
        "partitions_per_sec",
        Bound::AtLeast,
        10_000.0,
    ),
    (
        "every partition in use is served (one record to each: none refused)",
        "produce_every_partition",
        "partitions_refused",
        Bound::AtMost,
        0.0,
    ),
    (
        "a tiny partition reserves no disk blocks ahead (< 4 KiB a partition past its data)",
        "broker_after_produce",
        "disk_reserved_ahead_bytes_per_partition",
        Bound::AtMost,
        4095.0,
    ),
    (
        "clean shutdown ≤ 5 s (the goal at 100 000)",
        "clean_shutdown",
        "seconds",
        Bound::AtMost,
        5.0,
    ),
    (
        "≤ 8 KiB broker memory per idle connection",
        "idle_connections",
        "rss_bytes_per_connection",
        Bound::AtMost,
        8.0 * 1024.0,
    ),
    (
        "idle connections cost no CPU (≤ 1 % of a core added while they idle)",
        "idle_connections",
        "cpu_share_added_by_connections",
        Bound::AtMost,
        0.01,
    ),
];

/// Every goal the run can judge, for a run of `partitions`; the throughput goal only when
/// the throughput runs were made.
pub fn judge(steps: &[Step], partitions: u32, series: Option<&[Series]>) -> Vec<Goal> {
    let mut goals: Vec<Goal> = FIXED_GOALS
        .iter()
        .map(|&(text, step, figure, bound, limit)| goal(steps, text.to_owned(), (step, figure), bound, limit))
        .collect();
    let start = start_goal_seconds(partitions);
    let text = format!("start after clean shutdown ≤ {start:.1} s at {partitions} partitions (2 s at 10 000, 10 s at 100 000)");
    let figure = ("start_after_clean_shutdown", "ready_seconds");
    goals.insert(5, goal(steps, text, figure, Bound::AtMost, start));
    if let Some(series) = series {
        let short: usize = series.iter().map(Series::short_points).sum();
        let text = format!("throughput within 20 % of the best of its series (runs below {RATIO_GOAL} of it, or failed: none)");
        let mut throughput = goal(steps, text, ("throughput", "runs_below_goal"), Bound::AtMost, 0.0);
        throughput.value = Some(short as f64);
        throughput.met = Some(short == 0);
        throughput.step_finished = true;
        goals.push(throughput);
    }
    goals
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &'static str, status: Status, figures: Vec<(&'static str, f64)>) -> Step {
        let mut step = Step::skipped(name, name.into(), "");
        step.status = status;
        step.figures = figures;
        step
    }

    #[test]
    fn a_goal_is_met_only_by_a_finished_step_within_its_limit() {
        let steps = vec![
            step(
                "broker_idle",
                Status::Ok,
                vec![("rss_bytes_per_partition", 9000.0)],
            ),
            step(
                "create_partitions",
                Status::TimedOut,
                vec![("partitions_per_sec", 50_000.0)],
            ),
            step("clean_shutdown", Status::Ok, vec![("seconds", 8.3)]),
        ];
        let goals = judge(&steps, 10_000, None);
        let met = |figure: &str| goals.iter().find(|g| g.figure == figure).expect("a goal").met;
        assert_eq!(met("rss_bytes_per_partition"), Some(true));
        assert_eq!(met("partitions_per_sec"), Some(false), "timed out: not met");
        assert_eq!(met("seconds"), Some(false));
        assert_eq!(met("rss_bytes_per_connection"), None, "no figure");
        assert_eq!(start_goal_seconds(10_000), 2.0);
        assert_eq!(start_goal_seconds(55_000), 6.0);
        assert_eq!(start_goal_seconds(200_000), 10.0);
    }
}
