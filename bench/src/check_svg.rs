//! The SVG timeline of a `ringraft-bench check` run, written by hand (as svg_chart.rs): one
//! lane per node with the faults put on it, a lane with the leader the clients followed (and
//! its epoch), and a chart of acknowledged and read records per second, with the
//! unavailability windows (gaps between acknowledgements longer than `--unavailable-ms`)
//! shaded across all of it. The verdict is printed under it (docs/testing.md, "The correctness
//! checker").

use std::fmt::Write;

use crate::check_history::{Event, Verdict};

const WIDTH: f64 = 1000.0;
const LEFT: f64 = 110.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 50.0;
const LANE: f64 = 26.0;
const CHART: f64 = 220.0;
const LINE: f64 = 16.0;

/// Colours per fault kind and per leader (node id), cycled.
const FAULT_COLOURS: [(&str, &str); 7] = [
    ("kill", "#d62728"),
    ("pause", "#ff7f0e"),
    ("restart", "#9467bd"),
    ("partition", "#1f77b4"),
    ("sever", "#17becf"),
    ("isolate", "#e377c2"),
    ("disk-full", "#8c564b"),
];
const NODE_COLOURS: [&str; 6] = [
    "#2ca02c", "#bcbd22", "#7f7f7f", "#17becf", "#9467bd", "#1f77b4",
];

/// Windows (from, to) in ms where consecutive acknowledgements (sorted by time) are more than
/// `threshold_ms` apart.
pub fn unavailability(ack_ms: &[f64], threshold_ms: f64) -> Vec<(f64, f64)> {
    let mut sorted = ack_ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted
        .windows(2)
        .filter(|pair| pair[1] - pair[0] > threshold_ms)
        .map(|pair| (pair[0], pair[1]))
        .collect()
}

