#!/usr/bin/env python3
"""sim_ratio_summary.py — how many simulated/measured ratios of a validation CSV fall within a
tolerance, and their geometric mean (docs/studies/2026-12-07-netns-validation.md).

    bench/sim_ratio_summary.py FILE.csv [FILE2.csv ...] [--tol 0.20] [--by COLUMN[,COLUMN]]
                               [--half fit|test|all]

Reads the `ratio` column of bench/net_sim_validate.sh's or bench/allreduce_bench.sh's CSV (any
CSV with a `ratio` column). --by groups the rows (e.g. --by hosts, --by round); each file and
group is one line: rows, within +-tol, geometric mean, the smallest and largest ratio. Files are
never pooled: one line each. --half splits the rows into two fixed halves by their position in
the file (data rows numbered from 1: odd rows "fit", even rows "test"), the split the all-reduce
fit uses; "all" (the default) keeps every row.
"""
import argparse
import csv
import math
import sys
from collections import OrderedDict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--tol", type=float, default=0.20)
    ap.add_argument("--by", default="")
    ap.add_argument("--half", default="all", choices=["fit", "test", "all"])
    a = ap.parse_args()
    by = [c for c in a.by.split(",") if c]
    for path in a.csv:
        try:
            rows = list(csv.DictReader(open(path)))
        except OSError as e:
            print(f"sim_ratio_summary.py: {path}: {e.strerror}", file=sys.stderr)
            sys.exit(1)
        if rows and "ratio" not in rows[0]:
            print(f"sim_ratio_summary.py: {path}: no 'ratio' column", file=sys.stderr)
            sys.exit(2)
        for c in by:
            if rows and c not in rows[0]:
                print(f"sim_ratio_summary.py: --by {c}: {path} has no such column", file=sys.stderr)
                sys.exit(2)
        if a.half != "all":
            rows = [r for i, r in enumerate(rows, 1) if (i % 2 == 1) == (a.half == "fit")]
        groups = OrderedDict()
        for r in rows:
            groups.setdefault(tuple(r[c] for c in by), []).append(r)
        for key, sel in groups.items():
            ratios = [float(r["ratio"]) for r in sel if float(r["ratio"]) > 0]
            if not ratios:
                continue
            n_in = sum(1 for x in ratios if abs(x - 1) <= a.tol + 1e-12)
            gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            label = " ".join(f"{c}={v}" for c, v in zip(by, key))
            print(f"{path}{' ' + label if label else ''}{' half=' + a.half if a.half != 'all' else ''}: "
                  f"{n_in} of {len(ratios)} within +-{a.tol:.0%}, geometric mean {gm:.3f}, "
                  f"range {min(ratios):.3f}-{max(ratios):.3f}")


if __name__ == "__main__":
    main()
