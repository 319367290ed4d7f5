//! The self-contained HTML report: inline SVG charts (no scripts, no external resources) of
//! throughput and latency over time and of the latency percentile curve.

use std::fmt::Write;

use crate::result::RunResult;
use crate::stats::Measurement;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 240.0;
const MARGIN: f64 = 48.0;
const COLOURS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// One line of a chart: a name and `(x, y)` points.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points in data units.
    pub points: Vec<(f64, f64)>,
}

/// An SVG line chart. `log_x` plots x on a log10 scale (x must be > 0).
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series], log_x: bool) -> String {
    let scale = Scale::fit(series, log_x);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11"><text x="{MARGIN}" y="16" font-size="13" font-weight="bold">{}</text>"#,
        escape(title)
    );
    write_axes(&mut svg, &scale);
    write_axis_labels(&mut svg, x_label, y_label);
    write_lines(&mut svg, &scale, series);
    svg.push_str("</svg>");
    svg
}

/// The plot area's edges.
const LEFT: f64 = MARGIN;
const RIGHT: f64 = WIDTH - MARGIN;
const BOTTOM: f64 = HEIGHT - MARGIN + 8.0;
const TOP: f64 = MARGIN - 8.0;

/// How data units map to the plot area: x from `x_min` to `x_max` (log10 of x when `log_x`),
/// y from 0 to `y_max`.
struct Scale {
    log_x: bool,
    x_min: f64,
    x_max: f64,
    y_max: f64,
}

impl Scale {
    /// The scale that shows every point of `series` (a unit range when there are none), with
    /// 5 % room above the highest y.
    fn fit(series: &[Series], log_x: bool) -> Scale {
        let mut scale = Scale {
            log_x,
            x_min: f64::MAX,
            x_max: f64::MIN,
            y_max: 0.0,
        };
        for (x, y) in series.iter().flat_map(|s| s.points.iter()) {
            scale.x_min = scale.x_min.min(scale.fx(*x));
            scale.x_max = scale.x_max.max(scale.fx(*x));
            scale.y_max = scale.y_max.max(*y);
        }
        if scale.x_min > scale.x_max {
            (scale.x_min, scale.x_max) = (0.0, 1.0);
        }
        if scale.x_max - scale.x_min < 1e-9 {
            scale.x_max = scale.x_min + 1.0;
        }
        scale.y_max = if scale.y_max > 0.0 {
            scale.y_max * 1.05
        } else {
            1.0
        };
        scale
    }

    /// x on the axis (its log10 on a log scale).
    fn fx(&self, x: f64) -> f64 {
        if self.log_x {
            x.max(1e-9).log10()
        } else {
            x
        }
    }

    /// The horizontal pixel of `x`.
    fn px(&self, x: f64) -> f64 {
        MARGIN + (self.fx(x) - self.x_min) / (self.x_max - self.x_min) * (WIDTH - 2.0 * MARGIN)
    }

    /// The vertical pixel of `y`.
    fn py(&self, y: f64) -> f64 {
        HEIGHT - MARGIN + 8.0 - y / self.y_max * (HEIGHT - 2.0 * MARGIN)
    }
}

/// The axes, with five ticks each (and grid lines across for y).
fn write_axes(svg: &mut String, scale: &Scale) {
    let _ = write!(
        svg,
        r##"<path d="M{LEFT} {TOP}V{BOTTOM}H{RIGHT}" fill="none" stroke="#444"/>"##
    );
    for tick in 0..=4 {
        let y = scale.y_max * tick as f64 / 4.0;
        let _ = write!(
            svg,
            r##"<text x="{}" y="{}" text-anchor="end">{}</text><path d="M{LEFT} {}H{RIGHT}" stroke="#ddd"/>"##,
            LEFT - 4.0,
            scale.py(y) + 4.0,
            number(y),
            scale.py(y)
        );
    }
    for tick in 0..=4 {
        let x = scale.x_min + (scale.x_max - scale.x_min) * tick as f64 / 4.0;
        let shown = if scale.log_x { 10f64.powf(x) } else { x };
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            scale.px(if scale.log_x { shown } else { x }),
            BOTTOM + 14.0,
            number(shown)
        );
    }
}

/// The x label under the plot, the y label turned along its left side.
fn write_axis_labels(svg: &mut String, x_label: &str, y_label: &str) {
    let _ = write!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text><text x="12" y="{}" transform="rotate(-90 12 {})" text-anchor="middle">{}</text>"#,
        WIDTH / 2.0,
        HEIGHT - 4.0,
        escape(x_label),
        HEIGHT / 2.0,
        HEIGHT / 2.0,
        escape(y_label)
    );
}

