//! `--svg FILE`: a self-contained SVG with two charts, written by hand (no plotting crate):
//! commit latency by percentile (x: 1/(1-q) on a log scale, so p90, p99, p99.9, p99.99 are
//! evenly spaced; y: latency on a log scale) and committed records/s per interval over time.

use std::fmt::Write;

use hdrhistogram::Histogram;

pub const LATENCY_TITLE: &str = "Commit latency by percentile";
pub const THROUGHPUT_TITLE: &str = "Throughput per interval";

const WIDTH: f64 = 900.0;
const CHART_HEIGHT: f64 = 360.0;
/// Above the charts: the title line, then one line per setting.
const TITLE_HEIGHT: f64 = 30.0;
const SETTING_LINE_HEIGHT: f64 = 15.0;
const MARGIN_LEFT: f64 = 110.0;
const MARGIN_RIGHT: f64 = 30.0;
const MARGIN_TOP: f64 = 40.0;
const MARGIN_BOTTOM: f64 = 55.0;
/// The percentile axis ends at p99.99 (1/(1-q) = 10^4).
const PERCENTILE_DECADES: f64 = 4.0;
const CURVE_POINTS: usize = 200;

/// One interval of the throughput chart: start and end seconds into the window, records/s.
#[derive(Debug, Clone, Copy)]
pub struct RatePoint {
    pub start_sec: f64,
    pub end_sec: f64,
    pub records_per_sec: f64,
}

/// The SVG document: `title` and `settings` (one line each) head it.
pub fn render(
    title: &str,
    settings: &[String],
    latency_us: &Histogram<u64>,
    rate: &[RatePoint],
) -> String {
    let header = TITLE_HEIGHT + SETTING_LINE_HEIGHT * settings.len() as f64 + 5.0;
    let height = header + 2.0 * CHART_HEIGHT;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="22" font-size="16" text-anchor="middle">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    for (i, line) in settings.iter().enumerate() {
        let _ = writeln!(
            svg,
            r##"<text x="{}" y="{}" text-anchor="middle" fill="#444">{}</text>"##,
            WIDTH / 2.0,
            TITLE_HEIGHT + 10.0 + SETTING_LINE_HEIGHT * i as f64,
            escape(line)
        );
    }
    latency_chart(&mut svg, header, latency_us);
    throughput_chart(&mut svg, header + CHART_HEIGHT, rate);
    svg.push_str("</svg>\n");
    svg
}

/// The plot area of a chart whose top edge is at `top`.
#[derive(Debug, Clone, Copy)]
struct Plot {
    left: f64,
    top: f64,
    width: f64,
    height: f64,
}

impl Plot {
    fn at(top: f64) -> Self {
        Self {
            left: MARGIN_LEFT,
            top: top + MARGIN_TOP,
            width: WIDTH - MARGIN_LEFT - MARGIN_RIGHT,
            height: CHART_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM,
        }
    }

    /// Pixel of fractions (0..1 left to right, 0..1 bottom to top).
    fn point(&self, fx: f64, fy: f64) -> (f64, f64) {
        (
            self.left + fx.clamp(0.0, 1.0) * self.width,
            self.top + (1.0 - fy.clamp(0.0, 1.0)) * self.height,
        )
    }

    fn frame(&self, svg: &mut String, title: &str, x_label: &str, y_label: &str) {
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" font-size="14" text-anchor="middle">{}</text>"#,
            self.left + self.width / 2.0,
            self.top - 14.0,
            escape(title)
        );
        let _ = writeln!(
            svg,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="black"/>"#,
            self.left, self.top, self.width, self.height
        );
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            self.left + self.width / 2.0,
            self.top + self.height + 40.0,
            escape(x_label)
        );
        let (x, y) = (self.left - 92.0, self.top + self.height / 2.0);
        let _ = writeln!(
            svg,
            r#"<text x="{x}" y="{y}" text-anchor="middle" transform="rotate(-90 {x} {y})">{}</text>"#,
            escape(y_label)
        );
    }

    fn x_tick(&self, svg: &mut String, fx: f64, label: &str) {
        let (x, bottom) = self.point(fx, 0.0);
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            self.top,
            bottom + 16.0,
            escape(label)
        );
    }

    fn y_tick(&self, svg: &mut String, fy: f64, label: &str) {
        let (left, y) = self.point(0.0, fy);
        let _ = writeln!(
            svg,
            r##"<line x1="{left:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            self.left + self.width,
            left - 6.0,
            y + 4.0,
            escape(label)
        );
    }

    fn no_data(&self, svg: &mut String) {
        let (x, y) = self.point(0.5, 0.5);
        let _ = writeln!(
            svg,
            r#"<text x="{x}" y="{y}" text-anchor="middle">no data</text>"#
        );
    }
}

