#!/usr/bin/env python3
"""Syscalls, io_uring submissions, context switches and CPU per committed record, per thread of
every node, while `ringraft-bench` drives its local cluster.

    bench/profile/syscalls.py [--window S] -- [ringraft-bench cluster args...]

Starts target/release/ringraft-bench with the given arguments (plus --json), waits for the
warm-up to pass, attaches `perf stat --per-thread` (Debian's linux-perf; tracepoints only, so it
works where hardware counters are not exposed) to the nodes for --window seconds, and prints one
row per thread kind and node: counts per second and per committed record, using the bench's own
records/s for the same run. Needs root (tracepoints). Not run in CI.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

EVENTS = [
    "raw_syscalls:sys_enter",
    "io_uring:io_uring_submit_req",
    "context-switches",
    "task-clock",
]
BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "target", "release", "ringraft-bench")


def node_pids(deadline, expected):
    """pid -> node id of the running `ringraft serve` processes, once all `expected` are up."""
    while time.time() < deadline:
        out = subprocess.run(["pgrep", "-af", "ringraft serve"], capture_output=True, text=True).stdout
        pids = {}
        for line in out.splitlines():
            m = re.match(r"(\d+) .*server-(\d+)\.properties", line)
            if m:
                pids[int(m.group(1))] = int(m.group(2))
        if len(pids) >= expected:
            return pids
        time.sleep(0.2)
    sys.exit("no ringraft serve process appeared")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", type=float, default=4.0)
    parser.add_argument("bench_args", nargs="*")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="ringraft-syscalls-")
    report = os.path.join(workdir, "bench.json")
    warmup = 2.0
    duration = args.window + 4.0
    bench = subprocess.Popen(
        [BENCH, *args.bench_args, "--warmup", str(warmup), "--duration", str(duration), "--json", report],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        nodes = 3
        if "--nodes" in args.bench_args:
            nodes = int(args.bench_args[args.bench_args.index("--nodes") + 1])
        pids = node_pids(time.time() + 30, nodes)
        time.sleep(warmup + 1.5)  # leader elected, warm-up over
        perf = subprocess.run(
            ["perf", "stat", "-x", ",", "--per-thread", "-e", ",".join(EVENTS),
             "-p", ",".join(map(str, pids)), "--", "sleep", str(args.window)],
            capture_output=True, text=True, timeout=args.window + 30)
        threads = thread_owners(pids)  # while the nodes still run
        output, _ = bench.communicate(timeout=duration + 120)
    finally:
        if bench.poll() is None:
            bench.terminate()
    if bench.returncode != 0:
        sys.exit(f"ringraft-bench failed:\n{output}")
    with open(report) as f:
        r = json.load(f)
    rate = r["records_per_sec"]
    batches = rate / r["batch_records"]
    leader = r.get("leader_id")
    rows = {}
    for line in perf.stderr.splitlines():
        parts = line.split(",")
        if len(parts) < 4 or "-" not in parts[0]:
            continue
        comm, tid = parts[0].rsplit("-", 1)
        try:
            value = float(parts[1])
        except ValueError:
            continue
        node = pids.get(threads.get(int(tid)), "?")
        kind = "io-wq" if comm.startswith("iou-wrk") else comm
        key = (node, kind)
        rows.setdefault(key, {e: 0.0 for e in EVENTS})
        rows[key][parts[3]] = rows[key].get(parts[3], 0.0) + value
    print(f"{r['records_per_sec']:.0f} records/s, {r['batch_records']} records per batch, "
          f"{r['connections']} connections x {r['inflight_per_connection']} in flight; "
          f"leader node {leader}; loadavg {r['loadavg']}")
    print(f"{'node':>6} {'thread':<14} {'cpu %':>6} {'syscalls/batch':>15} {'sqes/batch':>11} "
          f"{'ctxsw/batch':>12} {'cpu ns/record':>14}")
    for (node, kind), c in sorted(rows.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        per = lambda v: v / args.window / batches if batches else float("nan")
        cpu_ms = c["task-clock"]
        print(f"{str(node) + ('*' if node == leader else ''):>6} {kind:<14} "
              f"{cpu_ms / 10 / args.window:6.1f} {per(c['raw_syscalls:sys_enter']):15.2f} "
              f"{per(c['io_uring:io_uring_submit_req']):11.2f} {per(c['context-switches']):12.2f} "
              f"{cpu_ms * 1e6 / args.window / rate if rate else float('nan'):14.0f}")
    print("(* = leader; io-wq = the kernel's io_uring workers of that node, where fdatasync runs)")


def thread_owners(pids):
    """tid -> pid for every thread of the given processes (io_uring workers included)."""
    owners = {}
    for pid in pids:
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                owners[int(tid)] = pid
        except OSError:
            pass
    return owners


if __name__ == "__main__":
    main()
