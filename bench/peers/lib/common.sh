# Shared helpers for the peer benchmark scripts (sourced, not run).
# shellcheck shell=bash

export LC_ALL=C

PEERS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_ROOT=$(cd "$PEERS_DIR/../.." && pwd)

die() { echo "$(basename "$0"): error: $*" >&2; exit 1; }
note() { echo "# $*" >&2; }

# median_range "v1 v2 ...": prints "MEDIAN MIN MAX N" (median of an even count is the mean of
# the middle two).
median_range() {
  printf '%s\n' $1 | sort -g | awk '
    { v[NR] = $1 }
    END {
      if (NR == 0) { print "nan nan nan 0"; exit }
      m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "%.1f %.1f %.1f %d\n", m, v[1], v[NR], NR
    }'
}

# ratio A B: A / B to three decimals ("n/a" when B is 0 or missing).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "n/a"; else printf "%.3f\n", a / b }'; }

# fs_type DIR: the file system type of DIR ("tmpfs", "ext4", ...).
fs_type() { df --output=fstype "$1" | tail -n 1 | tr -d ' '; }

# require_disk DIR: refuse a tmpfs/ramfs directory (the durable comparisons need a real disk).
require_disk() {
  local t
  t=$(fs_type "$1") || die "cannot df $1"
  case "$t" in
    tmpfs|ramfs|devtmpfs) die "$1 is on $t, not a disk: point the work directory elsewhere (--dir DIR or WORK_PARENT=DIR)" ;;
  esac
  note "work directory $1 is on $(df --output=source "$1" | tail -n 1) ($t)"
}

# machine_note: the load average and the busiest other processes, for the record (other people
# build on this machine).
machine_note() {
  note "loadavg: $(cut -d' ' -f1-3 /proc/loadavg); cores: $(nproc)"
}

# is_uint X
is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

# positive NAME...: dies unless each named variable holds a positive integer.
positive() {
  local name
  for name in "$@"; do
    is_uint "${!name}" && [ "${!name}" -ge 1 ] || die "$name must be a positive integer (got '${!name}')"
  done
}

# usage: the script's leading comment block.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

# Other people's work on this machine (builds, tests) competes for its cores and its disk. Before
# each measured run the scripts take a 1 s sample of what the machine does without us (our
# servers are idle then) and, for up to QUIET_WAIT seconds, wait for it to fall below
# QUIET_CPU busy cores and QUIET_IO disk utilisation; then they run anyway and print the last
# sample beside the result ("bg_cpu=1.84 bg_io=12%"), so contended runs can be told apart.
QUIET_WAIT=${QUIET_WAIT:-60}
QUIET_CPU=${QUIET_CPU:-0.5}
QUIET_IO=${QUIET_IO:-20}
QUIET_DEV=${QUIET_DEV:-}

# bg_sample: "CPU IO" over one second: busy cores (of nproc) and the disk's utilisation (%).
bg_sample() {
  local dev=${QUIET_DEV:-$(basename "$(df --output=source "${WORK:-/}" | tail -n 1)")}
  local a b
  a="$(head -n 1 /proc/stat) $(awk -v d="$dev" '$3 == d { print $13 }' /proc/diskstats)"
  sleep 1
  b="$(head -n 1 /proc/stat) $(awk -v d="$dev" '$3 == d { print $13 }' /proc/diskstats)"
  awk -v a="$a" -v b="$b" 'BEGIN {
      na = split(a, x, " "); split(b, y, " ")
      tot = 0; for (i = 2; i <= 11; i++) tot += y[i] - x[i]
      idle = (y[5] - x[5]) + (y[6] - x[6])
      io = (na >= 12) ? (y[na] - x[na]) / 10 : -1      # io_ticks: ms busy in 1000 ms
      if (io > 100) io = 100
      ncpu = '"$(nproc)"'
      printf "%.2f %d\n", (tot > 0 ? (tot - idle) / tot * ncpu : 0), io
    }'
}

