#!/usr/bin/env bash
# The three ways to run a workload on this machine's two cores, side by side: embedded (the
# engine alone on core 0), stored procedures and interactive transactions against `glass serve`
# (server pinned to core 0, its clients to core 1), for YCSB-C, Voter and the TPC-C paper mix
# with every terminal on its own home warehouse. Rounds are interleaved (embedded, sp,
# interactive, embedded, ...) and each cell is the median of ROUNDS runs with its range.
#
#   bench/server/modes-2core.sh [--glass BIN] [--rounds N] [--seconds S] [--connections C]
#                               [--arch unified|dedicated] [--workers W]
#
# The server runs W workers (default 1: it has one core, and more threads than cores measure
# the scheduler's wake-ups; a lock wait for another connection of the same worker is refused
# at once and retried, so interactive transactions need no worker per connection). Prints one
# table row per workload and mode.
set -euo pipefail
# shellcheck source=../peers/lib/common.sh
source "$(dirname "$0")/../peers/lib/common.sh"

GLASS=$REPO_ROOT/target/release/glass
ROUNDS=3
SECONDS_PER_RUN=4
CONNECTIONS=4
ARCH=unified
WORKERS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --glass) GLASS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --seconds) SECONDS_PER_RUN=$2; shift 2 ;;
    --connections) CONNECTIONS=$2; shift 2 ;;
    --arch) ARCH=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
positive ROUNDS SECONDS_PER_RUN CONNECTIONS WORKERS
[ -x "$GLASS" ] || die "no glass binary at $GLASS (cargo build --release first)"
command -v taskset >/dev/null || die "taskset (util-linux) is needed to pin server and clients apart"
[ "$(nproc)" -ge 2 ] || die "two cores are needed to pin server and clients apart"

WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

tps_of() { awk '/ transactions in .* txn\/s/ { for (i = 1; i <= NF; i++) if ($(i+1) == "txn/s") print $i }' "$1" | head -n 1; }
trips_of() { awk '/^round trips/ { on = 1; next } on && NF >= 2 { printf "%s=%s ", $1, $2 }' "$1"; }

machine_note
printf '%-8s %-12s %12s %20s  %s\n' workload mode "txn/s" "range" "round trips per txn"
# Voter at its largest scale, and every run with a seed of its own: a phone number has two
# votes, so calls that repeat phone numbers (a small scale, or runs replaying one seed against
# one server) become read-only refusals, one round trip in either model.
for spec in "ycsb --scale 100000 --ycsb-workload C" "voter --scale 999" "tpcc --scale $CONNECTIONS --mix paper"; do
  read -r -a args <<<"$spec"
  name=${args[0]}
  taskset -c 0 "$GLASS" serve "${args[@]}" --listen 127.0.0.1:0 --arch "$ARCH" \
    --workers "$WORKERS" --quiet >"$WORK/serve.out" 2>"$WORK/serve.err" &
  SERVER_PID=$!
  for _ in $(seq 1 600); do grep -q '^listening on tcp://' "$WORK/serve.out" && break; sleep 0.1; done
  addr=$(sed -n 's|^listening on tcp://||p' "$WORK/serve.out" | head -n 1)
  [ -n "$addr" ] || die "the $name server did not start: $(cat "$WORK/serve.err")"
  declare -A runs=()
  declare -A trips=()
  run=0
  for round in $(seq 1 "$ROUNDS"); do
    for mode in embedded sp interactive; do
      run=$((run + 1))
      seed=$((run * 1048576))
      log="$WORK/$name-$mode-$round.log"
      if [ "$mode" = embedded ]; then
        taskset -c 0 "$GLASS" bench "${args[@]}" --seed "$seed" --threads 1 --duration "$SECONDS_PER_RUN" \
          --warmup 1 --quiet >"$log" 2>&1 || die "embedded $name failed: $(tail -n 3 "$log")"
      else
        taskset -c 1 "$GLASS" bench "${args[@]}" --seed "$seed" --server "$addr" --mode "$mode" \
          --connections "$CONNECTIONS" --duration "$SECONDS_PER_RUN" --warmup 1 --quiet \
          >"$log" 2>&1 || die "$mode $name failed: $(tail -n 3 "$log")"
        trips[$mode]=$(trips_of "$log")
      fi
      runs[$mode]="${runs[$mode]:-} $(tps_of "$log")"
    done
  done
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=
  for mode in embedded sp interactive; do
    read -r med lo hi _ <<<"$(median_range "${runs[$mode]}")"
    printf '%-8s %-12s %12s %20s  %s\n' "$name" "$mode" "$med" "$lo-$hi" "${trips[$mode]:-}"
  done
  unset runs trips
done