fn latency_chart(svg: &mut String, top: f64, h: &Histogram<u64>) {
    let plot = Plot::at(top);
    plot.frame(
        svg,
        LATENCY_TITLE,
        "percentile (axis: 1/(1-q), log scale)",
        "latency, us (log scale)",
    );
    for (q, label) in [
        (0.0, "p0"),
        (0.5, "p50"),
        (0.9, "p90"),
        (0.99, "p99"),
        (0.999, "p99.9"),
        (0.9999, "p99.99"),
    ] {
        plot.x_tick(svg, percentile_axis(q) / PERCENTILE_DECADES, label);
    }
    if h.is_empty() {
        plot.no_data(svg);
        return;
    }
    let points: Vec<(f64, u64)> = (0..=CURVE_POINTS)
        .map(|i| {
            let x = PERCENTILE_DECADES * i as f64 / CURVE_POINTS as f64;
            (x, h.value_at_quantile(quantile_at(x)).max(1))
        })
        .collect();
    let axis = LogAxis::covering(h.min().max(1), h.max().max(1));
    for tick in axis.ticks() {
        plot.y_tick(svg, axis.fraction(tick as f64), &group_thousands(tick));
    }
    let path: Vec<String> = points
        .iter()
        .map(|(x, us)| {
            let (px, py) = plot.point(x / PERCENTILE_DECADES, axis.fraction(*us as f64));
            format!("{px:.1},{py:.1}")
        })
        .collect();
    let _ = writeln!(
        svg,
        r##"<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{}"/>"##,
        path.join(" ")
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="end">max {} us, {} samples</text>"#,
        plot.left + plot.width - 6.0,
        plot.top + 16.0,
        group_thousands(h.max()),
        group_thousands(h.len())
    );
}

fn throughput_chart(svg: &mut String, top: f64, rate: &[RatePoint]) {
    let plot = Plot::at(top);
    plot.frame(
        svg,
        THROUGHPUT_TITLE,
        "seconds into the measured window",
        "records/s",
    );
    let end = rate.iter().map(|p| p.end_sec).fold(0.0, f64::max);
    let peak = rate.iter().map(|p| p.records_per_sec).fold(0.0, f64::max);
    if rate.is_empty() || end <= 0.0 {
        plot.no_data(svg);
        return;
    }
    // The last interval ends a few milliseconds past the window's nominal length: do not let
    // that add a whole empty step to the axis (the point is drawn at its edge).
    let x_axis = LinearAxis::covering((end * 10.0).floor() / 10.0);
    let y_axis = LinearAxis::covering(peak);
    for tick in x_axis.ticks() {
        plot.x_tick(svg, x_axis.fraction(tick), &format_tick(tick));
    }
    for tick in y_axis.ticks() {
        plot.y_tick(
            svg,
            y_axis.fraction(tick),
            &group_thousands(tick.round() as u64),
        );
    }
    // A step per interval: its rate held from its start to its end.
    let mut path = Vec::new();
    for p in rate {
        for t in [p.start_sec, p.end_sec] {
            let (px, py) = plot.point(x_axis.fraction(t), y_axis.fraction(p.records_per_sec));
            path.push(format!("{px:.1},{py:.1}"));
        }
    }
    let _ = writeln!(
        svg,
        r##"<polyline fill="none" stroke="#2ca02c" stroke-width="2" points="{}"/>"##,
        path.join(" ")
    );
}

/// Where quantile `q` sits on the percentile axis: log10(1/(1-q)) (p90 at 1, p99 at 2, ...).
pub fn percentile_axis(q: f64) -> f64 {
    assert!((0.0..1.0).contains(&q), "quantile {q} outside [0, 1)");
    -(1.0 - q).log10()
}

/// The quantile at position `x` of the percentile axis (inverse of [`percentile_axis`]).
pub fn quantile_at(x: f64) -> f64 {
    assert!(x >= 0.0);
    1.0 - 10f64.powf(-x)
}

/// A log10 axis over whole decades.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogAxis {
    pub low_decade: i32,
    pub high_decade: i32,
}

impl LogAxis {
    /// The smallest run of whole decades holding `min..=max` (both at least 1).
    pub fn covering(min: u64, max: u64) -> Self {
        assert!(min >= 1 && min <= max);
        let low = (min as f64).log10().floor() as i32;
        let mut high = (max as f64).log10().ceil() as i32;
        if high <= low {
            high = low + 1;
        }
        Self {
            low_decade: low,
            high_decade: high,
        }
    }

