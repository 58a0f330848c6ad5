#!/usr/bin/env python3
"""sched_rank.py — does the simulator rank StarPU's scheduling policies as real runs do?

    bench/sched_rank.py [--summary OUT.csv] [--plot OUT.png] [--rotate-sim] [--min-tau T] [--tol F] RUNS.csv

RUNS.csv is bench/sim_validate.sh --scheds's CSV: per case (net, workers, ranks, mode, batch) and
policy, the real runs' images/s (real_runs: one per round, space separated; real_images_per_s:
their pooled rate, the harmonic mean) and the simulated images/s. For each case it prints, per
policy, real (pooled, min-max of the rounds), simulated and their ratio, then Kendall's tau-b
between the two rankings, and writes one summary row per case.

Ties (the rule, fixed before any simulated ranking was looked at): two policies tie in the real
ranking when the ranges [min, max] of their rounds overlap, i.e. when the distance between the
ranges' centres is at most the sum of their half-ranges: a difference the measurement cannot
resolve is no ranking. The simulation is deterministic, so the same width decides its ties: two
policies tie in the simulated ranking when their simulated rates differ by at most that pair's
relative width ((half-range a + half-range b) / the larger centre). The one rule serves both
rankings, so a perfect simulator of a noisy machine still gets tau-b = 1. tau_b_strict: the same
real ranking against the simulated one without ties, for reference.

--rotate-sim is the negative control: every policy is compared with the simulated rate of the
next one in the list (a deliberately wrong model that still has the right rates, each on the
wrong policy); a checker that cannot tell it from the right one proves nothing.
--min-tau / --tol: exit 1 unless every case has tau-b >= T (and, with --tol, every policy's
simulated / real within 1 +- F). Exit 2 on a bad CSV or usage.
"""
import argparse
import csv
import math
import os
import subprocess
import sys
import tempfile


def sign(v):
    return (v > 0) - (v < 0)


def tau_b(xs, ys):
    """Kendall's tau-b from per-pair signs: xs, ys map (i, j) to -1, 0 (tie) or +1."""
    n0 = len(xs)
    n1 = sum(1 for p in xs if xs[p] == 0)
    n2 = sum(1 for p in ys if ys[p] == 0)
    c = sum(1 for p in xs if xs[p] * ys[p] > 0)
    d = sum(1 for p in xs if xs[p] * ys[p] < 0)
    den = math.sqrt((n0 - n1) * (n0 - n2))
    return (c - d) / den if den > 0 else float("nan"), c, d, n1, n2


def analyse(pols):
    """pols: list of dicts (sched, real, lo, hi, sim). Returns tau_b, tau_b_strict and counts."""
    xs, ys, ys_strict = {}, {}, {}
    for i in range(len(pols)):
        for j in range(i + 1, len(pols)):
            a, b = pols[i], pols[j]
            ca, cb = (a["lo"] + a["hi"]) / 2, (b["lo"] + b["hi"]) / 2
            ha, hb = (a["hi"] - a["lo"]) / 2, (b["hi"] - b["lo"]) / 2
            xs[i, j] = 0 if abs(ca - cb) <= ha + hb else sign(ca - cb)
            width = (ha + hb) / max(ca, cb)
            ds = a["sim"] - b["sim"]
            ys[i, j] = 0 if abs(ds) <= width * max(a["sim"], b["sim"]) else sign(ds)
            ys_strict[i, j] = sign(ds)
    t, c, d, n1, n2 = tau_b(xs, ys)
    ts = tau_b(xs, ys_strict)[0]
    return t, ts, c, d, n1, n2, len(xs)


