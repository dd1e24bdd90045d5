#!/usr/bin/env bash
# Point reads over loopback TCP with the server on one core: Glass's YCSB-C stored procedures
# against PostgreSQL's `pgbench -S -M prepared` at the same number of connections, rounds
# interleaved (Glass, PostgreSQL, Glass, ...). Both servers are pinned to core 0 and their
# clients to core 1. See bench/peers/README.md for the PostgreSQL cluster (private, started and
# stopped here; installed from Debian's packages if missing).
#
#   bench/server/ycsb-vs-pgbench.sh [--glass BIN] [--connections C] [--workers W] [--secs S]
#                                   [--rounds R] [--dir DIR]
#
# Both read one row by a random key from 100,000: pgbench's accounts (scale 1) and YCSB's
# records (uniform keys here, as pgbench draws them; YCSB rows are 1 KB, pgbench's about 100
# bytes). Glass runs the unified architecture with one worker (the server has one core; each
# worker serves its connections in turn), PostgreSQL a backend per connection, as each is
# meant to run; `--workers C` gives Glass a worker per connection too. Prints each run, then
# the medians and their ratio.
set -euo pipefail
exec </dev/null
# shellcheck source=../peers/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../peers/lib/common.sh"
# shellcheck source=../peers/lib/pg.sh
. "$PEERS_DIR/lib/pg.sh"

GLASS=$REPO_ROOT/target/release/glass
CONNECTIONS=8
WORKERS=1
SECS=5
ROUNDS=3
WORK_PARENT=${WORK_PARENT:-/var/tmp}
while [ $# -gt 0 ]; do
  case "$1" in
    --glass) GLASS=${2:?}; shift 2 ;;
    --connections) CONNECTIONS=${2:?}; shift 2 ;;
    --workers) WORKERS=${2:?}; shift 2 ;;
    --secs) SECS=${2:?}; shift 2 ;;
    --rounds) ROUNDS=${2:?}; shift 2 ;;
    --dir) WORK_PARENT=${2:?}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
positive CONNECTIONS WORKERS SECS ROUNDS
[ -x "$GLASS" ] || die "no glass binary at $GLASS (cargo build --release first)"
command -v taskset >/dev/null || die "taskset (util-linux) is needed to pin servers and clients apart"
[ "$(nproc)" -ge 2 ] || die "two cores are needed"

pg_ensure_installed
WORK=$(mktemp -d "$WORK_PARENT/glass-ycsb-pg.XXXXXX") || die "mktemp in $WORK_PARENT failed"
GLASS_PID=
cleanup() {
  local rc=$?
  [ -n "$GLASS_PID" ] && kill "$GLASS_PID" 2>/dev/null || true
  pg_stop
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

machine_note
# TCP on loopback as well as the private socket: the comparison is over TCP.
PG_EXTRA_CONF="listen_addresses = '127.0.0.1'
max_connections = $((CONNECTIONS + 10))"
pg_start "$WORK"
pg_init_pgbench 1
# Backends fork from the postmaster and inherit its core.
taskset -p -c 0 "$(head -n 1 "$PG_DATA/postmaster.pid")" >/dev/null

taskset -c 0 "$GLASS" serve ycsb --scale 100000 --ycsb-workload C --distribution uniform \
  --listen 127.0.0.1:0 --arch unified --workers "$WORKERS" --quiet \
  >"$WORK/serve.out" 2>"$WORK/serve.err" &
GLASS_PID=$!
for _ in $(seq 1 600); do grep -q '^listening on tcp://' "$WORK/serve.out" && break; sleep 0.1; done
ADDR=$(sed -n 's|^listening on tcp://||p' "$WORK/serve.out" | head -n 1)
[ -n "$ADDR" ] || die "glass serve did not start: $(cat "$WORK/serve.err")"

glass_runs=""
pg_runs=""
for r in $(seq 1 "$ROUNDS"); do
  log="$WORK/glass-$r.log"
  taskset -c 1 "$GLASS" bench ycsb --scale 100000 --ycsb-workload C --distribution uniform \
    --server "$ADDR" --mode sp --connections "$CONNECTIONS" --duration "$SECS" --warmup 1 \
    --quiet >"$log" 2>&1 || die "glass bench failed: $(tail -n 3 "$log")"
  tps=$(awk '/ transactions in .* txn\/s/ { for (i = 1; i <= NF; i++) if ($(i+1) == "txn/s") print $i }' "$log" | head -n 1)
  echo "glass ycsb-c sp connections=$CONNECTIONS workers=$WORKERS tps=$tps"
  glass_runs="$glass_runs $tps"
  log="$WORK/pg-$r.log"
  taskset -c 1 "$PG_BINDIR/pgbench" -h 127.0.0.1 -p "$PG_PORT" -U postgres -S -M prepared \
    -c "$CONNECTIONS" -j 1 -T "$SECS" bench >"$log" 2>&1 \
    || { tail -n 20 "$log" >&2; die "pgbench -S failed (log above)"; }
  tps=$(sed -n -E 's/^tps = ([0-9.]+) \((without initial connection time|excluding connections establishing)\).*/\1/p' "$log" | head -n 1)
  [ -n "$tps" ] || { cat "$log" >&2; die "no tps line in pgbench's output (above)"; }
  echo "pgbench -S -M prepared clients=$CONNECTIONS tps=$tps"
  pg_runs="$pg_runs $tps"
done
read -r gm glo ghi _ <<<"$(median_range "$glass_runs")"
read -r pm plo phi _ <<<"$(median_range "$pg_runs")"
echo "glass median=$gm (range $glo-$ghi); postgresql median=$pm (range $plo-$phi); ratio=$(ratio "$gm" "$pm")"
note "$(pg_version); $ROUNDS round(s) of ${SECS}s; server on core 0, clients on core 1"
