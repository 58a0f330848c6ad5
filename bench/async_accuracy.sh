#!/usr/bin/env bash
# async_accuracy.sh — mixed-asynchronous accuracy against sync: N real mpirun
# ranks (--oversubscribe, one CPU worker each), staleness S, with and without lookahead, under
# the large-batch recipe (SGD, the linear scaling rule and a linear warm-up: --lr 0.05 for batch
# 64, --lr-ref-batch 64 --warmup-epochs 1; async takes SGD only), against the sync run of the same
# global batch (one process; sync equals one process). The global batch is the same for every N
# (strong scaling: only the staleness and the number of replicas change), split over the ranks.
# Each run writes --metrics OUT/<run>.csv; OUT/summary.csv gets
# net,batch,epochs,mode,ranks,staleness,lookahead,test_accuracy,diff_vs_sync,staleness_mean,wall_s.
# Usage: bench/async_accuracy.sh [OUT] (env: NET [lenet5], BATCH [256], EPOCHS [3], RANKS ["2 4 8"],
# STALENESS ["1 4"], CHUNKS [2] per rank, STARPU_ANP [build/apps/starpu_anp]). Runs already in
# summary.csv are skipped, so an interrupted study resumes.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=../scripts/lib.sh
source "$ROOT/scripts/lib.sh"
OUT="${1:-docs/figures/async_accuracy}"
NET="${NET:-lenet5}" BATCH="${BATCH:-256}" EPOCHS="${EPOCHS:-3}" RANKS="${RANKS:-2 4 8}"
STALE="${STALENESS:-1 4}" CHUNKS="${CHUNKS:-2}"
APP="${STARPU_ANP:-$ROOT/build/apps/starpu_anp}"
RECIPE=(--lr 0.05 --lr-ref-batch 64 --warmup-epochs 1)
mkdir -p "$OUT"
[ -f "$OUT/summary.csv" ] || echo "net,batch,epochs,mode,ranks,staleness,lookahead,test_accuracy,diff_vs_sync,staleness_mean,wall_s" >"$OUT/summary.csv"
# run NAME CMD...: the training, its result line into $line
run() {
  local name="$1"; shift
  echo "[async_accuracy] $name: $*" >&2
  line="$("$@" --metrics "$OUT/$name.csv" --quiet 2>"$OUT/$name.err" | anp_result_line)" \
    || { echo "[async_accuracy] $name failed: $(tail -1 "$OUT/$name.err")" >&2; return 1; }
  [ -s "$OUT/$name.err" ] || rm -f "$OUT/$name.err"
}
f() { anp_result_field "$line" "$1"; }
common=(train --net "$NET" --data fashion-mnist --batch "$BATCH" --epochs "$EPOCHS" "${RECIPE[@]}")
sync_acc="$(awk -F, -v n="$NET" -v b="$BATCH" -v e="$EPOCHS" '$1 == n && $2 == b && $3 == e && $4 == "sync" { print $8 }' "$OUT/summary.csv")"
if [ -z "$sync_acc" ]; then
  run "$NET-$BATCH-sync" "$APP" "${common[@]}" --chunks "$CHUNKS"
  sync_acc="$(f test_accuracy)"
  echo "$NET,$BATCH,$EPOCHS,sync,1,-,-,$sync_acc,0,-,$(f wall_s)" | tee -a "$OUT/summary.csv"
fi
for n in $RANKS; do
  for s in $STALE; do
    for la in 1 0; do
      awk -F, -v n="$NET" -v b="$BATCH" -v e="$EPOCHS" -v r="$n" -v s="$s" -v l="$la" \
        '$1 == n && $2 == b && $3 == e && $4 == "async" && $5 == r && $6 == s && $7 == l { f = 1 } END { exit !f }' \
        "$OUT/summary.csv" && continue
      extra=(); [ "$la" = 1 ] || extra=(--no-lookahead)
      run "$NET-$BATCH-async-n$n-s$s-la$la" timeout 3600 "${ANP_MPIRUN[@]}" -np "$n" -x STARPU_NCPU=1 "$APP" \
        "${common[@]}" --chunks "$CHUNKS" --mode async --staleness "$s" "${extra[@]}" || continue
      acc="$(f test_accuracy)"
      echo "$NET,$BATCH,$EPOCHS,async,$n,$s,$la,$acc,$(awk -v a="$acc" -v s="$sync_acc" 'BEGIN { printf "%+.4f", a - s }'),$(f staleness_mean),$(f wall_s)" \
        | tee -a "$OUT/summary.csv"
    done
  done
done
