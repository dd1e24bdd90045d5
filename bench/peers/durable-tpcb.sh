#!/usr/bin/env bash
# Durable TPC-B side by side: Glass (--durable, on disk) and PostgreSQL's pgbench (fsync and
# synchronous_commit on), same scale, same disk, interleaved. See bench/peers/README.md.
#
#   bench/peers/durable-tpcb.sh [--glass PATH] [--rounds R] [--secs N] [--scale N] [--dir DIR]
#                               [--commit-gather | --no-commit-gather]
#
# Glass's group commit gathers by default (--commit-gather on); --no-commit-gather runs it with
# --commit-gather off (a leader forces at once).
# Env equivalents: GLASS (target/release/glass), ROUNDS (3), SECS (10), SCALE (16), GATHER=0,
# WORK_PARENT (/var/tmp; both databases go in one new directory under it), KEEP_WORK=1.
# Each round runs, in this order: Glass 1 thread, pgbench -c 1, Glass 8 threads,
# pgbench -c 8 -j 2 (all pgbench runs -M prepared). Glass runs
#   glass bench tpcb --db DIR --durable --scale S --threads T --duration SECS --warmup 1
# on a database loaded once (glass load tpcb); pgbench runs -T SECS on one pgbench -i -s S.
# Waits for a quiet machine before each run (QUIET_WAIT, QUIET_CPU, QUIET_IO: see the README).
set -euo pipefail
exec </dev/null
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
. "$PEERS_DIR/lib/pg.sh"
. "$PEERS_DIR/lib/glass.sh"

ROUNDS=${ROUNDS:-3}
SECS=${SECS:-10}
SCALE=${SCALE:-16}
WORK_PARENT=${WORK_PARENT:-/var/tmp}
LOW=1
HIGH=8
GATHER=${GATHER:-1}

while [ $# -gt 0 ]; do
  case "$1" in
    --glass) GLASS=${2:?}; shift 2 ;;
    --rounds) ROUNDS=${2:?}; shift 2 ;;
    --secs) SECS=${2:?}; shift 2 ;;
    --scale) SCALE=${2:?}; shift 2 ;;
    --dir) WORK_PARENT=${2:?}; shift 2 ;;
    --commit-gather) GATHER=1; shift ;;
    --no-commit-gather) GATHER=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
positive SCALE SECS ROUNDS

glass_check
GATHER_FLAG=()
[ "$GATHER" = 0 ] && GATHER_FLAG=(--commit-gather off)
pg_ensure_installed
[ -d "$WORK_PARENT" ] || die "work parent $WORK_PARENT does not exist"
require_disk "$WORK_PARENT"
WORK=$(mktemp -d "$WORK_PARENT/glass-peers-tpcb.XXXXXX") || die "mktemp in $WORK_PARENT failed"
GDB=$WORK/glass-db
LOGS=$WORK/logs
mkdir -p "$LOGS"

cleanup() {
  local rc=$?
  pg_stop
  if [ "${KEEP_WORK:-0}" = 1 ]; then note "kept $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

START=$(date +%s)
machine_note
t0=$(date +%s.%N)
glass_run "$LOGS/glass-load.log" load tpcb --db "$GDB" --scale "$SCALE" >/dev/null
note "glass load tpcb --scale $SCALE: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s; $(du -sh "$GDB" | cut -f1) in $GDB"
pg_start "$WORK"
[ "$(stat -c %d "$GDB")" = "$(stat -c %d "$PG_DATA")" ] || die "$GDB and $PG_DATA are on different file systems"
pg_init_pgbench "$SCALE"

declare -A R Q
for ((r = 1; r <= ROUNDS; r++)); do
  for t in $LOW $HIGH; do
    log=$LOGS/glass-r$r-t$t.log
    bg=$(wait_quiet)
    others=$(glass_run "$log" bench tpcb --db "$GDB" --durable --scale "$SCALE" --threads "$t" --duration "$SECS" --warmup 1 ${GATHER_FLAG[@]+"${GATHER_FLAG[@]}"})
    tps=$(glass_tps "$log")
    record "glass$t" "$tps" "$others"
    echo "round $r: glass threads=$t tps=$tps $(glass_log_line "$log") $bg $others"
    bg=$(wait_quiet)
    out=$(pg_run_pgbench "$t" "$SECS" "$LOGS/pgbench-r$r-c$t.log")
    read -r tps others <<<"$out"
    record "pg$t" "$tps" "$others"
    echo "round $r: pgbench clients=$t tps=$tps $bg $others"
  done
done

echo
echo "Durable TPC-B, scale $SCALE, ${SECS} s runs, $ROUNDS rounds interleaved, $(nproc) cores, $(fs_type "$WORK") on $(df --output=source "$WORK" | tail -n 1)"
printf '%-34s %10s %10s %10s %14s  %s\n' "system" "median" "min" "max" "quiet med (n)" "runs (txn/s)"
row() {
  local name=$1 key=$2 med lo hi n
  read -r med lo hi n <<<"$(median_range "${R[$key]}")"
  printf '%-34s %10s %10s %10s %14s  %s\n' "$name" "$med" "$lo" "$hi" "$(quiet_cell "${Q[$key]:-}")" "$(echo ${R[$key]})"
  eval "MED_$key=$med"
}
row "glass --durable, $LOW thread"  glass$LOW
row "glass --durable, $HIGH threads" glass$HIGH
row "pgbench -M prepared, -c $LOW -j 1" pg$LOW
row "pgbench -M prepared, -c $HIGH -j $(( HIGH < PGBENCH_JOBS_MAX ? HIGH : PGBENCH_JOBS_MAX ))" pg$HIGH
g_lo=MED_glass$LOW; g_hi=MED_glass$HIGH; p_lo=MED_pg$LOW; p_hi=MED_pg$HIGH
echo "glass $HIGH/$LOW ratio:        $(ratio "${!g_hi}" "${!g_lo}")"
echo "pgbench $HIGH/$LOW ratio:      $(ratio "${!p_hi}" "${!p_lo}")"
echo "glass-$HIGH / pg-$HIGH ratio:      $(ratio "${!g_hi}" "${!p_hi}")"
echo "glass-$LOW / pg-$LOW ratio:      $(ratio "${!g_lo}" "${!p_lo}")"
qmed() { median_range "${Q[$1]:-}" | cut -d' ' -f1; }
if [ -n "${Q[glass$LOW]:-}" ] && [ -n "${Q[glass$HIGH]:-}" ]; then echo "glass $HIGH/$LOW ratio, quiet runs only:   $(ratio "$(qmed glass$HIGH)" "$(qmed glass$LOW)")"; fi
if [ -n "${Q[glass$HIGH]:-}" ] && [ -n "${Q[pg$HIGH]:-}" ]; then echo "glass-$HIGH / pg-$HIGH ratio, quiet runs only: $(ratio "$(qmed glass$HIGH)" "$(qmed pg$HIGH)")"; fi
echo "(quiet: runs during which other processes used under $QUIET_RUN cores)"
machine_note
note "$(pg_version); took $(( $(date +%s) - START )) s; logs in $LOGS$([ "${KEEP_WORK:-0}" = 1 ] || echo ' (removed at exit: KEEP_WORK=1 keeps them)')"
