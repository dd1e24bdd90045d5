#!/usr/bin/env python3
"""Names the compiled WebAssembly functions in callgrind_annotate's output.

Callgrind sees a module's code, compiled at run time by wasmtime, as `???:0xADDRESS`. A
`glass serve --isolation wasm --wasm-perfmap` writes `/tmp/perf-PID.map` ("START LENGTH NAME"
per compiled function, hexadecimal); this filter replaces each address that falls inside one
of those functions with its name.

    callgrind_annotate --inclusive=yes FILE | bench/isolation/jit-names.py PERF_MAP
"""
import bisect
import re
import sys


def load(path):
    spans = []
    with open(path, errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split(" ", 2)
            if len(parts) == 3:
                try:
                    spans.append((int(parts[0], 16), int(parts[1], 16), parts[2]))
                except ValueError:
                    continue
    spans.sort()
    return [s[0] for s in spans], spans


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    starts, spans = load(sys.argv[1])

    def name(match):
        address = int(match.group(1), 16)
        i = bisect.bisect_right(starts, address) - 1
        if i >= 0:
            start, length, fn = spans[i]
            if address < start + length:
                return f"[wasm] {fn}" + (f"+{address - start:#x}" if address != start else "")
        return match.group(0)

    pattern = re.compile(r"\?\?\?:0x([0-9a-fA-F]+)(?: \[\?\?\?\])?")
    for line in sys.stdin:
        sys.stdout.write(pattern.sub(name, line))


if __name__ == "__main__":
    main()
