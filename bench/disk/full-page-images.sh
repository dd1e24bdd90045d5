#!/usr/bin/env bash
# What protection against torn pages costs a durable database on disk: rounds that run each
# workload with full-page images (`--full-page-images on --doublewrite off`), with a doublewrite
# file instead (`--doublewrite on --full-page-images off`, the default) and with neither, one after the other, and per
# workload the median and range of each. The databases are loaded once into the work directory (a real disk, not
# tmpfs) and run on by every round.
#
#   bench/disk/full-page-images.sh [--glass BIN] [--rounds N] [--duration S] [--dir DIR]
#
# docs/performance.md, "Torn pages" and "A doublewrite file", has its figures.
set -euo pipefail
# shellcheck source=../peers/lib/common.sh
source "$(dirname "$0")/../peers/lib/common.sh"
GLASS=$REPO_ROOT/target/release/glass
ROUNDS=3
DURATION=4
DIR=
while [ $# -gt 0 ]; do
  case "$1" in
    --glass) GLASS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[ -x "$GLASS" ] || die "no glass binary at $GLASS (cargo build --release first)"
if [ -z "$DIR" ]; then
  mkdir -p "$REPO_ROOT/glass-out"
  DIR=$(mktemp -d "$REPO_ROOT/glass-out/fpi.XXXXXX")
  trap 'rm -rf "$DIR"' EXIT
fi
require_disk "$DIR"
machine_note
# workload, scale, threads
runs=("tpcc 2 4" "tpcb 16 8")
for w in "${runs[@]}"; do
  set -- $w
  "$GLASS" load "$1" --db "$DIR/$1" --scale "$2" >/dev/null
done
declare -A tps
for r in $(seq 1 "$ROUNDS"); do
  for mode in images doublewrite none; do
    case $mode in
      images) flags=(--full-page-images on --doublewrite off) ;;
      doublewrite) flags=(--full-page-images off --doublewrite on) ;;
      none) flags=(--full-page-images off --doublewrite off) ;;
    esac
    for w in "${runs[@]}"; do
      set -- $w
      out=$("$GLASS" bench "$1" --db "$DIR/$1" --durable --threads "$3" --duration "$DURATION" \
        --warmup 1 "${flags[@]}" 2>&1)
      t=$(grep -oE '[0-9.]+ txn/s' <<<"$out" | head -n 1 | cut -d' ' -f1)
      # Checkpoints and page writes show what images bring besides their own bytes.
      ck=$(grep -oE '[0-9]+ in commits' <<<"$out" | cut -d' ' -f1 || true)
      wr=$(grep -oE '[0-9]+ page writes' <<<"$out" | head -n 1 | cut -d' ' -f1 || true)
      dw=$(grep -oE '[0-9]+ batches of a sync' <<<"$out" | cut -d' ' -f1 || true)
      note "round $r: $1 $mode: $t txn/s, ${ck:-?} checkpoints, ${wr:-?} page writes, ${dw:-0} doublewrite batches"
      tps[$1.$mode]="${tps[$1.$mode]:-} $t"
    done
  done
done
echo "| durable, on disk | threads | images (txn/s): median (min-max) | doublewrite | neither | images / neither | doublewrite / neither |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for w in "${runs[@]}"; do
  set -- $w
  read -r im_m im_lo im_hi _ <<<"$(median_range "${tps[$1.images]}")"
  read -r dw_m dw_lo dw_hi _ <<<"$(median_range "${tps[$1.doublewrite]}")"
  read -r no_m no_lo no_hi _ <<<"$(median_range "${tps[$1.none]}")"
  echo "| $1 (scale $2) | $3 | $im_m ($im_lo-$im_hi) | $dw_m ($dw_lo-$dw_hi) | $no_m ($no_lo-$no_hi) | $(ratio "$im_m" "$no_m") | $(ratio "$dw_m" "$no_m") |"
done
