"""Groups `perf script -F event,ip,sym` call stacks of malloc uprobes by the first ringraft
function above the allocator (and the library call it made), per request.

    perf script ... | python3 bench/profile/allocation_sites.py REQUESTS_IN_THE_WINDOW
"""
import collections
import re
import sys

ALLOCATOR = ("__GI", "__libc", "<std::alloc", "__rustc", "alloc::alloc", "<alloc::alloc",
             "alloc::raw_vec", "<alloc::raw_vec")


def site(frames):
    library = None
    for frame in frames:
        if frame.startswith(("net::", "engine::", "ringraft")) or "<net::" in frame or "<engine::" in frame:
            return re.sub(r"\{\{closure\}\}", "", frame)[:110], (library or "")[:60]
        if not frame.startswith(ALLOCATOR):
            library = library or frame
    return "?", (library or "")[:60]


def main():
    requests = float(sys.argv[1])
    counts = collections.Counter()
    frames = []
    samples = 0
    for line in sys.stdin:
        line = line.rstrip("\n")
        if line.startswith(" probe_libc") or line.startswith("probe_libc"):
            if frames:
                counts[site(frames)] += 1
                samples += 1
            frames = []
        elif line.strip():
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                frames.append(re.sub(r" \(inlined\)$", "", parts[1]))
    if frames:
        counts[site(frames)] += 1
        samples += 1
    print(f"{samples / requests:.2f} mallocs per request in the window ({samples} samples)")
    for (ours, library), n in counts.most_common(30):
        print(f"{n / requests:6.2f}  {ours}  <- {library}")


if __name__ == "__main__":
    main()
