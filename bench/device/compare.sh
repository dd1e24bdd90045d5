#!/bin/bash
# Side-by-side scaling runs of several glass binaries on a machine with many cores, as one
# short script for the lent device (see the device tool's README). Usage:
#   bench/device/compare.sh THREADS ROUNDS BINARY...
# For each round, each thread count and each binary in turn (interleaved, so that drift on the
# machine falls on all alike): TPC-C paper mix, one warehouse per thread, in memory, full
# preset, 3 s after 1 s of warm-up. Prints one line per run: binary, threads, txn/s.
set -u
threads=$1 rounds=$2
shift 2
echo "cores: $(nproc)"
for round in $(seq "$rounds"); do
  for t in $threads; do
    for bin in "$@"; do
      tps=$("$bin" bench tpcc --mix paper --scale "$t" --threads "$t" --duration 3 --warmup 1 \
              --quiet 2>&1 | sed -n 's/.* transactions in .*: \([0-9.]*\) txn\/s.*/\1/p')
      echo "round=$round threads=$t bin=$(basename "$bin") txn/s=$tps"
    done
  done
done
