# DBx1000 helpers for dbx1000.sh and scaling-2core.sh (sourced, not run).
# shellcheck shell=bash
#
# Builds happen outside the tracked code, under target/peers/dbx1000 (target/ is ignored), one
# build directory per configuration (commit, CC_ALG, threads = warehouses, CPU_FREQ, run length),
# reused when it already holds a rundb built from the same configuration.
#
# Time: DBx1000 times with rdtsc divided by the compiled CPU_FREQ (system/helper.h,
# get_server_clock: ticks / CPU_FREQ, read as nanoseconds). Its reported seconds are therefore
# ticks / (CPU_FREQ * 1e9), while the real seconds are ticks / (TSC_GHz * 1e9), so
#   real seconds = reported seconds * CPU_FREQ / TSC_GHz
#   real txn/s   = reported txn/s   * TSC_GHz / CPU_FREQ.
# We compile CPU_FREQ as the TSC rate measured here (so the factor is ~1, and its abort penalty
# and timeouts, which are in the same units, are real nanoseconds too), and still apply the
# factor. Throughput is DBx1000's own: txn_cnt / run_time * THREAD_CNT (its README), run_time
# being the sum over threads of their time in the transaction loop; we also print
# txn_cnt / SimTime (the wall time of the measured phase), converted the same way.

DBX_ROOT=${DBX_BUILD_ROOT:-$REPO_ROOT/target/peers/dbx1000}
DBX_MAX_TXN=${DBX_MAX_TXN:-500000}   # MAX_TXN_PER_PART: a run ends when one thread commits this many (upstream: 100000)
DBX_PERC_PAYMENT=${DBX_PERC_PAYMENT:-0.5}   # the paper mix: Payment / New-Order 50/50 (upstream default)
DBX_CPU_FREQ=${DBX_CPU_FREQ:-}       # empty: the measured TSC rate
DBX_SRC_TREE=""
DBX_COMMIT=""
DBX_TSC_GHZ=""

