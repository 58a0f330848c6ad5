#!/usr/bin/env python3
"""summarize.py PASSES.csv | STEP.csv | FP32BF16.csv — the study's tables from its CSVs:
  passes_ab.sh's CSV: per shape and pass (fwd, wgr), the median over the runs of each run's median ms, former
    ("rows") and new ("groups"), the ratio former / new of those and the range of the per-run ratios, and how many
    result hashes the two variants gave (1: the same bits);
  step_ab.sh's CSV (winoin study): per worker count, the median and range of the per-round ratios B / A of
    images/s and of the critical path's conv ms per pass (A / B: > 1 is faster);
  rule_ab.sh's CSV: per shape and pass, each run's Winograd / oneDNN (> 1: oneDNN faster);
  fp32_bf16.sh's CSV: per worker count, the per-round bf16 / fp32 images/s ratios, their median and range."""
import collections, csv, statistics as st, sys

rows = list(csv.DictReader(open(sys.argv[1])))
loads = [float(r['load1']) for r in rows]
print(f"rounds: {len(set(r['round'] for r in rows))}, load average {min(loads)}-{max(loads)}")
rng = lambda x: "%.3f (%.3f-%.3f)" % (st.median(x), min(x), max(x))
if 'variant' in rows[0] and 'hash' not in rows[0]:
    d = collections.defaultdict(dict)
    for r in rows:
        d[(r['shape'], r['variant'][:3], r['round'])][r['variant'][4:]] = float(r['median_ms'])
    print("| shape | pass | Winograd ms (runs) | oneDNN ms (runs) | Winograd / oneDNN (runs) |")
    print("|---|---|---|---|---|")
    for key in sorted({k[:2] for k in d}):
        sel = [v for k, v in sorted(d.items()) if k[:2] == key]
        f = lambda a: " ".join("%.3f" % v[a] for v in sel)
        print(f"| {key[0]} | {key[1]} | {f('winograd')} | {f('onednn')} | "
              f"{' '.join('%.2f' % (v['winograd'] / v['onednn']) for v in sel)} |")
elif 'variant' in rows[0]:
    d, hs, runs = collections.defaultdict(list), collections.defaultdict(set), collections.defaultdict(dict)
    for r in rows:
        d[(r['shape'], r['variant'])].append(float(r['median_ms']))
        hs[(r['shape'], r['variant'][:3])].add(r['hash'])
        runs[(r['shape'], r['variant'][:3], r['round'])][r['variant'][4:]] = float(r['median_ms'])
    print("| shape | pass | former ms | new ms | former / new (per run) | hashes |")
    print("|---|---|---:|---:|---|---:|")
    for shape, p in sorted({(s, v[:3]) for s, v in d}):
        a, b = st.median(d[(shape, p + ' rows')]), st.median(d[(shape, p + ' groups')])
        x = [v['rows'] / v['groups'] for k, v in runs.items() if k[:2] == (shape, p) and 'rows' in v and 'groups' in v]
        print(f"| {shape} | {p} | {a:.3f} | {b:.3f} | {a / b:.3f} ({min(x):.3f}-{max(x):.3f}) | {len(hs[(shape, p)])} |")
elif 'build' in rows[0]:
    by = collections.defaultdict(dict)
    for r in rows:
        by[(r['workers'], r['round'])][r['build']] = r
    print("| workers | images/s B/A | fwd A/B | bwd data A/B | bwd filter A/B |")
    print("|---|---|---|---|---|")
    for w in sorted({k[0] for k in by}):
        sel = [v for k, v in by.items() if k[0] == w and 'A' in v and 'B' in v]
        f = lambda k, inv: rng([float(v['A'][k]) / float(v['B'][k]) if inv else float(v['B'][k]) / float(v['A'][k])
                                for v in sel])
        print(f"| {w} | {f('images_per_s', 0)} | {f('fwd_ms', 1)} | {f('bwd_data_ms', 1)} | {f('bwd_filter_ms', 1)} |")
else:
    by = collections.defaultdict(dict)
    for r in rows:
        by[(r['workers'], r['round'])][r['precision']] = float(r['images_per_s'])
    print("| workers | bf16 / fp32 images/s per round | median (range) |")
    print("|---|---|---|")
    for w in sorted({k[0] for k in by}):
        x = [v['bf16'] / v['fp32'] for k, v in sorted(by.items()) if k[0] == w]
        print(f"| {w} | {' '.join('%.2f' % y for y in x)} | {rng(x)} |")
