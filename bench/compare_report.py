#!/usr/bin/python3
"""Tables of bench/compare_frameworks.sh's runs (runs.csv): medians, ratios, scaling, as markdown.

  /usr/bin/python3 bench/compare_report.py --csv OUT/runs.csv [--sgemm GFLOPS] [--cores N]
                                           [--machine OUT/machine.txt] [--gpt-sgemm OUT/sgemm_gpt.csv]

Only matching runs are pooled. Each run has a kind: "compare" (one of the side-by-side runs of
a net and batch) or "scaling" (starpu-anp's 1 -> 2 worker runs). runs.csv has a kind column;
older files without one are read by the order compare_frameworks.sh writes them in: within a
round, the first starpu-anp run of a (net, batch, workers) is the comparison's, a later one (or
one with fewer workers than --cores) a scaling run. A comparison row uses only the rounds in
which every configuration of that row has a result, and a scaling row only the rounds with both
a 1- and a 2-worker scaling run, so each median in a row is over the same rounds. A target is
met only where the median ratio is at least the target, unrounded. Every cell's runs and
min / median / max are printed. Standard library only.

bf16 runs (kind "bf16", compare_frameworks.sh --precision bf16) have their own table: per net and
batch, starpu-anp --precision bf16 against starpu-anp fp32 (the comparison runs' starpu-anp, same
rounds) and against the best of the others' bf16 runs (PyTorch autocast, Keras mixed_bfloat16, 1
and 2 threads), pooled like a comparison row over the rounds in which all of them have a result;
targets 1.8x (own fp32: the issue names resnet20 and gpt-nano) and 1.5x (the others' bf16).

GPT runs (kind "gpt", compare_frameworks.sh --gpt) have their own tables, in tokens/s: per net,
context and batch, starpu-anp with N workers against PyTorch with N threads (N = 1, 2), and the
best of starpu-anp's against the best of PyTorch's; starpu-anp's 1 -> 2 worker scaling from the
same rounds; each side's GFLOP/s per core against the sgemm rate at the net's own dense shapes
(--gpt-sgemm: net,context,batch,sgemm_gflops rows); the median peak resident set of each.
"""
import argparse
import csv
import statistics
import sys
from collections import defaultdict

TARGET_RATIO = 1.5
TARGET_SCALING = 1.9
TARGET_BF16_SELF = 1.8  # starpu-anp bf16 / starpu-anp fp32
OTHERS_BF16 = {"pytorch": "PyTorch autocast", "tensorflow": "Keras mixed_bfloat16"}
OTHERS = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}  # column order


def fmt(v, nd=0):
    return "—" if v is None else f"{v:,.{nd}f}"


def verdict(ratio, target):
    """'yes' or 'no' on the unrounded ratio; the ratio to 3 places where 2 would mislead."""
    if ratio is None:
        return "—"
    met = ratio >= target
    shown = round(ratio, 2)
    if met != (shown >= target) or abs(ratio - target) < 0.01:
        return f"{'yes' if met else 'no'} ({ratio:.3f})"
    return "yes" if met else "no"


def read_runs(path, cores):
    """{(kind, framework, net, batch, workers): {round: images/s}}, {same key: {round: GFLOP/s}}, order."""
    ips = defaultdict(dict)
    gfl = defaultdict(dict)
    order = []
    seen = set()  # (round, net, batch, workers) of starpu-anp rows, to infer the kind
    with open(path) as f:
        for row in csv.DictReader(f):
            fw, net, b, w, r = row["framework"], row["net"], int(row["batch"]), int(row["workers"]), row["round"]
            kind = (row.get("kind") or "").strip()
            if not kind:
                if fw == "starpu-anp" and (w != cores or (r, net, b, w) in seen):
                    kind = "scaling"
                else:
                    kind = "compare"
            if fw == "starpu-anp":
                seen.add((r, net, b, w))
            try:
                v = float(row["images_per_s"])
            except ValueError:
                continue  # a failed run: no result line
            key = (kind, fw, net, b, w)
            ips[key][r] = v
            if row.get("gflops"):
                gfl[key][r] = float(row["gflops"])
            if kind in ("compare", "bf16") and (net, b) not in order:
                order.append((net, b))
    return ips, gfl, order


