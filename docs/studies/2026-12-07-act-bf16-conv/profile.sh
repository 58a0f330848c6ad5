#!/usr/bin/env bash
# The per-kernel profile of docs/studies/2026-12-07-act-bf16-conv.md: resnet20 and resnet8, --precision bf16,
# one worker, batch 64 in 2 chunks, 10 timed steps, the critical path by codelet (DNN_BREAKDOWN=2), with the bf16
# activations off (0) and on (1), ROUNDS interleaved rounds (A B, B A, ...). Run from the checkout's root after
# building: bash docs/studies/2026-12-07-act-bf16-conv/profile.sh [ROUNDS] > profile.txt
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
source "$ROOT/scripts/lib.sh"
anp_measure_prio "$ROOT"
ROUNDS="${1:-2}"
for r in $(seq 1 "$ROUNDS"); do
  for net in resnet20 resnet8; do
    if [ $((r % 2)) = 1 ]; then order="0 1"; else order="1 0"; fi
    for act in $order; do
      echo "== $net bf16 batch 64, 1 worker, DNN_BF16_ACTIVATIONS=$act, round $r, load $(cut -d' ' -f1 /proc/loadavg)"
      DNN_BF16_ACTIVATIONS=$act DNN_BREAKDOWN=2 STARPU_NCPU=1 STARPU_NCUDA=0 env -u OPENBLAS_CORETYPE "${ANP_PRIO[@]}" \
        timeout 600 "$ROOT/build/apps/starpu_anp" bench --net "$net" --batch 64 --chunks 2 --steps 10 --warmup 3 \
        --precision bf16 --quiet 2>&1 | grep -E "^critpath|^result" | sed -E 's/ blas=.* bd_cp_span_s/ ... bd_cp_span_s/'
    done
  done
done