    pub fn fraction(&self, value: f64) -> f64 {
        let span = f64::from(self.high_decade - self.low_decade);
        (value.max(f64::MIN_POSITIVE).log10() - f64::from(self.low_decade)) / span
    }

    /// 1, 2 and 5 times each power of ten on the axis.
    pub fn ticks(&self) -> Vec<u64> {
        let mut ticks = Vec::new();
        for decade in self.low_decade.max(0)..=self.high_decade {
            let base = 10u64.pow(decade as u32);
            for m in [1, 2, 5] {
                if decade < self.high_decade || m == 1 {
                    ticks.push(base * m);
                }
            }
        }
        ticks
    }
}

/// A linear axis from 0 to a round number at or above the data's maximum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearAxis {
    pub step: f64,
    pub max: f64,
}

impl LinearAxis {
    /// About five ticks of a 1, 2 or 5 times a power of ten step.
    pub fn covering(max: f64) -> Self {
        let max = if max > 0.0 { max } else { 1.0 };
        let raw = max / 5.0;
        let power = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .into_iter()
            .map(|m| m * power)
            .find(|s| *s >= raw)
            .expect("10x the power is at least raw");
        Self {
            step,
            max: (max / step).ceil() * step,
        }
    }

    pub fn fraction(&self, value: f64) -> f64 {
        value / self.max
    }

    pub fn ticks(&self) -> Vec<f64> {
        let count = (self.max / self.step).round() as usize;
        (0..=count).map(|i| i as f64 * self.step).collect()
    }
}

fn format_tick(value: f64) -> String {
    if value.fract().abs() < 1e-9 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn percentiles_sit_a_decade_apart() {
        assert!(close(percentile_axis(0.0), 0.0));
        assert!(close(percentile_axis(0.9), 1.0));
        assert!(close(percentile_axis(0.99), 2.0));
        assert!(close(percentile_axis(0.9999), 4.0));
        assert!(close(percentile_axis(0.5), 2f64.log10()));
        for x in [0.0, 0.3, 1.7, 4.0] {
            assert!(close(percentile_axis(quantile_at(x)), x));
        }
    }

    #[test]
    fn log_axis_covers_whole_decades() {
        let axis = LogAxis::covering(180, 12_000);
        assert_eq!(
            axis,
            LogAxis {
                low_decade: 2,
                high_decade: 5
            }
        );
        assert!(close(axis.fraction(100.0), 0.0));
        assert!(close(axis.fraction(100_000.0), 1.0));
        assert!(close(axis.fraction(1_000.0), 1.0 / 3.0));
        assert_eq!(
            axis.ticks(),
            vec![100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000]
        );
        // A single value still gets a decade of room.
        assert_eq!(
            LogAxis::covering(100, 100),
            LogAxis {
                low_decade: 2,
                high_decade: 3
            }
        );
    }

    #[test]
    fn linear_axis_rounds_up_to_a_nice_step() {
        let axis = LinearAxis::covering(31_413.0);
        assert_eq!(axis.step, 10_000.0);
        assert_eq!(axis.max, 40_000.0);
        assert_eq!(
            axis.ticks(),
            vec![0.0, 10_000.0, 20_000.0, 30_000.0, 40_000.0]
        );
        assert!(close(axis.fraction(20_000.0), 0.5));
        let seconds = LinearAxis::covering(10.0);
        assert_eq!((seconds.step, seconds.max), (2.0, 10.0));
        let small = LinearAxis::covering(2.3);
        assert!(close(small.step, 0.5) && close(small.max, 2.5), "{small:?}");
        assert_eq!(LinearAxis::covering(0.0).max, 1.0);
    }

    #[test]
    fn the_document_holds_both_charts_and_escapes_text() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for us in [150, 180, 200, 250, 4_000] {
            h.record(us).unwrap();
        }
        let rate = [
            RatePoint {
                start_sec: 0.0,
                end_sec: 1.0,
                records_per_sec: 900.0,
            },
            RatePoint {
                start_sec: 1.0,
                end_sec: 2.0,
                records_per_sec: 1100.0,
            },
        ];
        let svg = render("acks=-1 & <fsync>", &["1 connection".into()], &h, &rate);
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains(LATENCY_TITLE) && svg.contains(THROUGHPUT_TITLE));
        assert!(svg.contains("acks=-1 &amp; &lt;fsync&gt;"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        let empty = render("t", &[], &Histogram::new(3).unwrap(), &[]);
        assert_eq!(empty.matches("no data").count(), 2);
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1_000), "1,000");
        assert_eq!(group_thousands(1_234_567), "1,234,567");
    }
}
