#!/usr/bin/env python3
# usage: python3 bench/fio/minutes.py /tmp/fio/lat   (the write_lat_log prefix of bench/fio/soak-rate.fio)
# Per-minute latency of every write in fio's per-IO logs (time ms, latency ns, dir, bs, offset).
import glob, sys
rows = {}
for path in sorted(glob.glob(sys.argv[1] + "_clat.*.log")):
    for line in open(path):
        f = line.split(",")
        t_ms, lat_ns = int(f[0]), int(f[1])
        rows.setdefault(t_ms // 60000, []).append(lat_ns / 1000)
print("minute writes p50_us p99_us p999_us max_us over_20ms over_100ms")
for m in sorted(rows):
    v = sorted(rows[m]); n = len(v)
    q = lambda p: v[min(n - 1, int(p * n))]
    print(m + 1, n, round(q(.5)), round(q(.99)), round(q(.999)), round(v[-1]),
          sum(x > 20000 for x in v), sum(x > 100000 for x in v))
