#!/usr/bin/env bash
# Instructions a stored-procedure call costs the server, under callgrind: `glass serve WORKLOAD
# --isolation LEVEL --workers 1` counted only inside `ConnState::call` (the call at its level,
# its engine work, its commit; not the request's decoding, the reply's sending, nor the load),
# driven by `glass bench --server` for a fixed number of transactions on one connection. A
# procedure process (process, container, vm) is not traced: only the host's side counts, and
# at wasm the module's compiled code counts with the host's. Deterministic for one binary and
# module, so two builds compare in one run each; except at shm-poll, whose host's polling
# counts too and depends on how soon its guest answers.
#
#   bench/isolation/callgrind-call.sh [--glass BIN] [--workload W] [--scale S] [--level L]
#                                     [--txns N] [--module FILE] [--keep DIR] [--cache-sim]
#
#   --level   rust, wasm, none, process:CHANNEL or container:CHANNEL (default rust)
#   --scale   as `glass serve --scale` (default 1; YCSB's records: use 10000)
#   --txns    transactions driven (default 1000)
#   --module  with --level wasm, the module (default: glass serve's own default)
#   --keep    a directory to keep callgrind's files in, for callgrind_annotate; at wasm also
#             the module's perf map (perf.map) and both annotations with the module's
#             functions named (annotate-self.txt, annotate-inclusive.txt; jit-names.py)
#   --cache-sim  simulate the caches too (callgrind's --cache-sim=yes): the kept files then
#             count I1, D1 and last-level misses (callgrind_annotate --show=Ir,I1mr,D1mr,D1mw)
#
# Prints one line: workload, level, calls counted, instructions a call (and with --cache-sim
# the first-level cache misses a call: I1mr, D1mr, D1mw).
set -euo pipefail
# shellcheck source=../peers/lib/common.sh
source "$(dirname "$0")/../peers/lib/common.sh"

GLASS=$REPO_ROOT/target/release/glass
WORKLOAD=tpcc
SCALE=1
LEVEL=rust
TXNS=1000
MODULE=
KEEP=
CACHE_SIM=no
while [ $# -gt 0 ]; do
  case "$1" in
    --glass) GLASS=$2; shift 2 ;;
    --workload) WORKLOAD=$2; shift 2 ;;
    --scale) SCALE=$2; shift 2 ;;
    --level) LEVEL=$2; shift 2 ;;
    --txns) TXNS=$2; shift 2 ;;
    --module) MODULE=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    --cache-sim) CACHE_SIM=yes; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
positive SCALE TXNS
[ -x "$GLASS" ] || die "no glass binary at $GLASS (cargo build --release first)"
command -v valgrind >/dev/null || die "valgrind is needed (apt-get install -y valgrind)"

isolation=(--isolation "${LEVEL%%:*}")
case "$LEVEL" in
  *:*) isolation+=(--channel "${LEVEL#*:}") ;;
esac
if [ -n "$MODULE" ]; then isolation+=(--wasm-module "$MODULE"); fi
if [ "${LEVEL%%:*}" = wasm ] && [ -n "$KEEP" ]; then isolation+=(--wasm-perfmap); fi

work=$(mktemp -d)
server=
perfmap=
cleanup() {
  if [ -n "$server" ]; then kill -INT "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
  if [ -n "$perfmap" ]; then rm -f "$perfmap"; fi
}
trap cleanup EXIT

valgrind --tool=callgrind --cache-sim=$CACHE_SIM --separate-threads=yes --collect-atstart=no \
  '--toggle-collect=server::handler::ConnState::call*' \
  --callgrind-out-file="$work/cg.out" \
  "$GLASS" serve "$WORKLOAD" --scale "$SCALE" --unix "$work/s.sock" --workers 1 "${isolation[@]}" \
  >"$work/serve.log" 2>&1 &
server=$!
perfmap=/tmp/perf-$server.map
for _ in $(seq 1 900); do
  [ -S "$work/s.sock" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log" >&2; die "the server stopped before it listened"; }
  sleep 1
done
[ -S "$work/s.sock" ] || die "the server did not listen within 900 s"
"$GLASS" bench "$WORKLOAD" --scale "$SCALE" --server "unix://$work/s.sock" --txns "$TXNS" \
  --threads 1 --warmup 0 >"$work/bench.log" 2>&1 || {
  cat "$work/bench.log" >&2
  echo "the server's log ends:" >&2
  tail -n 30 "$work/serve.log" >&2
  die "the client failed"
}
kill -INT "$server"
wait "$server" || { tail -n 5 "$work/serve.log" >&2; die "the server did not stop cleanly"; }
server=

if [ -n "$KEEP" ]; then
  mkdir -p "$KEEP" && cp "$work"/cg.out* "$KEEP"/
  if [ -s "$perfmap" ]; then
    cp "$perfmap" "$KEEP/perf.map"
    worker=$(for f in "$work"/cg.out-*; do echo "$(awk '/^summary:/ { print $2 }' "$f") $f"; done | sort -n | tail -n 1 | cut -d' ' -f2)
    for kind in self inclusive; do
      if [ $kind = self ]; then inclusive=no; else inclusive=yes; fi
      callgrind_annotate --auto=no --inclusive=$inclusive "$worker" \
        | python3 "$(dirname "$0")/jit-names.py" "$KEEP/perf.map" >"$KEEP/annotate-$kind.txt"
    done
  fi
fi

# Every thread's file: its total, and the calls made into ConnState::call (callgrind names a
# function in full once per file and by its number after that).
python3 - "$WORKLOAD" "$LEVEL" "$work"/cg.out* <<'PY'
import re, sys
workload, level, files = sys.argv[1], sys.argv[2], sys.argv[3:]
total = calls = 0
events, sums = [], {}
for path in files:
    names, target = {}, False
    for line in open(path, errors="replace"):
        if line.startswith("events:"):
            events = line.split()[1:]
        if line.startswith("summary:"):
            values = [int(v) for v in line.split()[1:]]
            total += values[0]
            for event, value in zip(events, values):
                sums[event] = sums.get(event, 0) + value
        m = re.match(r"cfn=\((\d+)\)(?: (.*))?", line)
        if m:
            if m.group(2):
                names[m.group(1)] = m.group(2)
            target = names.get(m.group(1), "").startswith("server::handler::ConnState::call")
            continue
        m = re.match(r"fn=\((\d+)\)(?: (.*))?", line)
        if m and m.group(2):
            names[m.group(1)] = m.group(2)
        if line.startswith("calls=") and target:
            calls += int(line.split("=")[1].split()[0])
            target = False
if calls == 0:
    sys.exit("callgrind-call.sh: no call of ConnState::call was counted")
# With --cache-sim, the first-level misses a call too (instruction, data read, data write).
misses = "".join(
    f" {event}_per_call={sums[event] / calls:.1f}"
    for event in ("I1mr", "D1mr", "D1mw")
    if event in sums
)
print(f"{workload} {level} calls={calls} instructions_per_call={total // calls}{misses}")
PY