/// One polyline per series (none for an empty one) and its name in the legend, in turn.
fn write_lines(svg: &mut String, scale: &Scale, series: &[Series]) {
    for (index, line) in series.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        let path: Vec<String> = line
            .points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", scale.px(*x), scale.py(*y)))
            .collect();
        if !path.is_empty() {
            let _ = write!(
                svg,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
                path.join(" ")
            );
        }
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" fill="{colour}">{}</text>"#,
            RIGHT - 150.0,
            TOP + 14.0 * (index as f64 + 1.0),
            escape(&line.name)
        );
    }
}

fn number(value: f64) -> String {
    if value >= 100.0 || value == 0.0 {
        format!("{value:.0}")
    } else if value >= 1.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Throughput, latency-over-time and percentile-curve charts of one measurement.
fn measurement_charts(name: &str, latency_kind: &str, m: &Measurement) -> String {
    let throughput = Series {
        name: format!("{name} MB/s"),
        points: m
            .timeline
            .iter()
            .map(|i| (i.second as f64, i.bytes as f64 / 1e6))
            .collect(),
    };
    let mut html = line_chart(
        &format!("{name}: throughput per second"),
        "seconds",
        "MB/s",
        &[throughput],
        false,
    );
    if m.latency_us.is_empty() {
        return html;
    }
    let over_time = |q: f64, label: &str| Series {
        name: label.to_owned(),
        points: m
            .timeline
            .iter()
            .filter(|i| !i.latency_us.is_empty())
            .map(|i| (i.second as f64, i.latency_us.value_at_quantile(q) as f64 / 1e3))
            .collect(),
    };
    html.push_str(&line_chart(
        &format!("{name}: {latency_kind} latency per second"),
        "seconds",
        "ms",
        &[
            over_time(0.5, "p50"),
            over_time(0.99, "p99"),
            over_time(1.0, "max"),
        ],
        false,
    ));
    // x = 1 / (1 - q): 10 = p90, 100 = p99, 1000 = p99.9.
    let curve: Vec<(f64, f64)> = [
        0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999,
    ]
    .iter()
    .map(|q| (1.0 / (1.0 - q), m.latency_us.value_at_quantile(*q) as f64 / 1e3))
    .collect();
    html.push_str(&line_chart(
        &format!("{name}: {latency_kind} latency by percentile (x: 1/(1-q); 100 = p99)"),
        "1/(1-q)",
        "ms",
        &[Series {
            name: "latency".into(),
            points: curve,
        }],
        true,
    ));
    html
}

/// The whole page.
pub fn render_html(result: &RunResult) -> String {
    let mut html = String::from("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>laminar bench</title><style>body{font-family:sans-serif;max-width:760px;margin:2em auto}pre{background:#f4f4f4;padding:8px;white-space:pre-wrap}svg{display:block;margin:12px 0}</style></head><body>");
    let _ = write!(html, "<h1>laminar bench {}</h1>", escape(result.kind));
    for section in &result.sections {
        let _ = write!(
            html,
            "<h2>{}</h2><pre>{}</pre>",
            escape(section.name),
            escape(&section.measurement.summary_line(section.verb))
        );
        html.push_str(&measurement_charts(
            section.name,
            section.latency_kind,
            &section.measurement,
        ));
    }
    if let Some(limits) = &result.limits {
        let _ = write!(
            html,
            "<h2>Limits (same run)</h2><pre>{}</pre>",
            escape(&limits.describe())
        );
    }
    let _ = write!(
        html,
        "<h2>Settings</h2><pre>{}</pre></body></html>",
        escape(&serde_json::to_string_pretty(&result.settings).unwrap_or_default())
    );
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_is_self_contained_svg() {
        let svg = line_chart(
            "t<1>",
            "x",
            "y",
            &[Series {
                name: "a&b".into(),
                points: vec![(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)],
            }],
            false,
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("t&lt;1&gt;") && svg.contains("a&amp;b"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(!svg.contains("<script") && !svg.contains("href"));
        // An empty chart still renders (no NaN coordinates).
        let empty = line_chart(
            "e",
            "x",
            "y",
            &[Series {
                name: "none".into(),
                points: vec![],
            }],
            true,
        );
        assert!(!empty.contains("NaN"));
    }
}
