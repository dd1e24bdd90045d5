#!/usr/bin/env bash
# pgbench (TPC-B-like) on a private, durable PostgreSQL cluster. See bench/peers/README.md.
#
#   bench/peers/pgbench.sh [--scale N] [--secs N] [--clients "1 8"] [--rounds R] [--dir DIR]
#
# Env equivalents: SCALE (16), SECS (10), CLIENTS ("1 8"), ROUNDS (1), WORK_PARENT (/var/tmp),
# PG_PORT, PG_BINDIR, PG_SHARED_BUFFERS (256MB), PG_EXTRA_CONF, KEEP_WORK=1 (keep the cluster's
# directory for inspection; the server is stopped all the same).
#
# Installs PostgreSQL from Debian's packages if missing. Prints one line per run:
#   pgbench clients=C tps=X
# (tps excluding connection establishing), then a median line per client count.
# Waits for a quiet machine before each run (QUIET_WAIT, QUIET_CPU, QUIET_IO: see the README).
set -euo pipefail
exec </dev/null
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
. "$PEERS_DIR/lib/pg.sh"

SCALE=${SCALE:-16}
SECS=${SECS:-10}
CLIENTS=${CLIENTS:-"1 8"}
ROUNDS=${ROUNDS:-1}
WORK_PARENT=${WORK_PARENT:-/var/tmp}

while [ $# -gt 0 ]; do
  case "$1" in
    --scale) SCALE=${2:?}; shift 2 ;;
    --secs) SECS=${2:?}; shift 2 ;;
    --clients) CLIENTS=${2:?}; shift 2 ;;
    --rounds) ROUNDS=${2:?}; shift 2 ;;
    --dir) WORK_PARENT=${2:?}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
positive SCALE SECS ROUNDS
for c in $CLIENTS; do is_uint "$c" && [ "$c" -ge 1 ] || die "CLIENTS must be positive integers (got '$CLIENTS')"; done
[ -n "$CLIENTS" ] || die "CLIENTS is empty"

pg_ensure_installed
[ -d "$WORK_PARENT" ] || die "work parent $WORK_PARENT does not exist"
require_disk "$WORK_PARENT"
WORK=$(mktemp -d "$WORK_PARENT/glass-peers-pg.XXXXXX") || die "mktemp in $WORK_PARENT failed"

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
pg_start "$WORK"
pg_init_pgbench "$SCALE"

declare -A RESULTS
for ((r = 1; r <= ROUNDS; r++)); do
  for c in $CLIENTS; do
    bg=$(wait_quiet)
    out=$(pg_run_pgbench "$c" "$SECS" "$WORK/pgbench-r$r-c$c.log")
    read -r tps others <<<"$out"
    echo "pgbench clients=$c tps=$tps $bg $others"
    RESULTS[$c]="${RESULTS[$c]:-} $tps"
  done
done
if [ "$ROUNDS" -gt 1 ]; then
  for c in $CLIENTS; do
    read -r med lo hi n <<<"$(median_range "${RESULTS[$c]}")"
    echo "pgbench clients=$c median_tps=$med min=$lo max=$hi runs=$n"
  done
fi
machine_note
note "$(pg_version); scale $SCALE; ${SECS}s per run; $ROUNDS round(s); took $(( $(date +%s) - START )) s"
