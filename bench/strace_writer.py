# Summarises strace -T -tt traces of the log-writer thread (/tmp/soak/st-PID.txt): per call, count, p50, max, and the calls over 50 ms.
import collections, glob, gzip, re, sys
# usage: python3 bench/strace_writer.py 'DIR/st-*.txt*'   (plain or .gz)
for path in sorted(glob.glob(sys.argv[1] if len(sys.argv) > 1 else '/tmp/soak/st-[0-9]*.txt')):
    opener = gzip.open if path.endswith('.gz') else open
    lines=opener(path, 'rt').read().splitlines()
    calls=[]
    for l in lines:
        m=re.match(r'(\d+:\d+:\d+\.\d+) (\w+)\((.*)\)\s+=\s+(\S+).*<([\d.]+)>$', l)
        if m: calls.append((m.group(1), m.group(2), m.group(3)[:60], float(m.group(5))))
    by=collections.defaultdict(list)
    for c in calls: by[c[1]].append(c[3])
    print(path, len(calls), 'calls')
    for k,v in sorted(by.items()):
        v=sorted(v); print(f"  {k:16s} n={len(v):6d} p50={v[len(v)//2]*1e3:8.2f}ms max={v[-1]*1e3:8.1f}ms over50ms={sum(x>0.05 for x in v)}")
    slow=[c for c in calls if c[3]>0.05]
    for c in slow[:12]: print("   slow:", c[0], c[1], c[2], f"{c[3]*1e3:.1f} ms")
