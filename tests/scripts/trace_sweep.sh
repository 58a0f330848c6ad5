#!/usr/bin/env bash
# trace_sweep — a tiny scheduler sweep (2 policies x 2 worker counts, few steps, 2 measured runs
# after 1 discarded run each) writes sweep.csv with every run, summary.csv with medians, speedups
# and efficiencies, and the two PNG plots.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot not installed"; exit 77; }
OUT="$TMP/sweep"
rc=0; "$STARPU_ANP" sweep --out "$OUT" --scheds "eager dmda" --ncpu "1 2" --ncuda 0 --net lenet5 --batch 32 \
  --steps 2 --warmup 1 --reps 2 --discard 1 --timeout 120 >"$TMP/out" 2>"$TMP/err" || rc=$?
[ $rc -eq 0 ] || { cat "$TMP/err" >&2; fail "sweep exited $rc"; finish; }
/usr/bin/python3 - "$OUT" <<'EOF' || fail "sweep output checks"
import csv, sys
d = sys.argv[1]
bad = []
runs = list(csv.DictReader(open(d + "/sweep.csv")))
want_cols = ["scheduler", "ncpu", "ncuda", "ranks", "mode", "batch", "chunks", "images_per_s", "speedup", "efficiency"]
missing = [c for c in want_cols if c not in (runs[0].keys() if runs else [])]
if missing:
    bad.append("sweep.csv lacks columns " + " ".join(missing))
got = sorted((r["scheduler"], r["ncpu"], r["rep"]) for r in runs)
want = sorted((s, c, r) for s in ("eager", "dmda") for c in ("1", "2") for r in ("1", "2"))
if got != want:
    bad.append("sweep.csv rows %s, want %s (discarded runs must not appear)" % (got, want))
for r in runs:
    if r["status"] != "ok" or not float(r["images_per_s"] or 0) > 0 or not r["speedup"]:
        bad.append("run not ok: %s" % r)
summ = list(csv.DictReader(open(d + "/summary.csv")))
if len(summ) != 4:
    bad.append("summary.csv has %d rows, want 4" % len(summ))
for s in summ:
    lo, med, hi = (float(s[k]) for k in ("min_images_per_s", "median_images_per_s", "max_images_per_s"))
    if not lo <= med <= hi:
        bad.append("summary.csv: median outside min-max: %s" % s)
    if s["ncpu"] == "1" and abs(float(s["speedup"]) - 1) > 1e-6:
        bad.append("summary.csv: the 1-worker baseline has speedup %s" % s["speedup"])
    if abs(float(s["efficiency"]) - float(s["speedup"]) / int(s["workers"])) > 2e-3:
        bad.append("summary.csv: efficiency != speedup / workers: %s" % s)
for png in ("throughput.png", "speedup.png"):
    with open(d + "/" + png, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            bad.append(png + " is not a PNG")
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
grep -q '^| eager | 2 |' "$TMP/out" || fail "no Markdown table row on stdout"
expect_rc 0 "$STARPU_ANP" sweep --help
expect_rc 2 "$STARPU_ANP" sweep --bogus
expect_rc 2 "$STARPU_ANP" sweep --reps x
finish
