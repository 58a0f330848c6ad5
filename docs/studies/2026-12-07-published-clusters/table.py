#!/usr/bin/env python3
"""table.py — the study's tables and plot from its CSVs (scripts/simulate.sh rows).

    docs/studies/2026-12-07-published-clusters/table.py [--plot OUT.png] A.csv [B.csv ...]

For each CSV (one series: one platform, one all-reduce), per node count: images/s, speedup and
scaling efficiency over the series' one-node row (efficiency = images/s / (nodes x one node's)),
as a Markdown table. --plot draws efficiency against GPUs for every series with the published
points (PUBLISHED below) as gnuplot PNG.
"""
import csv
import os
import subprocess
import sys
import tempfile

# The published points: (series file prefix, GPUs, efficiency, label)
PUBLISHED = [
    ("goyal", 256, 0.90, "Goyal et al. 2017: about 90% at 256 GPUs"),
    ("anp", 64, 10.3 / 16, "ANP paper: 10.3x at 16 nodes (64.4%)"),
]


def rows(path):
    with open(path) as f:
        r = [x for x in csv.DictReader(f) if x["images_per_s"]]
    one = [x for x in r if x["nodes"] == "1"]
    if not one:
        sys.exit(f"table.py: {path}: no one-node row")
    base = float(one[-1]["images_per_s"])
    out = []
    for x in sorted(r, key=lambda x: int(x["nodes"])):
        n, ips = int(x["nodes"]), float(x["images_per_s"])
        out.append((n, n * int(x["gpus"]), ips, ips / base, ips / (n * base)))
    return out


def main():
    args = sys.argv[1:]
    plot = None
    if args[:1] == ["--plot"]:
        plot, args = args[1], args[2:]
    if not args:
        sys.exit("usage: table.py [--plot OUT.png] A.csv [B.csv ...]")
    series = {}
    for path in args:
        name = os.path.basename(path)[:-4]
        series[name] = rows(path)
        print(f"\n{name}\n\n| nodes | GPUs | images/s | speedup | efficiency |\n|---|---|---|---|---|")
        for n, g, ips, sp, eff in series[name]:
            print(f"| {n} | {g} | {ips:.1f} | {sp:.2f}x | {100 * eff:.1f}% |")
    if not plot:
        return
    d = tempfile.mkdtemp()
    cmds = []
    for name, r in series.items():
        dat = os.path.join(d, name + ".dat")
        with open(dat, "w") as f:
            f.writelines(f"{g} {100 * eff:.2f}\n" for _, g, _, _, eff in r)
        cmds.append(f"'{dat}' using 1:2 with linespoints lw 2 title '{name} (simulated)'")
    for prefix, g, eff, label in PUBLISHED:
        if any(n.startswith(prefix) for n in series):
            dat = os.path.join(d, prefix + "-published.dat")
            with open(dat, "w") as f:
                f.write(f"{g} {100 * eff:.2f}\n")
            cmds.append(f"'{dat}' using 1:2 with points pt 7 ps 2 title '{label}'")
    gp = ("set terminal pngcairo size 900,560 font 'DejaVu Sans,10'; "
          f"set output '{plot}'; set logscale x 2; set xrange [3:400]; set grid; set key left bottom; "
          "set xlabel 'GPUs'; set ylabel 'scaling efficiency over one node (%)'; set yrange [50:105]; "
          "set title 'Published clusters in simulation: predicted vs published scaling efficiency'; "
          "plot " + ", ".join(cmds))
    subprocess.run(["gnuplot", "-e", gp], check=True)
    print(f"\nplot: {plot}")


if __name__ == "__main__":
    main()
