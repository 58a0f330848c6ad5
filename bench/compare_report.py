#!/usr/bin/python3
"""Tables of bench/compare_frameworks.sh's runs (runs.csv): medians, ratios, scaling, as markdown.

  /usr/bin/python3 bench/compare_report.py --csv OUT/runs.csv [--sgemm GFLOPS] [--cores N]
                                           [--machine OUT/machine.txt]
Standard library only.
"""
import argparse
import csv
import statistics
import sys
from collections import defaultdict

TARGET_RATIO = 1.5
TARGET_SCALING = 1.9
OTHERS = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}  # column order


def fmt(v, nd=0):
    return "—" if v is None else f"{v:,.{nd}f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--sgemm", type=float, help="single-core sgemm GFLOP/s measured in the same run")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--machine", help="machine.txt to quote")
    a = ap.parse_args()

    rounds = set()
    ips = defaultdict(list)   # (framework, net, batch, workers) -> [images/s]
    gfl = defaultdict(list)   # same key -> [GFLOP/s] (starpu-anp only)
    order = []
    with open(a.csv) as f:
        for row in csv.DictReader(f):
            try:
                v = float(row["images_per_s"])
            except ValueError:
                continue  # a failed run: no result line
            rounds.add(row["round"])
            key = (row["framework"], row["net"], int(row["batch"]), int(row["workers"]))
            ips[key].append(v)
            if row["gflops"]:
                gfl[key].append(float(row["gflops"]))
            if (row["net"], int(row["batch"])) not in order:
                order.append((row["net"], int(row["batch"])))

    def med(d, key):
        return statistics.median(d[key]) if d.get(key) else None

    def spread(key):
        v = ips.get(key)
        return f"{min(v):,.0f}–{max(v):,.0f}" if v else "—"

    out = []
    if a.machine:
        out.append("```")
        out += [l.rstrip() for l in open(a.machine)]
        out.append("```")
        out.append("")
    n = a.cores
    ceiling = a.sgemm * n if a.sgemm else None
    present = [f for f in OTHERS if any(k[0] == f for k in ips)]
    cols = [(f, t) for f in present for t in (1, 2)]
    out.append(f"Median images/s over {len(rounds)} rounds, training steps (forward, backward, SGD "
               f"update): starpu-anp with STARPU_NCPU={n}; "
               + ", ".join(f"{OTHERS[f]} with 1 and 2 threads" for f in present)
               + "; the ratio is starpu-anp / the best of those.")
    out.append("")
    hdr = ("| net | batch | starpu-anp img/s | "
           + " | ".join(f"{OTHERS[f]} {t} thread{'s' if t > 1 else ''}" for f, t in cols)
           + f" | best other | starpu-anp / best | ≥ {TARGET_RATIO}× |")
    out.append(hdr)
    out.append("|" + "---|" * (hdr.count("|") - 1))
    extra = []  # (net, batch, ratio per framework, gflops)
    for net, b in order:
        s = med(ips, ("starpu-anp", net, b, n))
        vals = {c: med(ips, (c[0], net, b, c[1])) for c in cols}
        have = {c: v for c, v in vals.items() if v is not None}
        best = max(have, key=have.get) if have else None
        ratio = s / have[best] if s and best else None
        line = (f"| {net} | {b} | {fmt(s)} | " + " | ".join(fmt(vals[c]) for c in cols)
                + f" | {OTHERS[best[0]] + ' ' + str(best[1]) + 't' if best else '—'} | "
                  f"**{fmt(ratio, 2)}×** | {'yes' if ratio and ratio >= TARGET_RATIO else 'no'} |")
        out.append(line)
        per = {}
        for f in present:
            bf = max([v for (g, _), v in have.items() if g == f], default=None)
            per[f] = s / bf if s and bf else None
        extra.append((net, b, per, med(gfl, ("starpu-anp", net, b, n))))
    out.append("")
    hdr = "| net | batch | " + " | ".join(f"starpu-anp / best {OTHERS[f]}" for f in present) + \
          " | starpu-anp GFLOP/s |"
    if ceiling:
        hdr += f" % of {n}-core sgemm ({ceiling:.0f} GFLOP/s) |"
    out.append(hdr)
    out.append("|" + "---|" * (hdr.count("|") - 1))
    for net, b, per, g in extra:
        line = f"| {net} | {b} | " + " | ".join(f"{fmt(per[f], 2)}×" for f in present) + f" | {fmt(g, 1)} |"
        if ceiling:
            line += f" {fmt(100 * g / ceiling if g else None)}% |"
        out.append(line)
    out.append("")

    scal = sorted({(k[1], k[2]) for k in ips if k[0] == "starpu-anp" and k[3] == 1})
    if scal:
        out.append("starpu-anp scaling, STARPU_NCPU=1 → 2 (median images/s):")
        out.append("")
        out.append(f"| net | batch | 1 worker | 2 workers | speedup | ≥ {TARGET_SCALING}× |")
        out.append("|---|---|---|---|---|---|")
        for net, b in scal:
            s1, s2 = med(ips, ("starpu-anp", net, b, 1)), med(ips, ("starpu-anp", net, b, 2))
            sp = s2 / s1 if s1 and s2 else None
            out.append(f"| {net} | {b} | {fmt(s1)} | {fmt(s2)} | {fmt(sp, 2)}× | "
                       f"{'yes' if sp and sp >= TARGET_SCALING else 'no'} |")
        out.append("")

    out.append("Spread (min–max images/s over the rounds):")
    out.append("")
    out.append("| framework | net | batch | workers/threads | runs | min–max |")
    out.append("|---|---|---|---|---|---|")
    for k in sorted(ips):
        out.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {len(ips[k])} | {spread(k)} |")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
