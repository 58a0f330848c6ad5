#!/usr/bin/env python3
"""summarize.py PASSES.csv — per shape, the medians over the runs of passes_ab.sh's per-run medians (ms), and the
ratios former / new per pass (fwd: the split's bf16 read and the V pairs apart and together), the range of the
per-run ratios (each run's own A/B), and how many result hashes each pass gave over its variants (1: the same
bits)."""
import collections, csv, statistics as st, sys

rows = list(csv.DictReader(open(sys.argv[1])))
d, hs, shapes = collections.defaultdict(list), collections.defaultdict(set), []
for r in rows:
    d[(r['shape'], r['variant'])].append(float(r['median_ms']))
    hs[(r['shape'], r['variant'][:3])].add(r['hash'])
    if r['shape'] not in shapes:
        shapes.append(r['shape'])
loads = [float(r['load1']) for r in rows]
print(f"runs: {len(set(r['round'] for r in rows))}, load average {min(loads)}-{max(loads)}")
print("shape,fwd_before_ms,fwd_after_ms,fwd_x,fwd_split_only_x,fwd_pairs_only_x,dat_before_ms,dat_after_ms,dat_x,"
      "wgr_before_ms,wgr_after_ms,wgr_x,fwd_x_runs,dat_x_runs,wgr_x_runs,hashes_fwd_dat_wgr")


def rng(s, a, b):
    r = [x / y for x, y in zip(d[(s, a)], d[(s, b)])]
    return f"{min(r):.2f}-{max(r):.2f}"


for s in shapes:
    m = lambda v: st.median(d[(s, v)])
    fb, fa = m('fwd widen+pack'), m('fwd bf16+pairs')
    print(f"{s},{fb:.3f},{fa:.3f},{fb / fa:.2f},{fb / m('fwd bf16+pack'):.2f},{fb / m('fwd widen+pairs'):.2f},"
          f"{m('dat pack'):.3f},{m('dat pairs'):.3f},{m('dat pack') / m('dat pairs'):.2f},"
          f"{m('wgr widen'):.3f},{m('wgr bf16'):.3f},{m('wgr widen') / m('wgr bf16'):.2f},"
          f"{rng(s, 'fwd widen+pack', 'fwd bf16+pairs')},{rng(s, 'dat pack', 'dat pairs')},{rng(s, 'wgr widen', 'wgr bf16')},"
          f"{len(hs[(s, 'fwd')])}/{len(hs[(s, 'dat')])}/{len(hs[(s, 'wgr')])}")
