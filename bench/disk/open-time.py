#!/usr/bin/env python3
"""How long an open of a database on disk takes, with the free-space maps its last checkpoint
saved (`freespace.map`) and without them (the file removed: every heap page is read), from a
cold page cache, the two alternating.

Each round runs `glass bench <workload> --db DIR --duration 1 --warmup 0 --threads 1` and
times it from its line `using the ... database` to its line `running ...`, then kills it with
SIGKILL, so that every open after the first also recovers (from the open's own checkpoint,
whose map the next "saved" round takes). Dropping the page cache needs root; without it the
rounds run warm, and the script says so.

    bench/disk/open-time.py --db DIR [--glass BIN] [--workload tpcc] [--rounds 3]

docs/performance.md, "An open that reads only the heap pages changed since the checkpoint",
has its figures. The database is changed by the runs: use a copy.
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("--db", required=True, help="the database directory (a copy: the runs change it)")
p.add_argument("--glass", default=os.path.join(root, "target/release/glass"))
p.add_argument("--workload", default="tpcc")
p.add_argument("--rounds", type=int, default=3)
args = p.parse_args()
if not os.access(args.glass, os.X_OK):
    sys.exit(f"open-time: no glass binary at {args.glass} (cargo build --release first)")
if not os.path.isdir(args.db):
    sys.exit(f"open-time: no database directory {args.db}")
cold = os.geteuid() == 0
if not cold:
    print("open-time: not root, so the page cache is not dropped: the opens run warm", file=sys.stderr)


def open_once() -> float:
    if cold:
        subprocess.run("sync; echo 3 > /proc/sys/vm/drop_caches", shell=True, check=True)
    cmd = [args.glass, "bench", args.workload, "--db", args.db, "--duration", "1",
           "--warmup", "0", "--threads", "1"]
    run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    using = None
    for line in run.stdout:
        if line.startswith("using"):
            using = time.monotonic()
        elif line.startswith("running") and using is not None:
            took = time.monotonic() - using
            run.send_signal(signal.SIGKILL)
            run.wait()
            return took
    run.wait()
    sys.exit(f"open-time: {' '.join(cmd)} ended (status {run.returncode}) before it ran")


# One open first, so that the first "saved" round finds a map.
open_once()
times = {"saved": [], "walk": []}
for r in range(args.rounds):
    for mode in times:
        if mode == "walk":
            try:
                os.remove(os.path.join(args.db, "freespace.map"))
            except FileNotFoundError:
                pass
        took = open_once()
        times[mode].append(took)
        print(f"round {r + 1} {mode}: {took:.2f} s", flush=True)
for mode, xs in times.items():
    print(f"{mode}: median {statistics.median(xs):.2f} s, range {min(xs):.2f}-{max(xs):.2f}")
