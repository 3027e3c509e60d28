#!/usr/bin/env python3
"""Closed-loop create load on one ZooKeeper server (the leader), N creates in flight, for D seconds.

Each create is a persistent znode with a distinct name under one parent made for the run, holding
VALUE_BYTES of data, issued with kazoo's create_async: a slot issues its next create from the
completion of its last, so exactly N requests are outstanding. The N slots are split over P
processes (one kazoo client, so one session and one TCP connection, in each), because one Python
process saturates a core well below what ZooKeeper can take; each process reports its CPU time so
the caller can tell whether the driver was the bottleneck. After the measured window the run's
znodes are deleted (with the same number in flight, outside the clock), so every run of a series
starts from the same small tree, as etcd_put.py's bounded key space keeps etcd's.

Prints one JSON object (and writes it to --json FILE): creates_per_sec, mb_per_sec (value bytes,
10^6 B/MB), latency_us {p50, p99, p999, max, mean}, inflight, value_bytes, processes,
driver_cpu_percent (per process, of one core), driver_late_s (per process, how long after the
shared start it connected), errors, cleanup {deleted, errors, left, seconds}, loadavg.
"""
import multiprocessing
import os
import queue
import resource
import sys
import threading
import time

from peer_stats import driver_parser, emit, load_figures, load_shape, loadavg, process_shares

# A create that has not completed this long after its deadline is counted as failed.
RPC_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 15.0
PARENT = "/ringraft-bench"


class ClosedLoop:
    """`slots` chains of requests; a chain issues its next request from its last one's completion.

    Completions arrive on kazoo's completion thread while the first requests are issued from the
    caller's, hence the lock. `issue(k)` starts request number k and returns its async result, or
    None when there is no request k (the chain ends); `done(k, started, finished, error)` sees
    each completion; `more(now, slot_count)` says whether a chain goes on.
    """

    def __init__(self, slots, issue, done, more):
        self.issue, self.done, self.more = issue, done, more
        self.lock = threading.Lock()
        self.next_index = 0
        self.outstanding = 0
        self.slot_counts = [0] * slots
        self.finished = threading.Event()
        self.slots = slots

    def start(self):
        with self.lock:
            self.outstanding = self.slots
        if self.slots == 0:
            self.finished.set()
        for slot in range(self.slots):
            self._next(slot)

    def _next(self, slot):
        with self.lock:
            k = self.next_index
            self.next_index += 1
        started = time.monotonic()
        try:
            result = self.issue(k)
        except Exception as error:  # a refusal before the request left is a failed request
            self.done(k, started, time.monotonic(), error)
            self._end(slot)
            return
        if result is None:
            self._end(slot)
            return
        result.rawlink(lambda r: self._completed(slot, k, started, r))

    def _completed(self, slot, k, started, result):
        finished = time.monotonic()
        self.done(k, started, finished, result.exception)
        with self.lock:
            self.slot_counts[slot] += 1
            count = self.slot_counts[slot]
        if self.more(finished, count):
            self._next(slot)
        else:
            self._end(slot)

    def _end(self, slot):
        with self.lock:
            self.outstanding -= 1
            last = self.outstanding == 0
        if last:
            self.finished.set()

    def left(self):
        with self.lock:
            return self.outstanding


def run_process(args, run_path, proc_index, inflight, start_at):
    from kazoo.client import KazooClient  # imported in the child: each process has its own threads

    value = bytes((proc_index * 7 + j) % 251 for j in range(args.value_bytes))
    latencies = []
    created = []
    counts = {"errors": 0, "last_error": ""}
    lock = threading.Lock()
    client = KazooClient(hosts=args.endpoint, timeout=RPC_TIMEOUT_S)
    client.start(timeout=CONNECT_TIMEOUT_S)
    try:
        # srvr is the one four-letter word the ensemble allows (kazoo's server_version asks envi).
        srvr = client.command(b"srvr")
        version = next((line.split(":", 1)[1].strip().split("-")[0] for line in srvr.splitlines()
                        if line.startswith("Zookeeper version:")), "")
        # One create before the clock starts, so connection setup is not measured.
        warm = f"{run_path}/warm-{proc_index}"
        client.create(warm, b"x")
        created.append(warm)
        delay = start_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        measure_from = start_at + args.warmup
        stop_at = measure_from + args.duration

        def path(k):
            return f"{run_path}/p{proc_index}-{k}"

        def create_done(k, started, finished, error):
            with lock:
                if error is None:
                    created.append(path(k))
                    if started >= measure_from and finished <= stop_at:
                        latencies.append((finished - started) * 1e6)
                else:  # an error is counted and reported, never hidden
                    counts["errors"] += 1
                    counts["last_error"] = repr(error)[:300]

        cpu_before = resource.getrusage(resource.RUSAGE_SELF)
        load = ClosedLoop(
            inflight,
            issue=lambda k: client.create_async(path(k), value),
            done=create_done,
            more=lambda now, count: now < stop_at and count < args.max_creates,
        )
        load.start()
        if not load.finished.wait(max(0.0, stop_at - time.monotonic()) + RPC_TIMEOUT_S):
            with lock:
                counts["errors"] += load.left()
                counts["last_error"] = f"{load.left()} creates not completed {RPC_TIMEOUT_S} s after the deadline"
        cpu_after = resource.getrusage(resource.RUSAGE_SELF)

        # Outside the clock: this run's znodes go, so the next run finds the tree as this one did.
        cleanup_start = time.monotonic()
        cleanup_stop = cleanup_start + args.cleanup_max
        with lock:
            doomed = list(created)
        cleanup = {"deleted": 0, "errors": 0, "last_error": ""}

        def delete_done(k, started, finished, error):
            with lock:
                if error is None:
                    cleanup["deleted"] += 1
                else:
                    cleanup["errors"] += 1
                    cleanup["last_error"] = repr(error)[:300]

        # Each chain takes the next name; a chain stops when the names or the time run out.
        deletes = ClosedLoop(
            min(inflight, len(doomed)),
            issue=lambda k: client.delete_async(doomed[k]) if k < len(doomed) else None,
            done=delete_done,
            more=lambda now, count: now < cleanup_stop,
        )
        deletes.start()
        if not deletes.finished.wait(max(0.0, cleanup_stop - time.monotonic()) + RPC_TIMEOUT_S):
            with lock:
                cleanup["errors"] += deletes.left()
                cleanup["last_error"] = f"{deletes.left()} deletes not completed by the cleanup deadline"
        with lock:
            cleanup["left"] = len(doomed) - cleanup["deleted"]
        cleanup["seconds"] = time.monotonic() - cleanup_start
    finally:
        client.stop()
        client.close()
    cpu_s = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    with lock:
        return {
            "latencies": latencies,
            "errors": counts["errors"],
            "last_error": counts["last_error"],
            "cpu_percent": 100.0 * cpu_s / (args.warmup + args.duration),
            "cleanup": cleanup,
            "server_version": version,
            # A process that connected after the shared start loses warm-up, or measured time
            # once this passes the warm-up.
            "late_s": max(0.0, -delay),
        }


