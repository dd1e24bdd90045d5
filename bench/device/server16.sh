#!/bin/bash
# The server across cores, on a lent 16-core machine: YCSB-C stored procedures against
# `glass serve` with 1, 2, 4 and 8 workers, under both thread architectures. The server is
# pinned to cores 0..W-1 (unified) or 0..W (dedicated: its network thread gets a core of its
# own); CLIENTS client processes (one thread each, multiplexing CONNS connections) share the
# cores from CLIENT_CORES. Carry target/release/glass. Prints a line per run and a table.
#
#   WORKERS="1 2 4 8" CLIENTS=6 CONNS=64 CLIENT_CORES=9-15 SECS=3 bench/device/server16.sh
set -u
G=${GLASS:-target/release/glass}
WORKERS=${WORKERS:-"1 2 4 8"}
CLIENTS=${CLIENTS:-6}
CONNS=${CONNS:-64}
CLIENT_CORES=${CLIENT_CORES:-9-15}
SECS=${SECS:-3}
WORK=$(mktemp -d)
echo "cores: $(nproc); clients: $CLIENTS processes x $CONNS connections on cores $CLIENT_CORES"
declare -A TPS
for arch in unified dedicated; do
  for w in $WORKERS; do
    [ "$arch" = dedicated ] && last=$w || last=$((w - 1))
    taskset -c "0-$last" "$G" serve ycsb --scale 100000 --ycsb-workload C --listen 127.0.0.1:0 \
      --arch "$arch" --workers "$w" --quiet >"$WORK/serve.out" 2>"$WORK/serve.err" &
    pid=$!
    for _ in $(seq 1 600); do grep -q '^listening on tcp://' "$WORK/serve.out" && break; sleep 0.1; done
    addr=$(sed -n 's|^listening on tcp://||p' "$WORK/serve.out" | head -n 1)
    if [ -z "$addr" ]; then echo "server did not start: $(cat "$WORK/serve.err")"; kill $pid; continue; fi
    for c in $(seq 1 "$CLIENTS"); do
      taskset -c "$CLIENT_CORES" "$G" bench ycsb --scale 100000 --ycsb-workload C --server "$addr" \
        --mode sp --connections "$CONNS" --duration "$SECS" --warmup 1 --seed $((c * 1000)) \
        --quiet >"$WORK/client-$c.log" 2>&1 &
    done
    wait $(jobs -p | grep -v "^$pid$") 2>/dev/null
    total=$(cat "$WORK"/client-*.log | awk '/ transactions in .* txn\/s/ { for (i = 1; i <= NF; i++) if ($(i+1) == "txn/s") s += $i } END { printf "%.0f", s }')
    p50=$(awk '/^total/ { print $4 }' "$WORK/client-1.log")
    kill -TERM $pid; wait $pid 2>/dev/null
    echo "arch=$arch workers=$w tps=$total client1_p50_us=$p50"
    TPS[$arch,$w]=$total
    rm -f "$WORK"/client-*.log
  done
done
echo
printf '%-8s %12s %12s\n' workers unified dedicated
for w in $WORKERS; do printf '%-8s %12s %12s\n' "$w" "${TPS[unified,$w]:-}" "${TPS[dedicated,$w]:-}"; done
rm -rf "$WORK"
