#!/usr/bin/env python3
"""gpt_learning_plot.py — the table and the plot of bench/gpt_learning_compare.sh's runs.

  python3 bench/gpt_learning_plot.py DIR [--png FILE] [--bar 2]

Reads DIR/starpu-seedS.csv (starpu_anp train --metrics: its test_step and test_epoch rows) and
DIR/torch-seedS.csv (bench/gpt_learning.py), with DIR/starpu-seedS.log (the result line: batch,
context, tokens_per_s) and DIR/runs.csv (each process's wall time). Prints a markdown table: per
seed, each side's final validation loss (nats per token) and bits per byte; the means over the seeds
present on both sides; the difference of the means in % of PyTorch's and whether it is within
--bar %; each side's training tokens/s (starpu: its result line, evaluation left out; PyTorch: the
run's tokens over its training wall time) and whole-process wall time. Draws both sides' validation
bits per byte against training tokens, every seed, in one PNG (gnuplot, as the other studies'
plots). Standard library only. Exit status 0; 1 when no seed has both sides finished.
"""
import argparse
import csv
import glob
import math
import os
import re
import subprocess
import sys


def starpu_run(path, log):
    """[(step, val_loss, bpb)] from --metrics, the final one last; batch*context and tokens/s from the log."""
    pts = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["kind"] in ("test_step", "test_epoch"):
                pts[int(r["step"])] = (float(r["loss"]), float(r["bits_per_byte"]))
    bt, tps = None, None
    if os.path.exists(log):
        for line in open(log):
            if line.startswith("result:"):
                kv = dict(x.split("=", 1) for x in line.split()[1:] if "=" in x)
                bt = int(kv["batch"]) * int(kv["context"])
                tps = float(kv["tokens_per_s"])
    return [(s, *pts[s]) for s in sorted(pts)], bt, tps, "test_epoch" in open(path).read()


