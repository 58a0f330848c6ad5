#!/usr/bin/env python3
"""tables.py TAG — the study's 1 -> 16 core tables from seed-TAG-{e5-2667v2,here}[-1core].csv:
images/s, the speedup over 1 core with 1 chunk (strong scaling, the paper's measure) and over 1
core running the same C chunks (the same task shapes: the parallel speedup alone)."""
import csv
import os
import sys

D = os.path.dirname(os.path.abspath(__file__))
tag = sys.argv[1] if len(sys.argv) > 1 else ""


def load(name):
    path = os.path.join(D, f"seed{'-' + tag if tag else ''}-{name}.csv")
    out = {}
    if os.path.exists(path):
        for r in csv.DictReader(open(path)):
            out[(r["net"], int(r["cores"]), int(r["chunks"]))] = r
    return out


for cpu in ("e5-2667v2", "here"):
    multi, one = load(cpu), load(cpu + "-1core")
    print(f"\n{cpu}:\n")
    print("| net (batch) | cores = chunks | images/s | vs 1 core, 1 chunk | 1 core, same chunks: images/s | vs 1 core, same chunks | bd_compute | bd_idle |")
    print("|---|---|---|---|---|---|---|---|")
    for net in ("caffe_lenet", "cifar10_quick"):
        base = multi.get((net, 1, 1))
        for c in (1, 2, 4, 8, 16):
            r = multi.get((net, c, c))
            if not r:
                continue
            ips = float(r["images_per_s"])
            o = one.get((net, 1, c)) if c > 1 else base
            oips = float(o["images_per_s"]) if o else float("nan")
            print(f"| {net} ({r['batch']}) | {c} | {ips:.1f} | {ips / float(base['images_per_s']):.2f}x | "
                  f"{oips:.1f} | {ips / oips:.2f}x | {r.get('bd_compute', '')} | {r.get('bd_idle', '')} |")


def plot(png):
    """Speedup against cores on the simulated E5-2667 v2: over 1 core with 1 chunk (strong scaling)
    and over 1 core with the same chunks, with the paper's 8x at 16 cores."""
    import subprocess
    import tempfile
    multi, one = load("e5-2667v2"), load("e5-2667v2-1core")
    tmp = tempfile.mkdtemp(prefix="seed-plot-")
    plots = []
    for net in ("caffe_lenet", "cifar10_quick"):
        base = multi.get((net, 1, 1))
        if not base:
            continue
        for kind in ("strong", "same"):
            dat = os.path.join(tmp, f"{net}-{kind}.dat")
            with open(dat, "w") as f:
                for c in (1, 2, 4, 8, 16):
                    r = multi.get((net, c, c))
                    o = base if c == 1 else one.get((net, 1, c))
                    ref = base if kind == "strong" else o
                    if r and ref:
                        f.write(f"{c} {float(r['images_per_s']) / float(ref['images_per_s'])}\n")
            what = "over 1 core, 1 chunk" if kind == "strong" else "over 1 core, same chunks"
            plots.append(f"'{dat}' using 1:2 with linespoints lw 2 pt 7 {'dt 2 ' if kind == 'strong' else ''}"
                         f"title '{net}: {what}'")
    pt = os.path.join(tmp, "paper.dat")
    with open(pt, "w") as f:
        f.write("16 8\n")
    plots += ["x with lines lw 1 lc rgb '#888888' title 'ideal'",
              f"'{pt}' using 1:2 with points pt 9 ps 2.5 lc rgb 'black' title 'the Caffe seed: 8x (MNIST, CIFAR-10)'"]
    script = ("set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,10'; "
              f"set output '{png}'; set key left top; set grid; set logscale x 2; set xrange [1:16]; "
              "set yrange [0:*]; set xlabel 'cores = chunks (pinned)'; set ylabel 'speedup'; "
              "set title 'Simulated Xeon E5-2667 v2 node (2 x 8 cores), batch-level parallelism'; plot " +
              ", ".join(plots))
    subprocess.run(["gnuplot", "-e", script], check=True)


if len(sys.argv) > 2:
    plot(sys.argv[2])
