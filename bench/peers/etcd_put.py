#!/usr/bin/env python3
"""Closed-loop Put load on one etcd endpoint (the leader), N puts in flight, for D seconds.

Calls /etcdserverpb.KV/Put through grpcio with a hand-encoded PutRequest (field 1 key, field 2
value; both length-delimited) and identity serializers, so no generated stubs and no etcd3
package (which does not import with current protobuf) are needed. The in-flight puts are split
over P processes (asyncio grpc.aio in each), because one Python process saturates a core well
below what etcd can take; each process reports its CPU time so the caller can tell whether the
driver was the bottleneck.

Prints one JSON object (and writes it to --json FILE): puts_per_sec, mb_per_sec (value bytes,
10^6 B/MB), latency_us {p50, p99, p999, max, mean}, inflight, value_bytes, processes,
driver_cpu_percent (per process, of one core), errors, loadavg.
"""
import asyncio
import multiprocessing
import os
import resource
import sys
import time

from peer_stats import driver_parser, emit, load_figures, load_shape, loadavg, process_shares

PUT_METHOD = "/etcdserverpb.KV/Put"
# Keys cycle over a bounded space per process so the keyspace stays small however long the run.
KEYS_PER_PROCESS = 4096
RPC_TIMEOUT_S = 10.0


def varint(n: int) -> bytes:
    assert n >= 0
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def put_request(key: bytes, value: bytes) -> bytes:
    # PutRequest: key = 1 (bytes), value = 2 (bytes). Wire type 2 = length-delimited.
    return b"\x0a" + varint(len(key)) + key + b"\x12" + varint(len(value)) + value


async def put_loop(call, requests, start_at, measure_from, stop_at, max_puts, latencies, counts):
    i = 0
    while i < max_puts:
        now = time.monotonic()
        if now >= stop_at:
            return
        request = requests[i % len(requests)]
        i += 1
        try:
            await call(request, timeout=RPC_TIMEOUT_S)
        except Exception as error:  # an error is counted and reported, never hidden
            counts["errors"] += 1
            counts["last_error"] = repr(error)[:300]
            continue
        done = time.monotonic()
        if now >= measure_from and done <= stop_at:
            latencies.append((done - now) * 1e6)


async def run_process(target, inflight, value_bytes, proc_index, start_at, warmup, duration, max_puts):
    import grpc  # imported in the child so each process has its own gRPC core

    value = bytes((proc_index * 7 + j) % 251 for j in range(value_bytes))
    requests = [
        put_request(b"bench/%d/%d" % (proc_index, k), value) for k in range(KEYS_PER_PROCESS)
    ]
    latencies = []
    counts = {"errors": 0, "last_error": ""}
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_unary(PUT_METHOD, request_serializer=None, response_deserializer=None)
        # One put before the clock starts, so connection setup is not measured.
        await call(put_request(b"bench/warm", b"x"), timeout=RPC_TIMEOUT_S)
        delay = start_at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        measure_from = start_at + warmup
        stop_at = measure_from + duration
        cpu_before = resource.getrusage(resource.RUSAGE_SELF)
        await asyncio.gather(
            *(
                put_loop(call, requests, start_at, measure_from, stop_at, max_puts, latencies, counts)
                for _ in range(inflight)
            )
        )
        cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return {
        "latencies": latencies,
        "errors": counts["errors"],
        "last_error": counts["last_error"],
        "cpu_percent": 100.0 * cpu_s / (warmup + duration),
    }


def child(args, proc_index, inflight, start_at, queue):
    try:
        result = asyncio.run(
            run_process(
                args.endpoint, inflight, args.value_bytes, proc_index, start_at,
                args.warmup, args.duration, args.max_puts,
            )
        )
    except Exception as error:
        result = {"latencies": [], "errors": 1, "last_error": repr(error)[:300], "cpu_percent": 0.0,
                  "failed": True}
    queue.put(result)


def main():
    parser = driver_parser(__doc__, "HOST:PORT of the leader's client URL")
    parser.add_argument("--max-puts", type=int, default=10_000_000,
                        help="per in-flight slot, a bound on the loop besides the deadline")
    args = parser.parse_args()
    assert args.inflight >= 1 and args.value_bytes >= 0 and args.duration > 0

    shares = process_shares(args)
    processes = len(shares)
    # Every process starts its clock at the same instant, after all have connected.
    start_at = time.monotonic() + 2.0
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    workers = [ctx.Process(target=child, args=(args, i, shares[i], start_at, queue))
               for i in range(processes)]
    for worker in workers:
        worker.start()
    deadline = start_at + args.warmup + args.duration + RPC_TIMEOUT_S + 30
    results = []
    for _ in workers:
        results.append(queue.get(timeout=max(1.0, deadline - time.monotonic())))
    for worker in workers:
        worker.join(timeout=10)
        if worker.is_alive():
            worker.kill()

    summary = {
        "system": "etcd",
        **load_shape(args, processes),
        **load_figures("puts", args, results),
        "loadavg": loadavg(),
    }
    emit(summary, args.json)
    if any(r.get("failed") for r in results) or summary["puts"] == 0:
        sys.exit(1)


if __name__ == "__main__":
    main()
