#!/bin/bash
# What isolation costs when a procedure process has a core of its own, on a lent 16-core
# machine: `glass isolation` (Figures 6 and 7) for YCSB-C and Voter, the server on core 0,
# the clients on core 1, the procedure processes on core 2 — and, beside it, on the server's
# core as on two cores. Carry target/release/glass. Writes the reports under $OUT.
#
#   OUT=/tmp/iso bench/device/isolation16.sh
set -u
G=${GLASS:-target/release/glass}
OUT=${OUT:-$(mktemp -d)}
echo "cores: $(nproc)"
common=(isolation --workloads "${WORKLOADS:-ycsb,voter}" --ycsb-records 100000 --connections 8
  --duration "${SECS:-1}" --warmup 0.3 --steps "${STEPS:-0.5,1.0}" --server-core 0 --client-core 1)
"$G" "${common[@]}" --procedure-core 2 --out "$OUT/own" 2>&1 | grep -E '^(##|\| )' | grep -v '^| level\|^|---'
cp "$OUT/own/isolation.md" "$OUT/isolation-own-core.md" 2>/dev/null
"$G" "${common[@]}" --out "$OUT/same" 2>&1 | grep -E '^(##|\| )' | grep -v '^| level\|^|---'
cp "$OUT/same/isolation.md" "$OUT/isolation-same-core.md" 2>/dev/null
