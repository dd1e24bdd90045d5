#!/usr/bin/env bash
# DBx1000 (github.com/yxymit/DBx1000) TPC-C, built outside the repository's tracked code.
# See bench/peers/README.md.
#
#   bench/peers/dbx1000.sh [SRC] [--cc "NO_WAIT SILO"] [--threads "1 2"] [--rounds R]
#
# SRC (or --src, or env DBX1000_SRC): a DBx1000 git directory (bare/mirror) or checkout; without
# it, the copy that an earlier run left in target/peers/dbx1000 is used.
# Env: CC_ALGS ("NO_WAIT"), THREADS ("1 2"), ROUNDS (1), DBX_MAX_TXN (500000 per thread; upstream
# 100000), DBX_PERC_PAYMENT (0.5, the paper mix), DBX_CPU_FREQ (default: the measured TSC GHz),
# DBX_BUILD_ROOT (target/peers/dbx1000).
# N threads run N warehouses (rundb -tN -nN, config.h THREAD_CNT=NUM_WH=N). One line per run:
#   dbx1000 cc=CC threads=N tps=X wall_tps=Y txn_cnt=T abort_cnt=A
# Waits for a quiet machine before each run (QUIET_WAIT, QUIET_CPU, QUIET_IO: see the README).
set -euo pipefail
exec </dev/null
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
. "$PEERS_DIR/lib/dbx.sh"

SRC=${DBX1000_SRC:-}
CC_ALGS=${CC_ALGS:-NO_WAIT}
THREADS=${THREADS:-"1 2"}
ROUNDS=${ROUNDS:-1}

while [ $# -gt 0 ]; do
  case "$1" in
    --src) SRC=${2:?}; shift 2 ;;
    --cc) CC_ALGS=${2:?}; shift 2 ;;
    --threads) THREADS=${2:?}; shift 2 ;;
    --rounds) ROUNDS=${2:?}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; die "unknown argument: $1" ;;
    *) SRC=$1; shift ;;
  esac
done
for cc in $CC_ALGS; do
  case "$cc" in NO_WAIT|WAIT_DIE|DL_DETECT|SILO|TICTOC|OCC|MVCC|HEKATON|HSTORE) ;; *) die "unknown CC_ALG $cc" ;; esac
done
for n in $THREADS; do is_uint "$n" && [ "$n" -ge 1 ] || die "THREADS must be positive integers (got '$THREADS')"; done
positive ROUNDS
command -v make >/dev/null && command -v g++ >/dev/null || die "DBx1000 needs make and g++ (apt-get install -y build-essential)"
[ "$(uname -m)" = x86_64 ] || die "DBx1000 times with rdtsc: x86-64 only"

START=$(date +%s)
machine_note
dbx_prepare_src "$SRC"
dbx_measure_tsc
declare -A BUILDS R
for cc in $CC_ALGS; do for n in $THREADS; do dbx_build "$cc" "$n"; BUILDS[$cc-$n]=$DBX_BUILD; done; done
LOGS=$DBX_ROOT/logs/$(date +%Y%m%d-%H%M%S)
mkdir -p "$LOGS"
for ((r = 1; r <= ROUNDS; r++)); do
  for cc in $CC_ALGS; do
    for n in $THREADS; do
      DBX_BUILD=${BUILDS[$cc-$n]}
      bg=$(wait_quiet)
      out=$(dbx_run "$n" "$LOGS/r$r-$cc-t$n.log")
      read -r tps wall txn ab others <<<"$out"
      echo "dbx1000 cc=$cc threads=$n tps=$tps wall_tps=$wall txn_cnt=$txn abort_cnt=$ab $bg $others"
      R[$cc-$n]="${R[$cc-$n]:-} $tps"
    done
  done
done
if [ "$ROUNDS" -gt 1 ]; then
  for cc in $CC_ALGS; do for n in $THREADS; do
    read -r med lo hi k <<<"$(median_range "${R[$cc-$n]}")"
    echo "dbx1000 cc=$cc threads=$n median_tps=$med min=$lo max=$hi runs=$k"
  done; done
fi
machine_note
note "dbx1000 commit $DBX_COMMIT; TPC-C Payment/New-Order $DBX_PERC_PAYMENT/$(awk -v p="$DBX_PERC_PAYMENT" 'BEGIN { print 1 - p }'); CPU_FREQ $DBX_CPU_FREQ, TSC $DBX_TSC_GHZ GHz (txn/s scaled by TSC/CPU_FREQ = $(ratio "$DBX_TSC_GHZ" "$DBX_CPU_FREQ")); took $(( $(date +%s) - START )) s; logs in $LOGS"
