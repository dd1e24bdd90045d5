#!/bin/bash
# What isolation costs when a procedure process has a core of its own, on a lent 16-core
# machine: `glass isolation` (Figures 6 and 7) for YCSB-C and Voter, the server on core 0,
# the clients on core 1, the procedure processes on core 2 — and, beside it, on the server's
# core as on two cores. Carry target/release/glass, and for the levels none and wasm the
# library and module where they are built (target/release/libprocedures_native.so,
# target/wasm32-wasip1/release/procedures_wasm.wasm; `glass serve --help` says where they are
# looked for). Writes the reports under $OUT.
#
#   OUT=/tmp/iso bench/device/isolation16.sh
#   LEVELS=none,rust,wasm,process:shm-poll ROUNDS=3 STEPS=1.0 PLACES=own bench/device/isolation16.sh
#
# LEVELS (default: glass isolation's), ROUNDS (closed-loop peaks, interleaved; default 1),
# STEPS, SECS, WORKLOADS and PLACES ("own same": the procedure processes on a core of their
# own, on the server's) narrow or lengthen the runs. CROSSING names a built copy of the
# channels' round-trip benchmark (`cargo bench -p server --bench crossing --no-run` prints
# its path, target/release/deps/crossing-HASH; carry it): it runs first, on CPUs 0 and 2,
# and prints what one crossing costs by itself on this machine.
#
#   CROSSING=.dev16/crossing PLACES= bench/device/isolation16.sh     (the crossings alone)
set -u
G=${GLASS:-target/release/glass}
OUT=${OUT:-$(mktemp -d)}
echo "cores: $(nproc)"
common=(isolation --workloads "${WORKLOADS:-ycsb,voter}" --ycsb-records 100000 --connections 8
  --duration "${SECS:-1}" --warmup 0.3 --steps "${STEPS:-0.5,1.0}" --server-core 0 --client-core 1
  --rounds "${ROUNDS:-1}")
[ -n "${LEVELS:-}" ] && common+=(--levels "$LEVELS")
if [ -n "${CROSSING:-}" ]; then
  echo "== one crossing of each channel, by itself (CPUs 0 and 2; criterion: low, median, high)"
  CROSSING_CPUS=0,2 "$CROSSING" --bench --noplot 2>&1 | grep -B1 'time:' | grep -v '^--' |
    paste -d' ' - - | sed 's/  */ /g'
fi
for place in ${PLACES-own same}; do
  extra=()
  [ "$place" = own ] && extra=(--procedure-core 2)
  echo "== procedure processes on $([ "$place" = own ] && echo 'a core of their own' || echo "the server's core")"
  "$G" "${common[@]}" "${extra[@]}" --out "$OUT/$place" 2>&1 | grep -E '^(##|\| )' | grep -v '^| level\|^|---'
  cp "$OUT/$place/isolation.md" "$OUT/isolation-$place-core.md" 2>/dev/null
  cp "$OUT/$place/isolation.json" "$OUT/isolation-$place-core.json" 2>/dev/null
done
