#!/bin/bash
# One simulated core running the same K chunks as the K-core runs of run.sh (the same task shapes,
# calibrated by run.sh): the parallel efficiency without the change of chunk size.
# Usage: docs/studies/2026-12-07-seed-reproduction/run_one_core.sh NET BATCH [CHUNKS...]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
D="$ROOT/docs/studies/2026-12-07-seed-reproduction"
NET="$1" BATCH="$2"; shift 2
export DNN_CONV_ALGO=im2col OPENBLAS_CORETYPE=Haswell
export ANP_SIM_CALIB_DIR="${ANP_SIM_CALIB_DIR:-$HOME/.cache/starpu-anp/sim/calib-caffe-seed}"
for k in "${@:-2 4 8 16}"; do
  for cpu in e5-2667v2 here; do
    nice -n 10 timeout 1200 "$ROOT/scripts/simulate.sh" --no-build --quiet --net "$NET" --batch "$BATCH" --chunks "$k" \
      --cores 1 --ncpu 1 --cpu "$cpu" --steps 20 --warmup 3 --csv "$D/seed${TAG:+-$TAG}-$cpu-1core.csv" -- --pin-chunks
  done
done
