#!/usr/bin/env bash
# Two `glass` binaries' servers side by side under interactive clients: for each round, each
# binary in turn serves WORKLOAD from a fresh in-memory database on core 0 while the client
# (always the first binary) runs on core 1; prints each run's throughput and what the server
# said when it stopped (parked batches, lock waits and refusals, the consistency check).
#
#   bench/server/ab-interactive.sh OLD NEW WORKLOAD [SCALE] [CONNECTIONS] [ROUNDS] [ARCH] [WORKERS]
#
# e.g. bench/server/ab-interactive.sh /tmp/glass-old target/release/glass tpcc 1 16 3 unified 2
# CLIENT_ARGS adds flags to the client's command (e.g. CLIENT_ARGS=--no-prefetch).
set -euo pipefail

OLD=$1 NEW=$2 W=$3 S=${4:-1} C=${5:-4} R=${6:-3} A=${7:-unified} K=${8:-1}
SOCK=$(mktemp -u /tmp/glass-ab.XXXXXX.sock)
LOG=$(mktemp /tmp/glass-ab.XXXXXX.log)
trap 'rm -f "$SOCK" "$LOG"' EXIT
for r in $(seq 1 "$R"); do
  for b in old new; do
    bin=$OLD
    [ "$b" = new ] && bin=$NEW
    rm -f "$SOCK"
    taskset -c 0 "$bin" serve "$W" --scale "$S" --unix "$SOCK" --workers "$K" --arch "$A" \
      > "$LOG" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
    sleep 0.3
    line=$(taskset -c 1 "$OLD" bench "$W" --server "unix://$SOCK" --mode interactive \
      --connections "$C" --duration 3 --warmup 1 ${CLIENT_ARGS:-} 2>&1 | grep -E '^[0-9]+ transactions' || true)
    kill -INT "$pid"
    wait "$pid" || true
    echo "$b round $r: $line"
    grep -E '^(served|locks|consistency)' "$LOG" | sed 's/^/    /'
  done
done
