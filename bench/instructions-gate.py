#!/usr/bin/env python3
"""The instruction-count gate: reads the output of the `instructions` benchmark
(`cargo bench -p flowline-bench --bench instructions --bench peers`) on stdin and compares every count
with bench/instructions-baseline.txt.

    cargo bench -p flowline-bench --bench instructions --bench peers | python3 bench/instructions-gate.py
    ... | python3 bench/instructions-gate.py --update    # rewrite the baseline

Fails (exit 1) when a count grows more than 3% over its baseline, when a benchmark has no
baseline, or when a baseline has no benchmark. A deliberate change rewrites the baseline
with --update in the same commit, and its message says why. Prints every benchmark's
instructions per operation (the count over the benchmark's N operations) beside it.
"""
import os
import re
import sys

LIMIT = 0.03
# Operations per benchmark: N in bench/benches/instructions.rs.
N = 4096
HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = os.path.join(HERE, "instructions-baseline.txt")

# A benchmark's name; with several cases (`#[bench::w4(...)]`) each is `name_case`, the
# single case `n` is just `name`.
ID = re.compile(r"^(?:instructions|peers)::\w+::(\w+)(?: (\w+):)?")
INSTR = re.compile(r"^\s+Instructions:\s+([0-9]+)")


def parse(lines):
    counts, current = {}, None
    for line in lines:
        m = ID.match(line)
        if m:
            current = m.group(1) if m.group(2) in (None, "n") else f"{m.group(1)}_{m.group(2)}"
            continue
        m = INSTR.match(line)
        if m and current is not None:
            counts[current] = int(m.group(1))
            current = None
    return counts


def load_baseline():
    base = {}
    if os.path.exists(BASELINE):
        for line in open(BASELINE):
            line = line.strip()
            if line and not line.startswith("#"):
                name, count = line.split()
                base[name] = int(count)
    return base


def main():
    text = sys.stdin.read()
    sys.stdout.write(text)
    counts = parse(text.splitlines())
    if not counts:
        print("instructions-gate: no benchmark counts in the input", file=sys.stderr)
        return 1
    if "--update" in sys.argv[1:]:
        with open(BASELINE, "w") as f:
            f.write("# Instructions per benchmark (N = %d operations each); written by\n" % N)
            f.write("# bench/instructions-gate.py --update. Do not edit by hand.\n")
            for name in sorted(counts):
                f.write("%s %d\n" % (name, counts[name]))
        print("instructions-gate: baseline rewritten (%d benchmarks)" % len(counts))
        return 0
    base = load_baseline()
    failed = []
    print("\n%-32s %12s %12s %8s %10s" % ("benchmark", "baseline", "now", "change", "per op"))
    for name in sorted(set(counts) | set(base)):
        now, was = counts.get(name), base.get(name)
        if now is None:
            failed.append("%s: in the baseline, not run" % name)
            print("%-32s %12d %12s" % (name, was, "-"))
            continue
        if was is None:
            failed.append("%s: no baseline (add it with --update)" % name)
            print("%-32s %12s %12d %8s %10.1f" % (name, "-", now, "", now / N))
            continue
        change = (now - was) / was
        print("%-32s %12d %12d %+7.2f%% %10.1f" % (name, was, now, 100 * change, now / N))
        if change > LIMIT:
            failed.append("%s: %d -> %d instructions (%+.2f%%, limit +%d%%)"
                          % (name, was, now, 100 * change, 100 * LIMIT))
    if failed:
        print("\ninstructions-gate: FAILED", file=sys.stderr)
        for f in failed:
            print("  " + f, file=sys.stderr)
        return 1
    print("\ninstructions-gate: every count within +%d%% of the baseline" % (100 * LIMIT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
