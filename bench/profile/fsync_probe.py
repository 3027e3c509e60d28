#!/usr/bin/env python3
"""A 4 KiB write + fdatasync on the disk every 100 ms for SECONDS; prints the ones over 20 ms
with their UTC time, then p50/p99/max. Run beside a long benchmark to tell the host disk's
stalls from the node's: `bench/profile/fsync_probe.py 600 [FILE]` (FILE defaults to
/tmp/fsync-probe.dat, on the disk under test). Not run in CI."""
import os, time, sys
path = sys.argv[2] if len(sys.argv) > 2 else "/tmp/fsync-probe.dat"
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
buf = b"\0" * 4096
end = time.time() + float(sys.argv[1])
lat = []
while time.time() < end:
    t = time.time()
    os.pwrite(fd, buf, 0)
    os.fdatasync(fd)
    d = (time.time() - t) * 1000
    lat.append(d)
    if d > 20:
        print(f"{time.strftime('%H:%M:%S', time.gmtime(t))} fdatasync {d:.1f} ms", flush=True)
    time.sleep(0.1)
lat.sort()
print(f"n={len(lat)} p50={lat[len(lat)//2]:.2f}ms p99={lat[int(len(lat)*0.99)]:.2f}ms max={lat[-1]:.1f}ms")
