#!/bin/bash
# Glass beside DBx1000 (NO_WAIT) on a lent many-core machine: TPC-C paper mix, in memory, one
# warehouse per thread, at 1, 2, 4, 8, 12 and 16 threads, interleaved, so that what the machine
# itself allows (shared cores, memory) falls on both alike. DBx1000 is built on this machine
# (bench/peers/lib/dbx.sh's dbx_build, one build per thread count, DBX_MAX_TXN=200000) and
# carried with its binary `tscfreq`: DIR/t<N>/{rundb,benchmarks/} and DIR/tscfreq, DIR being
# $DBX (default .dev/dbx); Glass is $GLASS (default target/release/glass). Prints one line per
# run; DBx1000's txn/s is its own figure (txn_cnt / run_time * threads) scaled by this
# machine's TSC over the compiled CPU_FREQ ($CPU_FREQ, required). About three minutes.
set -u
DBX=${DBX:-.dev/dbx}
G=${GLASS:-target/release/glass}
: "${CPU_FREQ:?the CPU_FREQ DBx1000 was compiled with}"
echo "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
lscpu | grep -E '^(Thread|Core|Socket|NUMA node\(s\)|L3)' || true
tsc=$("$DBX/tscfreq")
echo "TSC $tsc GHz; DBx1000 compiled with CPU_FREQ $CPU_FREQ"
for round in ${ROUNDS_LIST:-1 2}; do
  for n in ${THREADS:-1 2 4 8 12 16}; do
    line=$(cd "$DBX/t$n" && timeout 120 ./rundb -t"$n" -n"$n" 2>&1 | grep -m1 '^\[summary\]')
    echo "$line" | awk -v n="$n" -v r="$round" -v tsc="$tsc" -v f="$CPU_FREQ" '{
        match($0, /txn_cnt=[0-9]+/); txn = substr($0, RSTART + 8, RLENGTH - 8)
        match($0, /run_time=[0-9.]+/); rt = substr($0, RSTART + 9, RLENGTH - 9)
        printf "round=%s threads=%s system=dbx1000 txn/s=%.1f\n", r, n, (rt > 0) ? txn / rt * n * tsc / f : 0 }'
    tps=$("$G" bench tpcc --mix paper --scale "$n" --threads "$n" --duration 3 --warmup 1 --quiet 2>&1 |
          sed -n 's/.* transactions in .*: \([0-9.]*\) txn\/s.*/\1/p')
    echo "round=$round threads=$n system=glass txn/s=$tps"
  done
done
