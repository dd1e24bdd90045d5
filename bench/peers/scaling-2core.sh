#!/usr/bin/env bash
# 1 -> 2 thread scaling on this 2-core machine: DBx1000 (NO_WAIT) and Glass, TPC-C paper mix
# (New-Order / Payment 50/50), in memory, one warehouse per thread, interleaved.
# See bench/peers/README.md.
#
#   bench/peers/scaling-2core.sh [DBX_SRC] [--glass PATH] [--rounds R] [--secs N]
#
# DBX_SRC (or env DBX1000_SRC): as for dbx1000.sh (a DBx1000 git directory or checkout; without
# it, the copy an earlier run left in target/peers/dbx1000). Env: GLASS (target/release/glass),
# ROUNDS (5), SECS (5: Glass's --duration), DBX_CC (NO_WAIT), and dbx1000.sh's DBX_* settings.
# Each round: DBx1000 1 thread, Glass 1 thread, DBx1000 2 threads, Glass 2 threads, with
#   rundb -tT -nT        and   glass bench tpcc --mix paper --threads T --scale T --duration SECS --warmup 1
# Waits for a quiet machine before each run (QUIET_WAIT, QUIET_CPU, QUIET_IO: see the README).
set -euo pipefail
exec </dev/null
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
. "$PEERS_DIR/lib/dbx.sh"
. "$PEERS_DIR/lib/glass.sh"

SRC=${DBX1000_SRC:-}
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-5}
DBX_CC=${DBX_CC:-NO_WAIT}

while [ $# -gt 0 ]; do
  case "$1" in
    --src) SRC=${2:?}; shift 2 ;;
    --glass) GLASS=${2:?}; shift 2 ;;
    --rounds) ROUNDS=${2:?}; shift 2 ;;
    --secs) SECS=${2:?}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; die "unknown argument: $1" ;;
    *) SRC=$1; shift ;;
  esac
done
positive ROUNDS SECS
command -v make >/dev/null && command -v g++ >/dev/null || die "DBx1000 needs make and g++ (apt-get install -y build-essential)"
[ "$(uname -m)" = x86_64 ] || die "DBx1000 times with rdtsc: x86-64 only"

START=$(date +%s)
machine_note
glass_check
dbx_prepare_src "$SRC"
dbx_measure_tsc
declare -A BUILDS R Q
for n in 1 2; do dbx_build "$DBX_CC" "$n"; BUILDS[$n]=$DBX_BUILD; done
LOGS=$DBX_ROOT/logs/scaling-$(date +%Y%m%d-%H%M%S)
mkdir -p "$LOGS"

for ((r = 1; r <= ROUNDS; r++)); do
  for n in 1 2; do
    DBX_BUILD=${BUILDS[$n]}
    bg=$(wait_quiet)
    out=$(dbx_run "$n" "$LOGS/r$r-dbx-t$n.log")
    read -r tps wall txn ab others <<<"$out"
    record "dbx$n" "$tps" "$others"
    echo "round $r: dbx1000 cc=$DBX_CC threads=$n tps=$tps wall_tps=$wall txn_cnt=$txn abort_cnt=$ab $bg $others"
    log=$LOGS/r$r-glass-t$n.log
    bg=$(wait_quiet)
    others=$(glass_run "$log" bench tpcc --mix paper --threads "$n" --scale "$n" --duration "$SECS" --warmup 1)
    tps=$(glass_tps "$log")
    record "glass$n" "$tps" "$others"
    echo "round $r: glass threads=$n tps=$tps $bg $others"
  done
done

echo
echo "TPC-C paper mix (Payment/New-Order 50/50), in memory, T threads = T warehouses, $ROUNDS rounds interleaved, $(nproc) cores"
printf '%-28s %10s %10s %10s %14s  %s\n' "system" "median" "min" "max" "quiet med (n)" "runs (txn/s)"
declare -A MED
row() {
  local name=$1 key=$2 med lo hi k
  read -r med lo hi k <<<"$(median_range "${R[$key]}")"
  MED[$key]=$med
  printf '%-28s %10s %10s %10s %14s  %s\n' "$name" "$med" "$lo" "$hi" "$(quiet_cell "${Q[$key]:-}")" "$(echo ${R[$key]})"
}
row "dbx1000 $DBX_CC, 1 thread" dbx1
row "dbx1000 $DBX_CC, 2 threads" dbx2
row "glass, 1 thread" glass1
row "glass, 2 threads" glass2
echo "dbx1000 2/1 ratio: $(ratio "${MED[dbx2]}" "${MED[dbx1]}")"
echo "glass 2/1 ratio:   $(ratio "${MED[glass2]}" "${MED[glass1]}")"
echo "glass/dbx1000 at 1 thread: $(ratio "${MED[glass1]}" "${MED[dbx1]}"); at 2 threads: $(ratio "${MED[glass2]}" "${MED[dbx2]}")"
qmed() { median_range "${Q[$1]:-}" | cut -d' ' -f1; }
if [ -n "${Q[dbx1]:-}" ] && [ -n "${Q[dbx2]:-}" ]; then echo "dbx1000 2/1 ratio, quiet runs only: $(ratio "$(qmed dbx2)" "$(qmed dbx1)")"; fi
if [ -n "${Q[glass1]:-}" ] && [ -n "${Q[glass2]:-}" ]; then echo "glass 2/1 ratio, quiet runs only:   $(ratio "$(qmed glass2)" "$(qmed glass1)")"; fi
echo "(quiet: runs during which other processes used under $QUIET_RUN cores)"
machine_note
note "dbx1000 commit $DBX_COMMIT, $DBX_CC, MAX_TXN_PER_PART $DBX_MAX_TXN, CPU_FREQ $DBX_CPU_FREQ, TSC $DBX_TSC_GHZ GHz (txn/s scaled by $(ratio "$DBX_TSC_GHZ" "$DBX_CPU_FREQ")); took $(( $(date +%s) - START )) s; logs in $LOGS"
