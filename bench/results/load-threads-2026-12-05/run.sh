#!/usr/bin/env bash
cd /work/main; source bench/peers/settle.sh
for r in 1 2 3; do for t in 16 4 2; do settle_disk /tmp >/dev/null
./target/release/ringraft-bench cluster --connections 16 --inflight 8 --duration 8 --load-threads $t --json /tmp/lt/t$t-r$r.json > /tmp/lt/t$t-r$r.log 2>&1
done; done
