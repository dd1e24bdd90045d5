#!/bin/bash
# Runs (per-thread reservations of the log buffer) on a lent 16-core machine: TPC-C paper mix,
# one warehouse per thread, in memory. First, interleaved, at all the cores: without runs
# (`--no-log-runs`), with runs of 1, 4 and 8 KiB (`--log-run-bytes`), and without log records
# or LSNs (`--switch main-log=off --switch lsn=off`: the most the log leaves); the same at half
# the cores without runs and with 4 KiB. Then the scaling command with 4 KiB runs, and where 16
# threads are (every thread's stack, two samples, by cuda-gdb or gdb). Carry the binary as
# $GLASS (default .dev/cmp/new; debug sections compressed for readable stacks). Writes log.txt,
# tpcc-paper.json and stacks.txt under $OUT (or target/runs16). About seven minutes; SIZES
# (default "1024 4096 8192") names the run sizes compared, STACKS=0 skips the stacks.
set -u
. "$(dirname "$0")/lib/stacks.sh"
OUT=${OUT:-target/runs16}
G=${GLASS:-.dev/cmp/new}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
n=$(nproc)
echo "cores: $n; $(grep -m1 'model name' /proc/cpuinfo)"
work=$(mktemp -d)
tps() {
  "$G" bench tpcc --mix paper --scale "$1" --threads "$1" --duration 3 --warmup 1 --quiet "${@:2}" 2>&1 |
    sed -n 's/.* transactions in .*: \([0-9.]*\) txn\/s.*/\1/p'
}
echo "== runs against none, interleaved"
for round in 1 2; do
  sizes=()
  for b in ${SIZES:-1024 4096 8192}; do sizes+=("--log-run-bytes $b"); done
  for cfg in "--no-log-runs" "${sizes[@]}" "--switch main-log=off --switch lsn=off"; do
    # shellcheck disable=SC2086
    echo "round=$round threads=$n config=${cfg// /} txn/s=$(tps "$n" $cfg)"
  done
  for cfg in "--no-log-runs" "--log-run-bytes 4096"; do
    # shellcheck disable=SC2086
    echo "round=$round threads=$((n / 2)) config=${cfg// /} txn/s=$(tps $((n / 2)) $cfg)"
  done
done
echo "== the scaling command, 4 KiB runs"
$G scale tpcc --mix paper --configs partitioned --threads "1,2,4,$((n / 2)),$((n * 3 / 4)),$n" \
    --duration 3 --warmup 1 --rounds 2 --log-run-bytes 4096 --json "$OUT/tpcc-paper.json" \
    --out "$work" 2>&1 | grep -v '^\[\|^note'
[ "${STACKS:-1}" = 0 ] && { rm -rf "$work"; exit 0; }
echo "== where $n threads are (stacks, 4 KiB runs)"
$G bench tpcc --mix paper --threads "$n" --scale "$n" --duration 20 --warmup 1 \
    --log-run-bytes 4096 > "$work/bench.txt" 2>&1 &
pid=$!
sample_stacks $pid "$OUT/stacks.txt" 2 6
kill $pid 2>/dev/null; wait $pid 2>/dev/null
rm -rf "$work"
