#!/usr/bin/env bash
# Sourced by the peer scripts: settle_disk DIR lets the disk holding DIR go quiet before a run.
# sync, then wait (at most SETTLE_MAX_S seconds, default 60) until /proc/diskstats has shown no
# IO in flight for that device in every sample of the last SETTLE_QUIET_S seconds (default 3),
# then print the load average. The host's write-back cache is not visible from here: a quiet
# queue in the guest is the best available sign that earlier writes are out of the way.

disk_of() {
    local source name parent
    source=$(df --output=source "$1" | tail -1)
    name=${source#/dev/}
    parent=$(lsblk -no pkname "$source" 2>/dev/null | head -1 || true)
    if [ -n "$parent" ]; then name=$parent; fi
    echo "$name"
}

disk_inflight() {
    # Field 12 of /proc/diskstats: I/Os currently in progress.
    awk -v dev="$1" '$3 == dev { print $12 }' /proc/diskstats
}

settle_disk() {
    local dir=$1 dev quiet_s=${SETTLE_QUIET_S:-3} max_s=${SETTLE_MAX_S:-60}
    dev=$(disk_of "$dir")
    sync
    local start now quiet_since inflight
    start=$(date +%s)
    quiet_since=$start
    while :; do
        now=$(date +%s)
        inflight=$(disk_inflight "$dev")
        if [ "${inflight:-0}" != 0 ]; then quiet_since=$now; fi
        if [ $((now - quiet_since)) -ge "$quiet_s" ]; then break; fi
        if [ $((now - start)) -ge "$max_s" ]; then
            echo "settle: $dev still busy after ${max_s}s (in flight: $inflight), going on" >&2
            break
        fi
        sleep 0.2
    done
    echo "settle: $dev quiet for ${quiet_s}s after $(( $(date +%s) - start ))s; load: $(cut -d' ' -f1-3 /proc/loadavg)"
}
