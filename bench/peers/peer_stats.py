"""What the peer load drivers (etcd_put.py, zk_create.py) share: their options, the fields of a
run's result and the writing of it as JSON, so that the peers' results read alike."""
import argparse
import json


def driver_parser(doc: str, endpoint_help: str) -> argparse.ArgumentParser:
    """The command line every driver takes, described by the first line of its `doc`: the
    leader's --endpoint, the load's shape (add_load_args) and --json (emit's file); the driver
    adds its own options."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--endpoint", required=True, help=endpoint_help)
    add_load_args(parser)
    parser.add_argument("--json", help="also write the JSON object here")
    return parser


def add_load_args(parser) -> None:
    """The load's shape, the same for every driver: writes in flight, value size, run time,
    warm-up and driver processes."""
    parser.add_argument("--inflight", type=int, default=1)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--processes", type=int, default=0,
                        help="driver processes (0: 1 for inflight<=16, else 2)")


def process_shares(args) -> list:
    """The writes in flight each driver process keeps: --processes of them (0: 1 up to 16 in
    flight, else 2), never more than there are writes in flight, sharing them as evenly as can
    be."""
    processes = args.processes or (1 if args.inflight <= 16 else 2)
    processes = min(processes, args.inflight)
    return [args.inflight // processes + (1 if i < args.inflight % processes else 0)
            for i in range(processes)]


def percentile(sorted_values, q: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, int(q * len(sorted_values)))
    return sorted_values[index]


def latency_summary(latencies) -> dict:
    """p50, p99, p999, max and mean of `latencies` (sorted, microseconds); zeros when empty."""
    count = len(latencies)
    return {
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
        "p999": percentile(latencies, 0.999),
        "max": latencies[-1] if latencies else 0.0,
        "mean": sum(latencies) / count if count else 0.0,
    }


def load_shape(args, processes: int) -> dict:
    """Where the load went and its shape (add_load_args's options), as every result states it."""
    return {
        "endpoint": args.endpoint,
        "inflight": args.inflight,
        "value_bytes": args.value_bytes,
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "processes": processes,
    }


def load_figures(writes: str, args, results) -> dict:
    """What the driver processes' `results` did in the measured window, summed: `writes` (the
    peer's word: puts, creates) counts the acknowledged writes, one latency each."""
    latencies = sorted(x for r in results for x in r["latencies"])
    count = len(latencies)
    return {
        writes: count,
        f"{writes}_per_sec": count / args.duration,
        "mb_per_sec": count * args.value_bytes / args.duration / 1e6,
        "latency_us": latency_summary(latencies),
        "errors": sum(r["errors"] for r in results),
        "last_error": next((r["last_error"] for r in results if r["last_error"]), ""),
        "driver_cpu_percent": [round(r["cpu_percent"], 1) for r in results],
    }


def loadavg() -> list:
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def emit(summary: dict, json_path) -> None:
    """Prints the run's result and writes it to `json_path` when one is given."""
    text = json.dumps(summary, indent=2)
    print(text)
    if json_path:
        with open(json_path, "w") as out:
            out.write(text + "\n")
