//! The scale run's results: the table printed, and the `--json` document.

use std::path::Path;

use anyhow::Context;
use serde_json::{json, Value};

use super::goals::Goal;
use super::step::{Status, Step};
use super::throughput::{Series, RATIO_GOAL};

/// Everything a scale run produced.
pub struct ScaleReport {
    /// The arguments and the machine, for the record.
    pub settings: Value,
    /// The steps, in the order run.
    pub steps: Vec<Step>,
    /// The throughput series, when they were run.
    pub series: Option<Vec<Series>>,
    /// The goals against the figures.
    pub goals: Vec<Goal>,
}

/// A figure in words; its key's last words say its unit.
pub fn format_figure(key: &str, value: f64) -> String {
    if key.contains("bytes") {
        format_bytes(value)
    } else if key.contains("seconds") {
        format!("{value:.3} s")
    } else if key.ends_with("_ms_median") {
        format!("{value:.2} ms")
    } else if key.ends_with("mb_per_sec") {
        format!("{value:.1} MB/s")
    } else if key.ends_with("_per_sec") {
        format!("{value:.0}/s")
    } else if key.contains("share") {
        format!("{:.2} %", value * 100.0)
    } else if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

fn format_bytes(value: f64) -> String {
    let size = value.abs();
    if size >= f64::from(1u32 << 30) {
        format!("{:.2} GiB", value / f64::from(1u32 << 30))
    } else if size >= f64::from(1u32 << 20) {
        format!("{:.1} MiB", value / f64::from(1u32 << 20))
    } else if size >= 1024.0 {
        format!("{:.1} KiB", value / 1024.0)
    } else {
        format!("{value:.0} B")
    }
}

/// The lines printed for one step: a heading, its figures, its notes and error.
pub fn step_lines(step: &Step) -> Vec<String> {
    let mut lines = vec![format!(
        "{:<9} {:>9.2} s  {}",
        step.status.word(),
        step.seconds,
        step.title
    )];
    for (key, value) in &step.figures {
        lines.push(format!("    {key:<44} {}", format_figure(key, *value)));
    }
    for note in &step.notes {
        lines.push(format!("    note: {note}"));
    }
    if let Some(error) = &step.error {
        for (index, line) in error.lines().enumerate() {
            let label = if index == 0 { "error:" } else { "      " };
            lines.push(format!("    {label} {line}"));
        }
    }
    lines
}

fn goal_lines(goals: &[Goal]) -> Vec<String> {
    let mut lines = vec![format!(
        "{:<90} {:>12}  verdict",
        "goal (decision 0029)", "figure"
    )];
    for goal in goals {
        let figure = goal
            .value
            .map_or("—".to_owned(), |v| format_figure(goal.figure, v));
        let verdict = match (goal.met, goal.step_finished) {
            (Some(true), _) => "met",
            (Some(false), true) => "not met",
            (Some(false), false) => "not met (its step did not finish)",
            (None, _) => "unknown (no figure)",
        };
        lines.push(format!("{:<90} {figure:>12}  {verdict}", goal.text));
    }
    lines
}

fn series_lines(series: &Series) -> Vec<String> {
    let mut lines = vec![format!("{} — by {}", series.title, series.axis)];
    for point in &series.points {
        let line = match (point.mb_per_sec, point.ratio_to_best) {
            (Some(mb), Some(ratio)) => {
                let flag = if ratio < RATIO_GOAL {
                    "below 0.8 of the best"
                } else {
                    ""
                };
                let tries: Vec<String> = point
                    .tries_mb_per_sec
                    .iter()
                    .map(|t| t.map_or("failed".to_owned(), |mb| format!("{mb:.0}")))
                    .collect();
                let cpu = point
                    .broker_cpu_s_per_gib
                    .map_or("-".to_owned(), |cpu| format!("{cpu:.2}"));
                format!(
                    "    {:>6} {mb:>10.1} MB/s  {ratio:>5.2}  {flag:<22}  broker {cpu:>5} s/GiB  tries: {}",
                    point.x,
                    tries.join(", ")
                )
            }
            _ => format!(
                "    {:>6}     failed: {}",
                point.x,
                point.error.as_deref().unwrap_or("no figure")
            ),
        };
        lines.push(line);
    }
    lines
}

impl ScaleReport {
    /// The whole table: steps, throughput series, goals.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![
            String::new(),
            format!("{:<9} {:>11}  step", "status", "wall time"),
        ];
        for step in &self.steps {
            lines.extend(step_lines(step));
        }
        for series in self.series.iter().flatten() {
            lines.push(String::new());
            lines.extend(series_lines(series));
        }
        lines.push(String::new());
        lines.extend(goal_lines(&self.goals));
        let unfinished = self
            .steps
            .iter()
            .filter(|s| matches!(s.status, Status::Failed | Status::TimedOut));
        let names: Vec<&str> = unfinished.map(|s| s.name).collect();
        if !names.is_empty() {
            lines.push(String::new());
            lines.push(format!(
                "{} steps did not finish: {}",
                names.len(),
                names.join(", ")
            ));
        }
        lines
    }

    /// The `--json` document.
    pub fn to_json(&self) -> Value {
        json!({
            "kind": "scale",
            "settings": self.settings,
            "steps": self.steps.iter().map(Step::to_json).collect::<Vec<_>>(),
            "throughput": self.series.as_ref().map(|all| all.iter().map(Series::to_json).collect::<Vec<_>>()),
            "goals": self.goals.iter().map(Goal::to_json).collect::<Vec<_>>(),
        })
    }

    /// Prints the table and writes the JSON if asked.
    pub fn emit(&self, json_path: Option<&Path>) -> anyhow::Result<()> {
        for line in self.lines() {
            println!("{line}");
        }
        if let Some(path) = json_path {
            let text = serde_json::to_string_pretty(&self.to_json())?;
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_printed_in_their_units() {
        assert_eq!(format_figure("rss_bytes_per_partition", 14_540.8), "14.2 KiB");
        assert_eq!(
            format_figure("disk_allocated_bytes", 3.0 * f64::from(1u32 << 30)),
            "3.00 GiB"
        );
        assert_eq!(format_figure("ready_seconds", 1.23456), "1.235 s");
        assert_eq!(format_figure("cpu_seconds_while_idle", 0.0), "0.000 s");
        assert_eq!(format_figure("metadata_all_ms_median", 3.2468), "3.25 ms");
        assert_eq!(format_figure("partitions_per_sec", 2427.4), "2427/s");
        assert_eq!(format_figure("mb_per_sec", 512.34), "512.3 MB/s");
        assert_eq!(format_figure("cpu_share_while_idle", 0.004), "0.40 %");
        assert_eq!(format_figure("fds", 30_052.0), "30052");
    }
}
