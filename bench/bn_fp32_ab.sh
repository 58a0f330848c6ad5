#!/usr/bin/env bash
# bn_fp32_ab.sh — batch norm's fp32 CPU kernels (dnn_op_bench --op bn: training forward, backward, each plain and with
# the fused relu, at ResNet-20's shapes) of two dnn_op_bench builds A and B side by side: ROUNDS rounds, each running
# A then B (B then A in even rounds) at measuring priority (scripts/lib.sh), per batch in BATCHES (best of REPS calls
# each, the thread's CPU clock); then per batch, shape and phase the median over the rounds of B's time / the same
# round's A time (docs/studies/2026-12-07-bnfp32.md).
#
#   bench/bn_fp32_ab.sh OUT_DIR A_BENCH B_BENCH [B_ARGS...]   environment: ROUNDS [3], REPS [30], BATCHES ["32 2"]
# B_ARGS go to B's runs only (e.g. A_BENCH = B_BENCH, B_ARGS --simd off: the portable loops against the AVX2 ones).
# Writes OUT_DIR/raw.md (the tables, each headed by its round, build, batch and load) and OUT_DIR/kernels.csv
# (round,who,batch,load1,shape,phase,ms_per_call,gb_per_s,pct_copy), and prints the ratios.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
source "$ROOT/scripts/lib.sh"
[ $# -ge 3 ] || { echo "usage: bench/bn_fp32_ab.sh OUT_DIR A_BENCH B_BENCH [B_ARGS...]" >&2; exit 2; }
OUT="$1" A="$2" B="$3"
shift 3
for bin in "$A" "$B"; do
  [ -x "$bin" ] || { echo "error: $bin: not an executable (build dnn_op_bench first)" >&2; exit 2; }
done
ROUNDS="${ROUNDS:-3}" REPS="${REPS:-30}" BATCHES="${BATCHES:-32 2}"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ && "$REPS" =~ ^[1-9][0-9]*$ ]] || {
  echo "error: ROUNDS=$ROUNDS, REPS=$REPS: expected positive integers" >&2
  exit 2
}
anp_measure_prio "$ROOT"
mkdir -p "$OUT"
: >"$OUT/raw.md"
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
  for b in $BATCHES; do
    for who in $order; do
      if [ "$who" = A ]; then cmd=("$A"); else cmd=("$B" "$@"); fi
      echo "## round $r who $who batch $b load $(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/raw.md"
      timeout 300 env -u OPENBLAS_CORETYPE "${ANP_PRIO[@]}" "${cmd[@]}" --op bn --batch "$b" --reps "$REPS" \
        --clock cpu >>"$OUT/raw.md" 2>&1
    done
  done
done
awk -F'|' '/^## round/ { split($0, w, " "); r = w[3]; who = w[5]; b = w[7]; l = w[9] }
  $2 ~ /^ bn / { gsub(/^ +| +$/, "", $3); gsub(/^ +| +$/, "", $4); gsub(/ /, "", $5); gsub(/ /, "", $8)
                 gsub(/[ %]/, "", $9); print r "," who "," b "," l ",\"" $3 "\",\"" $4 "\"," $5 "," $8 "," $9 }' \
  "$OUT/raw.md" | sed '1i round,who,batch,load1,shape,phase,ms_per_call,gb_per_s,pct_copy' >"$OUT/kernels.csv"
python3 - "$OUT/kernels.csv" <<'PY'
import csv, statistics, sys
from collections import defaultdict
t, loads = {}, defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    # GB/s carries more digits than ms/call: the time is the bytes / GB/s, the same for A and B
    t[(r["who"], int(r["batch"]), r["shape"], r["phase"], int(r["round"]))] = 1 / float(r["gb_per_s"])
    loads[int(r["batch"])].append(float(r["load1"]))
ratio, pa, pb = defaultdict(list), defaultdict(list), defaultdict(list)
for (who, b, shape, phase, rd), v in t.items():
    if who == "B" and ("A", b, shape, phase, rd) in t:
        ratio[(b, shape, phase)].append(v / t[("A", b, shape, phase, rd)])
print("| batch | shape | phase | B time / A time (median of the rounds) | min-max | rounds | load |")
print("|--:|---|---|--:|---|--:|---|")
for k in sorted(ratio, key=lambda k: (-k[0], k[1], k[2])):
    v = ratio[k]
    print(f"| {k[0]} | {k[1]} | {k[2]} | {statistics.median(v):.3f} | {min(v):.3f}-{max(v):.3f} | {len(v)} | "
          f"{min(loads[k[0]]):.1f}-{max(loads[k[0]]):.1f} |")
PY
