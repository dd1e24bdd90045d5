#!/bin/bash
# Issue 25 on a lent 16-core machine: the scaling command at the new code, the binary before
# a change beside the binary after it at half and all the cores (interleaved, two rounds), and
# where 16 threads are found: every thread's stack, sampled four times during a run, by a
# debugger attached to it (cuda-gdb on the lent machines, which have no gdb or perf; gdb
# elsewhere). Carry target/cmp/ holding the binaries `base` and `new` (debug sections
# compressed, `objcopy --compress-debug-sections`, for readable stacks: the release profile
# keeps line tables). Writes log.txt, tpcc-paper.json and stacks.txt under $OUT (or
# target/scale16). About six minutes.
set -u
. "$(dirname "$0")/lib/stacks.sh"
OUT=${OUT:-target/scale16}
B=target/cmp/base
G=target/cmp/new
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
n=$(nproc)
echo "cores: $n; $(grep -m1 'model name' /proc/cpuinfo)"
work=$(mktemp -d)
echo "== the new code: paper mix, one warehouse per thread"
$G scale tpcc --mix paper --configs partitioned --threads "1,2,4,$((n / 2)),$((n * 3 / 4)),$n" \
    --duration 3 --warmup 1 --rounds 2 --json "$OUT/tpcc-paper.json" --out "$work" 2>&1 | grep -v '^\[\|^note'
echo "== before and after, interleaved"
for r in 1 2; do
  for b in "$B" "$G"; do
    echo "$(basename "$b") round $r: $("$b" scale tpcc --mix paper --configs partitioned \
        --threads "$((n / 2)),$n" --duration 3 --warmup 1 --out "$work" 2>&1 |
        awk '/^ +[0-9]+ +[0-9]/ {printf "%s threads %s txn/s (p99 %s µs); ", $1, $2, $6}')"
  done
done
echo "== the new code, the log's records off (what the log costs)"
for t in $((n / 2)) $n; do
  echo "$t threads, main-log=off: $($G bench tpcc --mix paper --scale "$t" --threads "$t" \
      --duration 3 --warmup 1 --quiet --switch main-log=off 2>&1 |
      sed -n 's/.* transactions in .*: \([0-9.]*\) txn\/s.*/\1/p') txn/s"
done
echo "== where $n threads are (stacks, the new code)"
$G bench tpcc --mix paper --threads "$n" --scale "$n" --duration 30 --warmup 1 > "$work/bench.txt" 2>&1 &
pid=$!
sample_stacks $pid "$OUT/stacks.txt" 4 5
kill $pid 2>/dev/null; wait $pid 2>/dev/null
echo "== the new code: full mix, one warehouse per thread"
$G scale tpcc --mix full --configs partitioned --threads "1,$((n / 2)),$n" --duration 3 \
    --warmup 1 --out "$work" 2>&1 | grep -v '^\[\|^note'
rm -rf "$work"
