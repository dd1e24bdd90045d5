#!/usr/bin/env bash
# Two builds of Glass side by side on `glass isolation`: rounds that run A, then B (then A, B,
# ...), each a whole `glass isolation` with the same arguments, and per workload and level the
# median and range of each build's closed-loop throughput and of its time per transaction in
# the isolation-overhead, procedure and query-execution phases. For a change to the boundary,
# the machine being as noisy as it is: compare builds only within one run of this script.
#
#   bench/isolation/ab.sh --a BIN --b BIN [--rounds N] [--out DIR] -- [glass isolation ARGS]
#
# Each build's guests are that build (`glass isolation` starts its servers from its own binary);
# a WebAssembly module is the one `--wasm-module` or the binary's target directory names, so
# give each build its own target directory. Example:
#
#   bench/isolation/ab.sh --a /tmp/old/release/glass --b target/release/glass --rounds 3 -- \
#     --workloads ycsb,voter,tpcc --ycsb-records 10000 --levels process:uds --steps 1.0 --duration 2
set -euo pipefail
# shellcheck source=../peers/lib/common.sh
source "$(dirname "$0")/../peers/lib/common.sh"

A=
B=
ROUNDS=3
OUT=
while [ $# -gt 0 ]; do
  case "$1" in
    --a) A=$2; shift 2 ;;
    --b) B=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
positive ROUNDS
for bin in "$A" "$B"; do
  [ -n "$bin" ] && [ -x "$bin" ] || die "--a and --b must name two glass binaries (got '$bin')"
done
[ -n "$OUT" ] || OUT=$(mktemp -d)
mkdir -p "$OUT"
machine_note

for round in $(seq 1 "$ROUNDS"); do
  for side in a b; do
    if [ "$side" = a ]; then bin=$A; else bin=$B; fi
    note "round $round, $side: $bin isolation $*"
    "$bin" isolation --out "$OUT/$side-$round" "$@" >"$OUT/$side-$round.log" 2>&1 \
      || { tail -n 5 "$OUT/$side-$round.log" >&2; die "round $round of $side failed"; }
  done
done

python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
cells = {}
for side in "ab":
    for r in range(1, rounds + 1):
        report = json.load(open(f"{out}/{side}-{r}/isolation.json"))
        for w in report["workloads"]:
            for level in w["levels"]:
                phases = level.get("trace", {}).get("us_per_txn", {})
                key = (w.get("workload", "?"), level["level"])
                cell = cells.setdefault(key, {}).setdefault(side, {})
                for name, value in [("txn/s", level["tps"]),
                                    ("isolation µs", phases.get("isolation overhead")),
                                    ("procedure µs", phases.get("procedure execution")),
                                    ("query µs", phases.get("query execution"))]:
                    if value is not None:
                        cell.setdefault(name, []).append(value)
def show(values):
    if not values:
        return "-"
    return f"{statistics.median(values):,.1f} ({min(values):,.1f}-{max(values):,.1f})"
print("| workload | level | measure | A: median (range) | B: median (range) |")
print("|---|---|---|---:|---:|")
for (workload, level), sides in cells.items():
    for name in ["txn/s", "isolation µs", "procedure µs", "query µs"]:
        a, b = sides.get("a", {}).get(name, []), sides.get("b", {}).get(name, [])
        if a or b:
            print(f"| {workload} | {level} | {name} | {show(a)} | {show(b)} |")
PY
note "reports in $OUT"