def read_gpt(path):
    """GPT runs: {(net, context, batch): {(framework, n): {round: (tokens/s, GFLOP/s, peak RSS MiB)}}}
    (GFLOP/s and RSS None where the run printed none)."""
    runs = defaultdict(lambda: defaultdict(dict))
    with open(path) as f:
        for row in csv.DictReader(f):
            if (row.get("kind") or "").strip() != "gpt":
                continue
            try:
                tps = float(row["tokens_per_s"])
            except (ValueError, TypeError):
                continue  # a failed run: no result line
            num = lambda k: float(row[k]) if row.get(k) else None
            rss = num("peak_rss_mib") if "peak_rss_mib" in row else num("peak_rss_mb")  # the first files' name
            key = (row["net"], int(row["context"]), int(row["batch"]))
            runs[key][(row["framework"], int(row["workers"]))][row["round"]] = (tps, num("gflops"), rss)
    return runs


def gpt_report(runs, sgemm):
    """The GPT tables (markdown lines); none without GPT runs."""
    if not runs:
        return []
    out = ["GPT training steps (forward, per-token loss, backward, AdamW), median tokens/s: starpu-anp "
           "bench with STARPU_NCPU=N against PyTorch (bench/gpt_torch_step.py, fp32, "
           "scaled_dot_product_attention, fused AdamW) with N threads. Each row pools only the rounds in "
           "which both of its configurations have a result. \"best\" compares the faster of starpu-anp's "
           f"1 and 2 workers with the faster of PyTorch's 1 and 2 threads. A target is met where the unrounded "
           f"ratio is ≥ {TARGET_RATIO}. Peak RSS: the median of the runs' peak resident sets (/usr/bin/time), "
           "same batch and context on both sides.", ""]
    hdr = (f"| net | context | batch | N | rounds | starpu-anp tokens/s | PyTorch tokens/s | starpu-anp / PyTorch | "
           f"≥ {TARGET_RATIO}× | starpu-anp peak RSS MiB | PyTorch peak RSS MiB |")
    out += [hdr, "|" + "---|" * (hdr.count("|") - 1)]
    spread, scal, share = [], [], []

    def med(cell, rounds, i):
        v = [cell[r][i] for r in rounds if cell[r][i] is not None]
        return statistics.median(v) if v else None

    for key in sorted(runs, key=lambda k: (k[0], k[1], k[2])):
        net, t, b = key
        cells = runs[key]
        best = {}
        for n in (1, 2):
            s, p = cells.get(("starpu-anp", n), {}), cells.get(("pytorch", n), {})
            rounds = sorted(set(s) & set(p), key=lambda r: (len(r), r)) if s and p else []
            if not rounds:  # one side has no result: show what the other has on its own
                rounds_s, rounds_p = sorted(s), sorted(p)
            else:
                rounds_s = rounds_p = rounds
            ms, mp = med(s, rounds_s, 0) if s else None, med(p, rounds_p, 0) if p else None
            ratio = ms / mp if ms and mp and rounds else None
            if ms:
                best.setdefault("starpu-anp", []).append((ms, n))
            if mp:
                best.setdefault("pytorch", []).append((mp, n))
            out.append(f"| {net} | {t} | {b} | {n} | {len(rounds)} | {fmt(ms)} | {fmt(mp)} | **{fmt(ratio, 2)}×** | "
                       f"{verdict(ratio, TARGET_RATIO)} | {fmt(med(s, rounds_s, 2) if s else None)} | "
                       f"{fmt(med(p, rounds_p, 2) if p else None)} |")
            for fw, c, rr in (("starpu-anp", s, rounds_s), ("pytorch", p, rounds_p)):
                spread.append((fw, net, t, b, n, [c[r][0] for r in rr]))
                g = med(c, rr, 1) if c else None
                tps = med(c, rr, 0) if c else None
                share.append((fw, net, t, b, n, tps, g))
        bs, bp = max(best.get("starpu-anp", [(None, 0)])), max(best.get("pytorch", [(None, 0)]))
        ratio = bs[0] / bp[0] if bs[0] and bp[0] else None
        who = f"starpu-anp {bs[1]}w" if bs[0] else "—", f"PyTorch {bp[1]}t" if bp[0] else "—"
        out.append(f"| {net} | {t} | {b} | best: {who[0]}, {who[1]} | — | {fmt(bs[0])} | "
                   f"{fmt(bp[0])} | **{fmt(ratio, 2)}×** | {verdict(ratio, TARGET_RATIO)} | | |")
        s1, s2 = cells.get(("starpu-anp", 1), {}), cells.get(("starpu-anp", 2), {})
        rounds = sorted(set(s1) & set(s2), key=lambda r: (len(r), r))
        if rounds:
            a1, a2 = med(s1, rounds, 0), med(s2, rounds, 0)
            scal.append((net, t, b, len(rounds), a1, a2, a2 / a1))
    out.append("")
    if scal:
        out += ["starpu-anp scaling, STARPU_NCPU=1 → 2 (median tokens/s over the rounds with both):", "",
                f"| net | context | batch | rounds | 1 worker | 2 workers | speedup | ≥ {TARGET_SCALING}× |",
                "|---|---|---|---|---|---|---|---|"]
        for net, t, b, nr, a1, a2, sp in scal:
            out.append(f"| {net} | {t} | {b} | {nr} | {fmt(a1)} | {fmt(a2)} | {fmt(sp, 2)}× | "
                       f"{verdict(sp, TARGET_SCALING)} |")
        out.append("")
    # GFLOP/s: starpu-anp's own count (its result line); PyTorch's from the same FLOPs per token (the
    # same model), i.e. its tokens/s times starpu-anp's GFLOP/s / tokens/s of the same configuration.
    flops_per_token = {}
    for fw, net, t, b, n, tps, g in share:
        if fw == "starpu-anp" and tps and g:
            flops_per_token[(net, t, b)] = g * 1e9 / tps
    hdr = ("| framework | net | context | batch | N | GFLOP/s | GFLOP/s per core | sgemm GFLOP/s at the net's shapes "
           "(1 core) | share of N × sgemm |")
    rows = []
    for fw, net, t, b, n, tps, g in share:
        fpt = flops_per_token.get((net, t, b))
        gf = tps * fpt / 1e9 if tps and fpt else None
        sg = sgemm.get((net, t, b))
        rows.append(f"| {fw} | {net} | {t} | {b} | {n} | {fmt(gf, 1)} | {fmt(gf / n if gf else None, 1)} | "
                    f"{fmt(sg, 1)} | {fmt(100 * gf / (n * sg) if gf and sg else None)}% |")
    out += ["Achieved GFLOP/s (starpu-anp's FLOP count of a training step, both sides) against the "
            "single-core sgemm rate at the net's dense shapes (dnn_op_bench --sgemm, thread CPU clock, "
            "weighted by each GEMM's share of the FLOPs):", "", hdr, "|" + "---|" * (hdr.count("|") - 1)]
    out += rows + [""]
    out += ["Spread of the GPT cells (tokens/s over the runs each pools):", "",
            "| framework | net | context | batch | N | runs | min | median | max |",
            "|---|---|---|---|---|---|---|---|---|"]
    for fw, net, t, b, n, v in spread:
        if v:
            out.append(f"| {fw} | {net} | {t} | {b} | {n} | {len(v)} | {fmt(min(v))} | {fmt(statistics.median(v))} | "
                       f"{fmt(max(v))} |")
        else:
            out.append(f"| {fw} | {net} | {t} | {b} | {n} | 0 | — | — | — |")
    out.append("")
    return out


