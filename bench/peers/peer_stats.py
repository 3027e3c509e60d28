"""What the peer load drivers (etcd_put.py, zk_create.py) share: the latency summary of a run
and the writing of its JSON result, so that the peers' results read alike."""
import json


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
