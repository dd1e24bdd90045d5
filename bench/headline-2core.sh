#!/usr/bin/env bash
# The README's throughput headline: the TPC-C paper mix (New-Order / Payment 50/50) in memory,
# seven configurations from the full engine to the hand-coded kernel, interleaved round by
# round; each cell the median of ROUNDS runs with every run listed, p50 and p99 of the median
# run, every run's consistency check required to pass.
#
#   bench/headline-2core.sh [--glass BIN] [--rounds N] [--secs S] [--warmup W] [--no-touch]
#
# Each run is `glass bench tpcc --mix paper --preset P --threads T --duration S --warmup W`
# (1 warehouse unless the row says otherwise). First a process touches and frees 12 GiB, so
# that runs do not pay for the host backing fresh pages (see the README, "How far to trust a
# figure"); --no-touch leaves that out. Before each run the script waits for a quiet machine
# (QUIET_* as in bench/peers/README.md) and prints what other processes used during it.
set -euo pipefail
exec </dev/null
# shellcheck source=peers/lib/common.sh
source "$(dirname "$0")/peers/lib/common.sh"
# shellcheck source=peers/lib/glass.sh
source "$PEERS_DIR/lib/glass.sh"

ROUNDS=3
SECS=10
WARMUP=2
TOUCH=1
while [ $# -gt 0 ]; do
  case "$1" in
    --glass) GLASS=${2:?}; shift 2 ;;
    --rounds) ROUNDS=${2:?}; shift 2 ;;
    --secs) SECS=${2:?}; shift 2 ;;
    --warmup) WARMUP=${2:?}; shift 2 ;;
    --no-touch) TOUCH=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
positive ROUNDS SECS
is_uint "$WARMUP" || die "--warmup must be a whole number of seconds (got '$WARMUP')"

# key | label | threads | extra flags
CONFIGS=(
  "full1|full|1|--preset full"
  "full2|full|2|--preset full"
  "full2w|full, 2 warehouses (\`--scale 2\`)|2|--preset full --scale 2"
  "stripped1|stripped|1|--preset stripped"
  "noprefetch1|stripped, \`--no-prefetch\`|1|--preset stripped --no-prefetch"
  "stripped2|stripped with \`latching=on\`, \`locking=on\` (two threads need both)|2|--preset stripped --switch latching=on --switch locking=on"
  "optimal1|optimal (the kernel)|1|--preset optimal"
)

START=$(date +%s)
machine_note
glass_check
if [ "$TOUCH" = 1 ]; then
  note "touching and freeing 12 GiB first"
  python3 -c "b = b'\x01' * (12 << 30)"
fi
LOGS=$REPO_ROOT/target/headline/$(date +%Y%m%d-%H%M%S)
mkdir -p "$LOGS"
declare -A R Q P50 P99 RUNS
for ((r = 1; r <= ROUNDS; r++)); do
  for c in "${CONFIGS[@]}"; do
    IFS='|' read -r key label threads flags <<<"$c"
    log=$LOGS/r$r-$key.log
    bg=$(wait_quiet)
    # shellcheck disable=SC2086  # flags are words
    others=$(glass_run "$log" bench tpcc --mix paper --threads "$threads" $flags \
      --duration "$SECS" --warmup "$WARMUP")
    tps=$(glass_tps "$log")
    record "$key" "$tps" "$others"
    # The total row: p50 and p99 are its 4th and 6th fields.
    read -r p50 p99 < <(awk '$1 == "total" { print $4, $6 }' "$log")
    RUNS[$key]="${RUNS[$key]:-} $tps:$p50:$p99"
    echo "round $r: $key threads=$threads tps=$tps p50=$p50 p99=$p99 $bg $others"
  done
done

echo
echo "TPC-C paper mix, in memory, $ROUNDS interleaved rounds of ${SECS} s after ${WARMUP} s of warm-up, $(nproc) cores"
echo
echo "| preset | threads | txn/s | the $ROUNDS runs | p50 µs | p99 µs | quiet runs: median (n) |"
echo "|---|---:|---:|---|---:|---:|---:|"
for c in "${CONFIGS[@]}"; do
  IFS='|' read -r key label threads flags <<<"$c"
  read -r med _ _ _ <<<"$(median_range "${R[$key]}")"
  # p50 and p99 of the run whose throughput is closest to the median.
  best=$(printf '%s\n' ${RUNS[$key]} | awk -F: -v m="$med" '
    { d = $1 - m; if (d < 0) d = -d; if (NR == 1 || d < bd) { bd = d; b = $2 " " $3 } }
    END { print b }')
  read -r p50 p99 <<<"$best"
  runs=$(printf '%s\n' ${R[$key]} | awk '{ printf "%s%.0f", (NR > 1 ? " / " : ""), $1 }')
  printf '| %s | %s | %.0f | %s | %s | %s | %s |\n' "$label" "$threads" "$med" "$runs" "$p50" "$p99" \
    "$(quiet_cell "${Q[$key]:-}")"
done
echo "(quiet: runs during which other processes used under $QUIET_RUN cores)"
machine_note
note "took $(( $(date +%s) - START )) s; logs in $LOGS"
