#!/bin/bash
# The Caffe seed in simulation: 1 -> 16 cores of a simulated Xeon E5-2667 v2 node (and of this
# machine's cores, for comparison), chunks = cores, pinned (Caffe's static batch split).
# Usage: docs/studies/2026-12-07-seed-reproduction/run.sh NET BATCH [CORES...]
# Calibration (real runs, timed) at nice -15, the simulations (no timing of their own) at nice 10.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
D="$ROOT/docs/studies/2026-12-07-seed-reproduction"
NET="$1" BATCH="$2"; shift 2
CORES=("${@:-1 2 4 8 16}")
# The Xeon runs Caffe's convolutions as im2col + an AVX (8-wide) BLAS: calibrate our im2col path
# with OpenBLAS's 8-wide Haswell kernels (this machine's shell sets OPENBLAS_CORETYPE=Haswell).
export DNN_CONV_ALGO=im2col OPENBLAS_CORETYPE=Haswell
export ANP_SIM_CALIB_DIR="${ANP_SIM_CALIB_DIR:-$HOME/.cache/starpu-anp/sim/calib-caffe-seed}"
for c in ${CORES[@]}; do
  echo "# $NET batch $BATCH, $c core(s): calibration at $(date -u +%T), $(uptime | sed 's/.*load average/load average/')"
  nice -n -15 timeout 1200 "$ROOT/scripts/simulate.sh" --no-build --quiet --net "$NET" --batch "$BATCH" --chunks "$c" \
    --cores "$c" --cpu e5-2667v2 --calibrate-only
  for cpu in e5-2667v2 here; do
    nice -n 10 timeout 1200 "$ROOT/scripts/simulate.sh" --no-build --quiet --net "$NET" --batch "$BATCH" --chunks "$c" \
      --cores "$c" --ncpu "$c" --cpu "$cpu" --steps 20 --warmup 3 --csv "$D/seed${TAG:+-$TAG}-$cpu.csv" -- --pin-chunks
  done
done
