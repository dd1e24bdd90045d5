#!/bin/bash
# What part of the distance to linear scaling is the machine's and what part is sharing
# inside one process, on a lent 16-core machine (see the device tool's README): carry the
# release binary as $GLASS (default target/release/glass).
#
#   1. the machine: clock source, huge pages, caches;
#   2. TPC-C paper mix, one warehouse per worker, in memory, ROUNDS rounds interleaved:
#      T threads in one process (`glass bench --threads T --scale T`) beside T processes of one
#      thread and one warehouse each, started together (nothing shared but the machine: its
#      caches, memory and hypervisor); each process's throughput is summed;
#   3. one round of the full preset beside each ladder switch that may run on many threads
#      turned off, at one thread and at all the cores: which component's removal brings the
#      ratio nearer linear.
#
#   5. (only when named) the page latches the threads pass each other (`glass bench
#      --handoffs`): the paper mix on a warehouse per thread and on one, Voter, YCSB-C.
#
#   4. the database's size apart from sharing, ROUNDS rounds interleaved: one thread on one
#      warehouse and on a database of all the cores' warehouses (its home warehouse the first,
#      the others reached only by the mix's remote accesses, its B+-trees as deep as those the
#      threads of one process share), all the cores in one process, and as many processes of
#      one warehouse and of that larger database each.
#
# `glass scale tpcc --mix paper --configs partitioned,processes` draws section 2's comparison as
# two lines of the scaling command's own table and figure.
#
# Writes log.txt under $OUT (or target/processes16). THREADS (default "1 8 16"), ROUNDS (3),
# SECS (10), SECTIONS (default "1 2 3"; 4 and 5 only when named); FLAGS: glass flags added to every
# run of sections 2 and 4 (e.g. "--switch main-log=off --switch lsn=off"). On any machine, e.g.
# this project's two cores: THREADS=2 SECTIONS="2 4" bench/device/processes16.sh.
set -u
G=${GLASS:-target/release/glass}
OUT=${OUT:-target/processes16}
THREADS=${THREADS:-"1 8 16"}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-10}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
n=$(nproc)
want() { [[ " ${SECTIONS:-1 2 3} " == *" $1 "* ]]; }
tps() { sed -n 's/.* transactions in .*: \([0-9.]*\) txn\/s.*/\1/p' "$1"; }
work=$(mktemp -d)

if want 1; then
  echo "== 1. the machine"
  echo "cores: $n; $(grep -m1 'model name' /proc/cpuinfo)"
  lscpu | grep -E '^(Thread|Core|Socket|NUMA node\(s\)|L1d|L2|L3|CPU max MHz|Hypervisor)' || true
  echo "clock source: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)" \
    "(available: $(cat /sys/devices/system/clocksource/clocksource0/available_clocksource 2>/dev/null))"
  echo "transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
  grep -E '^(MemTotal|MemFree|HugePages_Total)' /proc/meminfo
fi

# one_process T SECS [W]: T threads in one process, W warehouses (default T).
one_process() {
  # shellcheck disable=SC2086 # FLAGS are words
  "$G" bench tpcc --mix paper --scale "${3:-$1}" --threads "$1" --duration "$2" --warmup 2 \
    --quiet ${FLAGS:-} >"$work/one.txt" 2>&1
  tps "$work/one.txt"
}

# processes T SECS [W]: T processes of one thread and W warehouses each (default 1), started
# together; the sum of their throughputs, and the spread of their load times (their measured
# windows overlap to within it).
processes() {
  local pids=() i sum=0 t
  for i in $(seq 1 "$1"); do
    # shellcheck disable=SC2086 # FLAGS are words
    "$G" bench tpcc --mix paper --scale "${3:-1}" --threads 1 --duration "$2" --warmup 2 --seed "$i" \
      ${FLAGS:-} >"$work/p$i.txt" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  local each=""
  for i in $(seq 1 "$1"); do
    t=$(tps "$work/p$i.txt")
    each="$each ${t%.*}"
    sum=$(awk -v a="$sum" -v b="${t:-0}" 'BEGIN { printf "%.1f", a + b }')
  done
  local loads
  loads=$(sed -n 's/^loaded in \([0-9.]*\) s/\1/p' "$work"/p*.txt | sort -n | sed -n '1p;$p' | tr '\n' ' ')
  echo "$sum (each:$each; load s min/max: $loads)"
}

if want 2; then
  echo "== 2. threads in one process beside processes of one thread, $SECS s points"
  for round in $(seq 1 "$ROUNDS"); do
    for t in $THREADS; do
      echo "round=$round threads=$t in-one-process txn/s=$(one_process "$t" "$SECS")"
      [ "$t" -gt 1 ] && echo "round=$round threads=$t processes txn/s=$(processes "$t" "$SECS")"
    done
  done
fi

if want 3; then
  echo "== 3. which component's removal scales, 5 s points"
  for variant in full "main-log=off lsn=off" btree-keys=off dir-lookup=off small-page=off \
    page-access=off xactions=off; do
    flags=""
    [ "$variant" != full ] && for s in $variant; do flags="$flags --switch $s"; done
    for t in 1 "$n"; do
      # shellcheck disable=SC2086 # flags are words
      "$G" bench tpcc --mix paper --scale "$t" --threads "$t" --duration 5 --warmup 1 --quiet \
        $flags >"$work/sw.txt" 2>&1
      echo "variant=\"$variant\" threads=$t txn/s=$(tps "$work/sw.txt")"
    done
  done
fi
if [[ " ${SECTIONS:-} " == *" 4 "* ]]; then
  echo "== 4. the database's size apart from sharing, $SECS s points"
  for round in $(seq 1 "$ROUNDS"); do
    echo "round=$round one thread, 1 warehouse txn/s=$(one_process 1 "$SECS" 1)"
    echo "round=$round one thread, $n warehouses txn/s=$(one_process 1 "$SECS" "$n")"
    echo "round=$round $n threads in one process txn/s=$(one_process "$n" "$SECS")"
    echo "round=$round $n processes, 1 warehouse each txn/s=$(processes "$n" "$SECS" 1)"
    echo "round=$round $n processes, $n warehouses each txn/s=$(processes "$n" "$SECS" "$n")"
  done
fi
if [[ " ${SECTIONS:-} " == *" 5 "* ]]; then
  echo "== 5. page latches the threads pass each other (--handoffs), 5 s points"
  for w in "$n" 1; do
    "$G" bench tpcc --mix paper --scale "$w" --threads "$n" --duration 5 --warmup 1 \
      --handoffs >"$work/h.txt" 2>&1
    echo "warehouses=$w threads=$n txn/s=$(tps "$work/h.txt") $(grep '^handoffs:' "$work/h.txt")"
  done
  for wl in voter ycsb; do
    "$G" bench "$wl" --threads "$n" --duration 5 --warmup 1 --handoffs >"$work/h.txt" 2>&1
    echo "$wl threads=$n txn/s=$(tps "$work/h.txt") $(grep '^handoffs:' "$work/h.txt")"
  done
fi
rm -rf "$work"