def child(args, run_path, proc_index, inflight, start_at, results):
    try:
        result = run_process(args, run_path, proc_index, inflight, start_at)
    except Exception as error:
        result = {"latencies": [], "errors": 1, "last_error": repr(error)[:300], "cpu_percent": 0.0,
                  "cleanup": {"deleted": 0, "errors": 0, "left": 0, "seconds": 0.0, "last_error": ""},
                  "server_version": "", "late_s": 0.0, "failed": True}
    results.put(result)


def with_client(endpoint, action):
    from kazoo.client import KazooClient

    client = KazooClient(hosts=endpoint, timeout=RPC_TIMEOUT_S)
    client.start(timeout=CONNECT_TIMEOUT_S)
    try:
        return action(client)
    finally:
        client.stop()
        client.close()


def main():
    parser = driver_parser(__doc__, "HOST:PORT of the leader's client port")
    parser.add_argument("--max-creates", type=int, default=10_000_000,
                        help="per in-flight slot, a bound on the loop besides the deadline")
    parser.add_argument("--cleanup-max", type=float, default=0.0,
                        help="seconds allowed for deleting the run's znodes (0: 60 + 3 x the run)")
    args = parser.parse_args()
    # jute.maxbuffer (1 MiB less a little by default) bounds one znode's data.
    assert args.inflight >= 1 and 0 <= args.value_bytes < 1_000_000 and args.duration > 0
    if args.cleanup_max <= 0:
        args.cleanup_max = 60 + 3 * (args.warmup + args.duration)

    shares = process_shares(args)
    processes = len(shares)
    # The run's parent is made before the workers fork (the client and its threads are gone by
    # then) and removed after they have deleted their znodes.
    run_path = f"{PARENT}/run-{os.getpid()}-{args.inflight}"
    with_client(args.endpoint, lambda c: c.create(run_path, b"", makepath=True))
    # Every process starts its clock at the same instant, after all have connected.
    start_at = time.monotonic() + 2.0
    ctx = multiprocessing.get_context("fork")
    results_queue = ctx.Queue()
    workers = [ctx.Process(target=child, args=(args, run_path, i, shares[i], start_at, results_queue))
               for i in range(processes)]
    for worker in workers:
        worker.start()
    deadline = start_at + args.warmup + args.duration + 2 * RPC_TIMEOUT_S + args.cleanup_max + 30
    results = []
    for _ in workers:
        try:
            results.append(results_queue.get(timeout=max(1.0, deadline - time.monotonic())))
        except queue.Empty:
            break
    missing = len(workers) - len(results)
    for worker in workers:
        worker.join(timeout=10)
        if worker.is_alive():
            worker.kill()
            worker.join(timeout=10)
    for _ in range(missing):
        results.append({"latencies": [], "errors": 1, "cpu_percent": 0.0, "server_version": "", "late_s": 0.0,
                        "last_error": "driver process gave no result by the deadline (killed)",
                        "cleanup": {"deleted": 0, "errors": 0, "left": 0, "seconds": 0.0, "last_error": ""},
                        "failed": True})
    parent_error = ""
    try:
        with_client(args.endpoint, lambda c: c.delete(run_path))
    except Exception as error:  # e.g. NotEmptyError when some deletes failed: reported below
        parent_error = repr(error)[:300]

    cleanup = [r["cleanup"] for r in results]
    summary = {
        "system": "zookeeper",
        "server_version": next((r["server_version"] for r in results if r["server_version"]), ""),
        **load_shape(args, processes),
        **load_figures("creates", args, results),
        "driver_late_s": [round(r["late_s"], 3) for r in results],
        "cleanup": {
            "deleted": sum(c["deleted"] for c in cleanup),
            "errors": sum(c["errors"] for c in cleanup),
            "left": sum(c["left"] for c in cleanup),
            "seconds": round(max(c["seconds"] for c in cleanup), 2),
            "last_error": next((c["last_error"] for c in cleanup if c["last_error"]), "") or parent_error,
        },
        "loadavg": loadavg(),
    }
    emit(summary, args.json)
    if summary["cleanup"]["left"] or parent_error:
        print(f"zk_create: {summary['cleanup']['left']} znodes of this run left in the tree "
              f"({summary['cleanup']['last_error']}); later runs start from a bigger tree", file=sys.stderr)
    if any(r.get("failed") for r in results) or summary["creates"] == 0:
        sys.exit(1)


if __name__ == "__main__":
    main()
