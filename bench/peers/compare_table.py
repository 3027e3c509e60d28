#!/usr/bin/env python3
"""The side-by-side table of one compare.sh run: reads the raw JSONs in DIR, prints markdown.

The peers are etcd (etcd-inflight-N.json) and ZooKeeper (zookeeper-inflight-N.json); either may be
missing (result directories from before the ZooKeeper step have none of its files).

Targets (issue 5): ringraft MB/s >= 25% of fio's O_DIRECT bandwidth / 3; ringraft's best
records/s >= 20x etcd's best puts/s; p50 with one record in flight <= 3x the pull-commit floor
(2 loopback round trips + one 4 KiB write + fdatasync); p99 <= 3x p50 with one in flight.
"""
import glob
import json
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def fmt(x, digits=0):
    return f"{x:,.{digits}f}"


def fio_figures(raw):
    bw = load(os.path.join(raw, "fio-bw.json"))["jobs"][0]["write"]
    lat = load(os.path.join(raw, "fio-lat.json"))["jobs"][0]
    write, sync = lat["write"], lat["sync"]
    slat_mean = write.get("slat_ns", {}).get("mean", 0) / 1000
    write_mean = write["clat_ns"]["mean"] / 1000 + slat_mean
    sync_mean = sync["lat_ns"]["mean"] / 1000
    write_p50 = write["clat_ns"]["percentile"]["50.000000"] / 1000 + slat_mean
    sync_p50 = sync["lat_ns"]["percentile"]["50.000000"] / 1000
    return {
        "bw_mb": bw["bw_bytes"] / 1e6,
        "cycle_mean_us": write_mean + sync_mean,
        "cycle_p50_us": write_p50 + sync_p50,
        "write_mean_us": write_mean,
        "sync_mean_us": sync_mean,
        "sync_p50_us": sync_p50,
        "cycles_per_sec": write["iops"],
    }


def ringraft_runs(raw):
    runs = []
    for path in sorted(glob.glob(os.path.join(raw, "ringraft-*.json"))):
        r = load(path)
        per_conn = r.get("inflight_per_connection", 1) or 1
        requests = r["connections"] * per_conn
        runs.append({
            "name": os.path.basename(path)[len("ringraft-"):-len(".json")],
            "config": f"{r['connections']} conn x {per_conn} in flight x {r['batch_records']} rec/batch",
            "requests_in_flight": requests,
            "records_in_flight": requests * r["batch_records"],
            "per_sec": r["records_per_sec"],
            "mb": r["mb_per_sec"],
            "lat": r["commit_latency_us"],
            "loadavg": r.get("loadavg", "").split()[:1],
            "exits": r.get("node_exits", []),
        })
    runs.sort(key=lambda r: (r["records_in_flight"], r["requests_in_flight"]))
    return runs


def peer_runs(raw, prefix, system, ops):
    """One row per PREFIX-inflight-N.json; ops names the requests ("puts") and the rate's key."""
    runs = []
    for path in glob.glob(os.path.join(raw, f"{prefix}-inflight-*.json")):
        e = load(path)
        version = e.get("server_version", "")
        runs.append({
            "name": f"{prefix}-{e['inflight']}",
            "system": f"{system} {'.'.join(version.split('.')[:2])}".strip() if version else system,
            "config": f"{e['inflight']} {ops} in flight ({e['processes']} driver proc, "
                      f"driver CPU {'/'.join(str(c) for c in e['driver_cpu_percent'])}%)",
            "requests_in_flight": e["inflight"],
            "records_in_flight": e["inflight"],
            "per_sec": e[f"{ops}_per_sec"],
            "mb": e["mb_per_sec"],
            "lat": e["latency_us"],
            "loadavg": e.get("loadavg", [""])[:1],
            "errors": e["errors"],
            "cleanup_left": e.get("cleanup", {}).get("left", 0),
        })
    runs.sort(key=lambda r: r["requests_in_flight"])
    return runs


def etcd_runs(raw):
    return peer_runs(raw, "etcd", "etcd 3.4", "puts")


def zookeeper_runs(raw):
    # The driver records the server's version; "ZooKeeper" alone when it could not.
    return peer_runs(raw, "zookeeper", "ZooKeeper", "creates")


def verdict(ok):
    return "met" if ok else "**not met**"


