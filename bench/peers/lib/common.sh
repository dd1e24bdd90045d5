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

# usage: the script's leading comment block.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
