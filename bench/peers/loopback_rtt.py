#!/usr/bin/env python3
"""Loopback TCP round trip between two processes: a ping-pong of SIZE-byte messages.

One process echoes, the other sends a message, waits for the echo, and times each round trip
(blocking sockets, TCP_NODELAY). Bounded by --count round trips and --seconds. With --cpus A,B the
pinger runs on CPU A and the echoer on CPU B (e.g. 0,0 for one vCPU, 0,1 across two); by default
both are left to the scheduler, as the cluster's processes are. Python's own per-message work is
included (a few microseconds per round trip), so the figure is an upper bound on the kernel's.

Prints one JSON object (and writes it to --json FILE): rtt_us {p50, p99, min, mean}, count, cpus.
"""
import argparse
import json
import os
import socket
import time


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("peer closed")
        buf += chunk
    return bytes(buf)


def echo(listener, size, cpu):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            conn.sendall(recv_exact(conn, size))
    except (ConnectionError, OSError):
        pass
    finally:
        conn.close()


def ping(port, size, count, seconds, warmup, cpu):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    message = bytes(size)
    for _ in range(warmup):
        sock.sendall(message)
        recv_exact(sock, size)
    samples = []
    deadline = time.monotonic() + seconds
    while len(samples) < count and time.monotonic() < deadline:
        start = time.perf_counter_ns()
        sock.sendall(message)
        recv_exact(sock, size)
        samples.append((time.perf_counter_ns() - start) / 1000)
    sock.close()
    return samples


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--cpus", help="PINGER,ECHOER CPU numbers (default: unpinned)")
    parser.add_argument("--json", help="also write the JSON object here")
    args = parser.parse_args()
    cpus = [int(c) for c in args.cpus.split(",")] if args.cpus else [None, None]
    assert len(cpus) == 2

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    child = os.fork()
    if child == 0:
        try:
            echo(listener, args.size, cpus[1])
        finally:
            os._exit(0)
    listener.close()
    try:
        samples = ping(port, args.size, args.count, args.seconds, args.warmup, cpus[0])
    finally:
        os.waitpid(child, 0)
    assert samples, "no round trip completed"
    samples.sort()
    n = len(samples)
    result = {
        "what": "loopback TCP round trip between two processes (python ping-pong)",
        "message_bytes": args.size,
        "cpus": args.cpus or "unpinned",
        "count": n,
        "rtt_us": {
            "p50": samples[n // 2],
            "p99": samples[min(n - 1, int(n * 0.99))],
            "min": samples[0],
            "mean": sum(samples) / n,
        },
        "loadavg": open("/proc/loadavg").read().split()[:3],
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
