#!/bin/bash
# Binaries and flags side by side on a lent 16-core machine (see the device tool's README):
# TPC-C paper mix, one warehouse per thread, in memory, every variant once per round, rounds
# interleaved (A B C A B C ...), then the median of each. Each variant is LABEL=BINARY and
# optional glass flags after a colon, e.g.
#
#   VARIANTS="huge=.dev/cmp/new:--huge-pages small=.dev/cmp/new base=.dev/cmp/base" \
#   THREADS="1 16" ROUNDS=3 bench/device/ab16.sh
#
# Prints a line per run and, per thread count, each variant's median and range (txn/s).
set -u
THREADS=${THREADS:-"1 16"}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-3}
echo "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
echo "transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
declare -A RUNS
for round in $(seq 1 "$ROUNDS"); do
  for t in $THREADS; do
    for v in $VARIANTS; do
      label=${v%%=*}
      spec=${v#*=}
      bin=${spec%%:*}
      flags=""
      [[ "$spec" == *:* ]] && flags=${spec#*:}
      # shellcheck disable=SC2086 # flags are words
      tps=$("$bin" bench tpcc --mix paper --scale "$t" --threads "$t" --duration "$SECS" --warmup 1 \
        --quiet $flags 2>&1 | sed -n 's/.* transactions in .*: \([0-9.]*\) txn\/s.*/\1/p')
      echo "round=$round threads=$t $label txn/s=${tps:-failed}"
      RUNS[$t.$label]="${RUNS[$t.$label]:-} ${tps:-0}"
    done
  done
done
for t in $THREADS; do
  for v in $VARIANTS; do
    label=${v%%=*}
    # shellcheck disable=SC2086 # one number per word
    sorted=$(printf '%s\n' ${RUNS[$t.$label]} | sort -n)
    n=$(echo "$sorted" | wc -l)
    median=$(echo "$sorted" | sed -n "$(((n + 1) / 2))p")
    echo "threads=$t $label median=$median range=$(echo "$sorted" | head -n 1)-$(echo "$sorted" | tail -n 1)"
  done
done