def main():
    raw = sys.argv[1]
    meta = load(os.path.join(raw, "meta.json"))
    fio = fio_figures(raw)
    rtt = {os.path.basename(p)[4:-5]: load(p)["rtt_us"] for p in glob.glob(os.path.join(raw, "rtt-*.json"))}
    ringraft = ringraft_runs(raw)
    etcd = etcd_runs(raw)
    zookeeper = zookeeper_runs(raw)
    loads = open(os.path.join(raw, "loads.txt")).read().split("\n")
    assert ringraft and (etcd or zookeeper), "missing runs"

    out = []
    p = out.append
    p(f"### Peer comparison, {meta['started']} (`{meta['command'].strip()}`)")
    p("")
    p(f"{meta['cpus']} vCPUs, kernel {meta['kernel']}, commit {meta['git']}; {meta['seconds']} s per run; "
      "1 KiB values, every write fsync'd on a majority of 3 replicas on one disk before it is acknowledged.")
    p("Load average (1/5/15 min) before each step: " +
      "; ".join(f"{line.split()[0]} {' '.join(line.split()[2:])}" for line in loads if line.strip()) + ".")
    p("")
    p("| system | configuration | in flight (records) | records, puts or creates/s | MB/s | p50 us | p99 us | p99.9 us | max us | p99/p50 |")
    p("|---|---|---|---|---|---|---|---|---|---|")
    for r in ringraft + etcd + zookeeper:
        lat = r["lat"]
        system = r.get("system", "ringraft")
        p(f"| {system} | {r['config']} | {r['records_in_flight']} | {fmt(r['per_sec'])} | {fmt(r['mb'], 1)} | "
          f"{fmt(lat['p50'])} | {fmt(lat['p99'])} | {fmt(lat['p999'])} | {fmt(lat['max'])} | "
          f"{lat['p99'] / max(lat['p50'], 1e-9):.1f} |")
    p("")
    p("| reference (same run) | figure |")
    p("|---|---|")
    p(f"| fio O_DIRECT seq write 1 MiB, iodepth 8 | {fmt(fio['bw_mb'])} MB/s (/3 = {fmt(fio['bw_mb'] / 3)} MB/s) |")
    p(f"| fio 4 KiB write + fdatasync, qd 1 (pre-written file) | p50 cycle {fmt(fio['cycle_p50_us'], 1)} us, "
      f"mean cycle {fmt(fio['cycle_mean_us'], 1)} us (write {fmt(fio['write_mean_us'], 1)} + fdatasync "
      f"{fmt(fio['sync_mean_us'], 1)}), {fmt(fio['cycles_per_sec'])} cycles/s |")
    log_path = os.path.join(raw, "log-writer1.json")
    log1 = load(log_path)["latency_us"] if os.path.exists(log_path) else None
    if log1:
        p(f"| ringraft log, 1 writer, 1 x 1 KiB batch (append to durable) | p50 {fmt(log1['p50'])} us, "
          f"p99 {fmt(log1['p99'])} us, mean {fmt(log1['mean'])} us |")
    for name in ("unpinned", "same-cpu", "across-cpus"):
        if name in rtt:
            p(f"| loopback TCP round trip, 2 python processes, {name} | p50 {fmt(rtt[name]['p50'], 1)} us, "
              f"p99 {fmt(rtt[name]['p99'], 1)} us, min {fmt(rtt[name]['min'], 1)} us |")

    best_mb = max(ringraft, key=lambda r: r["mb"])
    best_rec = max(ringraft, key=lambda r: r["per_sec"])
    one = min(ringraft, key=lambda r: r["records_in_flight"])
    rtt_p50 = rtt["unpinned"]["p50"]
    floor_p50 = 2 * rtt_p50 + fio["cycle_p50_us"]
    floor_mean = 2 * rtt_p50 + fio["cycle_mean_us"]
    mb_ratio = best_mb["mb"] / (fio["bw_mb"] / 3)
    p50_ratio = one["lat"]["p50"] / floor_p50
    tail_ratio = one["lat"]["p99"] / one["lat"]["p50"]
    p("")
    p("| target (issue 5) | measured | ratio | target | |")
    p("|---|---|---|---|---|")
    p(f"| committed MB/s vs fio bandwidth / 3 | {fmt(best_mb['mb'], 1)} MB/s ({best_mb['config']}) vs "
      f"{fmt(fio['bw_mb'] / 3)} MB/s | {100 * mb_ratio:.1f}% | >= 25% | {verdict(mb_ratio >= 0.25)} |")
    if etcd:
        best_etcd = max(etcd, key=lambda r: r["per_sec"])
        rec_ratio = best_rec["per_sec"] / best_etcd["per_sec"]
        p(f"| best records/s vs etcd's best puts/s | {fmt(best_rec['per_sec'])} ({best_rec['config']}) vs "
          f"{fmt(best_etcd['per_sec'])} ({best_etcd['requests_in_flight']} in flight) | {rec_ratio:.1f}x | >= 20x | "
          f"{verdict(rec_ratio >= 20)} |")
    else:
        p("| best records/s vs etcd's best puts/s | no etcd run in this directory | | >= 20x | not measured |")
    p(f"| p50, 1 record in flight, vs pull-commit floor | {fmt(one['lat']['p50'])} us vs 2 x {fmt(rtt_p50, 1)} + "
      f"{fmt(fio['cycle_p50_us'], 1)} = {fmt(floor_p50, 1)} us (with fio's mean cycle: {fmt(floor_mean, 1)} us) | "
      f"{p50_ratio:.2f}x ({one['lat']['p50'] / floor_mean:.2f}x) | <= 3x | {verdict(p50_ratio <= 3)} |")
    p(f"| p99 / p50, 1 record in flight | {fmt(one['lat']['p99'])} / {fmt(one['lat']['p50'])} us | "
      f"{tail_ratio:.1f}x | <= 3x | {verdict(tail_ratio <= 3)} |")
    if log1:
        floor_log = 2 * rtt_p50 + log1["p50"]
        p(f"| p50, 1 record in flight, vs the floor with our log's 1-writer p50 as the write + fdatasync | "
          f"{fmt(one['lat']['p50'])} us vs 2 x {fmt(rtt_p50, 1)} + {fmt(log1['p50'])} = {fmt(floor_log, 1)} us | "
          f"{one['lat']['p50'] / floor_log:.2f}x | <= 3x | {verdict(one['lat']['p50'] <= 3 * floor_log)} |")
    p("")
    if fio["cycle_p50_us"] > one["lat"]["p50"]:
        p(f"fio's 4 KiB write + fdatasync cycle ({fmt(fio['cycle_p50_us'])} us p50) is longer than ringraft's "
          f"whole p50 commit ({fmt(one['lat']['p50'])} us), which itself includes two such syncs: the host was "
          "flushing other writers' data (fio's psync fdatasync waits for it; the log's p50 is made of the "
          "syncs that do not), so the fio-based floor ratio says little in this run" +
          ("; the row with the log's own 1-writer p50 is the tighter check." if log1 else "."))
        p("")
    same = [r for r in ringraft if r["requests_in_flight"] == 128 and r["records_in_flight"] == 128]
    peers = [(name, ops, runs) for name, ops, runs in (("etcd", "puts", etcd), ("ZooKeeper", "creates", zookeeper))
             if runs]
    notes = []
    for name, ops, runs in peers:
        peer_one = min(runs, key=lambda r: r["records_in_flight"])
        notes.append(f"With one write in flight: ringraft p50 {fmt(one['lat']['p50'])} us, "
                     f"{fmt(one['per_sec'])} records/s; {name} p50 {fmt(peer_one['lat']['p50'])} us, "
                     f"{fmt(peer_one['per_sec'])} {ops}/s ({peer_one['lat']['p50'] / max(one['lat']['p50'], 1e-9):.1f}x "
                     f"ringraft's p50).")
    for name, ops, runs in peers:
        peer128 = [e for e in runs if e["requests_in_flight"] == 128]
        if same and peer128:
            notes.append(f"Like for like, one 1 KiB write per request and 128 in flight: ringraft "
                         f"{fmt(same[0]['per_sec'])} records/s vs {name} {fmt(peer128[0]['per_sec'])} {ops}/s "
                         f"({same[0]['per_sec'] / max(peer128[0]['per_sec'], 1e-9):.1f}x).")
    bad_exits = [x for r in ringraft for x in r["exits"] if not x.endswith("exit status: 0")]
    if bad_exits:
        notes.append(f"ringraft node exits: {bad_exits}")
    for name, ops, runs in peers:
        errors = sum(e["errors"] for e in runs)
        if errors:
            notes.append(f"{name} {ops[:-1]} errors: {errors}")
        left = sum(e["cleanup_left"] for e in runs)
        if left:
            notes.append(f"{name}: {left} znodes of earlier runs were not deleted, so later runs met a bigger tree")
    for note in notes:
        p(note)
        p("")
    print("\n".join(out).rstrip())


if __name__ == "__main__":
    main()
