# Sourced by the device scripts. sample_stacks PID FILE SAMPLES SECONDS: every thread's stack
# of the running process PID, SAMPLES times, SECONDS apart, written to FILE, by a debugger
# attached to it (cuda-gdb on the lent machines, which have no gdb or perf; gdb elsewhere;
# nothing is sampled without either).
sample_stacks() {
  local pid=$1 file=$2 samples=$3 every=$4 dbg
  dbg=$(command -v cuda-gdb || command -v gdb)
  : >"$file"
  for _ in $(seq "$samples"); do
    sleep "$every"
    [ -n "$dbg" ] && timeout 40 "$dbg" -p "$pid" -batch -ex "set pagination off" \
      -ex "thread apply all bt 16" >>"$file" 2>&1
  done
}