# wait_quiet: wait (up to QUIET_WAIT s) for a quiet machine; prints "bg_cpu=X bg_io=Y%".
wait_quiet() {
  local start cpu io
  start=$(date +%s)
  while :; do
    read -r cpu io <<<"$(bg_sample)"
    if awk -v c="$cpu" -v i="$io" -v mc="$QUIET_CPU" -v mi="$QUIET_IO" 'BEGIN { exit !(c < mc && i < mi) }' \
       || [ $(( $(date +%s) - start )) -ge "$QUIET_WAIT" ]; then
      break
    fi
  done
  echo "bg_cpu=$cpu bg_io=${io}%"
}

# Contention during a run: the machine's busy CPU time over the run (from /proc/stat, less
# kernel threads) less our own (the benchmark's user+system time from /usr/bin/time, plus the
# PostgreSQL server's for pgbench), divided by the run's wall time: "others_cpu=0.93" means other
# people's processes kept 0.93 of the machine's cores busy on average while we ran (n/a without
# /usr/bin/time).
# busy_jiffies: the machine's user, nice and system time (not idle, iowait, interrupts or steal)
# less what kernel threads used (the journal, writeback, block I/O workers: work our own writes
# cause as much as anyone's).
busy_jiffies() {
  local k
  k=$(cat /proc/[0-9]*/stat 2>/dev/null | awk '{ sub(/^[0-9]+ \(.*\) /, ""); if ($2 == 2 || $2 == 0) s += $12 + $13 } END { print s + 0 }')
  awk -v k="$k" '/^cpu / { print $2 + $3 + $4 - k; exit }' /proc/stat
}

# measured LOG EXTRA_FN CMD...: runs CMD (stdout and stderr to LOG) and prints others_cpu.
# EXTRA_FN (or "-") prints CPU jiffies of our processes that are not CMD's descendants.
measured() {
  local log=$1 extra=$2; shift 2
  local t0 t1 b0 b1 x0=0 x1=0 rc=0 own
  if [ "$extra" != - ]; then x0=$($extra); fi
  b0=$(busy_jiffies); t0=$(date +%s.%N)
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f "%U %S" -o "$log.cputime" "$@" </dev/null >"$log" 2>&1 || rc=$?
  else
    "$@" </dev/null >"$log" 2>&1 || rc=$?
  fi
  t1=$(date +%s.%N); b1=$(busy_jiffies)
  if [ "$extra" != - ]; then x1=$($extra); fi
  [ "$rc" = 0 ] || return "$rc"
  if [ -s "$log.cputime" ]; then
    own=$(tail -n 1 "$log.cputime")
    awk -v b0="$b0" -v b1="$b1" -v x0="$x0" -v x1="$x1" -v t0="$t0" -v t1="$t1" -v own="$own" -v hz="$(getconf CLK_TCK)" 'BEGIN {
        split(own, o, " ")
        v = ((b1 - b0) / hz - (o[1] + o[2]) - (x1 - x0) / hz) / (t1 - t0)
        if (v < 0) v = 0
        printf "others_cpu=%.2f\n", v
      }'
  else
    echo "others_cpu=n/a"
  fi
}

# quiet_run "others_cpu=X": true when other people used under QUIET_RUN cores (0.25) during the
# run; the tables give the median of those runs too.
QUIET_RUN=${QUIET_RUN:-0.25}
quiet_run() { awk -v s="$1" -v q="$QUIET_RUN" 'BEGIN { sub(/^others_cpu=/, "", s); exit !(s != "n/a" && s + 0 < q + 0) }'; }

# record KEY TPS OTHERS: adds a run's throughput to the caller's R[KEY], and to Q[KEY] when
# the run was quiet (OTHERS as quiet_run takes it). R and Q are the caller's associative arrays.
record() {
  R[$1]="${R[$1]:-} $2"
  if quiet_run "$3"; then Q[$1]="${Q[$1]:-} $2"; fi
}

# quiet_cell "v1 v2 ...": "MEDIAN (N)" of the quiet runs' values, or "- (0)".
quiet_cell() {
  local med lo hi n
  [ -n "$(echo $1)" ] || { echo "- (0)"; return; }
  read -r med lo hi n <<<"$(median_range "$1")"
  echo "$med ($n)"
}