def bf16_report(ips, order, n, cells):
    """The bf16 table (markdown lines; none without bf16 runs); its cells are added to `cells`."""
    if not any(k[0] == "bf16" for k in ips):
        return []
    present = [f for f in OTHERS_BF16 if any(k[0] == "bf16" and k[1] == f for k in ips)]
    cols = [(f, t) for f in present for t in (1, 2)]
    out = ["bf16 (--precision bf16): median images/s of starpu-anp --precision bf16 (STARPU_NCPU="
           f"{n}), of starpu-anp fp32 (the comparison runs) and of "
           + (", ".join(f"{OTHERS_BF16[f]} with 1 and 2 threads" for f in present) or "no other framework")
           + ". Each row pools only the rounds in which all its configurations have a result. Targets: starpu-anp "
           f"bf16 / fp32 ≥ {TARGET_BF16_SELF} (the issue's for resnet20 and gpt-nano), and starpu-anp bf16 / the "
           f"best other bf16 ≥ {TARGET_RATIO}, on the unrounded ratio.", ""]
    hdr = ("| net | batch | rounds | starpu-anp bf16 img/s | starpu-anp fp32 img/s | "
           + "".join(f"{OTHERS_BF16[f]} {t}t | " for f, t in cols)
           + f"bf16 / fp32 | ≥ {TARGET_BF16_SELF}× | bf16 / best other bf16 | ≥ {TARGET_RATIO}× |")
    out += [hdr, "|" + "---|" * (hdr.count("|") - 1)]
    for net, b in order:
        k16, k32 = ("bf16", "starpu-anp", net, b, n), ("compare", "starpu-anp", net, b, n)
        if not ips.get(k16) and not any(ips.get(("bf16", f, net, b, t)) for f, t in cols):
            continue
        okeys = {c: ("bf16", c[0], net, b, c[1]) for c in cols}
        have = [k for k in [k16, k32] + list(okeys.values()) if ips.get(k)]
        rounds = set.intersection(*(set(ips[k]) for k in have)) if have else set()
        vals = {k: [ips[k][r] for r in rounds] for k in have}
        med = {k: statistics.median(v) for k, v in vals.items() if v}
        s16, s32 = med.get(k16), med.get(k32)
        other = {c: med[k] for c, k in okeys.items() if k in med}
        best = max(other.values()) if other else None
        self_r = s16 / s32 if s16 and s32 else None
        other_r = s16 / best if s16 and best else None
        out.append(f"| {net} | {b} | {len(rounds)} | {fmt(s16)} | {fmt(s32)} | "
                   + "".join(f"{fmt(other.get(c))} | " for c in cols)
                   + f"**{fmt(self_r, 2)}×** | {verdict(self_r, TARGET_BF16_SELF)} | **{fmt(other_r, 2)}×** | "
                     f"{verdict(other_r, TARGET_RATIO)} |")
        cells.append(("bf16", "starpu-anp", net, b, n, vals.get(k16, [])))
        for c, k in okeys.items():
            cells.append(("bf16", c[0], net, b, c[1], vals.get(k, [])))
    out.append("")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--sgemm", type=float, help="single-core sgemm GFLOP/s measured in the same run")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--machine", help="machine.txt to quote")
    ap.add_argument("--gpt-sgemm", help="sgemm_gpt.csv: the sgemm rate at each GPT configuration's shapes")
    a = ap.parse_args()
    n = a.cores
    ips, gfl, order = read_runs(a.csv, n)
    gpt_rows = read_gpt(a.csv)
    gpt_sgemm = {}
    if a.gpt_sgemm:
        with open(a.gpt_sgemm) as f:
            for row in csv.DictReader(f):
                gpt_sgemm[(row["net"], int(row["context"]), int(row["batch"]))] = float(row["sgemm_gflops"])

    out = []
    if a.machine:
        out.append("```")
        out += [l.rstrip() for l in open(a.machine)]
        out.append("```")
        out.append("")
    ceiling = a.sgemm * n if a.sgemm else None
    present = [f for f in OTHERS if any(k[1] == f for k in ips)]
    cols = [(f, t) for f in present for t in (1, 2)]
    cells = []  # (label, net, batch, workers, [values]) for the spread table

    def pooled(keys):
        """Rounds in which every key has a run, and each key's values over those rounds."""
        have = [k for k in keys if ips.get(k)]
        rounds = set.intersection(*(set(ips[k]) for k in have)) if have else set()
        return sorted(rounds, key=lambda r: (len(r), r)), {k: [ips[k][r] for r in rounds] for k in have}

    if not order and not any(k[0] == "scaling" for k in ips):
        out += gpt_report(gpt_rows, gpt_sgemm)
        print("\n".join(out))
        return 0
    out.append("Median images/s of the comparison runs, training steps (forward, backward, SGD "
               f"update): starpu-anp with STARPU_NCPU={n}; "
               + ", ".join(f"{OTHERS[f]} with 1 and 2 threads" for f in present)
               + "; the ratio is starpu-anp / the best of those. Each row pools only the rounds in "
               "which all its configurations have a result (the rounds column); the scaling runs are "
               f"not pooled in. A target is met where the unrounded ratio is ≥ {TARGET_RATIO}.")
    out.append("")
    hdr = ("| net | batch | rounds | starpu-anp img/s | "
           + " | ".join(f"{OTHERS[f]} {t} thread{'s' if t > 1 else ''}" for f, t in cols)
           + f" | best other | starpu-anp / best | ≥ {TARGET_RATIO}× |")
    out.append(hdr)
    out.append("|" + "---|" * (hdr.count("|") - 1))
    extra = []  # (net, batch, ratio per framework, gflops)
    for net, b in order:
        skey = ("compare", "starpu-anp", net, b, n)
        okeys = {c: ("compare", c[0], net, b, c[1]) for c in cols}
        rounds, vals = pooled([skey] + list(okeys.values()))
        med = {k: statistics.median(v) for k, v in vals.items() if v}
        s = med.get(skey)
        have = {c: med[k] for c, k in okeys.items() if k in med}
        best = max(have, key=have.get) if have else None
        ratio = s / have[best] if s and best else None
        out.append(f"| {net} | {b} | {len(rounds)} | {fmt(s)} | "
                   + " | ".join(fmt(have.get(c)) for c in cols)
                   + f" | {OTHERS[best[0]] + ' ' + str(best[1]) + 't' if best else '—'} | "
                     f"**{fmt(ratio, 2)}×** | {verdict(ratio, TARGET_RATIO)} |")
        per = {}
        for f in present:
            bf = max([v for (g, _), v in have.items() if g == f], default=None)
            per[f] = s / bf if s and bf else None
        g = [gfl[skey][r] for r in rounds if r in gfl.get(skey, {})]
        extra.append((net, b, per, statistics.median(g) if g else None))
        cells.append(("compare", "starpu-anp", net, b, n, vals.get(skey, [])))
        for c, k in okeys.items():
            cells.append(("compare", c[0], net, b, c[1], vals.get(k, [])))
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

    out += bf16_report(ips, order, n, cells)

    scal = sorted({(k[2], k[3]) for k in ips if k[0] == "scaling" and k[1] == "starpu-anp"})
    if scal:
        out.append("starpu-anp scaling, STARPU_NCPU=1 → 2 (median images/s of the scaling runs only, "
                   "over the rounds with both):")
        out.append("")
        out.append(f"| net | batch | rounds | 1 worker | 2 workers | speedup | ≥ {TARGET_SCALING}× |")
        out.append("|---|---|---|---|---|---|---|")
        for net, b in scal:
            k1, k2 = ("scaling", "starpu-anp", net, b, 1), ("scaling", "starpu-anp", net, b, 2)
            rounds, vals = pooled([k1, k2])
            s1 = statistics.median(vals[k1]) if vals.get(k1) else None
            s2 = statistics.median(vals[k2]) if vals.get(k2) else None
            sp = s2 / s1 if s1 and s2 else None
            out.append(f"| {net} | {b} | {len(rounds)} | {fmt(s1)} | {fmt(s2)} | {fmt(sp, 2)}× | "
                       f"{verdict(sp, TARGET_SCALING)} |")
            cells.append(("scaling", "starpu-anp", net, b, 1, vals.get(k1, [])))
            cells.append(("scaling", "starpu-anp", net, b, 2, vals.get(k2, [])))
        out.append("")

    out += gpt_report(gpt_rows, gpt_sgemm)
    out.append("Spread of every cell above (images/s over the runs it pools):")
    out.append("")
    out.append("| kind | framework | net | batch | workers/threads | runs | min | median | max |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for kind, fw, net, b, w, v in cells:
        if v:
            out.append(f"| {kind} | {fw} | {net} | {b} | {w} | {len(v)} | {fmt(min(v))} | "
                       f"{fmt(statistics.median(v))} | {fmt(max(v))} |")
        else:
            out.append(f"| {kind} | {fw} | {net} | {b} | {w} | 0 | — | — | — |")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
