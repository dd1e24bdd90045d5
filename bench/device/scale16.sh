#!/bin/bash
# The scaling runs issue 25 asks for on a machine with 16 cores, as one short script for the
# lent device (see the device tool's README): carry target/release/glass. Writes the tables to
# stdout and the JSON under $OUT (or target/scale16). About three minutes.
set -u
G=${GLASS:-target/release/glass}
OUT=${OUT:-target/scale16}
mkdir -p "$OUT"
echo "cores: $(nproc)"
# One warehouse per thread, in memory, full preset: the goal's configuration.
$G scale tpcc --mix paper --configs partitioned --threads 1,2,4,8,16 --duration 4 --warmup 1 \
    --json "$OUT/tpcc-partitioned.json" --out "$OUT" 2>&1 | grep -v '^\[' 
# Durable TPC-B, one branch per thread, log forced at every commit: group commit.
$G scale tpcb --configs durable --threads 1,8,16 --duration 4 --warmup 1 \
    --json "$OUT/tpcb-durable.json" --out "$OUT" 2>&1 | grep -v '^\['
# Every thread on one warehouse: lock waits under contention.
$G scale tpcc --mix paper --configs shared --threads 1,2,4,8,16 --duration 3 --warmup 1 \
    --json "$OUT/tpcc-shared.json" --out "$OUT" 2>&1 | grep -v '^\['