def torch_run(path):
    rows = list(csv.DictReader(open(path)))
    pts = [(int(r["step"]), float(r["val_loss"]), float(r["val_bpb"])) for r in rows]
    last = rows[-1]
    bt = int(last["tokens"]) // int(last["step"]) if int(last["step"]) else None
    wall = float(last["wall_s"])
    return pts, bt, (int(last["tokens"]) / wall if wall > 0 else None)


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def sd(xs):
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("dir")
    ap.add_argument("--png", help="the plot [DIR/curves.png]")
    ap.add_argument("--bar", type=float, default=2.0, help="the bar on the difference of the mean bits per byte, in %%")
    a = ap.parse_args()
    if not os.path.isdir(a.dir):
        ap.error(f"{a.dir}: no such directory")
    png = a.png or os.path.join(a.dir, "curves.png")
    seeds = sorted({int(re.search(r"seed(\d+)", p).group(1))
                    for p in glob.glob(os.path.join(a.dir, "*-seed*.csv"))})
    walls = {}
    if os.path.exists(os.path.join(a.dir, "runs.csv")):
        for r in csv.DictReader(open(os.path.join(a.dir, "runs.csv"))):
            walls[(r["side"], int(r["seed"]))] = float(r["wall_s"])  # the last run of each

    S, T = {}, {}
    for s in seeds:
        sp, tp = os.path.join(a.dir, f"starpu-seed{s}.csv"), os.path.join(a.dir, f"torch-seed{s}.csv")
        if os.path.exists(sp) and os.path.getsize(sp) > 0:
            pts, bt, tps, done = starpu_run(sp, os.path.join(a.dir, f"starpu-seed{s}.log"))
            if pts and done:
                S[s] = (pts, bt, tps)
        if os.path.exists(tp):
            pts, bt, tps = torch_run(tp)
            if len(pts) > 1:
                T[s] = (pts, bt, tps)
    # --same-init runs: PyTorch from starpu-anp's initial weights, every step's loss
    I = {}
    for s in seeds:
        ip = os.path.join(a.dir, f"torch-init-seed{s}.csv")
        if os.path.exists(ip):
            pts, bt, tps = torch_run(ip)
            if len(pts) > 1:
                I[s] = (pts, bt, tps)
    steps_s = {s: S[s][0][-1][0] for s in S}
    steps_t = {s: T[s][0][-1][0] for s in T}
    both = [s for s in seeds if s in S and s in T and steps_s[s] == steps_t[s]]

    print("| seed | starpu-anp val loss | starpu-anp bits/byte | PyTorch val loss | PyTorch bits/byte | "
          "starpu-anp tokens/s | PyTorch tokens/s | starpu-anp wall s | PyTorch wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    f = lambda x, p=4: "—" if x is None else f"{x:.{p}f}"  # noqa: E731
    for s in seeds:
        sl = S[s][0][-1] if s in S else None
        tl = T[s][0][-1] if s in T else None
        print(f"| {s} | {f(sl and sl[1])} | {f(sl and sl[2])} | {f(tl and tl[1])} | {f(tl and tl[2])} | "
              f"{f(S[s][2] if s in S else None, 0)} | {f(T[s][2] if s in T else None, 0)} | "
              f"{f(walls.get(('starpu', s)), 0)} | {f(walls.get(('torch', s)), 0)} |")
    if both:
        sb = [S[s][0][-1][2] for s in both]
        tb = [T[s][0][-1][2] for s in both]
        sl = [S[s][0][-1][1] for s in both]
        tl = [T[s][0][-1][1] for s in both]
        d = 100.0 * (mean(sb) - mean(tb)) / mean(tb)
        print(f"| mean of {len(both)} (sd) | {mean(sl):.4f} | {mean(sb):.4f} ({sd(sb):.4f}) | {mean(tl):.4f} | "
              f"{mean(tb):.4f} ({sd(tb):.4f}) | {mean([S[s][2] for s in both]):.0f} | "
              f"{mean([T[s][2] for s in both]):.0f} | {mean([walls.get(('starpu', s), 0) for s in both]):.0f} | "
              f"{mean([walls.get(('torch', s), 0) for s in both]):.0f} |")
        print(f"\nseeds {' '.join(map(str, both))}, {steps_s[both[0]]} steps: starpu-anp {mean(sb):.4f} bits/byte, "
              f"PyTorch {mean(tb):.4f}: difference {d:+.2f}% of PyTorch's: "
              + ("met" if abs(d) <= a.bar else "missed") + f" (bar {a.bar:g}%)")
    else:
        print("\nno seed has both sides finished with the same steps", file=sys.stderr)

    paired = [s for s in seeds if s in S and s in I and I[s][0][-1][0] == steps_s[s]]
    if paired:
        print("\nSame initial weights (PyTorch from starpu-anp's draw, --same-init), same windows:\n")
        print("| seed | starpu-anp bits/byte | PyTorch bits/byte | difference | training loss: worst relative difference, first 10 steps "
              "| of all steps |")
        print("|---|---|---|---|---|---|")
        for s in paired:
            sb, ib = S[s][0][-1][2], I[s][0][-1][2]
            per = {}
            for r in csv.DictReader(open(os.path.join(a.dir, f"starpu-seed{s}.csv"))):
                if r["kind"] == "train_step":
                    per[int(r["step"])] = float(r["loss"])
            rel = []
            sl = os.path.join(a.dir, f"torch-init-seed{s}-steps.csv")
            if os.path.exists(sl):
                rel = [(int(r["step"]), abs(float(r["train_loss"]) - per[int(r["step"])]) / per[int(r["step"])])
                       for r in csv.DictReader(open(sl)) if int(r["step"]) in per]
            w10 = max((x for x in rel if x[0] <= 10), key=lambda x: x[1], default=None)
            wall = max(rel, key=lambda x: x[1], default=None)
            g = lambda w: "—" if w is None else f"{w[1]:.1e} (step {w[0]})"  # noqa: E731
            print(f"| {s} | {sb:.4f} | {ib:.4f} | {100 * (sb - ib) / ib:+.2f}% | {g(w10)} | {g(wall)} |")
        sb, ib = mean([S[s][0][-1][2] for s in paired]), mean([I[s][0][-1][2] for s in paired])
        print(f"| mean of {len(paired)} | {sb:.4f} | {ib:.4f} | {100 * (sb - ib) / ib:+.2f}% | | |")

    plots = []
    for side, runs, colour, name in (("starpu", S, "#1f77b4", "starpu-anp"), ("torch", T, "#d62728", "PyTorch"),
                                     ("torch-init", I, "#2ca02c", "PyTorch from the starpu-anp init")):
        for i, s in enumerate(sorted(runs)):
            pts, bt, _ = runs[s]
            bt = bt or next((r[1] for r in list(S.values()) + list(T.values()) if r[1]), 2048)
            dat = os.path.join(a.dir, f"{side}-seed{s}.dat")
            with open(dat, "w") as fo:
                for step, _, bpb in pts:
                    if step == 0:  # PyTorch's row before training (ln 256 nats, 8 bits): off the plot's scale
                        continue
                    fo.write(f"{step * bt / 1e6:.6f} {bpb:.6f}\n")
            plots.append(f"'{dat}' with linespoints lw 1.5 {'dt 2 ' if side == 'torch-init' else ''}"
                         f"pt {6 + 2 * i} ps 0.8 lc rgb '{colour}' title '{name} seed {s}'")
    if plots:
        gp = (f"set terminal pngcairo size 900,560; set output '{png}'; set key top right; set grid;"
              "set xlabel 'training tokens (millions)'; set ylabel 'validation bits per byte';"
              "set title 'gpt-nano on the King James Bible: starpu-anp and PyTorch, same recipe and windows';"
              "set yrange [*:*]; plot " + ", ".join(plots))
        subprocess.run(["gnuplot", "-e", gp], check=False)
        print(f"\nplot: {png}", file=sys.stderr)
    return 0 if both else 1


if __name__ == "__main__":
    sys.exit(main())
