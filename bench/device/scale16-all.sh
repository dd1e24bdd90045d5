#!/bin/bash
# Every scaling figure issue 25 asks for, in one call on a lent 16-core machine (see the
# device tool's README): carry the release binary as $GLASS (default target/release/glass).
#   1. the scaling command, paper mix, one warehouse per thread, in memory, 1..all cores,
#      three rounds (the goal: 6x at 8 threads, 12x at 16);
#   2. at one thread and at all the cores, the full preset beside neither log records nor
#      LSNs (`--switch main-log=off --switch lsn=off`, what the log still costs), interleaved;
#   3. the full five-transaction mix at 1, half and all the cores;
#   4. every thread on one warehouse (lock waits under contention);
#   5. durable TPC-B, one branch per thread, the log forced at every commit (group commit);
#   6. where all the threads are: every thread's stack, two samples (cuda-gdb or gdb);
#   7. the ratio from quieter points: one thread, half and all the cores only, 10 s after
#      2 s, three rounds (the one-thread point of 3 s runs drifts by a quarter to a half between
#      rounds, and the 16-thread ratio with it: docs/performance.md, "Ninth pass"); beside it
#      as many processes of one thread each, what the machine allows (CONFIGS7, default
#      "partitioned,processes"; about seven minutes with both, half without).
# Writes log.txt, the JSON of each scaling table, the figure and stacks.txt under $OUT (or
# target/scale16-all). About nine minutes for sections 1-6, seven for 7, more than one call
# (600 s) allows: name SECTIONS, e.g. SECTIONS="1 4 5" runs only those sections (default
# all seven; STACKS=0 also skips the sixth).
set -u
. "$(dirname "$0")/lib/stacks.sh"
G=${GLASS:-target/release/glass}
OUT=${OUT:-target/scale16-all}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
n=$(nproc)
echo "cores: $n; $(grep -m1 'model name' /proc/cpuinfo)"
lscpu | grep -E '^(Thread|Core|Socket|NUMA node\(s\)|L3|CPU max MHz)' || true
work=$(mktemp -d)
want() { [[ " ${SECTIONS:-1 2 3 4 5 6 7} " == *" $1 "* ]]; }
quiet() { grep -v '^\[\|^note\|^wrote'; }
tps() {
  "$G" bench tpcc --mix paper --scale "$1" --threads "$1" --duration 3 --warmup 1 --quiet "${@:2}" 2>&1 |
    sed -n 's/.* transactions in .*: \([0-9.]*\) txn\/s.*/\1/p'
}

if want 1; then
  echo "== 1. the scaling command: paper mix, one warehouse per thread, in memory"
  "$G" scale tpcc --mix paper --configs partitioned --threads "1,2,4,$((n / 2)),$((n * 3 / 4)),$n" \
    --duration 3 --warmup 1 --rounds 3 --json "$OUT/tpcc-paper.json" --out "$work/paper" 2>&1 | quiet
  cp "$work/paper/scale-tpcc.svg" "$OUT/scale-tpcc-paper.svg" 2>/dev/null
fi

if want 2; then
  echo "== 2. what the log still costs, interleaved"
  for round in 1 2; do
    for t in 1 "$n"; do
      echo "round=$round threads=$t full txn/s=$(tps "$t")"
      echo "round=$round threads=$t no-log,no-lsn txn/s=$(tps "$t" --switch main-log=off --switch lsn=off)"
    done
  done
fi

if want 3; then
  echo "== 3. the full mix, one warehouse per thread"
  "$G" scale tpcc --mix full --configs partitioned --threads "1,$((n / 2)),$n" --duration 3 \
    --warmup 1 --json "$OUT/tpcc-full.json" --out "$work/full" 2>&1 | quiet
fi

if want 4; then
  echo "== 4. every thread on one warehouse"
  "$G" scale tpcc --mix paper --configs shared --threads "1,2,4,$((n / 2)),$n" --duration 3 \
    --warmup 1 --json "$OUT/tpcc-shared.json" --out "$work/shared" 2>&1 | quiet
fi

if want 5; then
  echo "== 5. durable TPC-B, one branch per thread"
  "$G" scale tpcb --configs durable --threads "1,$((n / 2)),$n" --duration 4 --warmup 1 \
    --json "$OUT/tpcb-durable.json" --out "$work/tpcb" 2>&1 | quiet
fi

if want 6 && [ "${STACKS:-1}" != 0 ]; then
  echo "== 6. where $n threads are (stacks)"
  "$G" bench tpcc --mix paper --threads "$n" --scale "$n" --duration 20 --warmup 1 >"$work/bench.txt" 2>&1 &
  pid=$!
  sample_stacks $pid "$OUT/stacks.txt" 2 6
  kill $pid 2>/dev/null
  wait $pid 2>/dev/null
fi

if want 7; then
  echo "== 7. one thread, $((n / 2)) and $n, 10 s points"
  "$G" scale tpcc --mix paper --configs "${CONFIGS7:-partitioned,processes}" --threads "1,$((n / 2)),$n" --duration 10 --warmup 2 \
    --rounds 3 --json "$OUT/tpcc-paper-10s.json" --out "$work/paper10" 2>&1 | quiet
fi
rm -rf "$work"
echo "done"
