#!/bin/bash
# Page cleaners on a lent 16-core machine (see the device tool's README): TPC-C full mix on
# disk with a pool smaller than the data, each run on a fresh copy of one loaded database,
# every cleaner count once per round, rounds interleaved, then the median of each. The
# question it answers: whether cleaners, with cores to spare, should be on by default
# (docs/performance.md, "Page cleaners"; on 2 cores they were measured only where a write
# cost the transaction a wait).
#
#   GLASS=.dev/glass SCALE=16 POOL_MIB=256 THREADS=16 CLEANERS="0 2 4" ROUNDS=2 SECS=5 \
#   FLAGS="--durable" bench/device/cleaners16.sh
#
# FLAGS are added to every run (e.g. --durable, or an emulated device: --device-read-us 100
# --device-write-us 100 --device-queue fixed). WORK (/tmp/glass-cleaners) holds the loaded
# database and the copies. Prints a line per run and each count's median and range (txn/s,
# p99 µs, writes by misses and by cleaners).
set -u
GLASS=${GLASS:-target/release/glass}
SCALE=${SCALE:-16}
POOL_MIB=${POOL_MIB:-256}
THREADS=${THREADS:-16}
CLEANERS=${CLEANERS:-"0 2 4"}
ROUNDS=${ROUNDS:-2}
SECS=${SECS:-5}
FLAGS=${FLAGS:-}
WORK=${WORK:-/tmp/glass-cleaners}
echo "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
start=$(date +%s)
"$GLASS" load tpcc --db "$WORK/loaded" --scale "$SCALE" >"$WORK/load.log" 2>&1 ||
  { echo "load failed:"; tail -5 "$WORK/load.log"; exit 1; }
echo "glass load tpcc --scale $SCALE: $(($(date +%s) - start)) s, $(du -sh "$WORK/loaded" | cut -f1)"
declare -A RUNS
for round in $(seq 1 "$ROUNDS"); do
  for n in $CLEANERS; do
    rm -rf "$WORK/run" && cp -r "$WORK/loaded" "$WORK/run"
    rm -f "$WORK/run.json"
    # shellcheck disable=SC2086 # flags are words
    "$GLASS" bench tpcc --db "$WORK/run" --scale "$SCALE" --threads "$THREADS" \
      --pool-mib "$POOL_MIB" --duration "$SECS" --warmup 1 --page-cleaners "$n" --quiet \
      --json "$WORK/run.json" $FLAGS >/dev/null 2>"$WORK/run.err"
    line=$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
pool = r.get("pool") or {}
print("%.0f p99=%s consistency=%s evict_writes=%s cleaner_writes=%s" % (r["tps"], r["p99_us"],
      r["consistency"], pool.get("evict_writes", 0), pool.get("cleaner_writes", 0)))
' "$WORK/run.json" 2>/dev/null) || line="failed: $(tail -n 1 "$WORK/run.err")"
    echo "round=$round cleaners=$n txn/s=$line"
    [[ "$line" == failed* ]] || RUNS[$n]="${RUNS[$n]:-} ${line%% *}"
  done
done
rm -rf "$WORK/run"
for n in $CLEANERS; do
  # shellcheck disable=SC2086 # one number per word
  sorted=$(printf '%s\n' ${RUNS[$n]:-} | sort -n)
  count=$(echo "$sorted" | wc -l)
  median=$(echo "$sorted" | sed -n "$(((count + 1) / 2))p")
  echo "cleaners=$n median=$median range=$(echo "$sorted" | head -n 1)-$(echo "$sorted" | tail -n 1)"
done
