#!/usr/bin/env bash
# convout_bf16.sh — what writing a conv's output in bf16 (--precision bf16's activation storage: codelets/conv2d.h
# y_bf16, each CPU path's rounding epilogue) costs in the forward conv alone: dnn_op_bench --op conv2d --precision
# bf16 times, for each conv shape of its table (ResNet-20's 8 distinct convs first, then LeNet-5's and ResNet-8's)
# and each algorithm of LIST, the bf16 forward with an fp32 y ("fwd ... bf16") and right after it with a bf16 y
# ("fwd ... bf16 y"), one core, the thread's CPU time, best of REPS calls; over ROUNDS rounds.
#
#   bench/convout_bf16.sh [--rounds R] [--reps N] [--batch B] [--algos LIST] [--out DIR]
#   defaults: R 3, N 10, B 64, LIST auto,im2col,winograd,winograd4 (dnn_op_bench --conv-algo: up to 4; auto
#   runs oneDNN's conv on the stride-2 3x3 convs and on images of at most 14 columns); DNN_OP_BENCH
#   (build/bench/dnn_op_bench) names the binary
#
# Writes DIR/runs.csv (round,shape,algo,y,ms,load1; y fp32 or bf16) and prints per shape and algorithm the median
# over rounds of each time and the median (min-max) of the per-round ratio bf16 y / fp32 y (the two timed side by
# side, which a loaded machine disturbs less than absolute figures). Runs at scripts/lib.sh's measuring priority
# (anp_measure_prio), each under `timeout 600`. Exit status: 0, 1 if a run failed, 2 on a usage error.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
B="${DNN_OP_BENCH:-$ROOT/build/bench/dnn_op_bench}"
ROUNDS=3 REPS=10 BATCH=64 ALGOS=auto,im2col,winograd,winograd4 OUT="$ROOT/out/convout_bf16"
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
posint() { [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "convout_bf16.sh: $1 '${2:-}': expected a positive integer" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) posint "$1" "${2:-}"; ROUNDS="$2"; shift 2 ;;
    --reps) posint "$1" "${2:-}"; REPS="$2"; shift 2 ;;
    --batch) posint "$1" "${2:-}"; BATCH="$2"; shift 2 ;;
    --algos) [[ "${2:-}" =~ ^[a-z0-9,]+$ ]] || { echo "convout_bf16.sh: --algos '${2:-}': expected a comma-separated list" >&2; exit 2; }; ALGOS="$2"; shift 2 ;;
    --out) [ -n "${2:-}" ] || { echo "convout_bf16.sh: --out needs a directory" >&2; exit 2; }; OUT="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "convout_bf16.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$B" ] || { echo "convout_bf16.sh: $B: not built (cmake --build build --target dnn_op_bench)" >&2; exit 2; }
grep -qw avx512_bf16 /proc/cpuinfo || { echo "convout_bf16.sh: this CPU has no AVX512_BF16" >&2; exit 2; }
source "$ROOT/scripts/lib.sh"
anp_measure_prio "$ROOT"
mkdir -p "$OUT"
CSV="$OUT/runs.csv"
echo "round,shape,algo,y,ms,load1" >"$CSV"
echo "convout_bf16: $ROUNDS rounds, batch $BATCH, best of $REPS, algorithms $ALGOS, $ANP_PRIO_SAID; $(uptime)"
NALGO=$(echo "$ALGOS" | tr ',' '\n' | wc -l)
for r in $(seq 1 "$ROUNDS"); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  env -u OPENBLAS_CORETYPE "${ANP_PRIO[@]}" timeout 600 "$B" --op conv2d --batch "$BATCH" --precision bf16 --clock cpu \
    --reps "$REPS" --conv-algo "$ALGOS" >"$OUT/round$r.txt" 2>&1 || { echo "convout_bf16.sh: round $r failed" >&2; exit 1; }
  # rows: | conv2d | SHAPE | fwd [ALGO] bf16[ y] | ms | ...
  awk -F'|' -v r="$r" -v load="$load" -v one="$([ "$NALGO" = 1 ] && echo "$ALGOS")" '
    $2 ~ /conv2d/ && $4 ~ /^ *fwd .*bf16/ {
      shape = $3; gsub(/^ +| +$/, "", shape); gsub(/,/, ";", shape)
      n = split($4, f, " "); y = f[n] == "y" ? "bf16" : "fp32"; algo = n >= (y == "bf16" ? 4 : 3) ? f[2] : one
      ms = $5; gsub(/ /, "", ms)
      print r "," shape "," algo "," y "," ms "," load
    }' "$OUT/round$r.txt" >>"$CSV"
done
echo "after: $(uptime)"
python3 - "$CSV" <<'PY'
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = []
for r in rows:
    k = (r["shape"], r["algo"])
    if k not in keys: keys.append(k)
print("| conv (shape; algorithm) | fp32 y ms | bf16 y ms | bf16 y / fp32 y | load1 |")
print("|---|---:|---:|---:|---|")
for shape, algo in keys:
    sel = [r for r in rows if r["shape"] == shape and r["algo"] == algo]
    by = {}
    for r in sel: by.setdefault(r["round"], {})[r["y"]] = float(r["ms"])
    rat = [d["bf16"] / d["fp32"] for d in by.values() if "bf16" in d and "fp32" in d and d["fp32"] > 0]
    med = lambda y: st.median(float(r["ms"]) for r in sel if r["y"] == y)
    loads = [float(r["load1"]) for r in sel]
    print("| %s; %s | %.3f | %.3f | %.3f (%.3f-%.3f) | %.1f-%.1f |" % (shape.replace(";", ","), algo, med("fp32"), med("bf16"),
          st.median(rat), min(rat), max(rat), min(loads), max(loads)))
PY