# dbx_prepare_src SRC: SRC is a DBx1000 git directory (bare, or a mirror without a work tree)
# or a checkout. Extracts a pristine copy to $DBX_ROOT/src-<commit>. With SRC empty, reuses the
# one copy already there.
dbx_prepare_src() {
  local src=${1:-} key
  mkdir -p "$DBX_ROOT" || die "cannot create $DBX_ROOT"
  if [ -z "$src" ]; then
    local found=("$DBX_ROOT"/src-*)
    [ -e "${found[0]}" ] && [ ${#found[@]} = 1 ] \
      || die "no DBx1000 source: pass its git directory or checkout (argument, --src or DBX1000_SRC), e.g. a clone of github.com/yxymit/DBx1000"
    DBX_SRC_TREE=${found[0]}
    DBX_COMMIT=$(cat "$DBX_SRC_TREE/.glass-commit" 2>/dev/null || echo unknown)
    note "dbx1000: reusing the source copy $DBX_SRC_TREE (commit $DBX_COMMIT)"
    return 0
  fi
  [ -e "$src" ] || die "DBx1000 source $src does not exist"
  if [ -f "$src/config.h" ] && [ -f "$src/Makefile" ]; then
    # A checkout (its .git, if any, is left behind).
    DBX_COMMIT=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
    if [ "$DBX_COMMIT" != unknown ] && git -C "$src" diff --quiet HEAD -- 2>/dev/null; then
      key=$DBX_COMMIT
    else
      key=worktree-$(date +%s)   # local changes or no git: always a fresh copy
      DBX_COMMIT="$DBX_COMMIT+local"
    fi
    DBX_SRC_TREE=$DBX_ROOT/src-${key:0:12}
    if [ ! -f "$DBX_SRC_TREE/.glass-commit" ]; then
      rm -rf "$DBX_SRC_TREE"; mkdir -p "$DBX_SRC_TREE"
      tar -C "$src" --exclude=.git -cf - . | tar -C "$DBX_SRC_TREE" -xf - || die "copying $src failed"
      echo "$DBX_COMMIT" > "$DBX_SRC_TREE/.glass-commit"
    fi
  elif git --git-dir="$src" rev-parse --verify -q HEAD >/dev/null 2>&1; then
    DBX_COMMIT=$(git --git-dir="$src" rev-parse HEAD)
    DBX_SRC_TREE=$DBX_ROOT/src-${DBX_COMMIT:0:12}
    if [ ! -f "$DBX_SRC_TREE/.glass-commit" ]; then
      rm -rf "$DBX_SRC_TREE"; mkdir -p "$DBX_SRC_TREE"
      git --git-dir="$src" archive HEAD | tar -C "$DBX_SRC_TREE" -xf - || die "git archive from $src failed"
      echo "$DBX_COMMIT" > "$DBX_SRC_TREE/.glass-commit"
    fi
  else
    die "$src is neither a DBx1000 checkout (config.h, Makefile) nor a git directory"
  fi
  [ -f "$DBX_SRC_TREE/config.h" ] && [ -f "$DBX_SRC_TREE/system/main.cpp" ] || die "$DBX_SRC_TREE does not look like DBx1000"
  note "dbx1000: source $src, commit $DBX_COMMIT, copied to $DBX_SRC_TREE"
}

# dbx_measure_tsc: sets DBX_TSC_GHZ, the rdtsc rate against CLOCK_MONOTONIC over 0.5 s.
dbx_measure_tsc() {
  local bin=$DBX_ROOT/tscfreq
  if [ ! -x "$bin" ]; then
    cat > "$DBX_ROOT/tscfreq.c" <<'CEOF'
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <x86intrin.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(void) {
  double best = 0;
  for (int i = 0; i < 3; i++) {
    double t0 = now(); uint64_t c0 = __rdtsc();
    while (now() - t0 < 0.5) {}
    uint64_t c1 = __rdtsc(); double t1 = now();
    double ghz = (c1 - c0) / (t1 - t0) / 1e9;
    if (i == 0 || ghz < best) best = ghz; /* a preempted sample reads high; keep the lowest */
  }
  printf("%.4f\n", best);
  return 0;
}
CEOF
    cc -O2 -o "$bin" "$DBX_ROOT/tscfreq.c" || die "cannot compile the TSC calibrator (x86-64 only)"
  fi
  DBX_TSC_GHZ=$("$bin") || die "TSC calibration failed"
  local cpuinfo
  cpuinfo=$(awk -F: '/^cpu MHz/ { printf "%.4f", $2 / 1000; exit }' /proc/cpuinfo)
  note "dbx1000: TSC measured at $DBX_TSC_GHZ GHz (/proc/cpuinfo cpu MHz: ${cpuinfo:-n/a} GHz; $(grep -o -m1 -w tsc_known_freq /proc/cpuinfo || echo 'no tsc_known_freq flag'))"
  [ -n "$DBX_CPU_FREQ" ] || DBX_CPU_FREQ=$DBX_TSC_GHZ
}

# set_define FILE NAME VALUE: rewrite "#define NAME ..." and check that it took.
set_define() {
  local f=$1 name=$2 value=$3
  grep -q -E "^#define[[:space:]]+$name[[:space:]]" "$f" || die "$f has no #define $name"
  sed -i -E "s/^#define[[:space:]]+$name[[:space:]].*/#define $name $value/" "$f"
  grep -q -E "^#define $name $value\$" "$f" || die "setting $name in $f failed"
}

# dbx_build CC N: sets DBX_BUILD to a directory holding rundb for CC_ALG=CC, THREAD_CNT=N,
# NUM_WH=N, WORKLOAD=TPCC.
dbx_build() {
  local cc=$1 n=$2 cfg dir t0
  [ -n "$DBX_TSC_GHZ" ] || dbx_measure_tsc
  cfg="commit=$DBX_COMMIT cc=$cc threads=$n wh=$n cpu_freq=$DBX_CPU_FREQ max_txn=$DBX_MAX_TXN perc_payment=$DBX_PERC_PAYMENT"
  dir=$DBX_ROOT/build-${DBX_COMMIT:0:7}-$cc-t$n-f$DBX_CPU_FREQ-m$DBX_MAX_TXN-p$DBX_PERC_PAYMENT
  if [ -x "$dir/rundb" ] && [ "$(cat "$dir/.glass-config" 2>/dev/null)" = "$cfg" ]; then
    DBX_BUILD=$dir; return 0
  fi
  rm -rf "$dir"; mkdir -p "$dir"
  tar -C "$DBX_SRC_TREE" -cf - . | tar -C "$dir" -xf -
  local h=$dir/config.h
  set_define "$h" WORKLOAD TPCC
  set_define "$h" CC_ALG "$cc"
  set_define "$h" THREAD_CNT "$n"
  set_define "$h" NUM_WH "$n"
  set_define "$h" CPU_FREQ "$DBX_CPU_FREQ"
  set_define "$h" MAX_TXN_PER_PART "$DBX_MAX_TXN"
  set_define "$h" PERC_PAYMENT "$DBX_PERC_PAYMENT"
  # A modern toolchain: gcc builds position-independent executables by default, and the bundled
  # libs/libjemalloc.a is not PIC, so link with -no-pie; drop -Werror so newer warnings do not
  # stop the build. (In this build copy only.)
  sed -i -e 's/^LDFLAGS = -Wall/LDFLAGS = -no-pie -Wall/' -e 's/ -Werror//' "$dir/Makefile"
  grep -q -- '-no-pie' "$dir/Makefile" || die "patching $dir/Makefile failed"
  t0=$(date +%s)
  note "dbx1000: building $cc, $n thread(s) = $n warehouse(s), CPU_FREQ $DBX_CPU_FREQ, MAX_TXN_PER_PART $DBX_MAX_TXN in $dir"
  make -C "$dir" -j"$(nproc)" </dev/null >"$dir/build.log" 2>&1 \
    || { tail -30 "$dir/build.log" >&2; die "building DBx1000 failed (log: $dir/build.log, tail above)"; }
  note "dbx1000: built in $(( $(date +%s) - t0 )) s"
  echo "$cfg" > "$dir/.glass-config"
  DBX_BUILD=$dir
}

# dbx_run N LOGFILE: runs $DBX_BUILD/rundb -tN -nN; prints "TPS WALL_TPS TXN ABORTS others_cpu=X".
# Call it as out=$(dbx_run ...).
dbx_run() {
  local n=$1 log=$2 line sim others
  others=$(cd "$DBX_BUILD" && measured "$log" - ./rundb -t"$n" -n"$n") \
    || { tail -20 "$log" >&2; die "rundb -t$n -n$n failed (log: $log, tail above)"; }
  line=$(grep -m1 '^\[summary\]' "$log") || { tail -20 "$log" >&2; die "no [summary] line from rundb ($log)"; }
  sim=$(sed -n -E 's/^PASS! SimTime = ([0-9]+).*/\1/p' "$log")
  echo "$line" | awk -v others="$others" -v n="$n" -v tsc="$DBX_TSC_GHZ" -v f="$DBX_CPU_FREQ" -v sim="$sim" '{
      match($0, /txn_cnt=[0-9]+/);  txn = substr($0, RSTART + 8, RLENGTH - 8)
      match($0, /abort_cnt=[0-9]+/); ab = substr($0, RSTART + 10, RLENGTH - 10)
      match($0, /run_time=[0-9.]+/); rt = substr($0, RSTART + 9, RLENGTH - 9)
      scale = tsc / f
      tps = (rt > 0) ? txn / rt * n * scale : 0
      wall = (sim > 0) ? txn / (sim / 1e9) * scale : 0
      printf "%.1f %.1f %d %d %s\n", tps, wall, txn, ab, others
    }'
}
