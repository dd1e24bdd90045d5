#!/bin/bash
# The scaling runs issue 25 asks for on a machine with 16 cores, with the binary before a
# change interleaved beside the binary after it, as one short script for the lent device
# (see the device tool's README). Carry target/cmp/ holding the stripped binaries `base`
# and `new`. Usage: bench/device/scale16-compare.sh [THREADS] (default 1,2,4,8,16).
# Writes the tables to stdout and the JSON under $OUT (or target/scale16). About five minutes.
set -u
T=${1:-1,2,4,8,16}
OUT=${OUT:-target/scale16}
G=target/cmp/new
work=$(mktemp -d)
mkdir -p "$OUT"
echo "cores: $(nproc)"
tps() { sed -n 's/.* transactions in .*: \([0-9.]*\) txn\/s.*/\1/p'; }
# Before and after, interleaved: one warehouse per thread, paper mix, in memory.
bash bench/device/compare.sh "1 $(nproc | awk '{print int($1/2)}') $(nproc)" 1 target/cmp/base "$G"
# The scaling command at the new code, each configuration.
$G scale tpcc --mix paper --configs partitioned --threads "$T" --duration 3 --warmup 1 \
    --json "$OUT/tpcc-partitioned.json" --out "$work" 2>&1 | grep -v '^\['
cp "$work/scale-tpcc.svg" "$OUT/scale-tpcc-partitioned.svg" 2>/dev/null
n=$(nproc)
echo "main-log off, $n threads: $($G bench tpcc --mix paper --scale "$n" --threads "$n" \
    --duration 3 --warmup 1 --quiet --switch main-log=off 2>&1 | tps) txn/s"
$G scale tpcb --configs durable --threads "1,$((n / 2)),$n" --duration 3 --warmup 1 \
    --json "$OUT/tpcb-durable.json" --out "$work" 2>&1 | grep -v '^\['
$G scale tpcc --mix paper --configs shared --threads "$T" --duration 2 --warmup 1 \
    --json "$OUT/tpcc-shared.json" --out "$work" 2>&1 | grep -v '^\['
rm -rf "$work"
