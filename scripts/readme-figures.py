#!/usr/bin/env python3
"""Checks that every figure in README.md's "Performance" section comes from BENCHMARKS.md.

A figure is a number with a unit (`694 Mitems/s`, `476 ns`, `40.1 per ...`) or a ratio
(`0.91x`). Each number with a unit must appear in BENCHMARKS.md with that unit (in a
scenario's medians or in the DPDK anchors' table); a bare count in the section's prose
(`40.1 per push`, `rtrb 42.1`) must appear as a counted figure there. A ratio must appear
in BENCHMARKS.md, or be the quotient of the row's flowline and peer figures (inverted for
times, where less is better) to the two decimals printed.

Usage: scripts/readme-figures.py [README.md] [BENCHMARKS.md]; exits 1 naming each figure
it cannot find.
"""
import re
import sys

UNITS = r"(Mitems/s|Mpkts/s|Mreads/s|Mincs/s|ns|us_p50|instr/item)"
NUM = r"(\d[\d,]*(?:\.\d+)?)"


def section(text, title):
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def known_figures(bench):
    """(number, unit) pairs BENCHMARKS.md carries, and its ratios and counted figures."""
    pairs = set()
    for n, u in re.findall(NUM + r" " + UNITS, bench):
        pairs.add((float(n.replace(",", "")), u))
    for n, u in re.findall(r"\| " + NUM + r" \| " + UNITS + r" \|", bench):
        pairs.add((float(n.replace(",", "")), u))
    ratios = {float(r) for r in re.findall(r"(\d+(?:\.\d+)?)x\b", bench)}
    counted = {float(n) for n, u in pairs if u == "instr/item"}
    return pairs, ratios, counted


def check_row(cells, pairs, ratios, errors):
    """One table row: scenario | flowline | peer | ratio."""
    figures = []
    for cell in cells[1:3]:
        found = re.findall(NUM + r" " + UNITS, cell)
        for n, u in found:
            value = float(n.replace(",", ""))
            if (value, u) not in pairs:
                errors.append(f"{n} {u} ({cells[0]}) is not in BENCHMARKS.md")
        figures.append([(float(n.replace(",", "")), u) for n, u in found])
    for r in re.findall(r"(\d+(?:\.\d+)?)x", cells[3]):
        value = float(r)
        if value in ratios:
            continue
        ok = False
        if figures[0] and figures[1]:
            (a, ua), (b, ub) = figures[0][0], figures[1][0]
            if ua == ub and a > 0 and b > 0:
                q = b / a if ua in ("ns", "us_p50") else a / b
                ok = abs(round(q, 2) - value) < 0.006
        if not ok:
            errors.append(f"{r}x ({cells[0]}) is neither in BENCHMARKS.md nor its row's quotient")


def main():
    readme_path = sys.argv[1] if len(sys.argv) > 1 else "README.md"
    bench_path = sys.argv[2] if len(sys.argv) > 2 else "BENCHMARKS.md"
    perf = section(open(readme_path).read(), "Performance")
    pairs, ratios, counted = known_figures(open(bench_path).read())
    errors = []
    rows = 0
    prose = []
    for line in perf.splitlines():
        if line.startswith("| ") and not line.startswith("| ---") and "scenario" not in line:
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) != 4:
                errors.append(f"a table row without 4 cells: {line}")
                continue
            check_row(cells, pairs, ratios, errors)
            rows += 1
        elif not line.startswith("|"):
            prose.append(line)
    text = " ".join(prose)
    # Counted figures in the prose: "40.1 per push", "(rtrb 42.1)", "4.488 in bursts".
    counted_part = text[text.find("Counted instructions") :] if "Counted instructions" in text else ""
    for n in re.findall(r"(?<![\w.-])(\d+\.\d+)(?![\w.%-])", counted_part):
        if float(n) not in counted:
            errors.append(f"counted figure {n} is not in BENCHMARKS.md")
    if rows == 0:
        errors.append("no figures table in the README's Performance section")
    for e in errors:
        print(f"readme-figures: {e}")
    if errors:
        sys.exit(1)
    print(f"readme-figures: {rows} rows and the counted figures all in {bench_path}")


if __name__ == "__main__":
    main()