/// Counts per whole second from 0 to `end_ms` (the last bin may be partial).
pub fn per_second(times_ms: &[(f64, u64)], end_ms: f64) -> Vec<u64> {
    let bins = (end_ms / 1000.0).ceil().max(1.0) as usize;
    let mut out = vec![0; bins];
    for &(t, n) in times_ms {
        let bin = ((t / 1000.0) as usize).min(bins - 1);
        out[bin] += n;
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub fn render(events: &[Event], verdict: &Verdict, threshold_ms: f64, seed: Option<u64>) -> String {
    let end_ms = events.iter().map(Event::t_ms).fold(1000.0, f64::max);
    let plot_width = WIDTH - LEFT - RIGHT;
    let x = |t: f64| LEFT + (t / end_ms).clamp(0.0, 1.0) * plot_width;
    let mut nodes: Vec<i32> = events
        .iter()
        .filter_map(|e| match e {
            Event::FaultStart { node, .. } | Event::Leader { node, .. } => Some(*node),
            _ => None,
        })
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    let lanes_top = TOP;
    let leader_top = lanes_top + LANE * nodes.len() as f64;
    let chart_top = leader_top + LANE + 30.0;
    let chart_bottom = chart_top + CHART;
    let text_top = chart_bottom + 45.0;
    let lines = 2 + verdict.checks.len();
    let height = text_top + LINE * lines as f64 + 10.0;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let title = match seed {
        Some(seed) => format!("ringraft-bench check, seed {seed}"),
        None => "ringraft-bench check".to_string(),
    };
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="22" font-size="16" text-anchor="middle">{}</text>"#,
        WIDTH / 2.0,
        escape(&title)
    );
    let mut legend_x = LEFT;
    for (kind, colour) in FAULT_COLOURS {
        let _ = writeln!(
            svg,
            r#"<rect x="{legend_x}" y="30" width="10" height="10" fill="{colour}"/><text x="{}" y="39">{kind}</text>"#,
            legend_x + 13.0
        );
        legend_x += 70.0;
    }
    let _ = writeln!(
        svg,
        r##"<rect x="{legend_x}" y="30" width="10" height="10" fill="#ff0000" fill-opacity="0.15"/><text x="{}" y="39">no acknowledgement for over {threshold_ms} ms</text>"##,
        legend_x + 13.0
    );

    // Unavailability windows, shaded across lanes and chart.
    let ack_ms: Vec<f64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Ack { t_ms, .. } => Some(*t_ms),
            _ => None,
        })
        .collect();
    for (from, to) in unavailability(&ack_ms, threshold_ms) {
        let _ = writeln!(
            svg,
            r##"<rect x="{:.1}" y="{lanes_top}" width="{:.1}" height="{:.1}" fill="#ff0000" fill-opacity="0.15"><title>{:.0} ms without an acknowledgement</title></rect>"##,
            x(from),
            (x(to) - x(from)).max(1.0),
            chart_bottom - lanes_top,
            to - from
        );
    }

    // Fault lanes.
    let lane_of = |node: i32| nodes.iter().position(|&n| n == node).unwrap_or(0);
    for (i, node) in nodes.iter().enumerate() {
        let y = lanes_top + LANE * i as f64;
        let _ = writeln!(
            svg,
            r##"<text x="{}" y="{}" text-anchor="end">node {node}</text><line x1="{LEFT}" y1="{}" x2="{}" y2="{}" stroke="#ddd"/>"##,
            LEFT - 8.0,
            y + LANE / 2.0 + 4.0,
            y + LANE,
            WIDTH - RIGHT,
            y + LANE
        );
    }
    let mut open: Vec<(f64, String, i32)> = Vec::new();
    let mut spans: Vec<(f64, f64, String, i32)> = Vec::new();
    for event in events {
        match event {
            Event::FaultStart { t_ms, kind, node } => open.push((*t_ms, kind.clone(), *node)),
            Event::FaultEnd { t_ms, kind, node } => {
                if let Some(i) = open.iter().position(|(_, k, n)| k == kind && n == node) {
                    let (from, kind, node) = open.remove(i);
                    spans.push((from, *t_ms, kind, node));
                }
            }
            _ => {}
        }
    }
    spans.extend(open.into_iter().map(|(from, k, n)| (from, end_ms, k, n)));
    for (from, to, kind, node) in spans {
        let base = kind.split(':').next().unwrap_or("");
        let colour = FAULT_COLOURS
            .iter()
            .find(|(k, _)| *k == base)
            .map_or("#000", |(_, c)| c);
        let y = lanes_top + LANE * lane_of(node) as f64 + 4.0;
        let _ = writeln!(
            svg,
            r#"<rect x="{:.1}" y="{y}" width="{:.1}" height="{}" fill="{colour}"><title>{} on node {node}: {:.1} s to {:.1} s</title></rect>"#,
            x(from),
            (x(to) - x(from)).max(2.0),
            LANE - 8.0,
            escape(&kind),
            from / 1000.0,
            to / 1000.0
        );
    }

    // Leader lane.
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="end">leader</text>"#,
        LEFT - 8.0,
        leader_top + LANE / 2.0 + 4.0
    );
    let leaders: Vec<(f64, i32, i32)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Leader { t_ms, node, epoch } => Some((*t_ms, *node, *epoch)),
            _ => None,
        })
        .collect();
    for (i, &(from, node, epoch)) in leaders.iter().enumerate() {
        let to = leaders.get(i + 1).map_or(end_ms, |next| next.0);
        let colour = NODE_COLOURS[node.unsigned_abs() as usize % NODE_COLOURS.len()];
        let (x0, w) = (x(from), (x(to) - x(from)).max(1.0));
        let _ = writeln!(
            svg,
            r#"<rect x="{x0:.1}" y="{}" width="{w:.1}" height="{}" fill="{colour}" fill-opacity="0.7"><title>node {node}, epoch {epoch}, from {:.1} s</title></rect>"#,
            leader_top + 4.0,
            LANE - 8.0,
            from / 1000.0
        );
        if w > 40.0 {
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{}" fill="white">{node}/e{epoch}</text>"#,
                x0 + 3.0,
                leader_top + LANE / 2.0 + 4.0
            );
        }
    }

    // Throughput chart: acknowledged and read records per second.
    let acks: Vec<(f64, u64)> = ack_ms.iter().map(|&t| (t, 1)).collect();
    let reads: Vec<(f64, u64)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Read { t_ms, records, .. } => Some((*t_ms, records.len() as u64)),
            _ => None,
        })
        .collect();
    let (acks, reads) = (per_second(&acks, end_ms), per_second(&reads, end_ms));
    let max = acks.iter().chain(&reads).copied().max().unwrap_or(0).max(1) as f64;
    let _ = writeln!(
        svg,
        r#"<rect x="{LEFT}" y="{chart_top}" width="{plot_width}" height="{CHART}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="end">{max:.0}/s</text><text x="{}" y="{}" text-anchor="end">0</text>"#,
        LEFT - 8.0,
        chart_top + 10.0,
        LEFT - 8.0,
        chart_bottom
    );
    for (series, colour, label, dy) in [
        (&acks, "#2ca02c", "records acknowledged per second", 0.0),
        (
            &reads,
            "#1f77b4",
            "records read per second (all consumers)",
            LINE,
        ),
    ] {
        let points: Vec<String> = series
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let t = (i as f64 + 0.5) * 1000.0;
                format!(
                    "{:.1},{:.1}",
                    x(t.min(end_ms)),
                    chart_bottom - n as f64 / max * CHART
                )
            })
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
            points.join(" ")
        );
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" fill="{colour}">{label}</text>"#,
            LEFT + 8.0,
            chart_top + 16.0 + dy
        );
    }
    // Time axis: a tick every 10 s (every 1 s for short runs).
    let step = if end_ms > 20_000.0 { 10_000.0 } else { 1000.0 };
    let mut t = 0.0;
    while t <= end_ms {
        let _ = writeln!(
            svg,
            r##"<line x1="{0:.1}" y1="{chart_bottom}" x2="{0:.1}" y2="{1}" stroke="black"/><text x="{0:.1}" y="{2}" text-anchor="middle">{3:.0}</text>"##,
            x(t),
            chart_bottom + 5.0,
            chart_bottom + 18.0,
            t / 1000.0
        );
        t += step;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">seconds since the start</text>"#,
        LEFT + plot_width / 2.0,
        chart_bottom + 34.0
    );

    // The verdict.
    let c = &verdict.counts;
    let mut lines = vec![
        format!(
            "{} acknowledged, {} indeterminate sends, {} records read, {} faults, {} leaders, final read {} records",
            c.acknowledged, c.indeterminate_sends, c.records_read, c.faults, c.leaders, c.final_records
        ),
        format!(
            "verdict: {}",
            if verdict.violations() == 0 {
                "clean".to_string()
            } else {
                format!("{} violations", verdict.violations())
            }
        ),
    ];
    lines.extend(verdict.checks.iter().map(|check| {
        format!(
            "{}: {} ({} violations)",
            check.name,
            if check.violations == 0 { "ok" } else { "FAIL" },
            check.violations
        )
    }));
    for (i, line) in lines.iter().enumerate() {
        let fill = if line.contains("FAIL") {
            "#d62728"
        } else {
            "#000"
        };
        let _ = writeln!(
            svg,
            r#"<text x="{LEFT}" y="{}" fill="{fill}">{}</text>"#,
            text_top + LINE * i as f64,
            escape(line)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check_history::analyse;

    #[test]
    fn windows_are_gaps_longer_than_the_threshold() {
        let acks = [100.0, 50.0, 700.0, 800.0, 2000.0];
        assert_eq!(
            unavailability(&acks, 500.0),
            vec![(100.0, 700.0), (800.0, 2000.0)]
        );
        assert_eq!(unavailability(&acks, 2000.0), vec![]);
        assert_eq!(unavailability(&[], 1.0), vec![]);
    }

    #[test]
    fn counts_fall_in_their_second() {
        let times = [(0.0, 1), (999.0, 2), (1000.0, 4), (2500.0, 8), (9999.0, 16)];
        assert_eq!(per_second(&times, 2600.0), vec![3, 4, 24]);
    }

    #[test]
    fn the_timeline_has_every_lane_and_the_verdict() {
        let events = vec![
            Event::Leader {
                t_ms: 0.0,
                node: 1,
                epoch: 1,
            },
            Event::FaultStart {
                t_ms: 100.0,
                kind: "kill".into(),
                node: 1,
            },
            Event::Leader {
                t_ms: 900.0,
                node: 2,
                epoch: 2,
            },
            Event::FaultEnd {
                t_ms: 1500.0,
                kind: "kill".into(),
                node: 1,
            },
            Event::FaultStart {
                t_ms: 1600.0,
                kind: "sever:3".into(),
                node: 2,
            },
        ];
        let svg = render(&events, &analyse(&events), 500.0, Some(7));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        for text in [
            "seed 7",
            ">node 1<",
            ">node 2<",
            ">leader<",
            "kill on node 1: 0.1 s to 1.5 s",
            "sever:3 on node 2",
            "node 2, epoch 2",
            "final-read: FAIL",
        ] {
            assert!(svg.contains(text), "{text} missing from\n{svg}");
        }
    }
}
