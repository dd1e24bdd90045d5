#!/bin/bash
# What the log costs at many cores: TPC-C paper mix, one warehouse per thread, in memory, at
# 1, half and all the cores, with the full preset, without log records (`main-log=off`: LSNs
# are still drawn from one counter), and without log records or LSNs (`lsn=off` too),
# interleaved. Glass is $GLASS (default target/release/glass). Prints one line per run.
set -u
G=${GLASS:-target/release/glass}
n=$(nproc)
echo "cores: $n"
for round in ${ROUNDS_LIST:-1 2}; do
  for t in 1 $((n / 2)) "$n"; do
    for cfg in full "main-log=off" "main-log=off lsn=off"; do
      args=()
      [ "$cfg" = full ] || for s in $cfg; do args+=(--switch "$s"); done
      tps=$("$G" bench tpcc --mix paper --scale "$t" --threads "$t" --duration 3 --warmup 1 \
            --quiet "${args[@]}" 2>&1 | sed -n 's/.* transactions in .*: \([0-9.]*\) txn\/s.*/\1/p')
      echo "round=$round threads=$t config=${cfg// /,} txn/s=$tps"
    done
  done
done
