#!/usr/bin/env python3
"""sim_plot.py — plot rows of scripts/simulate.sh CSVs with gnuplot (docs/SIMULATION.md).

    bench/sim_plot.py --x gpus --y images_per_s --series sched --title T --out F.png A.csv [B.csv ...]

One line per distinct value of the --series columns (comma list, e.g. sched or mode,allreduce),
x and y from the named columns; --ylabel/--xlabel override the axis names; --efficiency plots
y / (x * y at the smallest x of that series) instead (scaling efficiency); --speedup plots
y / y at the smallest x of all rows (the one-node run every series starts from) with an ideal
line, e.g. speedup over nodes for sync tree, ring and async; --speedup-each divides each series by
its own row at its smallest x instead (series that start from different runs: several nets over
cores); --point X,Y,LABEL marks a published figure (repeatable).
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--x", required=True)
    ap.add_argument("--y", default="images_per_s")
    ap.add_argument("--series", default="sched")
    ap.add_argument("--title", default="")
    ap.add_argument("--xlabel", default=None)
    ap.add_argument("--ylabel", default=None)
    ap.add_argument("--efficiency", action="store_true")
    ap.add_argument("--speedup", action="store_true")
    ap.add_argument("--speedup-each", action="store_true")
    ap.add_argument("--point", action="append", default=[], help="X,Y,LABEL: a published figure")
    ap.add_argument("--logx", action="store_true")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    series = {}
    for path in a.csv:
        with open(path) as f:
            for r in csv.DictReader(f):
                for col in [a.x, a.y] + a.series.split(","):
                    if col not in r:
                        sys.exit(f"sim_plot.py: {path}: no column '{col}'")
                key = "-".join(r[c] for c in a.series.split(",") if r[c] not in ("", "-"))
                try:
                    series.setdefault(key, []).append((float(r[a.x]), float(r[a.y])))
                except ValueError:
                    continue
    if not series:
        sys.exit("sim_plot.py: no rows")
    tmp = tempfile.mkdtemp(prefix="anp-sim-plot-")
    plots = []
    if a.speedup:
        # the baseline: the first row at the smallest x (one node: every mode and all-reduce is
        # the same run there); a series without a row at that x starts from it
        bx, by = min((p for pts in series.values() for p in pts), key=lambda p: p[0])
        base = [k for k, pts in series.items() if any(x == bx for x, _ in pts)]
        series = {k: ([(bx, by)] if not any(x == bx for x, _ in pts) else []) + pts
                  for k, pts in series.items() if k not in base or len(series[k]) > 1}
        series = {k: [(x, y / by) for x, y in pts] for k, pts in series.items()}
    if a.speedup_each:
        series = {k: [(x, y / min(pts)[1]) for x, y in pts] for k, pts in series.items()}
        bx = min(x for pts in series.values() for x, _ in pts)
    for key, pts in sorted(series.items()):
        pts.sort()
        if a.efficiency:
            x0, y0 = pts[0]
            pts = [(x, y / (x / x0 * y0)) for x, y in pts]
        dat = os.path.join(tmp, f"{len(plots)}.dat")
        with open(dat, "w") as f:
            f.writelines(f"{x} {y}\n" for x, y in pts)
        plots.append(f"'{dat}' using 1:2 with linespoints lw 2 pt 7 title '{key}'")
    if a.speedup or a.speedup_each:
        plots.append(f"x / {bx} with lines dt 2 lc rgb 'gray' title 'ideal'")
    for pt in a.point:
        px, py, label = pt.split(",", 2)
        dat = os.path.join(tmp, f"{len(plots)}.dat")
        with open(dat, "w") as f:
            f.write(f"{px} {py}\n")
        plots.append(f"'{dat}' using 1:2 with points pt 9 ps 2.5 lc rgb 'black' title '{label}'")
    ylabel = a.ylabel or ("scaling efficiency" if a.efficiency else
                          "speedup" if a.speedup or a.speedup_each else a.y.replace("_", " "))
    script = (f"set terminal pngcairo size 900,540 font 'DejaVu Sans,10'; set output '{a.out}'; "
              f"set key outside right; set grid; set xlabel '{a.xlabel or a.x}'; set ylabel '{ylabel}'; "
              f"set title '{a.title}'; " + ("set logscale x 2; " if a.logx else "") +
              ("set yrange [0:1.1]; " if a.efficiency else "set yrange [0:*]; ") + "plot " + ", ".join(plots))
    rc = subprocess.run(["gnuplot", "-e", script]).returncode
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    sys.exit(rc)


if __name__ == "__main__":
    main()
