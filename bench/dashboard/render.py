#!/usr/bin/env python3
"""Renders the Grafana dashboard docs/grafana/ringraft.json to a PNG, headless, from a Prometheus
server's data: every panel's PromQL queries are run over the time range (query_range for time
series, the last value for stat panels) and drawn where the dashboard's grid puts them (24
columns; a row header, then its panels). It reads the dashboard as Grafana would, with the
`node` variable at "All"; stat panels show each series' last value in the window. It is not
Grafana (whose licence keeps it out of this project), so the look differs; the queries, the
layout and the data are the dashboard's, and a query that is wrong shows as an error or as
"no data" here too.

Usage: render.py DASHBOARD PROMETHEUS_URL START END STAT_AT OUT.png  (Unix seconds; STAT_AT: the
moment stat panels show, the end of the load)
"""
import json
import re
import sys
import urllib.parse
import urllib.request

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.gridspec import GridSpec  # noqa: E402

ALL = ".*"


def api(base, path, params):
    url = f"{base}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=30) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise RuntimeError(f"{url}: {body}")
    return body["data"]["result"]


def expand(expr):
    return expr.replace("$node", ALL)


def legend(fmt, metric):
    if not fmt:
        return ",".join(f"{k}={v}" for k, v in sorted(metric.items()) if k != "__name__")
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt)


def short(instance_text):
    # 127.0.0.1:PORT says little; the node's port is enough to tell the three apart.
    return re.sub(r"127\.0\.0\.1:", ":", instance_text)


def layout(panels):
    """(panel, top, height) in grid units: a row header takes one unit, then its panels, each
    line of panels as high as its tallest."""
    placed, cursor, line = [], 0, []

    def flush():
        nonlocal cursor, line
        if line:
            height = max(p["gridPos"]["h"] for p in line)
            placed.extend((p, cursor, height) for p in line)
            cursor += height
            line = []

    last_y = None
    for p in panels:
        if p.get("type") == "row":
            flush()
            placed.append((p, cursor, 1))
            cursor += 1
            last_y = None
            continue
        y = p["gridPos"]["y"]
        if last_y is not None and y != last_y:
            flush()
        line.append(p)
        last_y = y
    flush()
    return placed, cursor


def draw_timeseries(ax, panel, base, start, end, step):
    drawn = 0
    for target in panel.get("targets", []):
        for series in api(base, "query_range", {"query": expand(target["expr"]), "start": start, "end": end, "step": step}):
            points = [(float(t) - start, float(v)) for t, v in series["values"] if v not in ("NaN", "+Inf", "-Inf")]
            if not points:
                continue
            xs, ys = zip(*points)
            ax.plot(xs, ys, linewidth=1, label=short(legend(target.get("legendFormat"), series["metric"])))
            drawn += 1
    if drawn:
        ax.legend(fontsize=5, loc="upper left", ncol=2, frameon=False)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, fontsize=7, color="gray")
    ax.set_xlim(0, end - start)
    ax.set_xlabel("s", fontsize=6)
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
    if unit:
        ax.set_ylabel(unit, fontsize=6)
    ax.tick_params(labelsize=6)
    ax.grid(alpha=0.3)


def draw_stat(ax, panel, base, start, at, step):
    # Each series' value at `at` (the end of the load, before the nodes stop): the last point
    # of a range query up to there, keeping only the series that still had a point then (a
    # filter such as `== 1` ends a series when its value changes).
    found = []
    for target in panel.get("targets", []):
        query = {"query": expand(target["expr"]), "start": start, "end": at, "step": step}
        for series in api(base, "query_range", query):
            last_time, last_value = series["values"][-1]
            label = short(legend(target.get("legendFormat"), series["metric"]))
            found.append((float(last_time), label, float(last_value)))
    newest = max((t for t, _, _ in found), default=None)
    lines = [f"{label}  {value:.6g}" for t, label, value in found if t >= newest - step]
    ax.axis("off")
    ax.text(0.03, 0.85, "\n".join(lines[:8]) or "no data", va="top", ha="left", fontsize=7, family="monospace", transform=ax.transAxes)


def main():
    dashboard_path, base, start, end, stat_at, out = sys.argv[1:7]
    start, end, stat_at = float(start), float(end), float(stat_at)
    step = max(1, int((end - start) / 300))
    dashboard = json.load(open(dashboard_path))
    placed, units = layout(dashboard["panels"])
    unit_inches = 0.28
    fig = plt.figure(figsize=(24 * 0.75, units * unit_inches + 0.6))
    grid = GridSpec(units, 24, figure=fig, hspace=1.6, wspace=1.2, top=1 - 0.6 / (units * unit_inches + 0.6), bottom=0.01, left=0.03, right=0.99)
    fig.suptitle(f"{dashboard['title']} (rendered from Prometheus by bench/dashboard/render.py; {int(end - start)} s)", fontsize=11)
    for panel, top, height in placed:
        if panel.get("type") == "row":
            ax = fig.add_subplot(grid[top, :])
            ax.axis("off")
            ax.text(0, 0.2, panel["title"], fontsize=10, weight="bold", transform=ax.transAxes)
            continue
        pos = panel["gridPos"]
        ax = fig.add_subplot(grid[top : top + height, pos["x"] : pos["x"] + pos["w"]])
        ax.set_title(panel["title"], fontsize=8, loc="left")
        if panel.get("type") == "stat":
            draw_stat(ax, panel, base, start, stat_at, step)
        else:
            draw_timeseries(ax, panel, base, start, end, step)
    fig.savefig(out, dpi=80)
    print(f"wrote {out}: {len(placed)} panels and rows")


if __name__ == "__main__":
    main()