def plot(cases, out):
    """One panel per case: each policy's real rounds (min-max bar, pooled point) and simulated rate."""
    n = len(cases)
    cols = 2 if n > 1 else 1
    rows = (n + cols - 1) // cols
    with tempfile.TemporaryDirectory() as d:
        script = [f"set terminal pngcairo size {620 * cols},{380 * rows} font 'DejaVu Sans,9'", f"set output '{out}'",
                  f"set multiplot layout {rows},{cols}", "set grid ytics", "set key bottom left", "set xtics rotate by -35",
                  "set ylabel 'images/s'", "set offsets 0.5, 0.5, 0, 0", "set yrange [0:*]"]
        for k, (key, pols) in enumerate(cases.items()):
            f = os.path.join(d, f"c{k}.dat")
            with open(f, "w") as fh:
                for i, p in enumerate(pols):
                    fh.write(f"{i} {p['sched']} {p['real']} {p['lo']} {p['hi']} {p['sim']}\n")
            t = pols[0]["tau"]
            script.append(f"set title '{key}: Kendall tau-b {t:.2f}'")
            script.append(f"plot '{f}' using 1:3:4:5:xticlabels(2) with yerrorbars pt 7 lw 2 title 'real (pooled, min-max)', "
                          f"'' using ($1+0.15):6 with points pt 5 ps 1.3 title 'simulated'")
        script.append("unset multiplot")
        r = subprocess.run(["gnuplot"], input="\n".join(script), text=True, capture_output=True)
        if r.returncode != 0:
            print(f"sched_rank.py: gnuplot could not draw {out}: {r.stderr.strip().splitlines()[:1]}", file=sys.stderr)
            return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--summary", help="write one row per case here")
    ap.add_argument("--plot", help="a PNG of real against simulated per policy (gnuplot)")
    ap.add_argument("--rotate-sim", action="store_true", help="negative control: each policy gets the next one's simulated rate")
    ap.add_argument("--min-tau", type=float)
    ap.add_argument("--tol", type=float)
    a = ap.parse_args()
    cases = {}
    try:
        with open(a.csv, newline="") as fh:
            for row in csv.DictReader(fh):
                runs = [float(v) for v in row["real_runs"].split()]
                key = f"{row['net']} batch {row['batch']}, {row['workers']} workers" + \
                      ("" if row["ranks"] == "1" else f", {row['ranks']} ranks {row['mode']}")
                cases.setdefault(key, []).append({
                    "sched": row["sched"], "real": float(row["real_images_per_s"]), "lo": min(runs), "hi": max(runs),
                    "runs": runs, "sim": float(row["sim_images_per_s"]), "chunks": row.get("chunks", ""),
                    "load": row.get("load_avg", "")})
    except (OSError, KeyError, ValueError) as e:
        print(f"sched_rank.py: {a.csv}: not a sim_validate.sh --scheds CSV ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    if not cases:
        print(f"sched_rank.py: {a.csv}: no rows", file=sys.stderr)
        return 2
    ok = True
    out = []
    for key, pols in cases.items():
        if len(pols) < 2:
            print(f"sched_rank.py: {key}: one policy, nothing to rank", file=sys.stderr)
            return 2
        if a.rotate_sim:
            sims = [p["sim"] for p in pols]
            for i, p in enumerate(pols):
                p["sim"] = sims[(i + 1) % len(pols)]
        t, ts, c, d, n1, n2, npairs = analyse(pols)
        for p in pols:
            p["tau"] = t
        print(f"{key} (chunks {pols[0]['chunks']}; 1-min load after each round: {pols[0]['load']})")
        print(f"  {'policy':<11} {'real':>9} {'min':>9} {'max':>9} {'spread':>7} {'sim':>9} {'sim/real':>8}")
        within = 0
        for p in sorted(pols, key=lambda p: -p["real"]):
            r = p["sim"] / p["real"] if p["real"] > 0 else float("inf")
            p["ratio"] = r
            inside = a.tol is None or abs(r - 1) <= a.tol
            within += abs(r - 1) <= (a.tol if a.tol is not None else 0.10)
            ok &= inside
            print(f"  {p['sched']:<11} {p['real']:9.1f} {p['lo']:9.1f} {p['hi']:9.1f} {(p['hi'] - p['lo']) / p['real']:6.1%} "
                  f"{p['sim']:9.1f} {r:8.3f}")
        worst = max(pols, key=lambda p: abs(p["ratio"] - 1))
        print(f"  Kendall tau-b {t:.3f} (concordant {c}, discordant {d}, of {npairs} pairs; ties: real {n1}, simulated {n2}); "
              f"without simulated ties {ts:.3f}; within +-{a.tol if a.tol is not None else 0.10:.0%}: {within}/{len(pols)}, "
              f"worst {worst['sched']} {worst['ratio']:.3f}")
        if a.min_tau is not None and not (t >= a.min_tau):
            ok = False
        out.append((key, pols, t, ts, c, d, n1, n2, within, worst))
    if a.summary:
        with open(a.summary, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["case", "policies", "real_order", "sim_order", "tau_b", "tau_b_strict", "concordant", "discordant",
                        "real_ties", "sim_ties", "within_10pct", "worst_policy", "worst_ratio"])
            for key, pols, t, ts, c, d, n1, n2, within, worst in out:
                w.writerow([key, len(pols), " > ".join(p["sched"] for p in sorted(pols, key=lambda p: -p["real"])),
                            " > ".join(p["sched"] for p in sorted(pols, key=lambda p: -p["sim"])),
                            f"{t:.3f}", f"{ts:.3f}", c, d, n1, n2, within, worst["sched"], f"{worst['ratio']:.3f}"])
    if a.plot and plot(cases, a.plot) != 0:
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
