#!/usr/bin/env bash
# bn_bf16_kernels.sh — batch norm's CPU kernels with x (its input) and y (the fused relu's output) each fp32 or bf16,
# at ResNet-20's shapes (dnn_op_bench --op bn-bf16), ROUNDS runs per batch at measuring priority (scripts/lib.sh),
# each run's variants side by side (best of REPS calls each, the thread's CPU clock); then per phase and storage the
# median over the runs of its time / the same run's fp32 (x32 y32) time (docs/studies/2026-12-07-bnin-bf16.md).
#
#   bench/bn_bf16_kernels.sh OUT_DIR [BUILD_DIR]     environment: ROUNDS [3], REPS [20], BATCHES ["32 64"]
# Writes OUT_DIR/kernels_raw.md (the tables, each headed by its round, batch and load), OUT_DIR/kernels.csv
# (round,batch,load1,shape,phase,ms_per_call) and prints the ResNet-20 step totals' ratios.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
source "$ROOT/scripts/lib.sh"
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: bench/bn_bf16_kernels.sh OUT_DIR [BUILD_DIR]" >&2; exit 2; }
OUT="$1" BENCH="${2:-$ROOT/build}/bench/dnn_op_bench"
[ -x "$BENCH" ] || { echo "error: $BENCH: not an executable (build dnn_op_bench first)" >&2; exit 2; }
ROUNDS="${ROUNDS:-3}" REPS="${REPS:-20}" BATCHES="${BATCHES:-32 64}"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ && "$REPS" =~ ^[1-9][0-9]*$ ]] || {
  echo "error: ROUNDS=$ROUNDS, REPS=$REPS: expected positive integers" >&2
  exit 2
}
anp_measure_prio "$ROOT"
mkdir -p "$OUT"
: >"$OUT/kernels_raw.md"
for r in $(seq "$ROUNDS"); do
  for b in $BATCHES; do
    echo "## round $r batch $b load $(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/kernels_raw.md"
    timeout 300 env -u OPENBLAS_CORETYPE "${ANP_PRIO[@]}" "$BENCH" --op bn-bf16 --batch "$b" --reps "$REPS" \
      --clock cpu >>"$OUT/kernels_raw.md" 2>&1
  done
done
awk -F'|' '/^## round/ { split($0, w, " "); r = w[3]; b = w[5]; l = w[7] }
  $2 ~ /bn-bf16/ { gsub(/^ +| +$/, "", $3); gsub(/^ +| +$/, "", $4); gsub(/ /, "", $5)
                   print r "," b "," l ",\"" $3 "\",\"" $4 "\"," $5 }' "$OUT/kernels_raw.md" |
  sed '1i round,batch,load1,shape,phase,ms_per_call' >"$OUT/kernels.csv"
python3 - "$OUT/kernels.csv" <<'PY'
import csv, statistics, sys
from collections import defaultdict
t = {}
for r in csv.DictReader(open(sys.argv[1])):
    t[(int(r["batch"]), r["shape"], r["phase"], int(r["round"]))] = (float(r["ms_per_call"]), float(r["load1"]))
ratio, ms, loads = defaultdict(list), defaultdict(list), defaultdict(list)
for (b, shape, phase, rd), (v, l) in t.items():
    if not shape.startswith("ResNet"):
        continue
    base = " ".join(phase.split()[:-2])
    ratio[(b, phase)].append(v / t[(b, shape, base + " x32 y32", rd)][0])
    ms[(b, phase)].append(v)
    loads[b].append(l)
print("| batch | phase, storage | ms per step (median) | / x32 y32 (median of the runs' ratios) | runs | load |")
print("|--:|---|--:|--:|--:|---|")
for k in sorted(ratio, key=lambda k: (k[0], k[1])):
    print(f"| {k[0]} | {k[1]} | {statistics.median(ms[k]):.3f} | {statistics.median(ratio[k]):.3f} | {len(ratio[k])} | "
          f"{min(loads[k[0]]):.1f}-{max(loads[k[0]]):.1f} |")
PY
