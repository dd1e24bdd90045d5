# Glass helpers for durable-tpcb.sh and scaling-2core.sh (sourced, not run).
# shellcheck shell=bash

GLASS=${GLASS:-$REPO_ROOT/target/release/glass}

glass_check() {
  [ -x "$GLASS" ] || die "no Glass binary at $GLASS: build it (cargo build --release) or pass --glass PATH / GLASS=PATH"
  note "glass: $GLASS ($("$GLASS" --version 2>/dev/null || echo 'version unknown'); built $(date -r "$GLASS" '+%F %T'))"
  if git -C "$(dirname "$GLASS")" rev-parse --short HEAD >/dev/null 2>&1; then
    note "glass: its repository's HEAD is $(git -C "$(dirname "$GLASS")" rev-parse --short HEAD)$(git -C "$(dirname "$GLASS")" diff --quiet HEAD -- 2>/dev/null || echo ' (plus uncommitted changes)')"
  fi
}

# glass_tps LOGFILE: the measured throughput from "N transactions in X s: Y txn/s (...)".
glass_tps() {
  local tps
  tps=$(sed -n -E 's/^[0-9]+ transactions in [0-9.]+ s: ([0-9.]+) txn\/s.*/\1/p' "$1" | tail -n 1)
  [ -n "$tps" ] || { tail -30 "$1" >&2; die "no throughput line in Glass's output ($1, tail above)"; }
  grep -q '^consistency: ok' "$1" || { tail -30 "$1" >&2; die "Glass's consistency check did not pass ($1, tail above)"; }
  echo "$tps"
}

# glass_log_line LOGFILE: "forces per commit, commits per group" from the log: line, if any.
glass_log_line() {
  sed -n -E 's/^log: .*: ([0-9.]+) forces per commit, ([0-9.]+) commits per group.*/forces_per_commit=\1 commits_per_group=\2/p' "$1" | tail -n 1
}

# glass_run LOGFILE ARGS...: run Glass, log to LOGFILE, die with its tail on failure; prints
# others_cpu=X (other people's CPU use during the run). Call it as out=$(glass_run ...).
glass_run() {
  local log=$1; shift
  measured "$log" - "$GLASS" "$@" || { tail -30 "$log" >&2; die "glass $* failed (log: $log, tail above)"; }
}
