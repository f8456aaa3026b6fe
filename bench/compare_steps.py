#!/usr/bin/env python3
# bench/compare_steps.py — two builds' `zero bench step --json` output side by side: per (ranks,
# stage), the median step time of each (over the rows of interleaved runs) and after / before.
"""Usage: python3 bench/compare_steps.py before.json after.json"""
import json
import statistics
import sys


def load(path):
    by = {}
    for line in open(path):
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("run") == "zero":
            by.setdefault((r["ranks"], r["stage"]), []).append(r["step_ms"])
    return by


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    before, after = load(argv[0]), load(argv[1])
    print("| ranks | stage | before ms | after ms | after / before | runs |")
    print("| --- | --- | --- | --- | --- | --- |")
    for key in sorted(set(before) & set(after)):
        b, a = statistics.median(before[key]), statistics.median(after[key])
        print("| %d | %d | %.1f | %.1f | %.3f | %d / %d |" % (key[0], key[1], b, a, a / b, len(before[key]), len(after[key])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
